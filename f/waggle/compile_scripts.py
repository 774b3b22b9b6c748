# /// script
# requires-python = ">=3.11"
# dependencies = ["httpx==0.28.1", "wmill==1.850.0"]
# ///
"""compile_scripts: the level's TypeScript catalogue → JavaScript through ts-compile-service.

reference/scheduler.md §4.2 and contracts.md §C. 200 → the answer unchanged (same order,
``source``/``sha256`` now the JavaScript). Anything else raises with the status, the error
type and a summary (the service's count message and the first five diagnostics with their
codes), so the TypeScript is never passed on and the reason fits the ledger's 2,000 chars.
"""

from __future__ import annotations

import json

import httpx

from f.waggle.common import VAR_TS_COMPILE, body_text, http_client, read_variable

COMPILE_TIMEOUT_S = 30.0
SHOWN_DIAGNOSTICS = 5


class CompileError(RuntimeError):
    """ts-compile refused the catalogue or did not answer; the message says why."""


def summarize_refusal(status: int, error_type: str | None, body: object) -> str:
    """``"compile {status} {errorType}: …"`` with at most five diagnostics (code, file:line:col, message)."""
    head = f"compile {status} {error_type or ''}: "
    if isinstance(body, dict):
        diagnostics = body.get("diagnostics")
        if isinstance(diagnostics, list):
            shown = []
            for d in diagnostics[:SHOWN_DIAGNOSTICS]:
                if not isinstance(d, dict):
                    shown.append(json.dumps(d)[:200])
                    continue
                where = ":".join(str(d[k]) for k in ("file", "line", "col") if d.get(k) is not None)
                text = " ".join(str(d.get("message", "")).split())[:200]
                shown.append(f"{d.get('code', '?')}" + (f" {where}" if where else "") + f" {text}")
            count = f"{len(diagnostics)} diagnostic(s)"
            more = f"; {len(diagnostics) - SHOWN_DIAGNOSTICS} more" if len(diagnostics) > SHOWN_DIAGNOSTICS else ""
            message = body.get("message")
            lead = f"{message} ({count})" if isinstance(message, str) and message else count
            return head + f"{lead}: " + "; ".join(shown) + more
        if isinstance(body.get("fieldList"), list):
            return head + json.dumps(body["fieldList"], ensure_ascii=False)[:1200]
        return head + json.dumps(body, ensure_ascii=False)[:1200]
    return head + str(body)[:1200]


def compile_scripts(scripts: list[dict], base_url: str, *, client: httpx.Client | None = None) -> dict:
    """``POST {base_url}/compile`` with ``{"scripts": scripts}``; returns the 200 body unchanged.

    Raises :class:`CompileError` for any other status, an unparsable body or no answer.
    """
    owned = client is None
    http = client or http_client(base_url, COMPILE_TIMEOUT_S)
    try:
        try:
            response = http.post(
                f"{base_url.rstrip('/')}/compile",
                content=json.dumps({"scripts": scripts}).encode(),
                headers={"content-type": "application/json"},
            )
        except httpx.HTTPError as exc:
            raise CompileError(f"compile: ts-compile at {base_url} did not answer: {type(exc).__name__}: {exc}") from exc
        text = body_text(response)
        try:
            body = json.loads(text)
        except ValueError as exc:
            raise CompileError(f"compile {response.status_code}: the answer is not JSON: {text[:200]}") from exc
        if response.status_code != 200:
            raise CompileError(summarize_refusal(response.status_code, response.headers.get("x-amzn-errortype"), body))
        if not isinstance(body, dict) or not isinstance(body.get("scripts"), list):
            raise CompileError(f"compile 200 without a scripts list: {text[:200]}")
        if len(body["scripts"]) != len(scripts or []):
            raise CompileError(f"compile 200 returned {len(body['scripts'])} scripts for {len(scripts or [])} sent")
        return body
    finally:
        if owned:
            http.close()


def main(scripts: list[dict]):
    if scripts is None:
        raise ValueError("scripts is required (an empty list means no page scripts); the flow input was null")
    cached = None
    result = compile_scripts(scripts, read_variable(VAR_TS_COMPILE))
    cached = result.get("cached")
    print(f"compiled {len(result['scripts'])} script(s) with TypeScript {result.get('typescript')} (cached: {cached})")
    return result
