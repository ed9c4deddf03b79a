"""The GGUF header reader on generated headers (Hypothesis) and on corrupt input."""

from __future__ import annotations

import contextlib
import io
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersight.diagnose.physics.gguf import GGML_TYPES, GGUFError, read_gguf_stream

# value type id -> (struct format, strategy)
SCALARS: dict[int, tuple[str, st.SearchStrategy[Any]]] = {
    0: ("B", st.integers(0, 255)),
    1: ("b", st.integers(-128, 127)),
    2: ("H", st.integers(0, 2**16 - 1)),
    3: ("h", st.integers(-(2**15), 2**15 - 1)),
    4: ("I", st.integers(0, 2**32 - 1)),
    5: ("i", st.integers(-(2**31), 2**31 - 1)),
    6: ("f", st.floats(width=32, allow_nan=False)),
    7: ("?", st.booleans()),
    10: ("Q", st.integers(0, 2**64 - 1)),
    11: ("q", st.integers(-(2**63), 2**63 - 1)),
    12: ("d", st.floats(allow_nan=False)),
}


class Writer:
    """A minimal GGUF header writer (the test's own, independent of the reader)."""

    def __init__(self, version: int, endian: str) -> None:
        self.v, self.e, self.buf = version, endian, io.BytesIO()

    def u(self, fmt: str, x: Any) -> None:
        self.buf.write(struct.pack(self.e + fmt, x))

    def n(self, x: int) -> None:
        self.u("Q" if self.v >= 2 else "I", x)

    def s(self, text: str) -> None:
        b = text.encode()
        self.n(len(b))
        self.buf.write(b)

    def value(self, vtype: int, val: Any) -> None:
        if vtype in SCALARS:
            self.u(SCALARS[vtype][0], val)
        elif vtype == 8:
            self.s(val)
        else:  # array: (item type, items)
            itype, items = val
            self.u("I", itype)
            self.n(len(items))
            for it in items:
                self.value(itype, it)


def typed_value() -> st.SearchStrategy[tuple[int, Any]]:
    scalar = st.sampled_from(sorted(SCALARS)).flatmap(lambda t: SCALARS[t][1].map(lambda v: (t, v)))
    string = st.text(max_size=20).map(lambda v: (8, v))
    arr_scalar = st.sampled_from(sorted(SCALARS)).flatmap(
        lambda t: st.lists(SCALARS[t][1], max_size=6).map(lambda xs: (9, (t, xs)))
    )
    arr_str = st.lists(st.text(max_size=8), max_size=5).map(lambda xs: (9, (8, xs)))
    return st.one_of(scalar, string, arr_scalar, arr_str)


tensor = st.tuples(
    st.text(min_size=1, max_size=12),
    st.lists(st.integers(1, 4096), min_size=1, max_size=4),
    st.sampled_from(sorted(GGML_TYPES)),
    st.integers(0, 2**40),
)


def _norm(vtype: int, val: Any) -> Any:
    if vtype == 6:
        return struct.unpack("f", struct.pack("f", val))[0]
    if vtype == 9:
        itype, items = val
        return [_norm(itype, x) for x in items]
    return val


@settings(max_examples=150, deadline=None)
@given(
    version=st.sampled_from([1, 2, 3]),
    endian=st.sampled_from(["<", ">"]),
    meta=st.dictionaries(st.text(min_size=1, max_size=16), typed_value(), max_size=8),
    tensors=st.lists(tensor, max_size=5),
)
def test_roundtrip_generated_headers(
    version: int, endian: str, meta: dict[str, Any], tensors: list[Any]
) -> None:
    w = Writer(version, endian)
    w.buf.write(b"GGUF")
    w.u("I", version)
    w.n(len(tensors))
    w.n(len(meta))
    for k, (vt, val) in meta.items():
        w.s(k)
        w.u("I", vt)
        w.value(vt, val)
    for name, dims, ttype, off in tensors:
        w.s(name)
        w.u("I", len(dims))
        for d in dims:
            w.n(d)
        w.u("I", ttype)
        w.u("Q", off)
    w.buf.write(b"\x00" * 32)  # tensor data would follow
    g = read_gguf_stream(io.BytesIO(w.buf.getvalue()))
    assert g.version == version
    assert g.metadata == {k: _norm(vt, v) for k, (vt, v) in meta.items()}
    assert [(t.name, list(t.shape), t.type_id, t.offset) for t in g.tensors] == [
        (n, d, ty, o) for n, d, ty, o in tensors
    ]
    for t in g.tensors:
        _, block, size = GGML_TYPES[t.type_id]
        assert t.n_bytes == -(-t.n_elements // block) * size


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_raises_only_gguferror(data: bytes) -> None:
    with contextlib.suppress(GGUFError):
        read_gguf_stream(io.BytesIO(b"GGUF" + data))


def test_truncated_and_bad_magic() -> None:
    w = Writer(3, "<")
    w.buf.write(b"GGUF")
    w.u("I", 3)
    w.n(0)
    w.n(1)
    w.s("general.architecture")
    w.u("I", 8)
    w.s("llama")
    full = w.buf.getvalue()
    assert read_gguf_stream(io.BytesIO(full)).architecture == "llama"
    with pytest.raises(GGUFError, match="truncated"):
        read_gguf_stream(io.BytesIO(full[:-3]))
    with pytest.raises(GGUFError, match="magic"):
        read_gguf_stream(io.BytesIO(b"GGML" + full[4:]))
    with pytest.raises(GGUFError, match="version"):
        read_gguf_stream(io.BytesIO(b"GGUF" + struct.pack("<I", 9) + full[8:]))


def test_quant_block_sizes_match_bits_per_weight() -> None:
    bpw = {name: 8 * size / block for name, block, size in GGML_TYPES.values()}
    assert bpw["Q4_0"] == 4.5 and bpw["Q4_1"] == 5.0 and bpw["Q8_0"] == 8.5
    assert bpw["Q4_K"] == 4.5 and bpw["Q6_K"] == 6.5625 and bpw["Q2_K"] == 2.625
    assert bpw["F16"] == 16 and bpw["BF16"] == 16 and bpw["F32"] == 32
