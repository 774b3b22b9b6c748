"""The payload digests of a WACZ, read from its CDXJ index (decision 181, issue 27 item 1).

One CDXJ line is ``<SURT> <14-digit timestamp> <JSON>`` (pywb / cdxj-indexer, the form both
BrowserHive and our capture server write). From it we keep, per record:

* a **response** (``status`` present, ``mime`` not ``warc/revisit``, an ``http(s)`` URL, a
  ``digest``): an original the organization now holds → ``payload_digests``;
* a **revisit** (``mime`` ``warc/revisit``): the digest it refers to → ``archive_revisits``;
* either, answered ``200`` at an http(s) URL: the ``(url, digest)`` pair the crawl now holds →
  ``crawl_resources`` (decision 321: later captures of the crawl leave that sub-resource out).

Resource records (screenshots, ``urn:…``) and lines that do not parse are ignored: the index
serves dedup only, a bad line costs a stored body later, never a wrong revisit.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone

INDEX_MAX_BYTES = 8 * 1024 * 1024  # a page's index is a few KB; larger ones are not read for dedup


@dataclass(frozen=True)
class IndexedResponse:
    """One response record: ``digest`` (as in the WARC), ``uri``, ``date`` (UTC, seconds)."""

    digest: str
    uri: str
    date: datetime


@dataclass(frozen=True)
class IndexedDigests:
    """What one WACZ's index says: its ``responses`` (originals), its ``revisits`` (digests) and
    its ``resources``: ``(uri, digest)`` of 200 responses and revisits (and, added by the WACZ
    check, the behavior sources it stores)."""

    responses: tuple[IndexedResponse, ...] = ()
    revisits: tuple[str, ...] = ()
    resources: tuple[tuple[str, str], ...] = ()


def _date(ts: str) -> datetime | None:
    try:
        return datetime.strptime(ts[:14].ljust(14, "0"), "%Y%m%d%H%M%S").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def cdxj_records(text: str) -> Iterator[tuple[str, dict]]:
    """``(timestamp, JSON object)`` of each line of a CDXJ index (``<surt> <timestamp> <json>``),
    in order; lines without three parts or whose JSON is not an object are skipped."""
    for line in text.splitlines():
        parts = line.split(" ", 2)
        if len(parts) != 3:
            continue
        try:
            fields = json.loads(parts[2])
        except ValueError:
            continue
        if isinstance(fields, dict):
            yield parts[1], fields


def parse_cdxj(text: str) -> IndexedDigests:
    """The responses and revisits of one CDXJ index (``text``: its lines), in index order,
    each digest once (the first response of a digest wins, as in ``payload_digests``)."""
    responses: dict[str, IndexedResponse] = {}
    revisits: dict[str, None] = {}
    resources: dict[tuple[str, str], None] = {}
    for timestamp, fields in cdxj_records(text):
        digest, url, mime = fields.get("digest"), fields.get("url"), fields.get("mime")
        if not isinstance(digest, str) or not digest or not isinstance(url, str):
            continue
        if str(fields.get("status")) == "200" and url.startswith(("http://", "https://")):
            resources.setdefault((url, digest), None)
        if mime == "warc/revisit":
            revisits.setdefault(digest, None)
            continue
        date = _date(timestamp)
        if fields.get("status") is None or date is None or not url.startswith(("http://", "https://")):
            continue
        responses.setdefault(digest, IndexedResponse(digest, url, date))
    return IndexedDigests(tuple(responses.values()), tuple(revisits), tuple(resources))
