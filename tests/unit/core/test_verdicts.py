"""Typed verdicts in the RunResult: keys for programs, old files with dict verdicts."""

from __future__ import annotations

import orjson

from infersight.core.records import RunResult
from infersight.core.verdicts import Evidence, Verdict, evidence_key

OLD_FILE_VERDICT = {
    "id": "slot_bound",
    "title": "Queueing: slot-bound",
    "summary": "8 of 8 slots busy.",
    "window": [10.0, 20.0],
    "evidence": [
        {"name": "slots (S)", "value": 8, "unit": "sequences", "source": "engine /metrics"},
        {"name": "ITL floor", "value": 0.004, "unit": "s", "source": "roofline"},
        {"name": "TTFT p50 (from sent)", "value": 0.2, "unit": "s", "source": "records"},
    ],
    "confidence": 0.85,
    "fixes": ["raise --parallel"],
    "level": "c=8",
}


def test_a_file_with_dict_verdicts_loads_typed_and_keyed() -> None:
    doc = {"schema_version": 1, "kind": "bench", "diagnosis": [OLD_FILE_VERDICT]}
    result = RunResult.from_json_bytes(orjson.dumps(doc))
    (v,) = result.diagnosis
    assert isinstance(v, Verdict) and v.window.start == 10.0 and v.window.seconds == 10.0
    assert [e.key for e in v.evidence] == ["slots_s", "itl_floor", "ttft_sent_p50"]
    assert v.evidence_value("itl_floor") == 0.004 == v.evidence_value("ITL floor")
    assert v.evidence_value("slots_s") == 8 and isinstance(v.evidence_value("slots_s"), int)
    assert v.engine == "unknown" and v.evidence_value("absent") is None
    # Written back, the keys are stored and the file reads the same.
    again = RunResult.from_json_bytes(result.to_json_bytes())
    assert again.diagnosis == result.diagnosis
    assert orjson.loads(result.to_json_bytes())["diagnosis"][0]["evidence"][1]["key"] == "itl_floor"


def test_a_stated_key_wins_over_the_label() -> None:
    e = Evidence(key="slots", name="slots (S)", value=4)
    assert e.key == "slots" and e.text() == "slots (S) = 4"
    assert Evidence(name="ITL / floor", value=2.5, unit="x").key == "itl_ratio"
    assert evidence_key("demand (R + Q, max)") == "demand_r_q_max"
    assert Evidence(name="x", value=1234.5).value_text() == "1,234"
