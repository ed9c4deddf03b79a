"""A loopback port that refuses connections for as long as a test holds it.

A port only looked up as free (``core.listen.free_port``) is closed again at once, and
the kernel may hand it to the next server a test starts: a "dead" upstream then
answers. Held bound without listening, the port refuses every connection and no other
socket can be given it."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def closed_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections until the block ends."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])
