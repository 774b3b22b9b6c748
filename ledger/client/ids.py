"""Short ids: the client shows the first 8 characters of an id and accepts any unique prefix.

A full UUID is used as given (no listing). A prefix is matched, case-insensitively, against the
ids the caller may see (archives: every page of ``GET /api/archives``; crawls: the ledger's
``GET /api/crawls?idPrefix=``, which needs at least :data:`MIN_CRAWL_PREFIX` characters).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ledger.client.api import ApiError

FULL_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
PREFIX = re.compile(r"^[0-9a-f][0-9a-f-]*$")
SHOWN_CANDIDATES = 5
MIN_CRAWL_PREFIX = 4  # what GET /api/crawls?idPrefix= accepts


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def resolve(given: str, ids: Iterable[str], what: str, listing: str) -> str:
    """The one id of ``ids`` that starts with ``given`` (or ``given`` itself when a full UUID).

    ``what`` names the kind ("archive"), ``listing`` the command that lists them. Raises
    :class:`ApiError` (status 400) for a malformed prefix, (404) when none matches and (409)
    when several do, each message saying what to type instead.
    """
    prefix = given.strip().lower()
    if FULL_UUID.match(prefix):
        return prefix
    if not PREFIX.match(prefix):
        raise ApiError(400, f"{given!r} is not {_article(what)} {what} id or id prefix (hex digits, as `{listing}` shows)")
    matches = list(dict.fromkeys(i for i in (str(x).lower() for x in ids) if i.startswith(prefix)))
    if not matches:
        raise ApiError(404, f"no {what} you may see has an id starting with {given!r} (see `{listing}`)")
    if len(matches) > 1:
        shown = ", ".join(matches[:SHOWN_CANDIDATES]) + (" …" if len(matches) > SHOWN_CANDIDATES else "")
        raise ApiError(409, f"{given!r} is ambiguous: {len(matches)} {what}s start with it ({shown});"
                            " give more characters")
    return matches[0]
