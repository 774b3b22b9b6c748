"""Where a level report's discovered links come from (issue 14, docs/internals.md "Level
report v2"): a result's inline ``links`` when it carries them (the flow had them in the
capture answer), else its ``.links.json`` in S3 (``linksLocation``, the old shape, read on the
report's critical path). Links keep result order, so the first-seen order and a budget cut
are the same whichever way each result came.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any


async def discovered_links(results: list[dict],
                           read_s3: Callable[[list[dict]], Awaitable[list[list]]]) -> tuple[list, int, list[int]]:
    """``(links, overflow, counts)``: every result's links in result order, the sum of the
    results' ``linksOverflow`` (links the flow did not send because of the per-page cap), and
    how many of ``links`` each result gave (in result order).

    ``read_s3(results)`` reads the ``.links.json`` of the results without inline links and
    returns one list per result given (empty when the file was skipped); it raises what the
    S3 read raises (``Refused`` 503)."""
    from_s3 = [r for r in results if r.get("links") is None and r.get("linksLocation")]
    read = dict(zip(map(id, from_s3), await read_s3(from_s3))) if from_s3 else {}
    links: list = []
    overflow = 0
    counts: list[int] = []
    for r in results:
        inline = r.get("links")
        if inline is not None:
            links.extend(inline)
            overflow += int(r.get("linksOverflow") or 0)
            counts.append(len(inline))
        else:
            got = read.get(id(r)) or []
            links.extend(got)
            counts.append(len(got))
    return links, overflow, counts
