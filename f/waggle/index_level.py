# /// script
# requires-python = ">=3.11"
# dependencies = ["httpx==0.28.1", "wmill==1.850.0"]
# ///
"""index_level: ask the ledger to index this level's archives (reference/scheduler.md §4.5).

``POST {waggle_api_url}/api/crawls/{crawl_id}/index`` with the Bearer header only — no body
and no content-type (a bodyless POST declaring JSON is refused by strict servers).
The ledger indexes the crawl's admitted archives not indexed yet into Postgres full-text search
(issue 26) and answers its counts; the step reports them. 404 → search is off on this
deployment (``WAGGLE_SEARCH_URL=off``, or no permission): skipped, not an error, and not logged
(it is the same answer on every level: issue 17 item 5; the step's result says ``skipped``).
"""

from __future__ import annotations

from collections.abc import Callable

import httpx

from f.waggle.common import (
    http_client,
    LEDGER_RETRY_BUDGET_S,
    VAR_API_URL,
    VAR_TOKEN,
    body_text,
    call_with_retry,
    excerpt,
    json_or_text,
    read_variable,
)


class IndexError_(RuntimeError):
    """The ledger refused the index request (not 2xx, not 404)."""


def index(
    api_url: str,
    token: str,
    crawl_id: str,
    *,
    client: httpx.Client | None = None,
    retry_budget_s: float = LEDGER_RETRY_BUDGET_S,
    log: Callable[[str], None] = print,
) -> dict:
    """Returns ``{indexed, pages, skipped}`` plus the ledger's ``withoutText``, ``deferred`` and
    ``remaining`` when it sent them; raises :class:`IndexError_` on other non-2xx answers."""
    what = f"POST /api/crawls/{crawl_id}/index"
    url = f"{api_url.rstrip('/')}/api/crawls/{crawl_id}/index"
    http = client or http_client(api_url, 60.0)
    try:
        response = call_with_retry(
            lambda: http.post(url, headers={"authorization": f"Bearer {token}"}),
            what=what, budget_s=retry_budget_s, log=log,
        )
    finally:
        if client is None:
            http.close()
    if response.status_code == 404:  # expected on deployments without search: silent (module doc)
        return {"indexed": 0, "pages": 0, "skipped": True}
    if not 200 <= response.status_code < 300:
        raise IndexError_(f"{what} → {response.status_code} {excerpt(body_text(response), 300)}")
    answer = json_or_text(response)
    answer = answer if isinstance(answer, dict) else {}
    indexed, pages = answer.get("indexed", 0), answer.get("pages", 0)
    extra = {k: answer[k] for k in ("withoutText", "deferred", "remaining") if isinstance(answer.get(k), int)}
    log(f"indexed {indexed} archive(s), {pages} page(s) with text"
        + "".join(f", {k} {v}" for k, v in extra.items() if v))
    return {"indexed": indexed, "pages": pages, "skipped": False, **extra}


def main(crawl_id: str):
    return index(read_variable(VAR_API_URL), read_variable(VAR_TOKEN), crawl_id)
