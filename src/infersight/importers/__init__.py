"""infersight.importers: other tools' results as RunResults (docs/design.md section 10).

    from infersight.importers import detect, import_file
    result = import_file("benchmarks.json")   # GuideLLM, AIPerf, vLLM, inference-perf, llm-d
    detect(data)                              # the format id, or None for a RunResult
    load_result("run.json")                   # ours or another tool's, told apart by content

Each format has one module (``guidellm``, ``aiperf``, ``vllm``, ``inference_perf``,
``llmd`` for llm-d-benchmark's benchmark report, whose levels :func:`merge_reports`
joins);
the format comes from the file's content, never its name. Reading a file needs none of
those tools. Per-request timings become the request records of docs/design.md section
2, so ``diagnose`` and ``report`` treat the run like one of ours; a file of aggregates
alone gives levels without requests, and :func:`missing_evidence` says what cannot be
decided from it.
"""

from infersight.importers.detect import FORMATS, detect, import_bytes, import_file
from infersight.importers.evidence import missing_evidence
from infersight.importers.llmd import merge_reports
from infersight.importers.result_file import load_result, load_results

__all__ = [
    "FORMATS",
    "detect",
    "import_bytes",
    "import_file",
    "load_result",
    "load_results",
    "merge_reports",
    "missing_evidence",
]
