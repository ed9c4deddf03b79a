"""``python -m infersight.engine --child``: the engine's child process (internal).

Users start the engine with ``infersight serve`` or :class:`EmbeddedEngine`.
"""

from __future__ import annotations

import sys

from infersight.engine.server_main import main


def _run() -> int:
    if sys.argv[1:] != ["--child"]:
        sys.stderr.write("internal entry point; use `infersight serve` to run the engine\n")
        return 2

    return main()


if __name__ == "__main__":
    sys.exit(_run())
