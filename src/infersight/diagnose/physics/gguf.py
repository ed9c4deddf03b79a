"""A small, dependency-free reader for GGUF file headers (metadata and tensor table).

GGUF layout (versions 1-3): magic ``GGUF``, ``uint32`` version, tensor count and
metadata count (``uint32`` in v1, ``uint64`` since v2), then the metadata key/value
pairs, then one info record per tensor (name, dims, ggml type, offset). Only the
header is read: the tensor data (most of the file) is never touched, so reading the
shape of a multi-GB model costs a few milliseconds.

Files are little-endian unless written big-endian (the version field then reads
byte-swapped); both are accepted.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from infersight.core.errors import ConfigError, file_error

__all__ = [
    "GGML_TYPES",
    "GGUFError",
    "GGUFFile",
    "GGUFTensor",
    "read_gguf",
    "read_gguf_stream",
]

MAGIC = b"GGUF"

#: ggml tensor type id -> (name, elements per block, bytes per block).
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34),
    9: ("Q8_1", 32, 36),
    10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
    15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66),
    17: ("IQ2_XS", 256, 74),
    18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50),
    20: ("IQ4_NL", 32, 18),
    21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82),
    23: ("IQ4_XS", 256, 136),
    24: ("I8", 1, 1),
    25: ("I16", 1, 2),
    26: ("I32", 1, 4),
    27: ("I64", 1, 8),
    28: ("F64", 1, 8),
    29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2),
    34: ("TQ1_0", 256, 54),
    35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17),
}

# Metadata value types: id -> struct format (scalars) or a marker.
_SCALARS: dict[int, str] = {
    0: "B",  # uint8
    1: "b",  # int8
    2: "H",  # uint16
    3: "h",  # int16
    4: "I",  # uint32
    5: "i",  # int32
    6: "f",  # float32
    7: "?",  # bool
    10: "Q",  # uint64
    11: "q",  # int64
    12: "d",  # float64
}
_STRING = 8
_ARRAY = 9
# Defensive limits so a corrupt header cannot make us allocate gigabytes.
_MAX_STRING = 1 << 24
_MAX_COUNT = 1 << 24
_MAX_DIMS = 8


class GGUFError(ConfigError):
    """The file is not a GGUF file or its header is corrupt."""


@dataclass(frozen=True, slots=True)
class GGUFTensor:
    """One entry of the tensor table."""

    name: str
    shape: tuple[int, ...]
    type_id: int
    offset: int

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def type_name(self) -> str:
        return GGML_TYPES.get(self.type_id, (f"type{self.type_id}", 1, 0))[0]

    @property
    def n_bytes(self) -> int:
        """Bytes the tensor occupies on disk (and in memory once loaded)."""
        _, block, size = GGML_TYPES.get(self.type_id, ("?", 1, 0))
        return -(-self.n_elements // block) * size


@dataclass(slots=True)
class GGUFFile:
    """The parsed header: version, metadata and tensor table."""

    version: int
    metadata: dict[str, Any]
    tensors: list[GGUFTensor] = field(default_factory=list)
    path: Path | None = None

    @property
    def architecture(self) -> str | None:
        arch = self.metadata.get("general.architecture")
        return arch if isinstance(arch, str) else None

    def arch_value(self, key: str, default: Any = None) -> Any:
        """``{architecture}.{key}`` from the metadata, e.g. ``block_count``."""
        arch = self.architecture
        if arch is None:
            return default
        return self.metadata.get(f"{arch}.{key}", default)

    @property
    def weights_bytes(self) -> int:
        """Sum of all tensor sizes: the exact weight memory after quantisation."""
        return sum(t.n_bytes for t in self.tensors)

    @property
    def n_parameters(self) -> int:
        return sum(t.n_elements for t in self.tensors)


class _Reader:
    """Reads from a growing in-memory buffer (1 MiB file reads), so that parsing the
    ~100k small strings of a tokenizer costs microseconds each, not a syscall each."""

    def __init__(self, f: BinaryIO, endian: str) -> None:
        self.f = f
        self.e = endian
        self.buf = bytearray()
        self.pos = 0
        self._structs: dict[str, struct.Struct] = {}

    def _need(self, n: int) -> None:
        while len(self.buf) - self.pos < n:
            chunk = self.f.read(max(1 << 20, n - (len(self.buf) - self.pos)))
            if not chunk:
                raise GGUFError("truncated GGUF header")
            if self.pos > (1 << 22):  # drop what was parsed so the buffer stays small
                del self.buf[: self.pos]
                self.pos = 0
            self.buf += chunk

    def read(self, n: int) -> bytes:
        self._need(n)
        b = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return b

    def _struct(self, fmt: str) -> struct.Struct:
        st = self._structs.get(fmt)
        if st is None:
            st = self._structs[fmt] = struct.Struct(self.e + fmt)
        return st

    def scalar(self, fmt: str) -> Any:
        st = self._struct(fmt)
        self._need(st.size)
        v = st.unpack_from(self.buf, self.pos)[0]
        self.pos += st.size
        return v

    def count(self, wide: bool) -> int:
        n = int(self.scalar("Q" if wide else "I"))
        if n > _MAX_COUNT:
            raise GGUFError(f"implausible count {n} in GGUF header")
        return n

    def string(self, wide: bool) -> str:
        n = self.count(wide)
        if n > _MAX_STRING:
            raise GGUFError(f"implausible string length {n} in GGUF header")
        self._need(n)
        v = self.buf[self.pos : self.pos + n].decode("utf-8", errors="replace")
        self.pos += n
        return v

    def value(self, vtype: int, wide: bool) -> Any:
        if vtype in _SCALARS:
            return self.scalar(_SCALARS[vtype])
        if vtype == _STRING:
            return self.string(wide)
        if vtype == _ARRAY:
            itype = int(self.scalar("I"))
            n = self.count(wide)
            if itype in _SCALARS:
                st = self._struct(f"{n}{_SCALARS[itype]}")
                self._need(st.size)
                vals = list(st.unpack_from(self.buf, self.pos))
                self.pos += st.size
                return vals
            if itype == _STRING:
                return [self.string(wide) for _ in range(n)]
            return [self.value(itype, wide) for _ in range(n)]
        raise GGUFError(f"unknown GGUF metadata value type {vtype}")


def read_gguf_stream(f: BinaryIO) -> GGUFFile:
    """Parse a GGUF header from an open binary stream positioned at the start."""
    if f.read(4) != MAGIC:
        raise GGUFError("not a GGUF file (bad magic)")
    raw_version = f.read(4)
    if len(raw_version) != 4:
        raise GGUFError("truncated GGUF header")
    version = struct.unpack("<I", raw_version)[0]
    endian = "<"
    if version > 0xFFFF:  # written big-endian: the version reads byte-swapped
        version = struct.unpack(">I", raw_version)[0]
        endian = ">"
    if version not in (1, 2, 3):
        raise GGUFError(f"unsupported GGUF version {version}")
    wide = version >= 2
    r = _Reader(f, endian)
    n_tensors = r.count(wide)
    n_kv = r.count(wide)
    metadata: dict[str, Any] = {}
    for _ in range(n_kv):
        key = r.string(wide)
        vtype = int(r.scalar("I"))
        metadata[key] = r.value(vtype, wide)
    out = GGUFFile(version=version, metadata=metadata)
    for _ in range(n_tensors):
        name = r.string(wide)
        n_dims = int(r.scalar("I"))
        if n_dims > _MAX_DIMS:
            raise GGUFError(f"tensor {name!r} has {n_dims} dimensions")
        dims = tuple(int(r.scalar("Q" if wide else "I")) for _ in range(n_dims))
        type_id = int(r.scalar("I"))
        offset = int(r.scalar("Q"))
        out.tensors.append(GGUFTensor(name, dims, type_id, offset))
    return out


def read_gguf(path: str | Path) -> GGUFFile:
    """Read the header of the GGUF file at ``path`` (never the tensor data)."""
    p = Path(path)
    try:
        with p.open("rb") as f:
            g = read_gguf_stream(f)
    except OSError as e:
        raise file_error(p, e) from None
    except struct.error as e:
        raise GGUFError(f"{p}: corrupt GGUF header ({e})") from None
    g.path = p
    return g
