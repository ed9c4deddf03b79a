"""A client of the Prometheus HTTP API (``/api/v1``): range and instant queries, series
and label values, with the authentication and TLS options Prometheus' own clients
offer (``promtool --http.config.file``): basic auth, a bearer token, a CA, a client
certificate and ``insecure_skip_verify``.

Every failure is one :mod:`infersight.core.errors` error whose message names the
server (never a credential) and what to check; aiohttp's exceptions never escape.
"""

from __future__ import annotations

import asyncio
import os
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import aiohttp
import numpy as np
import orjson
from pydantic import SecretStr

from infersight.core.endpoint import shown_url
from infersight.core.errors import (
    AuthError,
    ConfigError,
    ConnectError,
    ProtocolError,
    ServerError,
    Timeout,
)
from infersight.telemetry.prometheus.auth import PrometheusAuth

__all__ = ["MatrixSeries", "PrometheusClient"]


@dataclass(frozen=True, slots=True)
class MatrixSeries:
    """One series of a range query: its labels and its points."""

    labels: dict[str, str]
    t: np.ndarray
    v: np.ndarray


def _matrix(result: Any) -> list[MatrixSeries]:
    out = []
    for item in result or ():
        values = item.get("values") or []
        if not values:
            continue
        t = np.fromiter((float(p[0]) for p in values), dtype=float, count=len(values))
        v = np.array([p[1] for p in values], dtype=float)
        out.append(MatrixSeries(dict(item.get("metric") or {}), t, v))
    return out


class PrometheusClient:
    """``async with PrometheusClient(url, auth) as prom: await prom.query_range(...)``.

    ``url`` is the server root (``http://prometheus:9090``, or a path prefix such as
    ``https://example.com/prometheus``); user info in it is used as basic auth.
    """

    def __init__(
        self,
        url: str,
        auth: PrometheusAuth | None = None,
        *,
        timeout: float = 120.0,
        concurrency: int = 4,
    ) -> None:
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(
                f"--prometheus {shown_url(url)!r}: give the server's URL, "
                "e.g. http://prometheus:9090"
            )
        self.auth = auth or PrometheusAuth()
        if parts.username and not self.auth.username:
            self.auth = self.auth.model_copy(
                update={
                    "username": unquote(parts.username),
                    "password_value": SecretStr(unquote(parts.password or "")),
                }
            )
        # Requests go to the root shown: no user info (sent as basic auth) and no query.
        self.url = shown_url(url).rstrip("/")
        self.timeout = timeout
        self.queries = 0
        self.points = 0
        self.warnings: list[str] = []
        self._sem = asyncio.Semaphore(max(1, concurrency))
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> PrometheusClient:
        ctx = self.auth.ssl_context() if self.url.startswith("https:") else None
        connector = aiohttp.TCPConnector(ssl=ctx if ctx is not None else False, limit=8)
        self._session = aiohttp.ClientSession(
            connector=connector,
            headers=self.auth.headers(),
            timeout=aiohttp.ClientTimeout(total=self.timeout, sock_connect=min(10.0, self.timeout)),
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _call(self, path: str, form: list[tuple[str, str]], method: str = "POST") -> Any:
        """``form`` to ``/api/v1/<path>``; the ``data`` of a success."""
        assert self._session is not None, "use `async with PrometheusClient(...)`"
        where = f"Prometheus at {self.url}"
        url = f"{self.url}/api/v1/{path}"
        kw: dict[str, Any] = {"data": form} if method == "POST" else {"params": form}
        try:
            async with (
                self._sem,
                self._session.request(
                    method, url, server_hostname=self.auth.server_name or None, **kw
                ) as r,
            ):
                body, status = await r.read(), r.status
        except aiohttp.ClientConnectorCertificateError as e:
            raise ConnectError(
                f"{where}: TLS certificate not trusted ({e.certificate_error}); "
                "give its CA (tls_config.ca_file) or insecure_skip_verify"
            ) from None
        except aiohttp.ClientSSLError as e:
            raise ConnectError(f"{where}: TLS handshake failed ({type(e).__name__})") from None
        except aiohttp.ClientConnectorError as e:
            errno = getattr(e.os_error, "errno", None)
            if isinstance(e.os_error, socket.gaierror):
                why = "its host name does not resolve"
            else:
                why = os.strerror(errno).lower() if errno else "no route to the server"
            raise ConnectError(f"{where}: cannot connect ({why})") from None
        except (aiohttp.ServerTimeoutError, TimeoutError):
            raise Timeout(f"{where}: no answer within {self.timeout:.0f} s") from None
        except aiohttp.ClientError as e:
            raise ConnectError(f"{where}: {type(e).__name__}") from None
        return self._data(where, path, status, body)

    def _data(self, where: str, path: str, status: int, body: bytes) -> Any:
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError:
            doc = None
        if status in (401, 403):
            raise AuthError(
                f"{where} answered HTTP {status}: the credentials were refused or "
                "missing (--http-config, INFERSIGHT_PROMETHEUS_*)",
                status=status,
            )
        if not isinstance(doc, dict) or "status" not in doc:
            if status >= 500:
                raise ServerError(f"{where} answered HTTP {status}", status=status)
            raise ProtocolError(
                f"{where} did not answer like the Prometheus HTTP API "
                f"(HTTP {status} on /api/v1/{path}); is it the server's root URL?"
            )
        for w in doc.get("warnings") or ():
            if w not in self.warnings:
                self.warnings.append(str(w))
        if doc.get("status") != "success":
            err = f"{doc.get('errorType', 'error')}: {doc.get('error', '')}".strip()
            if status >= 500 or doc.get("errorType") in ("timeout", "canceled", "internal"):
                raise ServerError(f"{where}: {err}", status=status or 500)
            raise ConfigError(f"{where} rejected the request: {err}")
        return doc.get("data")

    async def query_range(
        self, query: str, start: float, end: float, step: float
    ) -> list[MatrixSeries]:
        """The series of ``query`` evaluated every ``step`` seconds in ``[start, end]``."""
        data = await self._call(
            "query_range",
            [("query", query), ("start", _ts(start)), ("end", _ts(end)), ("step", _ts(step))],
        )
        self.queries += 1
        if not isinstance(data, dict) or data.get("resultType") != "matrix":
            raise ProtocolError(f"Prometheus at {self.url}: query_range did not return a matrix")
        series = _matrix(data.get("result"))
        self.points += sum(int(s.t.size) for s in series)
        return series

    async def label_values(
        self, label: str, match: list[str], start: float, end: float
    ) -> list[str]:
        """The values of ``label`` (``__name__``: metric names) on series matching ``match``."""
        form = [("start", _ts(start)), ("end", _ts(end))] + [("match[]", m) for m in match]
        # GET is the only method this endpoint has (Prometheus 2.x).
        data = await self._call(f"label/{label}/values", form, method="GET")
        return [str(x) for x in data or ()]

    async def call_get(self, path: str, params: list[tuple[str, str]] | None = None) -> Any:
        """GET ``/api/v1/<path>`` (e.g. ``status/config``); its ``data``."""
        return await self._call(path, params or [], method="GET")

    async def series(self, match: list[str], start: float, end: float) -> list[dict[str, str]]:
        """Label sets of the series matching any of ``match`` in ``[start, end]``."""
        form = [("start", _ts(start)), ("end", _ts(end))] + [("match[]", m) for m in match]
        data = await self._call("series", form)
        return [dict(x) for x in data or ()]


def _ts(x: float) -> str:
    return f"{x:.3f}".rstrip("0").rstrip(".")
