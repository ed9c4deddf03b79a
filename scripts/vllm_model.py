"""Turn the embedded GGUF into a Hugging Face directory that vLLM can serve.

    .tool-venvs/vllm/bin/python scripts/vllm_model.py GGUF OUT_DIR

Run with the vLLM venv's Python (transformers, gguf and accelerate live there). The
GGUF is loaded dequantized by transformers; a fresh model built from its config,
without ``quantization_config`` (vLLM would look for a GGUF kernel), receives the
loaded weights and is saved with the tokenizer. Nothing is downloaded. The directory is
written to a temporary name first and renamed, so a half-written one never stands.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def main(gguf: Path, out: Path) -> None:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name)
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    fresh = AutoModelForCausalLM.from_config(config, torch_dtype="bfloat16")
    fresh.load_state_dict(loaded.state_dict())
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    fresh.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: vllm_model.py GGUF OUT_DIR")
    main(Path(sys.argv[1]), Path(sys.argv[2]))
