"""A real headless Chromium (Debian's package; `make chromium` installs it) driven over the
Chrome DevTools Protocol: open a page as a person would, collect console errors and uncaught
exceptions, measure what each chart drew, and take a screenshot.

Only aiohttp (a stoker dependency) speaks the protocol's websocket; no browser is downloaded."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# For each chart: its id, and the SVG marks (shapes and text) that take up space on screen.
_CHARTS_JS = """
[...document.querySelectorAll('figure.chart')].map(fig => {
  const svg = fig.querySelector('svg');
  if (!svg) return {id: fig.id, width: 0, height: 0, marks: 0, text: 0};
  const box = svg.getBoundingClientRect();
  const drawn = [...svg.querySelectorAll('path, rect, use, line, polyline, circle, ellipse')]
    .filter(e => { const b = e.getBoundingClientRect(); return b.width > 0 || b.height > 0; });
  const text = [...svg.querySelectorAll('text')].filter(e => e.textContent.trim()).length;
  return {id: fig.id, width: box.width, height: box.height, marks: drawn.length, text: text,
          title: (fig.querySelector('h3') || {}).textContent || '',
          reading: (fig.querySelector('.reading') || {}).textContent || ''};
})
"""


@dataclass
class PageView:
    console_errors: list[str] = field(default_factory=list)
    charts: list[dict[str, Any]] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    screenshot: Path | None = None
    load_s: float = 0.0


def executable() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        raise RuntimeError("no chromium on PATH: run `make chromium` (Debian's package, as root)")
    return found


def open_page(url: str, screenshot: Path | None = None, width: int = 1000) -> PageView:
    """Load ``url`` in a fresh headless Chromium and report what a person would have seen."""
    # Chromium's helper processes may still write to the profile as the browser is stopped: a
    # fresh-clone run failed its cleanup ("Directory not empty"); the profile is scratch.
    with tempfile.TemporaryDirectory(
        prefix="stoker-chromium-", ignore_cleanup_errors=True
    ) as profile:
        proc = subprocess.Popen(
            [
                executable(),
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--remote-debugging-port=0",
                f"--user-data-dir={profile}",
                f"--window-size={width},900",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            port = _port(Path(profile) / "DevToolsActivePort", proc)
            return asyncio.run(_drive(port, url, screenshot, width))
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _port(active: Path, proc: subprocess.Popen[bytes], timeout_s: float = 60.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"chromium exited at start-up (code {proc.returncode})")
        with contextlib.suppress(FileNotFoundError, ValueError, IndexError):
            return int(active.read_text().splitlines()[0])
        time.sleep(0.05)
    raise RuntimeError("chromium did not open its DevTools port in 60 s")


async def _drive(port: int, url: str, screenshot: Path | None, width: int) -> PageView:
    import aiohttp

    view = PageView()
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{port}/json/list") as r:
            targets = await r.json(content_type=None)
        ws_url = next(t["webSocketDebuggerUrl"] for t in targets if t.get("type") == "page")
        async with http.ws_connect(ws_url, max_msg_size=0) as ws:
            cdp = _Session(ws, view)
            reader = asyncio.create_task(cdp.read())
            try:
                for domain in ("Page", "Runtime", "Log", "Network"):
                    await cdp.call(f"{domain}.enable")
                start = time.perf_counter()
                loaded = cdp.expect("Page.loadEventFired")
                await cdp.call("Page.navigate", url=url)
                await asyncio.wait_for(loaded, 60)
                view.load_s = time.perf_counter() - start
                await asyncio.sleep(0.2)  # late console messages land before we look
                result = await cdp.call(
                    "Runtime.evaluate", expression=_CHARTS_JS, returnByValue=True
                )
                view.charts = result["result"].get("value") or []
                if screenshot is not None:
                    metrics = await cdp.call("Page.getLayoutMetrics")
                    height = int(metrics["cssContentSize"]["height"]) + 1
                    await cdp.call(
                        "Emulation.setDeviceMetricsOverride",
                        width=width,
                        height=height,
                        deviceScaleFactor=1,
                        mobile=False,
                    )
                    shot = await cdp.call(
                        "Page.captureScreenshot", format="png", captureBeyondViewport=True
                    )
                    screenshot.parent.mkdir(parents=True, exist_ok=True)
                    screenshot.write_bytes(base64.b64decode(shot["data"]))
                    view.screenshot = screenshot
            finally:
                reader.cancel()
    return view


class _Session:
    """Calls by id and events by name over one DevTools websocket."""

    def __init__(self, ws: Any, view: PageView) -> None:
        self.ws, self.view, self.next_id = ws, view, 0
        self.calls: dict[int, asyncio.Future[Any]] = {}
        self.waiting: dict[str, asyncio.Future[Any]] = {}

    async def call(self, method: str, **params: Any) -> Any:
        self.next_id += 1
        fut = asyncio.get_running_loop().create_future()
        self.calls[self.next_id] = fut
        await self.ws.send_str(json.dumps({"id": self.next_id, "method": method, "params": params}))
        return await asyncio.wait_for(fut, 60)

    def expect(self, event: str) -> asyncio.Future[Any]:
        fut = asyncio.get_running_loop().create_future()
        self.waiting[event] = fut
        return fut

    async def read(self) -> None:
        async for msg in self.ws:
            data = json.loads(msg.data)
            if "id" in data:
                fut = self.calls.pop(data["id"], None)
                if fut and not fut.done():
                    if "error" in data:
                        fut.set_exception(RuntimeError(f"CDP: {data['error']}"))
                    else:
                        fut.set_result(data.get("result", {}))
                continue
            self._event(data.get("method", ""), data.get("params", {}))

    def _event(self, method: str, params: dict[str, Any]) -> None:
        fut = self.waiting.pop(method, None)
        if fut and not fut.done():
            fut.set_result(params)
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = " ".join(
                str(a.get("value", a.get("description", ""))) for a in params.get("args", [])
            )
            self.view.console_errors.append(f"console.{params['type']}: {args}")
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            text = details.get("exception", {}).get("description") or details.get("text")
            self.view.console_errors.append(f"uncaught: {text}")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            self.view.console_errors.append(f"{entry.get('source')}: {entry.get('text')}")
        elif method == "Network.requestWillBeSent":
            self.view.requests.append(params.get("request", {}).get("url", ""))
