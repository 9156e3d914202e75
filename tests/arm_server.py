"""A loopback Azure Resource Manager for teardown tests: a real HTTP server on 127.0.0.1 that
speaks ARM's long-running-operation protocol as documented (azure-resource-manager-rpc
``async-api-reference.md``; facts in shared/facts/provisioning/azure-infra.md section 4):

- DELETE and POST actions answer 202 with absolute ``Azure-AsyncOperation`` and ``Location``
  headers and a ``Retry-After`` (seconds); the operation URL answers 200 ``{"status": ...}``
  (``InProgress`` for ``polls`` reads, then ``Succeeded``, or ``Failed``/``Canceled`` with an
  ``error``), the Location URL 202 while running and 200/204 when done;
- the AMLFS ``archive`` action is not an LRO: 200 with no body, and the file system's
  ``properties.hsm.archiveStatus`` goes InProgress -> Completed (or Failed / Canceled);
- ``throttle(n, ...)`` answers the next ``n`` matching requests 429 with ``Retry-After``;
- every request is logged (method, path, api-version, time, and the ``stoker-deployment-id``
  tag its resource carried when it was answered) so tests can assert order, and that nothing
  was changed on a resource that was not the deployment's (``changed_not_owned``);
- ``before(method, contains, fn)`` runs ``fn`` once just before a matching request is answered
  (a tag changed, a VM started, between teardown's reads and its writes).

The ARM ids are lower-cased for lookup, as ARM treats them case-insensitively.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

AMLFS = "Microsoft.StorageCache/amlFilesystems"
VMSS = "Microsoft.Compute/virtualMachineScaleSets"
VM = "Microsoft.Compute/virtualMachines"
TAG_DEPLOYMENT = "stoker-deployment-id"
MUTATING = {"PUT", "POST", "DELETE", "PATCH"}


@dataclass
class Logged:
    method: str
    path: str  # lower-cased, no query
    api_version: str | None
    status: int
    at: float
    authorized: bool
    owner: str | None = None  # its resource's stoker-deployment-id then; None: none, or no resource


@dataclass
class _Op:
    polls: int  # InProgress answers left
    outcome: str  # Succeeded, Failed, Canceled
    on_done: Any  # called once when the operation succeeds
    done: bool = False


@dataclass
class _Throttle:
    left: int
    method: str | None
    contains: str
    retry_after: int


@dataclass
class ArmState:
    resources: dict[str, dict[str, Any]] = field(default_factory=dict)  # lower id -> body
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)  # lower name -> body
    ops: dict[str, _Op] = field(default_factory=dict)
    log: list[Logged] = field(default_factory=list)
    throttles: list[_Throttle] = field(default_factory=list)
    events: list[tuple[int, str]] = field(default_factory=list)  # (log index, what happened)
    hooks: list[tuple[str | None, str, Any]] = field(default_factory=list)  # one-shot


class ArmServer:
    """``with ArmServer() as arm:`` serves on ``arm.url``; add resources, then run teardown."""

    def __init__(self, subscription: str = "00000000-0000-0000-0000-000000000001") -> None:
        self.subscription = subscription
        self.state = ArmState()
        self.lock = threading.Lock()
        self.op_polls = 2  # InProgress answers before an LRO ends
        self.op_retry_after = 0  # seconds; 0 lets the client's polling interval decide
        self.archive_polls = 2  # file system reads with archive InProgress before it ends
        self.archive_outcome = "Completed"  # or Failed / Canceled
        self.delete_outcome = "Succeeded"
        self._ids = itertools.count(1)
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._http.server_port}"
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    def __enter__(self) -> ArmServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()

    # ------------------------------------------------------------------ fixtures

    def rid(self, group: str, rtype: str, name: str) -> str:
        return f"/subscriptions/{self.subscription}/resourceGroups/{group}/providers/{rtype}/{name}"

    def add_group(self, name: str, tags: dict[str, str] | None = None) -> None:
        self.state.groups[name.lower()] = {
            "id": f"/subscriptions/{self.subscription}/resourceGroups/{name}",
            "name": name,
            "location": "eastus",
            "tags": tags or {},
            "properties": {"provisioningState": "Succeeded"},
        }

    def add_amlfs(self, group: str, name: str, tags: dict[str, str], hsm: bool = True) -> str:
        if group.lower() not in self.state.groups:
            self.add_group(group)
        rid = self.rid(group, AMLFS, name)
        props: dict[str, Any] = {"provisioningState": "Succeeded", "storageCapacityTiB": 16}
        if hsm:
            props["hsm"] = {
                "settings": {"container": "c", "loggingContainer": "l", "importPrefix": "/"},
                "archiveStatus": [],
            }
        self.state.resources[rid.lower()] = {
            "id": rid, "name": name, "type": AMLFS, "location": "eastus", "tags": tags,
            "sku": {"name": "AMLFS-Durable-Premium-250"}, "properties": props,
            "_archive_reads": 0,
        }  # fmt: skip
        return rid

    def add_vmss(self, group: str, name: str, tags: dict[str, str], capacity: int = 2) -> str:
        if group.lower() not in self.state.groups:
            self.add_group(group)
        rid = self.rid(group, VMSS, name)
        self.state.resources[rid.lower()] = {
            "id": rid, "name": name, "type": VMSS, "location": "eastus", "tags": tags,
            "sku": {"name": "Standard_ND96isr_H100_v5", "tier": "Standard", "capacity": capacity},
            "properties": {"provisioningState": "Succeeded", "singlePlacementGroup": True},
            "_power": "running",
        }  # fmt: skip
        return rid

    def add_other(self, group: str, rtype: str, name: str, tags: dict[str, str]) -> str:
        if group.lower() not in self.state.groups:
            self.add_group(group)
        rid = self.rid(group, rtype, name)
        self.state.resources[rid.lower()] = {
            "id": rid, "name": name, "type": rtype, "location": "eastus", "tags": tags,
            "properties": {},
        }  # fmt: skip
        return rid

    def add_vm(self, group: str, name: str, tags: dict[str, str], power: str = "running") -> str:
        if group.lower() not in self.state.groups:
            self.add_group(group)
        rid = self.rid(group, VM, name)
        self.state.resources[rid.lower()] = {
            "id": rid, "name": name, "type": VM, "location": "eastus", "tags": tags,
            "properties": {"provisioningState": "Succeeded"}, "_power": power,
        }  # fmt: skip
        return rid

    def body(self, rid: str) -> dict[str, Any]:
        return self.state.resources[rid.lower()]

    def retag(self, rid: str, tags: dict[str, str]) -> None:
        self.body(rid)["tags"] = dict(tags)

    def before(self, method: str | None, contains: str, fn: Any) -> None:
        """Run ``fn()`` once, just before the next request that matches is answered."""
        self.state.hooks.append((method, contains.lower(), fn))

    def changed_not_owned(self, deployment_id: str) -> list[Logged]:
        """Mutating requests on a resource that did not carry ``deployment_id`` right then."""
        return [r for r in self.mutating() if r.owner != deployment_id]

    def throttle(self, n: int, *, method: str | None = None, contains: str = "",
                 retry_after: int = 1) -> None:  # fmt: skip
        """Answer the next ``n`` requests that match 429 with ``Retry-After``."""
        self.state.throttles.append(_Throttle(n, method, contains.lower(), retry_after))

    def exists(self, rid: str) -> bool:
        return rid.lower() in self.state.resources

    def requests(self, method: str | None = None, contains: str = "") -> list[Logged]:
        return [
            r
            for r in self.state.log
            if (method is None or r.method == method) and contains.lower() in r.path
        ]

    def mutating(self) -> list[Logged]:
        return [r for r in self.state.log if r.method in MUTATING]

    # ------------------------------------------------------------------ extra routes
    # Added for preflight (tests/preflight_arm.py); other tests add theirs the same way. A
    # route sees the request before the built-in ones; ``fn(method, path, query, body)``
    # answers (status, headers, body) or None to pass it on.

    def route(self, pattern: str, fn: Any, method: str | None = None) -> None:
        """Answer requests whose lower-cased path fully matches ``pattern`` with ``fn``."""
        routes = self.__dict__.setdefault("_routes", [])
        routes.append((method, re.compile(pattern.lower()), fn))

    def _routed(self, method: str, lower: str, query: dict[str, str], body: bytes) -> Any:
        for want, pattern, fn in self.__dict__.get("_routes", []):
            m = pattern.fullmatch(lower)
            if m and want in (None, method):
                answer = fn(method, m, query, body)
                if answer is not None:
                    return answer
        return None

    # ------------------------------------------------------------------ behaviour

    def _start_op(self, on_done: Any, outcome: str = "Succeeded") -> dict[str, str]:
        op = f"op{next(self._ids)}"
        self.state.ops[op] = _Op(self.op_polls, outcome, on_done)
        base = f"{self.url}/subscriptions/{self.subscription}/providers/Test/locations/eastus"
        return {
            "Azure-AsyncOperation": f"{base}/operations/{op}?api-version=test",
            "Location": f"{base}/operationResults/{op}?api-version=test",
            "Retry-After": str(self.op_retry_after),
        }

    def _event(self, what: str) -> None:
        self.state.events.append((len(self.state.log), what))  # the request being answered

    def event_index(self, what: str) -> int:
        return next(i for i, e in self.state.events if e == what)

    def _advance(self, op: _Op) -> str:
        if op.done:
            return op.outcome
        if op.polls > 0:
            op.polls -= 1
            return "InProgress"
        op.done = True
        if op.outcome == "Succeeded":
            op.on_done()
        return op.outcome

    def _fs_view(self, body: dict[str, Any]) -> dict[str, Any]:
        """The file system as a GET shows it; each read moves a running archive along."""
        hsm = body["properties"].get("hsm")
        if hsm and hsm["archiveStatus"]:
            status = hsm["archiveStatus"][0]["status"]
            if status["state"] == "InProgress":
                body["_archive_reads"] += 1
                if body["_archive_reads"] > self.archive_polls:
                    status["state"] = self.archive_outcome
                    self._event(f"archive {self.archive_outcome} {body['name']}")
                    status["percentComplete"] = 100 if self.archive_outcome == "Completed" else 40
                    status["lastCompletionTime"] = "2026-12-02T10:00:00Z"
                    if self.archive_outcome == "Failed":
                        status["errorCode"] = "ArchiveFailed"
                        status["errorMessage"] = "blob container refused the write (403)"
                else:
                    status["percentComplete"] = 50
        return {k: v for k, v in body.items() if not k.startswith("_")}

    def owner(self, path: str) -> str | None:
        m = re.match(r"(/subscriptions/.+?/providers/[^/]+/[^/]+/[^/]+)", path.lower())
        body = self.state.resources.get(m.group(1)) if m else None
        return (body.get("tags") or {}).get(TAG_DEPLOYMENT) if body else None

    def run_hooks(self, method: str, path: str) -> None:
        for hook in list(self.state.hooks):
            if hook[0] in (None, method) and hook[1] in path.lower():
                self.state.hooks.remove(hook)
                hook[2]()

    def handle(
        self, method: str, path: str, query: dict[str, str], body: bytes = b""
    ) -> tuple[int, dict, Any]:
        st = self.state
        lower = path.lower().rstrip("/")
        for t in st.throttles:
            if t.left > 0 and (t.method in (None, method)) and t.contains in lower:
                t.left -= 1
                err = {"error": {"code": "TooManyRequests", "message": "throttled"}}
                return 429, {"Retry-After": str(t.retry_after)}, err
        routed = self._routed(method, lower, query, body)  # extra routes (below)
        if routed is not None:
            return routed
        m = re.search(r"/operations/(op\d+)$", lower)
        if m:
            op = st.ops[m.group(1)]
            status = self._advance(op)
            body: dict[str, Any] = {"id": lower, "name": m.group(1), "status": status}
            if status in ("Failed", "Canceled"):
                body["error"] = {"code": f"Operation{status}", "message": f"the test said {status}"}
            retry = {"Retry-After": str(self.op_retry_after)} if status == "InProgress" else {}
            return 200, retry, body
        m = re.search(r"/operationresults/(op\d+)$", lower)
        if m:
            if self._advance(st.ops[m.group(1)]) == "InProgress":
                return 202, {"Retry-After": str(self.op_retry_after)}, None
            return 204, {}, None
        m = re.fullmatch(r"/subscriptions/[^/]+/resourcegroups", lower)
        if m and method == "GET":
            return 200, {}, {"value": list(st.groups.values())}
        m = re.fullmatch(r"/subscriptions/[^/]+/resourcegroups/([^/]+)", lower)
        if m and method == "GET":
            group = st.groups.get(m.group(1))
            return (200, {}, group) if group else _not_found(path)
        m = re.fullmatch(r"/subscriptions/[^/]+(?:/resourcegroups/([^/]+))?/resources", lower)
        if m and method == "GET":
            rg = m.group(1)
            items = [
                {k: v for k, v in r.items() if not k.startswith("_") and k != "properties"}
                for r in st.resources.values()
                if rg is None or f"/resourcegroups/{rg}/" in r["id"].lower()
            ]
            return 200, {}, {"value": items}
        m = re.fullmatch(r"(/subscriptions/.+/providers/[^/]+/[^/]+/[^/]+)(?:/(\w+))?", lower)
        if not m:
            return _not_found(path)
        rid, action = m.group(1), m.group(2)
        body = st.resources.get(rid)
        if body is None:
            return _not_found(path)
        return self._resource(method, rid, action, body)

    def _resource(self, method: str, rid: str, action: str | None, body: dict) -> tuple:
        st = self.state
        if method == "GET" and action is None:
            if body["type"] == AMLFS:
                return 200, {}, self._fs_view(body)
            return 200, {}, {k: v for k, v in body.items() if not k.startswith("_")}
        if method == "GET" and action == "instanceview" and body["type"] == VM:
            codes = ["ProvisioningState/succeeded", f"PowerState/{body['_power']}"]
            return 200, {}, {"statuses": [{"code": c, "level": "Info"} for c in codes]}
        if method == "GET" and action == "instanceview":
            power = body["_power"]
            if power == "deallocating" and body.get("_settle_reads") is not None:
                body["_settle_reads"] -= 1  # an operation an earlier client left running
                if body["_settle_reads"] < 0:
                    power = body["_power"] = "deallocated"
            summary = [{"code": f"PowerState/{power}", "count": body["sku"]["capacity"]}]
            return 200, {}, {"virtualMachine": {"statusesSummary": summary}, "statuses": []}
        if method == "DELETE" and action is None:
            outcome = self.delete_outcome

            def gone() -> None:
                st.resources.pop(rid, None)

            body["properties"]["provisioningState"] = "Deleting"
            return 202, self._start_op(gone, outcome), None
        if method == "POST" and action == "archive" and body["type"] == AMLFS:
            hsm = body["properties"].get("hsm")
            if not hsm:
                err = {"code": "BadRequest", "message": "the file system has no HSM settings"}
                return 400, {}, {"error": err}
            body["_archive_reads"] = 0
            hsm["archiveStatus"] = [{
                "filesystemPath": "/",
                "status": {"state": "InProgress", "percentComplete": 0,
                           "lastStartedTime": f"2026-12-02T09:{next(self._ids):02d}:00Z"},
            }]  # fmt: skip
            return 200, {}, None
        if method == "POST" and action == "cancelarchive" and body["type"] == AMLFS:
            for entry in body["properties"].get("hsm", {}).get("archiveStatus", []):
                entry["status"]["state"] = "Canceled"
            return 200, {}, None
        if method == "POST" and action == "deallocate" and body["type"] == VMSS:
            body["_power"] = "deallocating"

            def deallocated() -> None:
                body["_power"] = "deallocated"

            return 202, self._start_op(deallocated), None
        return 405, {}, {"error": {"code": "MethodNotAllowed", "message": f"{method} {action}"}}


def _not_found(path: str) -> tuple[int, dict, Any]:
    err = {"code": "ResourceNotFound", "message": f"The Resource '{path}' was not found."}
    return 404, {"x-ms-failure-cause": "gateway"}, {"error": err}


def _handler(server: ArmServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out as two writes

        def log_message(self, *args: object) -> None:  # quiet
            pass

        def _serve(self) -> None:
            parts = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            with server.lock:
                server.run_hooks(self.command, parts.path)
                owner = server.owner(parts.path)
                status, headers, body = server.handle(self.command, parts.path, query, raw)
                server.state.log.append(
                    Logged(
                        self.command,
                        parts.path.lower().rstrip("/"),
                        query.get("api-version"),
                        status,
                        time.monotonic(),
                        self.headers.get("Authorization", "").startswith("Bearer "),
                        owner,
                    )
                )
            data = b"" if body is None else json.dumps(body).encode()
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("x-ms-request-id", "test")
            if data:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = _serve

    return Handler
