# /// script
# requires-python = ">=3.11"
# dependencies = ["httpx==0.28.1", "wmill==1.850.0"]
# ///
"""report_level: report one level's results to the ledger (reference/scheduler.md §4.4).

``POST {waggle_api_url}/api/crawls/{crawl_id}/pages`` with ``{depth, results, compiled}``;
``compiled`` trimmed to ``{typescript, hostTypes, scripts: [{id, version, sha256}]}``, and
``robots`` (plan_level's fetched robots.txt outcomes, the crawl's cache; sent only when given) and
``sitemaps`` (plan_level's sitemap URLs per host, issue 29 item 2; sent only when given).
Connection failures and 5xx are retried with back-off for a bounded time (the ledger's
level report is idempotent), so a ledger restart mid-level loses nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Optional

import httpx

from f.waggle.common import (
    http_client,
    LEDGER_RETRY_BUDGET_S,
    VAR_API_URL,
    VAR_TOKEN,
    call_with_retry,
    json_or_text,
    ledger_failure,
    read_variable,
)


class ReportError(RuntimeError):
    """The ledger did not accept the level report; the message carries status, body and hint."""


def trim_compiled(compiled: dict | None) -> dict:
    """``{typescript, hostTypes, scripts: [{id, version, sha256}]}`` — no source, phase, options, cached."""
    compiled = compiled or {}
    return {
        "typescript": compiled.get("typescript"),
        "hostTypes": compiled.get("hostTypes"),
        "scripts": [
            {"id": s.get("id"), "version": s.get("version"), "sha256": s.get("sha256")}
            for s in compiled.get("scripts") or []
        ],
    }


def report(
    api_url: str,
    token: str,
    crawl_id: str,
    depth: int,
    results: list[dict],
    compiled: dict | None,
    *,
    robots: list[dict] | None = None,
    sitemaps: list[dict] | None = None,
    client: httpx.Client | None = None,
    retry_budget_s: float = LEDGER_RETRY_BUDGET_S,
    log: Callable[[str], None] = print,
) -> dict:
    """Send the level report; returns the ledger's ``{next, stopReason}`` unchanged.

    Raises :class:`ReportError` on a non-2xx answer (after retrying 5xx for
    ``retry_budget_s``) and re-raises the transport error when the ledger never answered.
    """
    what = f"POST /api/crawls/{crawl_id}/pages"
    doc = {"depth": depth, "results": results or [], "compiled": trim_compiled(compiled)}
    if robots:
        doc["robots"] = robots
    if sitemaps:  # plan_level's sitemap URLs (issue 29 item 2): the ledger queues those in scope
        doc["sitemaps"] = sitemaps
    body = json.dumps(doc).encode()
    url = f"{api_url.rstrip('/')}/api/crawls/{crawl_id}/pages"
    headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
    http = client or http_client(api_url, 60.0)
    try:
        response = call_with_retry(lambda: http.post(url, content=body, headers=headers), what=what,
                                   budget_s=retry_budget_s, log=log)
    finally:
        if client is None:
            http.close()
    if not 200 <= response.status_code < 300:
        raise ReportError(ledger_failure(what, response))
    answer = json_or_text(response)
    if not isinstance(answer, dict):
        raise ReportError(f"{what} → {response.status_code} but the body is not a JSON object: {str(answer)[:300]}")
    nxt = answer.get("next") or []
    stop = answer.get("stopReason")
    log(f"depth {depth}: {len(results or [])} reported, next {len(nxt)}" + (f" (stopped by {stop})" if stop else ""))
    return answer


def main(crawl_id: str, depth: int, results: list[dict], compiled: dict, robots: Optional[list[dict]] = None,
         sitemaps: Optional[list[dict]] = None):
    api_url = read_variable(VAR_API_URL)
    token = read_variable(VAR_TOKEN)
    return report(api_url, token, crawl_id, depth, results, compiled, robots=robots, sitemaps=sitemaps)
