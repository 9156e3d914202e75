"""A local stand-in for the instance metadata service's Scheduled Events, on 127.0.0.1: it serves
the documents Azure documents and records the acknowledgements, for the tests, the benchmark and
the demo (``PreemptionWatcher(..., endpoint=server.url, vm_name=...)``).

    with EventsServer(vm_name="vmss_3") as server:
        server.schedule("Preempt", notice_s=30)           # an event for this VM
        server.schedule("Reboot", resources=["vmss_7"])   # one for another VM
        ... server.acks -> [(perf_counter, ["<EventId>"])]

Like IMDS it refuses a request without ``Metadata: true`` (HTTP 400), answers the instance
document's ``compute.name``, raises ``DocumentIncarnation`` when the events change, and drops an
acknowledged event from the list once it has "started" (``forget_acked``).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class EventsServer:
    def __init__(self, vm_name: str = "stoker-vm", *, forget_acked: bool = False) -> None:
        self.vm_name = vm_name
        self.forget_acked = forget_acked
        self.events: list[dict[str, Any]] = []
        self.incarnation = 1
        self.acks: list[tuple[float, list[str]]] = []  # (time.perf_counter(), EventIds)
        self.gets = 0
        self.refused = 0  # requests without Metadata: true
        self.first_served: dict[str, float] = {}  # EventId -> perf_counter of its first GET
        # called with the EventIds as an acknowledgement arrives, before it is answered (a
        # test looks at the disk at that moment)
        self.on_ack: Callable[[list[str]], Any] | None = None
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        host, port = self._server.server_address[:2]
        self.url = f"http://{host}:{port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()

    def schedule(
        self,
        event_type: str = "Preempt",
        *,
        notice_s: float | None = 30.0,
        resources: list[str] | None = None,
        event_id: str | None = None,
    ) -> str:
        """Add an event (NotBefore ``notice_s`` from now; None: already Started); its EventId."""
        event_id = event_id or str(uuid.uuid4()).upper()
        started = notice_s is None
        event = {
            "EventId": event_id,
            "EventType": event_type,
            "ResourceType": "VirtualMachine",
            "Resources": resources if resources is not None else [self.vm_name],
            "EventStatus": "Started" if started else "Scheduled",
            "NotBefore": "" if started else formatdate(time.time() + notice_s, usegmt=True),
            "Description": f"{event_type} scheduled by stoker's local events server",
            "EventSource": "Platform",
            "DurationInSeconds": -1,
        }
        with self._lock:
            self.events.append(event)
            self.incarnation += 1
        return event_id

    def clear(self) -> None:
        with self._lock:
            self.events = []
            self.incarnation += 1

    def document(self) -> dict[str, Any]:
        now = time.perf_counter()
        with self._lock:
            self.gets += 1
            for event in self.events:
                self.first_served.setdefault(event["EventId"], now)
            return {"DocumentIncarnation": self.incarnation, "Events": list(self.events)}

    def _acknowledge(self, body: Any) -> bool:
        try:
            ids = [str(r["EventId"]) for r in body["StartRequests"]]
        except (KeyError, TypeError):
            return False
        if self.on_ack is not None:
            self.on_ack(ids)
        with self._lock:
            self.acks.append((time.perf_counter(), ids))
            if self.forget_acked:
                self.events = [e for e in self.events if e["EventId"] not in ids]
                self.incarnation += 1
        return True

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if not self._metadata():
                    return
                if self.path.startswith("/metadata/scheduledevents"):
                    self._send(200, owner.document())
                elif self.path.startswith("/metadata/instance"):
                    compute = {"name": owner.vm_name, "vmSize": "Standard_ND96isr_H100_v5"}
                    self._send(200, {"compute": compute})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self) -> None:
                if not self._metadata():
                    return
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"null")
                except ValueError:
                    body = None
                ok = self.path.startswith("/metadata/scheduledevents") and owner._acknowledge(body)
                self._send(200 if ok else 400, {} if ok else {"error": "Bad Request"})

            def _metadata(self) -> bool:
                if self.headers.get("Metadata") == "true":
                    return True
                with owner._lock:
                    owner.refused += 1
                self._send(400, {"error": "Bad request. Required metadata header not specified"})
                return False

            def _send(self, status: int, doc: Any) -> None:
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> EventsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
