"""A tiny Chrome DevTools Protocol driver for headless Chromium (tests only).

Starts ``/usr/bin/chromium --headless`` with ``--remote-debugging-port=0`` bound to
127.0.0.1, connects to the browser endpoint over a WebSocket (aiohttp), opens one page
and records what the page did: every network request, console message, uncaught
exception and log entry.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from support.waiting import until

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--hide-scrollbars",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
)


def _remove(path: str) -> bool:
    """Delete a directory tree; True once it is gone."""
    shutil.rmtree(path, ignore_errors=True)
    return not os.path.exists(path)


class Browser:
    """``async with Browser() as b: page = await b.open(url)``."""

    def __init__(self, width: int = 1200, height: int = 2400) -> None:
        self.width, self.height = width, height
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.events: list[dict[str, Any]] = []

    async def __aenter__(self) -> Browser:
        # Chromium's helper processes may still write to the profile for a moment after
        # the browser exits; a leftover file must not fail the test.
        self._tmp = tempfile.TemporaryDirectory(
            prefix="infersight-chromium-", ignore_cleanup_errors=True
        )
        self._proc = await asyncio.create_subprocess_exec(
            CHROMIUM,
            *FLAGS,
            f"--user-data-dir={self._tmp.name}",
            f"--window-size={self.width},{self.height}",
            "about:blank",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            # its org.chromium.* folders go in the profile folder, removed below (in
            # /tmp they were left, one a launch)
            env={**os.environ, "TMPDIR": self._tmp.name},
        )
        port_file = Path(self._tmp.name) / "DevToolsActivePort"

        def listening() -> bool:  # Chromium writes its port here once listening
            if self._proc.returncode is not None:
                raise RuntimeError(f"chromium exited with {self._proc.returncode}")
            return port_file.exists() and len(port_file.read_text().splitlines()) >= 2

        await until(listening, "chromium to open its DevTools port", timeout=60)
        port, path = port_file.read_text().splitlines()[:2]
        self._session = aiohttp.ClientSession()
        self._ws = await self._session.ws_connect(f"ws://127.0.0.1:{port}{path}", max_msg_size=0)
        self._reader = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._reader.cancel()
        await self._ws.close()
        await self._session.close()
        self._proc.terminate()
        try:
            await asyncio.wait_for(self._proc.wait(), 10)
        except TimeoutError:
            self._proc.kill()
            await self._proc.wait()
        # the browser's last writes may land after it exited: try again for a while,
        # and leave what is left to cleanup (which ignores errors)
        with contextlib.suppress(AssertionError):
            await until(lambda: _remove(self._tmp.name), "the profile to be removed", timeout=2)
        self._tmp.cleanup()

    async def _read(self) -> None:
        async for msg in self._ws:
            data = msg.json()
            if "id" in data and data["id"] in self._pending:
                self._pending.pop(data["id"]).set_result(data)
            else:
                self.events.append(data)

    async def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        timeout: float = 60.0,
    ) -> dict[str, Any]:
        mid = next(self._ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[mid] = fut
        msg: dict[str, Any] = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        await self._ws.send_json(msg)
        reply = await asyncio.wait_for(fut, timeout)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        result: dict[str, Any] = reply.get("result", {})
        return result

    async def open(self, url: str) -> Page:
        """A new tab showing ``url``, once loaded and its network idle (so that a late
        request, or an error it raises, is among the events already)."""
        target = await self.send("Target.createTarget", {"url": "about:blank"})
        att = await self.send(
            "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}
        )
        page = Page(self, att["sessionId"])
        for domain in ("Page", "Runtime", "Log", "Network"):
            await page.send(f"{domain}.enable")
        await page.send("Page.setLifecycleEventsEnabled", {"enabled": True})
        await page.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False},
        )
        start = len(self.events)
        await page.send("Page.navigate", {"url": url})

        def seen(method: str, name: str | None = None) -> bool:
            return any(
                e.get("method") == method
                and e.get("sessionId") == page.session
                and (name is None or e.get("params", {}).get("name") == name)
                for e in self.events[start:]
            )

        await until(lambda: seen("Page.loadEventFired"), f"{url} to load", timeout=60)
        # Chromium's own "nothing on the network for 0.5 s": late requests or errors
        # would show up before it
        await until(
            lambda: seen("Page.lifecycleEvent", "networkIdle"), f"{url} to go idle", timeout=60
        )
        return page


class Page:
    def __init__(self, browser: Browser, session: str) -> None:
        self.browser, self.session = browser, session

    async def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.browser.send(method, params, self.session)

    def events(self, method: str) -> list[dict[str, Any]]:
        return [
            e.get("params", {})
            for e in self.browser.events
            if e.get("method") == method and e.get("sessionId") == self.session
        ]

    def requested_urls(self) -> list[str]:
        return [e["request"]["url"] for e in self.events("Network.requestWillBeSent")]

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and error-level log entries."""
        out = []
        for e in self.events("Runtime.exceptionThrown"):
            d = e.get("exceptionDetails", {})
            out.append(f"{d.get('text')} {d.get('exception', {}).get('description', '')}")
        out += [
            str(e.get("args"))
            for e in self.events("Runtime.consoleAPICalled")
            if e.get("type") in ("error", "assert")
        ]
        out += [
            str(e["entry"].get("text"))
            for e in self.events("Log.entryAdded")
            if e.get("entry", {}).get("level") == "error"
        ]
        return out

    async def evaluate(self, expression: str) -> Any:
        r = await self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        return r["result"].get("value")

    async def screenshot(self, clip_height: int | None = None) -> bytes:
        params: dict[str, Any] = {"format": "png"}
        if clip_height:
            params["clip"] = {
                "x": 0,
                "y": 0,
                "width": self.browser.width,
                "height": clip_height,
                "scale": 1,
            }
            params["captureBeyondViewport"] = True
        r = await self.send("Page.captureScreenshot", params)
        return base64.b64decode(r["data"])


@asynccontextmanager
async def serve(pages: dict[str, str]) -> AsyncIterator[tuple[str, list[str]]]:
    """Serve ``pages`` on 127.0.0.1; yields the base URL and every path requested."""
    hits: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        hits.append(request.path)
        body = pages.get(request.path)
        if body is None:
            return web.Response(status=404)
        return web.Response(text=body, content_type="text/html")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}", hits
    finally:
        await runner.cleanup()
