#!/usr/bin/env bash
# The main job: install, start the embedded engine, benchmark it, diagnose the run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# --sweep closed: 1, 2, 4, ... clients until throughput stops growing twice with the slots
# full, the levels the server model needs to check itself on held-out levels; prompts and
# answers of mixed lengths, as a real workload's are (docs/design.md section 9).
exec .venv/bin/infersight bench --sweep closed --requests 32 \
    --input-tokens uniform:24:104 --output-tokens uniform:16:80 --out runs/demo "$@"
