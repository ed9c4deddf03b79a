#!/usr/bin/env bash
# The main job: install, start the embedded engine, benchmark it, diagnose the run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/infersight bench --concurrency 1,4,16 --requests 32 --max-tokens 48 --out runs/demo "$@"
