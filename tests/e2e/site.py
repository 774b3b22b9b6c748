"""A copy of a real website on a loopback port, with its own access log.

Serves a directory (Debian's ``python3.11-doc`` HTML in the e2e test) plus a given robots.txt,
and records every request with a monotonic timestamp taken when the request line has been
read — the site's own view of how the crawler behaved, independent of what waggle records.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from functools import partial
from http.server import SimpleHTTPRequestHandler
from pathlib import Path

from tests.fixtures.loopback import LoopbackSite


@dataclass(frozen=True)
class Hit:
    """One request: ``t`` = ``time.monotonic()`` in s; ``dest`` = its ``Sec-Fetch-Dest`` header ('' if absent)."""

    t: float
    method: str
    path: str
    dest: str
    user_agent: str
    status: int


class _Handler(SimpleHTTPRequestHandler):
    site: "Site"

    def parse_request(self) -> bool:
        self._t = time.monotonic()
        return super().parse_request()

    def send_response(self, code: int, message: str | None = None) -> None:
        self._status = code
        super().send_response(code, message)

    def handle_one_request(self) -> None:
        self._t = None
        self._status = 0
        super().handle_one_request()
        if getattr(self, "_t", None) is not None and getattr(self, "command", None):
            self.site._record(Hit(
                t=self._t, method=self.command, path=self.path,
                dest=self.headers.get("Sec-Fetch-Dest", ""),
                user_agent=self.headers.get("User-Agent", ""), status=self._status,
            ))

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] == "/robots.txt":
            body = self.site.robots_txt.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()

    def log_message(self, format: str, *args) -> None:  # the access log is self.site.hits
        pass


class Site(LoopbackSite):
    """``root`` served on ``http://127.0.0.1:<port>`` (OS-chosen) until :meth:`stop`."""

    def __init__(self, root: Path, robots_txt: str):
        self.robots_txt = robots_txt
        self._hits: list[Hit] = []
        self._lock = threading.Lock()
        handler = type("SiteHandler", (_Handler,), {"site": self})
        super().__init__(partial(handler, directory=str(root)))

    def _record(self, hit: Hit) -> None:
        with self._lock:
            self._hits.append(hit)

    @property
    def hits(self) -> list[Hit]:
        """Every request so far, in the order they were read (by timestamp)."""
        with self._lock:
            return sorted(self._hits, key=lambda h: h.t)


@dataclass
class Capture:
    """The requests one capture made on a site: from its document request to the next one."""

    page: str
    hits: list[Hit]

    @property
    def first(self) -> float:
        return self.hits[0].t

    @property
    def last(self) -> float:
        return self.hits[-1].t


def captures(hits: list[Hit]) -> list[Capture]:
    """Split a site's access log into captures.

    A capture starts with a top-level document request (``Sec-Fetch-Dest: document``, sent by
    Chromium for navigations) and owns every later request until the next one. robots.txt is
    left out: the flow fetches it itself, between captures. Requests before the first document
    (none expected) are returned as a capture with page ``""`` so no request is lost.
    """
    out: list[Capture] = []
    for hit in hits:
        if hit.path.split("?", 1)[0] == "/robots.txt":
            continue
        if hit.dest == "document" or not out:
            out.append(Capture(page=hit.path if hit.dest == "document" else "", hits=[hit]))
        else:
            out[-1].hits.append(hit)
    return out
