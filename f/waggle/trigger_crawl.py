# /// script
# requires-python = ">=3.11"
# dependencies = ["httpx==0.28.1"]
# ///
"""trigger_crawl: the nightly job — start a crawl of the organization's targets and wait for it.

reference/scheduler.md §4.7. ``POST {waggle_url}/api/crawls`` with ``{"fromTargets": {}}``
(or ``{"fromTargets": {"limit": N}}``); 429 (the organization runs as many crawls as
``WAGGLE_MAX_RUNNING_CRAWLS_PER_ORG`` allows) or an older ledger's 409 → a green skip, no
polling; only 202 means accepted. Then poll ``GET /api/crawls/{id}`` (the sleep comes first)
until ``succeeded`` (returned) or ``failed``/unknown state/deadline (raised).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Optional

import httpx

DEFAULT_TIMEOUT_MS = 7_200_000
DEFAULT_POLL_MS = 15_000
NO_ROUTE = re.compile(r"Route [A-Z]+:/api/crawls\S* not found")
NO_ROUTE_FASTAPI = {"detail": "Not Found"}  # FastAPI's body for a route that does not exist


class TriggerError(RuntimeError):
    """The nightly crawl could not be started, failed, or did not finish in time."""


def failure(response: httpx.Response, what: str) -> str:
    """``"{what} → {status} {body[:300]}{hint}"``: 401 issuer hint; 404 no-route vs. grant hint."""
    text = response.text
    hint = ""
    if response.status_code == 401:
        hint = " — the token may be stale (issuer restarted?)"
    elif response.status_code == 404:
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if NO_ROUTE.search(text) or parsed == NO_ROUTE_FASTAPI:
            hint = (" — the ledger does not expose /api/crawls (set WAGGLE_CRAWL_WEBHOOK_URL and"
                    " WAGGLE_CRAWL_WEBHOOK_TOKEN; upstream: CAPTURE_LEDGER_CRAWL_WEBHOOK_URL and _TOKEN)")
        else:
            hint = (" — does the token's subject have crawl permission for that organization?"
                    " Grant it in the ledger: fga:grant submitter <sub> <org>")
    return f"{what} → {response.status_code} {text[:300]}{hint}"


def trigger(
    waggle_url: str,
    token: str,
    limit: int | None = None,
    timeout_ms: int | None = None,
    poll_interval_ms: int | None = None,
    *,
    client: httpx.Client | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    log: Callable[[str], None] = print,
) -> dict:
    """Start and wait; returns ``{outcome: "skipped"}`` or the succeeded summary. None = not given."""
    timeout_ms = DEFAULT_TIMEOUT_MS if timeout_ms is None else timeout_ms
    poll_ms = DEFAULT_POLL_MS if poll_interval_ms is None else poll_interval_ms
    base = waggle_url.rstrip("/")
    headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
    body = {"fromTargets": {} if limit is None else {"limit": limit}}
    http = client or httpx.Client(timeout=30.0)
    try:
        response = http.post(f"{base}/api/crawls", content=json.dumps(body).encode(), headers=headers)
        if response.status_code in (409, 429):  # 429: the organization's running-crawl limit (issue 12)
            log("the organization's running-crawl limit is reached; skipping" if response.status_code == 429
                else "a crawl is already running; skipping")
            return {"outcome": "skipped"}
        if response.status_code != 202:
            raise TriggerError(failure(response, "POST /api/crawls"))
        crawl_id = response.json()["crawlId"]
        deadline = clock() + timeout_ms / 1000.0
        while True:
            if clock() > deadline:
                raise TriggerError(
                    f"{crawl_id} did not finish within {round(timeout_ms / 60000)} minutes;"
                    " it may still be running; check GET /api/crawls/:id"
                )
            sleep(poll_ms / 1000.0)
            poll = http.get(f"{base}/api/crawls/{crawl_id}", headers=headers)
            if not 200 <= poll.status_code < 300:
                raise TriggerError(failure(poll, f"GET /api/crawls/{crawl_id}"))
            crawl = poll.json()
            state = crawl.get("state") if isinstance(crawl, dict) else None
            if state == "running":
                continue
            if state == "failed":
                raise TriggerError(f"{crawl_id} failed: {crawl.get('error') or '(no reason)'}")
            if state != "succeeded":
                raise TriggerError(f"unknown state «{'undefined' if state is None else state}»; did the ledger's field names change?")
            result = {
                "outcome": "succeeded",
                "crawlId": crawl_id,
                "pagesDiscovered": crawl.get("pagesDiscovered") or 0,
                "pagesCaptured": crawl.get("pagesCaptured") or 0,
                "stopReason": crawl.get("stopReason"),
            }
            log(f"crawl {crawl_id} succeeded: {result}")
            return result
    finally:
        if client is None:
            http.close()


def main(
    waggle_url: str,
    token: str,
    limit: Optional[int] = None,
    timeout_ms: int = 7200000,
    poll_interval_ms: int = 15000,
):
    return trigger(waggle_url, token, limit, timeout_ms, poll_interval_ms)
