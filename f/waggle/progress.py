# /// script
# requires-python = ">=3.11"
# dependencies = ["httpx==0.28.1", "wmill==1.850.0"]
# ///
"""Progress events from ``crawl_host`` to the ledger (a Windmill library script: no ``main``).

``POST {waggle_api_url}/api/crawls/{crawl_id}/progress`` with the flow's token, body
``{"url", "phase": "started"|"done", "status"?: "captured"|"failed"}`` — one when a page's
capture starts, one when it ends (issue 15); ``{"url", "phase": "queued"}`` before the ``started``
of a capture submitted held behind the host's loading page (decision 401: not capturing yet; an
older ledger that refuses it gets ``started``); and ``{"url", "phase": "sealed", "taskId",
"manifestLocation"?}`` when the capture server's seal answer names its task (issue 24 item 5:
a crawl failed before that capture answers still admits it). A captured page's ``done`` also carries the
capture's ``taskId``, ``manifestLocation`` and ``manifestSummary`` when the result has them, so a
crawl failed before its level report still records the page (ledger.crawl.salvage), and the
page's ``links`` (the capped list its level-report result carries), which the ledger puts into
the frontier during the level (issue 14: the report then skips them). A ledger that predates
these fields refuses them (400 "unknown field"): the poster then sends that event, and every
later one, without them (the level report still carries every link). Progress is a courtesy: a poster never raises and
never delays a capture. Events go out in order from one background thread per host, each with a
short timeout and no retry; failures are logged (first few only) and dropped. ``close()`` waits
at most :data:`CLOSE_WAIT_S` for the queue to drain.

Batches: the thread sends what is queued in one request, ``{"events": [...]}`` (at most
:data:`BATCH_MAX`), after waiting up to :data:`LINGER_S` for the next event (a page's ``done``
and the next page's ``started`` come together): half the requests of one per event. A ledger
that predates batches (400 "unknown field events") gets one request per event from then on.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

import httpx

from f.waggle.common import VAR_API_URL, VAR_TOKEN, http_client, read_variable

TIMEOUT_S = 2.0
CLOSE_WAIT_S = 3.0
MAX_LOGGED = 3  # failures logged per host; the rest are counted in the closing line
CAPTURE_KEYS = ("taskId", "manifestLocation", "manifestSummary", "links")  # of a captured PageResult
BATCH_MAX = 32  # events in one request (the ledger's PROGRESS_BATCH_MAX)
LINGER_S = 0.2  # wait for the next event before sending: a done's latency grows by at most this
_STOP = object()


class ProgressPoster:
    """``poster(url, phase, result)`` queues one event; ``close()`` drains (bounded) and stops."""

    def __init__(self, send: Callable[[dict], httpx.Response] | None, log: Callable[[str], None] = print):
        self._send, self._log = send, log
        self._queue: queue.Queue = queue.Queue()
        self.sent = self.failed = 0
        self.plain = False  # the ledger refused the capture fields once: never sent again
        self.no_links = False  # the ledger refused ``links`` once (round 20): never sent again
        self.no_batch = False  # the ledger refused ``events`` once (round 21): one request per event
        self.no_sealed = False  # the ledger refused a ``sealed`` event once (issue 24): never sent again
        self.no_queued = False  # the ledger refused a ``queued`` event once (decision 401): sent as started
        self.requests = 0
        self._thread = threading.Thread(target=self._run, name="waggle-progress", daemon=True)
        if send is not None:
            self._thread.start()

    def __call__(self, url: str, phase: str, result: dict | None = None) -> None:
        if self._send is None:
            return
        body = {"url": url, "phase": phase}
        if phase == "sealed":  # the capture sealed: its task and manifest-to-be (issue 24 item 5)
            if self.plain or self.no_sealed or not (result or {}).get("taskId"):
                return
            body.update({k: result[k] for k in ("taskId", "manifestLocation") if result.get(k)})
        elif phase == "done":
            result = result or {}
            body["status"] = "captured" if result.get("status") == "captured" else "failed"
            if body["status"] == "captured" and result.get("taskId"):
                body.update({k: result[k] for k in CAPTURE_KEYS if result.get(k) is not None})
        self._queue.put(body)

    def _post(self, body: dict) -> httpx.Response:
        """Send ``body`` (without the fields the ledger refused before: ``links``, then every
        capture field)."""
        body = self._strip(body)
        resp = self._send(body)
        if (resp.status_code == 400 and "links" in body and "unknown field links" in resp.text and not self.no_links
                and "unknown field taskId" not in resp.text):
            self.no_links = True
            self._log("the ledger takes no links in progress events (an older ledger): sent without")
            return self._post(body)
        if resp.status_code == 400 and "taskId" in body and "unknown field" in resp.text and not self.plain:
            self.plain = True
            self._log("the ledger takes no capture fields in progress events (an older ledger): sent without")
            return self._post(body)
        return resp

    def _take(self) -> tuple[list[dict], bool]:
        """The next events to send (blocks for the first, then waits up to :data:`LINGER_S` for
        more, at most :data:`BATCH_MAX`), and whether ``close()`` was called."""
        first = self._queue.get()
        if first is _STOP:
            return [], True
        events = [first]
        deadline = time.monotonic() + LINGER_S
        while len(events) < BATCH_MAX:
            try:
                item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if item is _STOP:
                return events, True
            events.append(item)
        return events, False

    def _send_batch(self, events: list[dict]) -> list[str | None]:
        """Send ``events``; one outcome each: None when recorded, else why not."""
        if self.no_queued:  # an older ledger: a held capture shows as started, as it did
            events = [{**e, "phase": "started"} if e.get("phase") == "queued" else e for e in events]
        outcomes = self._send_batch_once(events)
        if (any(e.get("phase") == "queued" for e in events) and not self.no_queued
                and any(o is not None and o.startswith("HTTP 400") and "phase" in o for o in outcomes)):
            self.no_queued = True
            self._log("the ledger takes no 'queued' progress events (an older ledger): sent as 'started'")
            return self._send_batch(events)
        sealed = [i for i, e in enumerate(events) if e.get("phase") == "sealed"]
        refused = [o for o in outcomes if o is not None and o.startswith("HTTP 400") and "phase" in o]
        if sealed and refused and not self.no_sealed:  # an older ledger: send the rest without them
            self.no_sealed = True
            self._log("the ledger takes no 'sealed' progress events (an older ledger): sent without")
            rest = [e for e in events if e.get("phase") != "sealed"]
            again = iter(self._send_batch_once(rest) if rest else [])
            return ["not sent (older ledger)" if e.get("phase") == "sealed" else next(again) for e in events]
        return outcomes

    def _send_batch_once(self, events: list[dict]) -> list[str | None]:
        if len(events) > 1 and not self.no_batch:
            self.requests += 1
            resp = self._send({"events": [self._strip(e) for e in events]})
            if resp.status_code == 400 and "unknown field events" in resp.text:
                self.no_batch = True
                self._log("the ledger takes no batched progress events (an older ledger): sent one by one")
            elif resp.status_code < 300:
                results = resp.json().get("results") or []
                return [None if i < len(results) and results[i].get("recorded") else
                        f"HTTP {results[i].get('status') if i < len(results) else '?'}"
                        f" {str(results[i].get('error') if i < len(results) else 'no result')[:160]}"
                        for i in range(len(events))]
            else:
                return [f"HTTP {resp.status_code} {resp.text[:160]}"] * len(events)
        out: list[str | None] = []
        for body in events:
            self.requests += 1
            resp = self._post(body)
            out.append(None if resp.status_code < 300 else f"HTTP {resp.status_code} {resp.text[:160]}")
        return out

    def _strip(self, body: dict) -> dict:
        if self.plain:
            return {k: v for k, v in body.items() if k not in CAPTURE_KEYS}
        if self.no_links:
            return {k: v for k, v in body.items() if k != "links"}
        return body

    def _run(self) -> None:
        stop = False
        while not stop:
            events, stop = self._take()
            if not events:
                continue
            try:
                outcomes = self._send_batch(events)
            except Exception as exc:  # noqa: BLE001 - the ledger being down must not touch the capture
                outcomes = [f"{type(exc).__name__}: {exc}"] * len(events)
            for why in outcomes:
                if why is None:
                    self.sent += 1
                    continue
                self.failed += 1
                if self.failed <= MAX_LOGGED:
                    self._log(f"progress event not recorded ({why}); the capture goes on")

    def close(self) -> None:
        if self._send is None:
            return
        self._queue.put(_STOP)
        self._thread.join(CLOSE_WAIT_S)
        if self.failed:
            self._log(f"progress: {self.sent} event(s) recorded, {self.failed} not")


def poster(crawl_id: str, *, log: Callable[[str], None] = print,
           read: Callable[[str], str] = read_variable) -> ProgressPoster:
    """A poster for ``crawl_id`` with the flow's ledger URL and token; a disabled one (logged)
    when the variables cannot be read."""
    try:
        api_url, token = read(VAR_API_URL).rstrip("/"), read(VAR_TOKEN)
    except Exception as exc:  # noqa: BLE001 - no progress, the capture still runs
        log(f"progress events off: {exc}")
        return ProgressPoster(None, log)
    client = http_client(api_url, TIMEOUT_S)
    url = f"{api_url}/api/crawls/{crawl_id}/progress"
    headers = {"Authorization": f"Bearer {token}"}
    return ProgressPoster(lambda body: client.post(url, json=body, headers=headers), log)
