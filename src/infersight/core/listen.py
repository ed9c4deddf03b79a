"""Whether a server can listen on an address, and the one line when it cannot.

The engine, the gateway and the exporter check before they start anything else, so a
taken port is one clear error (exit 2), not a traceback after the upstreams were opened.
"""

from __future__ import annotations

import errno
import socket

from infersight.core.errors import ConfigError

__all__ = ["check_can_listen", "free_port", "listen_error"]


def listen_error(host: str, port: int, e: OSError) -> ConfigError:
    """The one line for ``host:port`` that cannot be listened on: the port is taken,
    needs root, or the host is not this machine's."""
    if e.errno == errno.EADDRINUSE:
        why = (
            f"port {port} on {host} is already in use; choose another --port, or --port 0 for a "
            "free one"
        )
    elif e.errno == errno.EACCES:
        why = f"no permission to listen on port {port} (ports below 1024 need root)"
    elif e.errno == errno.EADDRNOTAVAIL:
        why = f"--host {host} is not an address of this machine"
    else:
        why = f"cannot listen on {host}:{port}: {(e.strerror or str(e)).lower()}"
    return ConfigError(why)


def check_can_listen(host: str, port: int) -> None:
    """Raise the one-line ConfigError when ``host:port`` cannot be listened on (port 0,
    any free port, always can). Binds and closes a socket the way servers bind."""
    if port == 0:
        return
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as e:
        raise ConfigError(f"cannot resolve --host {host!r}: {e.strerror}") from None
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as aiohttp and llama.cpp do
        try:
            s.bind(addr)
        except OSError as e:
            raise listen_error(host, port, e) from None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on at ``host`` now, for a server that must be told its
    port before it binds (a child process, a test's fake). Another process, or a later
    call, may be handed the same port once this one is closed: a port that must stay
    dead has to be held bound."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port
