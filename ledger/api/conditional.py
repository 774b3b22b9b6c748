"""The previous capture of a page, for conditional requests (decision 331, docs/capture-server.md
extension "conditional").

``POST /api/crawls/{crawl_id}/previous`` ``{"url": "<page URL>"}`` (1–8,000 characters, http(s))
→ 200 ``{"etag", "lastModified", "digest", "uri", "date", "container", "original": {"url", "offset",
"length"}}`` or ``{}`` (no earlier capture of that URL in the crawl's organization with
validators, or its original is gone or cannot be ranged). Only that organization's rows are read
(``ledger.archive.conditional``). Authorization: the flow's token, as the digest lookup's
(another organization's crawl is as absent as an unknown one: 404), or the crawl's read token
(decision 405: what capture servers are given). 400 bad body, naming it.
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, StringConstraints

from ledger.api.read_token import crawl_reader
from ledger.archive.conditional import previous

router = APIRouter()


class PreviousQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: Annotated[str, StringConstraints(min_length=1, max_length=8000, pattern=r"^https?://")]


@router.post("/api/crawls/{crawl_id}/previous")
async def previous_capture(crawl_id: uuid.UUID, body: PreviousQuery, request: Request) -> dict:
    """See the module docstring."""
    org = await crawl_reader(request, crawl_id)  # the flow's token or the crawl's read token (decision 405)
    services = request.app.state.services
    if services.s3 is None:  # no store to read an original from: the capture asks unconditionally
        return {}
    return await previous(services.pool, services.s3, org, body.url)
