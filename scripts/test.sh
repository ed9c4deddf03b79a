#!/usr/bin/env bash
# Install everything (Debian prometheus and chromium, the benchmark tools the importer
# tests run and vLLM's CPU build for the vLLM tests included), lint, type-check, test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --system
# The benchmark tools and vLLM (scripts/setup.sh --tools: minutes, mostly downloads and
# unpacking) install while lint, types and the unit tests run; only the integration
# tests use them.
tools_log=$(mktemp)
# A full run also starts the vLLM servers the integration tests share as soon as vLLM is
# installed: their minutes of start-up overlap the unit tests instead of the heavy
# integration tests (tests/integration/conftest.py adopts them; idle, they use no CPU).
vllm_dir=$(mktemp -d)
vllm_servers=(.venv/bin/python -m infersight.testing.vllm_server)
if [ $# -eq 0 ]; then
  { bash scripts/tool_venvs.sh && "${vllm_servers[@]}" start "$vllm_dir" slots_2 kv_16_blocks; } \
    >"$tools_log" 2>&1 &
else
  bash scripts/tool_venvs.sh >"$tools_log" 2>&1 &
fi
tools=$!
trap 'pkill -P $tools 2>/dev/null; kill $tools 2>/dev/null || true; "${vllm_servers[@]}" stop "$vllm_dir"; rm -rf "$tools_log" "$vllm_dir"' EXIT
echo "== ruff";  .venv/bin/ruff check src tests benchmarks
echo "== ruff format"; .venv/bin/ruff format --check src tests benchmarks
echo "== mypy";  .venv/bin/mypy
echo "== pytest"
# Tests that need prometheus, promtool, chromium... fail here when one is missing
# (a plain local pytest skips them and lists them in its summary): see tests/conftest.py.
export INFERSIGHT_REQUIRE_REAL_PARTS=1
set +e
if [ $# -gt 0 ]; then
  wait $tools || { cat "$tools_log"; exit 1; }
  .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
  rc=$?
else
  # Unit tests are CPU-bound and share nothing: one worker per core halves their time.
  .venv/bin/python -m pytest -q -p no:cacheprovider -n 2 tests/unit
  rc=$?
  echo "== benchmark tools and vLLM (scripts/tool_venvs.sh, then the tests' vLLM servers)"
  tools_rc=0; wait $tools || tools_rc=$?
  cat "$tools_log"
  [ $tools_rc -eq 0 ] || { echo "installing the tools failed" >&2; exit $tools_rc; }
  # Integration tests mostly wait on real servers: two sessions side by side, the heavy
  # tests (CPU load, noise judged) one at a time in one of them, the rest in the other
  # (tests/integration/conftest.py says which and why).
  logs=$(mktemp -d)
  export INFERSIGHT_TEST_VLLM_DIR=$vllm_dir
  .venv/bin/python -m pytest -q -p no:cacheprovider -m heavy --durations=15 --basetemp "$logs/heavy" \
    tests/integration >"$logs/heavy.log" 2>&1 &
  heavy=$!
  .venv/bin/python -m pytest -q -p no:cacheprovider -m "not heavy" --durations=15 --basetemp "$logs/light" \
    tests/integration >"$logs/light.log" 2>&1 &
  light=$!
  wait $heavy; rc2=$?
  wait $light; rc3=$?
  echo "== integration tests, heavy (one at a time)"; cat "$logs/heavy.log"
  echo "== integration tests, the rest (beside them)"; cat "$logs/light.log"
  [ $rc -ne 0 ] || rc=$rc2
  [ $rc -ne 0 ] || rc=$rc3
fi
set -e
# pytest's 5 means "no tests collected": that is a failure here too.
exit $rc
