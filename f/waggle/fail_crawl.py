# /// script
# requires-python = ">=3.11"
# dependencies = ["httpx==0.28.1", "wmill==1.850.0"]
# ///
"""fail_crawl: the flow's failure module; closes the crawl (reference/scheduler.md §4.6).

``POST {waggle_api_url}/api/crawls/{crawl_id}/failed`` with ``{"reason": describe(error)}``.
The reason is one line, prefixed ``[step_id]``, at most 2,000 characters (the ledger's
limit; a longer one would be refused and leave the crawl running). Never raises once the
variables are read: a failed close is returned as ``{closed: false, problem}``.
"""

from __future__ import annotations

import json
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
    one_line,
    read_variable,
)

REASON_MAX = 2000


def describe(error: object) -> str:
    """One-line reason for ``error`` as Windmill passes it (string, null, or ``{message, step_id, …}``)."""
    if isinstance(error, str):
        text = error
    elif not isinstance(error, dict):
        text = "null" if error is None else str(error)
    else:
        message = error.get("message")
        text = message if isinstance(message, str) else json.dumps(error, ensure_ascii=False, default=str)
        step = error.get("step_id")
        if isinstance(step, str) and step:
            text = f"[{step}] {text}"
    return clip(one_line(text))


def clip(text: str, limit: int = REASON_MAX) -> str:
    """``text`` cut to ``limit`` characters, ending in "…" when cut (the head keeps ``[step]`` and the status)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def close_crawl(
    api_url: str,
    token: str,
    crawl_id: str,
    error: object,
    *,
    client: httpx.Client | None = None,
    retry_budget_s: float = LEDGER_RETRY_BUDGET_S,
    log: Callable[[str], None] = print,
) -> dict:
    """Ask the ledger to close the crawl; ``{closed: bool}`` or ``{closed: false, problem}``; never raises."""
    what = f"POST /api/crawls/{crawl_id}/failed"
    reason = describe(error)
    log(f"closing crawl {crawl_id}: {reason}")
    try:
        http = client or http_client(api_url, 30.0)
        try:
            response = call_with_retry(
                lambda: http.post(
                    f"{api_url.rstrip('/')}/api/crawls/{crawl_id}/failed",
                    content=json.dumps({"reason": reason}).encode(),
                    headers={"authorization": f"Bearer {token}", "content-type": "application/json"},
                ),
                what=what, budget_s=retry_budget_s, log=log,
            )
        finally:
            if client is None:
                http.close()
    except Exception as exc:  # noqa: BLE001 - never raise: the flow is already red
        problem = str(exc) or type(exc).__name__
        log(f"could not close: {problem}")
        return {"closed": False, "problem": problem}
    if not 200 <= response.status_code < 300:
        problem = f"{what} → {response.status_code} {excerpt(body_text(response), 200)}"
        log(problem)
        return {"closed": False, "problem": problem}
    answer = json_or_text(response)
    closed = bool(answer.get("closed")) if isinstance(answer, dict) else False
    log("closed" if closed else "nothing to close (already finished)")
    return {"closed": closed}


def main(crawl_id: str, error: dict):
    api_url = read_variable(VAR_API_URL)
    token = read_variable(VAR_TOKEN)
    return close_crawl(api_url, token, crawl_id, error)
