"""``GET /api/search?q=…[&crawl=][&host=][&from=][&to=][&page=][&size=]`` (issue 26 item 3).

``q``: web-search syntax (``websearch_to_tsquery``): words, ``"a phrase"``, ``-excluded``,
``OR``; ≤ 500 characters. ``crawl``: a crawl id; ``host``: the page's host, or host:port (only that port, or the scheme's default when the URL names none); ``from``/``to``:
captured between (a date = that whole day, UTC; or a date-time with a zone); ``page`` from 1
(≤ 100), ``size`` 1–50 (default 10).

200 ``{hits, page, size, more, incomplete, rankedNewest}`` (:func:`ledger.search.query.search`):
only archives the caller may view — candidates from the organizations OpenFGA confirms and the
archives it lists as shared, each hit confirmed by BatchCheck ``can_view`` (decision 311); 400 with what to change
(empty, stop words only, exclusions only, too long, a bad filter) — validation before
authentication; 401 without identity; 404 when search is off (``WAGGLE_SEARCH_URL=off``).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from ledger.api.errors import NotPermitted
from ledger.api.identity import authenticate
from ledger.search.indexer import search_enabled
from ledger.search.query import BadQuery, parse, search

router = APIRouter()


@router.get("/api/search")
async def search_archives(request: Request) -> Any:
    services = request.app.state.services
    if not search_enabled(services.settings):
        return JSONResponse({"error": "search is off on this deployment (WAGGLE_SEARCH_URL=off)"}, status_code=404)
    try:
        query = parse(request.query_params)
    except BadQuery as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)
    identity = await authenticate(request)
    if not identity.subject:
        raise NotPermitted()
    try:
        return await search(services.pool, services.authz, identity, query)
    except BadQuery as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)
