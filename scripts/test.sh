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
vllm_dir=$(mktemp -d)
logs=$(mktemp -d)  # the integration sessions' logs and temporary files
vllm_servers=(.venv/bin/python tests/support/vllm_servers.py)
if [ $# -eq 0 ]; then
  # A full run also starts the vLLM servers the integration tests share, as soon as vLLM
  # is installed: vLLM first, at full priority, and the rest of this phase (the other
  # tools, the unit tests) niced, so their minutes of start-up are over when the unit
  # tests are and never on the heavy tests' path (tests/support/vllm_servers.py; the
  # heavy session adopts them; idle, they use no CPU).
  tools_and_vllm() {
    nice -n 10 bash scripts/tool_venvs.sh guidellm aiperf inference-perf &
    local others=$! rc=0
    { bash scripts/tool_venvs.sh vllm && "${vllm_servers[@]}" start "$vllm_dir" slots_2 kv_16_blocks; } || rc=$?
    wait $others || rc=$?
    return $rc
  }
  tools_and_vllm >"$tools_log" 2>&1 &
  later=(nice -n 10)
else
  bash scripts/tool_venvs.sh >"$tools_log" 2>&1 &
  later=()
fi
tools=$!
# Every step of the cleanup runs (set +e: under -e one failing step, a pkill that finds
# nothing, would skip the rest and end a passing run with its status).
trap 'set +e; pkill -P $tools 2>/dev/null; kill $tools 2>/dev/null; "${vllm_servers[@]}" stop "$vllm_dir"; rm -rf "$tools_log" "$vllm_dir" "$logs"' EXIT
echo "== ruff";  .venv/bin/ruff check src testkit tests benchmarks
echo "== ruff format"; .venv/bin/ruff format --check src testkit tests benchmarks
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
  "${later[@]}" .venv/bin/python -m pytest -q -p no:cacheprovider -n 2 tests/unit
  rc=$?
  # Integration tests mostly wait on real servers: two sessions side by side, the heavy
  # tests (CPU load, noise judged) one at a time in one of them, the rest in the other
  # (tests/integration/conftest.py says which and why). The rest need none of the tools:
  # they start now, beside the tools' install and the vLLM servers' start-up, and the
  # heavy ones once those are done, so no heavy test meets a starting vLLM.
  .venv/bin/python -m pytest -q -p no:cacheprovider -m "not heavy" --durations=15 --basetemp "$logs/light" \
    tests/integration >"$logs/light.log" 2>&1 &
  light=$!
  echo "== benchmark tools and vLLM (scripts/tool_venvs.sh, then the tests' vLLM servers)"
  tools_rc=0; wait $tools || tools_rc=$?
  cat "$tools_log"
  [ $tools_rc -eq 0 ] || { echo "installing the tools failed" >&2; kill $light; exit $tools_rc; }
  export INFERSIGHT_TEST_VLLM_DIR=$vllm_dir
  .venv/bin/python -m pytest -q -p no:cacheprovider -m heavy --durations=15 --basetemp "$logs/heavy" \
    tests/integration >"$logs/heavy.log" 2>&1 &
  heavy=$!
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
