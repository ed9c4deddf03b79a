"""Where a command's requests go: a server root URL and what is known about the server.

The CLI layer decides the endpoint (a ``--url`` the user gave, or the embedded engine
it started for the command) and hands an :class:`Endpoint` down; ``bench``, ``batch``
and ``gateway`` only ever see this plain data, never the engine itself.
:func:`server_root` is the one place a URL's ``/v1`` suffix is removed.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

from infersight.core.errors import ConfigError

__all__ = ["Endpoint", "EndpointOpener", "is_loopback", "server_root", "shown_url"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine's loopback."""
    try:
        return host == "localhost" or ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def server_root(url: str) -> str:
    """``http://host:port/v1/`` -> ``http://host:port``: the server root every path
    (``/v1/chat/completions``, ``/metrics``, ``/tokenize``) is joined to. Users paste
    the OpenAI base URL (with ``/v1``) as often as the root; both mean the same server.
    """
    text = url.strip()
    scheme_end = text.find("://")
    # Only the path may lose its /v1: a host that happens to be called "v1" stays.
    path_at = text.find("/", scheme_end + 3 if scheme_end >= 0 else 0)
    if path_at < 0:
        return text
    head, path = text[:path_at], text[path_at:].rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")].rstrip("/")
    return head + path


def shown_url(url: str) -> str:
    """``url`` fit to show (stats, logs): no ``user:password@``, no query or fragment
    (where keys such as ``?api-key=`` travel)."""
    text = url.strip()
    scheme_end = text.find("://")
    start = scheme_end + 3 if scheme_end >= 0 else 0
    for sep in ("#", "?"):
        cut = text.find(sep, start)
        if cut >= 0:
            text = text[:cut]
    path_at = text.find("/", start)
    authority = text[start:] if path_at < 0 else text[start:path_at]
    at = authority.rfind("@")
    if at >= 0:
        text = text[:start] + authority[at + 1 :] + ("" if path_at < 0 else text[path_at:])
    return text


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A server to send requests to.

    ``url`` is the server root (see :func:`server_root`). When this command started the
    server (the embedded engine), ``started_by`` names the command and the other fields
    say what is known about it: its process id, slot count, served model and the
    settings a run records; for a URL the user gave they are unknown (None / empty).
    """

    url: str
    #: The key the server requires (the embedded engine's own), else None.
    api_key: str | None = None
    #: The command that started the server (``"bench"``...), None for a given URL.
    started_by: str | None = None
    pid: int | None = None
    slots: int | None = None
    model: str | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def given(cls, url: str) -> Endpoint:
        """A server the user named: its root URL and nothing else known."""
        return cls(url=server_root(url))

    @classmethod
    def required(cls, url: str | None, *, command: str) -> Endpoint:
        """:meth:`given`; without a URL, the ConfigError a library caller gets (only
        the CLI layer starts the embedded engine)."""
        if url is None:
            raise ConfigError(
                f"no server URL: give url (the `infersight {command}` command starts the "
                "embedded engine when --url is not given)"
            )
        return cls.given(url)

    @property
    def started(self) -> bool:
        """Whether this command started the server (and so knows its pid and slots)."""
        return self.started_by is not None


#: Opens an endpoint when a command first needs one, and closes it after: how the CLI
#: hands a command an embedded engine that should start only if there is work to do.
EndpointOpener = Callable[[], AbstractAsyncContextManager[Endpoint]]
