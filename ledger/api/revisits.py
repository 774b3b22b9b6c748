"""The digest lookup of revisit records (decision 181, docs/capture-server.md extension "revisit").

``POST /api/crawls/{crawl_id}/digests`` ``{"digests": ["sha256:…", …]}`` (1–5,000 strings of
1–200 characters) → 200 ``{"held": {digest: {"uri", "date", "container"}}}``: the digests the
crawl's organization already archived, each with its original's URI, WARC-Date (ISO 8601 UTC)
and WACZ member name ``<archive id>.wacz`` (decision 322: the revisit record names it, so
ReplayWeb.page finds an original at another URL).
Only that organization's index is read (``ledger.archive.digests``). Authorization: the flow's
token, as the level report's (``submitter`` + the crawl in one of the caller's organizations;
another organization's crawl is as absent as an unknown one: 404), or the crawl's read token
(decision 405: what capture servers are given). 400 bad body, naming it.

Within the crawl (extension recrawl, decision 321): the body may also carry ``"resources":
[{"uri", "digest"}, …]`` (0–5,000; ``uri`` 1–2,000 characters); the answer then has
``"written": [{"uri", "digest"}, …]`` — those an admitted, complete archive of **this crawl**
already holds (its capture server leaves such a sub-resource out of the page's WACZ).
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from ledger.api.read_token import crawl_reader
from ledger.archive.digests import DIGESTS_MAX, URI_MAX, held, written
from ledger.crawl.errors import Refused

router = APIRouter()

Digest = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9]+:[A-Za-z0-9+/=]+$")]


class Pair(BaseModel):
    model_config = ConfigDict(extra="forbid")
    uri: Annotated[str, StringConstraints(min_length=1, max_length=URI_MAX)]
    digest: Digest


class DigestQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    digests: list[Digest] = Field(max_length=DIGESTS_MAX)
    resources: list[Pair] = Field(default_factory=list, max_length=DIGESTS_MAX)


@router.post("/api/crawls/{crawl_id}/digests")
async def lookup_digests(crawl_id: uuid.UUID, body: DigestQuery, request: Request) -> dict:
    """See the module docstring."""
    org = await crawl_reader(request, crawl_id)  # the flow's token or the crawl's read token (decision 405)
    pool = request.app.state.services.pool
    if not body.digests and not body.resources:
        raise Refused(400, "digests: give at least one digest or resource")
    out: dict = {"held": await held(pool, org, list(body.digests)) if body.digests else {}}
    if body.resources:
        pairs = await written(pool, str(crawl_id), [(p.uri, p.digest) for p in body.resources])
        out["written"] = [{"uri": u, "digest": d} for u, d in pairs]
    return out
