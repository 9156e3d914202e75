"""A proxy in front of Azurite that answers some requests itself, as a throttled account does.

Every request is forwarded with ``Connection: close``, so that each one comes through a new
connection and passes the ``fault`` rule: a function of (method, path) that returns None to
forward the request, or (status, error code, Retry-After) to answer it, as Blob Storage answers
a throttled request (503 ServerBusy, 500 OperationTimedOut). ``log`` records every request:
(time, method, path, status it was answered with, or None when forwarded).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

from azurite import free_port

Fault = tuple[int, str, float | None]


class Request(NamedTuple):
    at: float
    method: str
    path: str
    injected: int | None


class FaultyProxy:
    def __init__(self, upstream_port: int, fault: Callable[[str, str], Fault | None]) -> None:
        self.upstream_port, self.fault = upstream_port, fault
        self.port = free_port()
        self.log: list[Request] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def endpoint(self, account: str) -> str:
        return f"http://127.0.0.1:{self.port}/{account}"

    def __enter__(self) -> FaultyProxy:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", self.port)
        )
        self._ready.set()
        self._loop.run_forever()
        server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        lines = head.decode("latin-1").split("\r\n")
        method, path = lines[0].split(" ")[:2]
        headers = {
            k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])
        }
        fault = self.fault(method, path)
        self.log.append(Request(time.monotonic(), method, path, fault[0] if fault else None))
        try:
            if fault:
                await reader.readexactly(int(headers.get("content-length") or 0))
                await self._answer(writer, *fault)
            else:
                await self._forward(lines, reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _answer(
        self, writer: asyncio.StreamWriter, status: int, code: str, retry_after: float | None
    ) -> None:
        body = f"<?xml version='1.0' encoding='utf-8'?><Error><Code>{code}</Code></Error>".encode()
        extra = f"Retry-After: {retry_after:g}\r\n" if retry_after is not None else ""
        writer.write(
            f"HTTP/1.1 {status} {code}\r\nContent-Type: application/xml\r\n"
            f"x-ms-error-code: {code}\r\n{extra}Content-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n".encode()
            + body
        )
        await writer.drain()

    async def _forward(
        self, lines: list[str], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        kept = [x for x in lines[1:] if x and not x.lower().startswith("connection:")]
        head = "\r\n".join([lines[0], *kept, "Connection: close", "", ""]).encode("latin-1")
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        up_writer.write(head)

        async def body_up() -> None:  # the request's body, as it comes
            while chunk := await reader.read(1 << 16):
                up_writer.write(chunk)
                await up_writer.drain()

        sending = asyncio.ensure_future(body_up())
        try:
            while chunk := await up_reader.read(1 << 16):  # until Azurite closes
                writer.write(chunk)
                await writer.drain()
        finally:
            sending.cancel()
            up_writer.close()
