"""The serve front's engine-side framing (``Relay``): however an answer is split across
reads, the client gets exactly the engine's bytes (less the engine's keep-alive terms)
and the answer ends once, where its framing says."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from infersight.core.errors import InfersightError
from infersight.gateway.front_relay import _CHUNK_HEADS, Relay


class Sink:
    def __init__(self) -> None:
        self.out: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.out.append(data)


class Engine:
    """The engine side's transport: takes the request, never closes."""

    def write(self, data: bytes) -> None:
        pass

    def is_closing(self) -> bool:
        return False


HEAD = (b"HTTP/1.1 200 OK\r\nServer: llama.cpp\r\nContent-Type: text/event-stream\r\n"
        b"Transfer-Encoding: chunked\r\nKeep-Alive: timeout=5, max=100")


def _stream(events: list[bytes]) -> bytes:
    body = b"".join(b"%x\r\n" % len(e) + e + b"\r\n" for e in events)
    return HEAD + b"\r\n\r\n" + body + b"0\r\n\r\n"


def _relay(answer: bytes, cuts: list[int]) -> tuple[bytes, list[Any], Relay]:
    relay, sink, done = Relay(), Sink(), []
    relay.connection_made(Engine())  # type: ignore[arg-type]
    relay.begin(sink, b"req", close_client=False, unchunk=False,  # type: ignore[arg-type]
                on_done=done.append)
    points = sorted({c % (len(answer) + 1) for c in cuts} | {0, len(answer)})
    for a, b in itertools.pairwise(points):
        relay.data_received(answer[a:b])
    return b"".join(sink.out), done, relay


events = st.lists(
    st.binary(min_size=1, max_size=80).map(lambda b: b"data: " + b.hex().encode() + b"\n\n"),
    min_size=1, max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(events, st.lists(st.integers(min_value=0, max_value=4000), max_size=8),
       st.booleans())
def test_any_split_of_a_stream_is_relayed_exactly_once(
    evs: list[bytes], cuts: list[int], per_event: bool
) -> None:
    answer = _stream(evs)
    if per_event:  # the engine's usual writes: the head, then one chunk per read
        cuts = [answer.index(b"\r\n\r\n") + 4]
        pos = cuts[0]
        for e in evs:
            pos += len(b"%x\r\n" % len(e)) + len(e) + 2
            cuts.append(pos)
    out, done, relay = _relay(answer, cuts)
    assert out == answer.replace(b"\r\nKeep-Alive: timeout=5, max=100", b"")
    assert done == [None]  # finished once, without an error
    assert relay.started


def test_a_bad_chunk_size_is_an_error_not_a_relayed_answer() -> None:
    answer = HEAD + b"\r\n\r\n" + b"zz\r\nhello\r\n0\r\n\r\n"
    out, done, relay = _relay(answer, [len(HEAD) + 4])
    assert len(done) == 1 and isinstance(done[0], InfersightError)
    assert b"hello" not in out and not relay.reusable


def test_the_whole_chunk_table_names_the_one_size_each_length_can_hold() -> None:
    # A read is taken as one whole chunk only when it starts with the size line its
    # length implies: checked here for every length the table covers.
    assert _CHUNK_HEADS[5] == () and _CHUNK_HEADS[6] == b"1\r\n"
    for n, head in enumerate(_CHUNK_HEADS):
        fits = (n - digits - 4 for digits in range(1, 6))  # a size s of its digit count
        sizes = [s for s in fits if s > 0 and len(b"%x\r\n" % s) + s + 2 == n]
        assert len(sizes) <= 1
        assert head == (b"%x\r\n" % sizes[0] if sizes else ())
        assert not b"0\r\n\r\n".startswith(head)  # the last chunk is never taken as one


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([1, 15, 16, 255, 256, 4095, 4096, 16370, 20000]),
                min_size=1, max_size=6), st.booleans())
def test_chunks_across_size_line_lengths_and_upper_case_sizes_are_relayed_exactly(
    sizes: list[int], upper: bool
) -> None:
    evs = [b"x" * s for s in sizes]
    answer = _stream(evs)
    if upper:  # another server's spelling: the general walk takes it
        head, _, body = answer.partition(b"\r\n\r\n")
        body = b"".join(b"%X\r\n" % len(e) + e + b"\r\n" for e in evs) + b"0\r\n\r\n"
        answer = head + b"\r\n\r\n" + body
    cuts, pos = [answer.index(b"\r\n\r\n") + 4], answer.index(b"\r\n\r\n") + 4
    for e in evs:
        pos += len(b"%x\r\n" % len(e)) + len(e) + 2
        cuts.append(pos)
    out, done, _ = _relay(answer, cuts)
    assert out == answer.replace(b"\r\nKeep-Alive: timeout=5, max=100", b"")
    assert done == [None]
