"""``GET /``: the archive picker, one HTML page (reference/ledger.md §6.2, English text), for the
identity modes without sign-in. In JWT mode ``GET /`` is the web page of ``ledger.web`` instead
(OIDC sign-in, crawls, archives, replay).

The picker depends on the identity mode chosen at start-up:
* **header** (dev identity): inputs ``#subject`` and ``#orgs`` and a load button ``#reload``;
  a warning ``#notice`` when the API listens on a non-loopback address (anyone on the network
  can be anyone); ``MODE = "names"``.
* **deny**: only a warning that no identity is configured — no inputs and no ``<script>``.

The script lists ``GET /api/archives`` (newest first, "More" pages with ``before``), flags
``waczComplete === false`` rows with an "incomplete" badge, and downloads through the 300 s
signed URL of ``POST /api/archives/{id}/url``. No authentication is needed for the page itself.
"""

from __future__ import annotations

import html
import json
from functools import lru_cache
from importlib import resources

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

router = APIRouter()

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


@lru_cache(maxsize=1)
def _assets() -> tuple[str, str]:
    base = resources.files("ledger.api")
    return (base / "picker.html").read_text(encoding="utf-8"), (base / "picker.js").read_text(encoding="utf-8")


def render_picker(mode: str, *, host: str, port: int) -> str:
    """The page for identity ``mode`` (``header`` | ``deny``) on ``host:port``."""
    page, script = _assets()
    esc = html.escape
    if mode == "header":
        notice = ('<p class="notice">This page authenticates nobody: the API trusts the names you type'
                  " (dev header identity).</p>")
        if host not in LOOPBACK:
            notice += (f'<p class="notice warn" id="notice">The API listens on {esc(host)}:{port} while trusting'
                       " names: anyone on the network can be anyone. Listen on 127.0.0.1 or configure an OIDC"
                       " issuer.</p>")
        form = ('<form id="identity"><label>Subject <input id="subject" name="subject" autocomplete="username"'
                ' placeholder="alice"></label><label>Organizations (comma list) <input id="orgs" name="orgs"'
                ' placeholder="acme"></label><button id="reload" type="submit">Load</button></form>')
        js_mode = "names"
        unauth = "401 — the subject is empty (this API identifies by the dev header)"
    else:
        notice = ('<p class="notice warn" id="notice">No identity is configured on this API, so nobody\'s list'
                  " can be shown (everyone gets 401). Set WAGGLE_OIDC_ISSUER or WAGGLE_DEV_IDENTITY=1.</p>")
        return page.replace("<!--NOTICE-->", notice).replace("<!--FORM-->", "").replace("<!--SCRIPT-->", "")
    constants = f"const MODE = {json.dumps(js_mode)};\nconst UNAUTHENTICATED = {json.dumps(unauth)};\n"
    body = "<script>\n" + constants + script.replace("</", "<\\/") + "</script>"
    return page.replace("<!--NOTICE-->", notice).replace("<!--FORM-->", form).replace("<!--SCRIPT-->", body)


@router.get("/", response_class=HTMLResponse)
async def picker(request: Request) -> HTMLResponse:
    """The picker page (``text/html; charset=utf-8``), built once per app."""
    if getattr(request.app.state.identity, "mode", "") == "jwt":
        from ledger.web.routes import shell

        return shell()  # type: ignore[return-value]
    cached = getattr(request.app.state, "picker_html", None)
    if cached is None:
        resolver = request.app.state.identity
        settings = request.app.state.settings
        cached = render_picker(getattr(resolver, "mode", "deny"), host=settings.api_host, port=settings.api_port)
        request.app.state.picker_html = cached
    return HTMLResponse(cached, headers={"Cache-Control": "no-store"})
