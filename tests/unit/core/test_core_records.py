"""RequestRecord, Sample and RunResult survive a round trip; bad files are ConfigErrors."""

from __future__ import annotations

import math
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersight.core.errors import ConfigError
from infersight.core.records import (
    SCHEMA_VERSION,
    RequestRecord,
    RunResult,
    Sample,
    load_run_result,
    save_run_result,
)

times = st.floats(min_value=0.0, max_value=1e7, allow_nan=False, allow_infinity=False)
opt_times = st.none() | times
text = st.text(max_size=20)
labels = st.dictionaries(st.text(min_size=1, max_size=8), text, max_size=3)


@st.composite
def records(draw: st.DrawFn) -> RequestRecord:
    n = draw(st.integers(min_value=0, max_value=6))
    return RequestRecord(
        request_id=draw(st.text(min_size=1, max_size=12)),
        scheduled=draw(times),
        sent=draw(opt_times),
        headers=draw(opt_times),
        chunk_times=sorted(draw(st.lists(times, min_size=n, max_size=n))),
        chunk_tokens=draw(st.lists(st.integers(1, 8), min_size=n, max_size=n)),
        end=draw(opt_times),
        status=draw(st.none() | st.integers(100, 599)),
        ok=draw(st.booleans()),
        error=draw(st.none() | st.sampled_from(["ReadError", "Overloaded", "Cancelled"])),
        error_message=draw(st.none() | text),
        finish_reason=draw(st.none() | st.sampled_from(["stop", "length"])),
        prompt_tokens=draw(st.none() | st.integers(0, 10**6)),
        completion_tokens=draw(st.none() | st.integers(0, 10**6)),
        tokens_estimated=draw(st.booleans()),
        usage_mismatch=draw(st.booleans()),
        queue_delay=draw(opt_times),
        attempts=draw(st.integers(0, 5)),
        resends=draw(st.integers(0, 3)),
        server_request_id=draw(st.none() | text),
        cancelled=draw(st.booleans()),
        labels=draw(labels),
    )


samples = st.builds(
    Sample,
    t=times,
    name=st.text(min_size=1, max_size=20),
    value=st.none() | st.floats(allow_nan=False, allow_infinity=False),
    labels=labels,
)


@settings(max_examples=60, deadline=None)
@given(rec=records())
def test_record_dict_round_trip(rec: RequestRecord) -> None:
    back = RequestRecord.from_dict(orjson.loads(orjson.dumps(rec.to_dict())))
    assert back == rec
    assert (
        back.ttft == rec.ttft and back.tpot == rec.tpot and back.output_tokens == rec.output_tokens
    )


def test_record_from_a_newer_version_ignores_unknown_fields() -> None:
    d = RequestRecord("r1", 1.0, end=2.0, ok=True).to_dict() | {"added_in_v9": 42}
    assert RequestRecord.from_dict(d) == RequestRecord("r1", 1.0, end=2.0, ok=True)


@settings(max_examples=40, deadline=None)
@given(
    recs=st.lists(records(), max_size=5),
    samps=st.lists(samples, max_size=5),
    config=st.dictionaries(
        st.text(max_size=8), st.integers(-(2**63), 2**63 - 1) | text, max_size=4
    ),
    notes=st.lists(text, max_size=3),
)
def test_run_result_round_trip(
    recs: list[RequestRecord], samps: list[Sample], config: dict[str, object], notes: list[str]
) -> None:
    run = RunResult(
        run_id="rt",
        records=recs,
        samples=samps,
        config=config,
        notes=notes,
        client_limited=bool(recs),
        client_limited_reasons=["lag"] if recs else [],
    )
    back = RunResult.from_json_bytes(run.to_json_bytes())
    assert back.records == recs and back.samples == samps
    assert back.config == config and back.notes == notes and back.run_id == "rt"
    assert back.client_limited == bool(recs) and back.schema_version == SCHEMA_VERSION
    assert back.to_json_bytes() == run.to_json_bytes()


def test_save_is_atomic_and_loads_back(tmp_path: Path) -> None:
    run = RunResult(run_id="x", records=[RequestRecord("a", 0.5, end=1.0, ok=True)])
    p = save_run_result(run, tmp_path / "sub" / "result.json")
    assert p.exists() and not list(p.parent.glob("*.tmp"))
    assert load_run_result(p).records == run.records


def test_client_limited_heads_the_document() -> None:
    keys = list(orjson.loads(RunResult(client_limited=True).to_json_bytes()))
    assert keys.index("client_limited") < keys.index("records")
    assert keys.index("partial") < keys.index("config")


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"", "not JSON"),
        (b"{nope", "not JSON"),
        (b"[1, 2]", "no schema_version"),
        (b'{"records": []}', "no schema_version"),
        (b'{"schema_version": "one"}', "not a number"),
        (b'{"schema_version": %d}' % (SCHEMA_VERSION + 1), "upgrade infersight"),
        (b'{"schema_version": 1, "records": [[1, 2]]}', "malformed"),
        (b'{"schema_version": 1, "records": [{"request_id": "a"}]}', "malformed"),
        (b'{"schema_version": 1, "samples": [{"t": 1}]}', "malformed"),
        (b'{"schema_version": 1, "partial": "maybe"}', "partial"),
    ],
)
def test_bad_files_are_one_config_error_line(tmp_path: Path, content: bytes, why: str) -> None:
    p = tmp_path / "result.json"
    p.write_bytes(content)
    with pytest.raises(ConfigError) as ei:
        load_run_result(p)
    msg = str(ei.value)
    assert msg.startswith(f"{p}: not a valid infersight RunResult") and why in msg
    assert "\n" not in msg


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_run_result(tmp_path / "absent.json")
    with pytest.raises(ConfigError, match="cannot read"):
        load_run_result(tmp_path)  # a directory


def test_derived_metrics_follow_design_section_2() -> None:
    r = RequestRecord(
        "a",
        scheduled=10.0,
        sent=10.5,
        chunk_times=[11.0, 11.5, 12.0],
        chunk_tokens=[1, 2, 1],
        end=12.25,
        completion_tokens=5,
        ok=True,
    )
    assert r.schedule_lag == 0.5 and r.ttft == 1.0 and r.ttft_from_sent == 0.5
    assert r.e2e == 2.25 and r.e2e_from_sent == 1.75
    assert math.isclose(r.tpot or 0, 1.0 / 4) and math.isclose(r.itl_mean or 0, 0.5)
    assert r.output_tokens == 5
    r.completion_tokens = None
    assert r.output_tokens == 4  # the chunk counts when usage is absent
