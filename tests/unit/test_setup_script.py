"""scripts/setup.sh: it stops no process it did not start, and its log is private.

The script runs for real (bash, mktemp, trap) in a copy of the repository layout; only
what would reach the network is replaced: ``.venv/bin/python`` (pip) is a stub that
reports where its output goes, and ``pkill``/``killall`` on the PATH record any call
(so a regression cannot stop another Prometheus on this host while the test runs).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "setup.sh"

# pip's stand-in: says which file its stdout is (the step log) and that file's mode.
_PYTHON = """#!/usr/bin/env bash
if [ "${1:-}" = "-c" ]; then exit 0; fi  # "is the model package installed?": yes
out=$(readlink /proc/$$/fd/1)
echo "$out $(stat -L -c %a /proc/$$/fd/1)" >> "$STUB_RECORD"
echo "pip says: step output"
[ -z "${STUB_FAIL:-}" ]
"""
_RECORDER = '#!/usr/bin/env bash\necho "$(basename "$0") $*" >> "$STUB_RECORD"\n'


def _tree(tmp: Path) -> tuple[Path, dict[str, str]]:
    root = tmp / "repo"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPT, root / "scripts" / "setup.sh")
    bins = tmp / "bin"
    bins.mkdir()
    for path, text in [
        (root / ".venv" / "bin" / "python", _PYTHON),
        (bins / "pkill", _RECORDER),
        (bins / "killall", _RECORDER),
        # --system finds these installed, so apt-get is not needed.
        (bins / "prometheus", _RECORDER),
        (bins / "promtool", _RECORDER),
        (bins / "chromium", _RECORDER),
        (bins / "tmux", _RECORDER),
        (bins / "redis-server", _RECORDER),
    ]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o755)
    private_tmp = tmp / "tmpdir"
    private_tmp.mkdir()
    env = {
        "PATH": f"{bins}:{os.environ['PATH']}",
        "TMPDIR": str(private_tmp),
        "STUB_RECORD": str(tmp / "record.txt"),
        "HOME": str(tmp),
    }
    return root, env


@pytest.mark.skipif(sys.platform != "linux", reason="the stub reads /proc/self/fd")
def test_system_setup_stops_nothing_and_logs_privately(tmp_path: Path) -> None:
    root, env = _tree(tmp_path)
    run = subprocess.run(
        ["bash", str(root / "scripts" / "setup.sh"), "--system"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert "setup: done" in run.stdout
    records = (tmp_path / "record.txt").read_text().splitlines()
    assert not [r for r in records if r.startswith(("pkill", "killall"))], records
    # Every pip step wrote to a fresh file in $TMPDIR, readable by its owner only.
    steps = [r.rsplit(" ", 1) for r in records if not r.startswith(("pkill", "killall"))]
    assert len(steps) >= 2
    for log, mode in steps:
        assert Path(log).parent == tmp_path / "tmpdir"
        assert Path(log).name.startswith("infersight-setup.")
        assert stat.S_IMODE(int(mode, 8)) == 0o600
    assert list((tmp_path / "tmpdir").iterdir()) == []  # removed at exit


def test_a_failing_step_shows_its_log_and_removes_it(tmp_path: Path) -> None:
    root, env = _tree(tmp_path)
    run = subprocess.run(
        ["bash", str(root / "scripts" / "setup.sh")],
        env={**env, "STUB_FAIL": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode != 0
    assert "pip says: step output" in run.stderr
    assert list((tmp_path / "tmpdir").iterdir()) == []
