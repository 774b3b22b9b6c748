# /// script
# requires-python = ">=3.11"
# dependencies = ["httpx==0.28.1", "wmill==1.850.0"]
# ///
"""The token capture servers get for the ledger reads they make (decision 405; a library script).

Extensions ``revisit``, ``conditional`` and ``holdAdmission`` name a ledger URL and a bearer token
in the capture request: the server reads the crawl's digests, a page's previous capture and the
host's politeness there. That token used to be the flow's own, which also reports levels, fails
crawls and starts new ones. :func:`read_token` asks the ledger once per ``crawl_host`` job
(``POST /api/crawls/{id}/read-token`` with the flow's token) for a token of this crawl that only
those three read routes accept.

A ledger that does not issue one (an older ledger: no such route, or any failure at that moment)
leaves the flow's token in its place, as before, and the job says so in its log: captures keep
their revisits, conditional requests and held captures' admission reads either way.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx

from f.waggle.common import http_client

TIMEOUT_S = 5.0


def read_token(api_url: str, token: str, crawl_id: str, *, log: Callable[[str], None] = print,
               client: httpx.Client | None = None) -> str:
    """A read token of ``crawl_id`` from the ledger at ``api_url`` (asked with the flow's
    ``token``), or ``token`` itself when the ledger does not give one (logged; never raises)."""
    if not (api_url or "").strip() or not (token or "").strip():
        return token
    url = f"{api_url.strip().rstrip('/')}/api/crawls/{crawl_id}/read-token"
    own = client is None
    client = client or http_client(api_url, TIMEOUT_S)
    try:
        resp = client.post(url, headers={"Authorization": f"Bearer {token.strip()}"})
        got = resp.json().get("token") if resp.status_code == 201 else None
        if isinstance(got, str) and got:
            return got
        why = f"HTTP {resp.status_code} {resp.text[:160]}"
    except Exception as exc:  # noqa: BLE001 - the captures go on with the token they had
        why = f"{type(exc).__name__}: {exc}"
    finally:
        if own:
            client.close()
    log(f"capture servers get the flow's token: the ledger gave no read token ({why})")
    return token
