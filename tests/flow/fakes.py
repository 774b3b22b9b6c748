"""Test doubles for the flow tests: a tiny real HTTP server on 127.0.0.1 and a fake endpoint.

``HttpFake(handler)`` serves every request through ``handler(req) -> (status, headers, body)``
and records each request (method, path, headers, body, time); ``FakeEndpoint`` mirrors the
upstream crawl-host test double (reference/scheduler.md §7.1 "Test setup").
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any, Callable

from f.waggle.crawl_host import Answer
from tests.fixtures.loopback import LoopbackSite


@dataclass
class Req:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.monotonic)

    def json(self) -> Any:
        return json.loads(self.body)


Handler = Callable[[Req], tuple[int, dict[str, str], bytes | str | dict | list | None]]


class HttpFake(LoopbackSite):
    """A threaded HTTP server on 127.0.0.1 answering through ``handler``; ``port=0`` = OS-chosen,
    a given port is bound again (a "restarted" server)."""

    def __init__(self, handler: Handler, port: int = 0) -> None:
        self.handler = handler
        self.requests: list[Req] = []
        fake = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _any(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                req = Req(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                fake.requests.append(req)
                try:
                    status, headers, payload = fake.handler(req)
                except _Hang as hang:
                    time.sleep(hang.seconds)
                    return
                if isinstance(payload, (dict, list)):
                    data = json.dumps(payload).encode()
                    headers = {"content-type": "application/json", **headers}
                elif isinstance(payload, str):
                    data = payload.encode()
                else:
                    data = payload or b""
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a deadline or a killed step): nothing to answer

            do_GET = do_POST = do_PUT = do_DELETE = _any

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(H, port=port)
        self.authority = f"127.0.0.1:{self.port}"

    def close(self) -> None:
        self.stop()


class _Hang(Exception):
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


def hang(seconds: float):
    """Raise inside a handler to keep the connection silent for ``seconds`` (then close it)."""
    raise _Hang(seconds)


def capture_reply(url: str, target: str, *, status: str = "success", error_type: str | None = None,
                  links: str | None = "s3://b/x.links.json", manifest: object = "default",
                  http_status: int | None = None) -> dict:
    """A BrowserHive 200 body like the upstream fake's default reply."""
    report: dict = {"status": status, "artifacts": {"links": links} if links is not None else {}}
    if error_type:
        report["errorDetails"] = {"type": error_type, "message": "boom"}
        if http_status is not None:
            report["errorDetails"]["httpStatusCode"] = http_status
    if http_status is not None:
        report["httpStatusCode"] = http_status
    body: dict = {"taskId": f"task-{url}@{target}", "report": report}
    if manifest == "default":
        body["manifest"] = {"location": f"s3://b/task-{url}.result.json"}
    elif manifest != "absent":
        body["manifest"] = manifest
    return body


class FakeEndpoint:
    """Upstream-style fake endpoint: responses (last repeats), busy_times, down, error, refuse, fail_on."""

    def __init__(self, target: str, calls: list[str], *, responses: list[dict] | None = None,
                 busy_times: int = 0, down: bool = False, error: BaseException | None = None,
                 refuse: Answer | None = None, fail_on: tuple[str, ...] = (), delay_s: float = 0.0) -> None:
        self.target = target
        self.calls = calls
        self.responses = responses or []
        self.busy_times = busy_times
        self.down = down
        self.error = error
        self.refuse = refuse
        self.fail_on = fail_on
        self.delay_s = delay_s
        self.requests: list[dict] = []
        self.times: list[float] = []
        self._n = 0

    def capture(self, request: dict) -> Answer:
        self.calls.append(self.target)
        self.requests.append(request)
        self.times.append(time.monotonic())
        if self.down:
            raise ConnectionError("fetch failed")
        if self.error is not None:
            raise self.error
        if self.busy_times > 0:
            self.busy_times -= 1
            return Answer(429, "Busy", {"message": "a capture is already running on this browser"})
        if self.refuse is not None:
            return self.refuse
        url = request["url"]
        if url in self.fail_on:
            return Answer(400, "ValidationException", {"message": "could not be submitted"})
        if self.delay_s:
            time.sleep(self.delay_s)
        if self.responses:
            reply = self.responses[min(self._n, len(self.responses) - 1)]
            self._n += 1
            body = reply(url, self.target) if callable(reply) else reply
        else:
            body = capture_reply(url, self.target)
        return Answer(200, None, body)
