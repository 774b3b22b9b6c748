"""Within one crawl (decision 321, issue 27 item 1): the ``(URL, payload digest)`` pairs of a
crawl's admitted archives, and the behavior sources they store, are answered as ``written`` by
``POST /api/crawls/{id}/digests`` — for that crawl only (another crawl of the same organization
gets revisits, never a left-out resource), never from an archive the check found broken."""

from __future__ import annotations

import pytest

from waggle_capture.revisits import payload_digest
from tests.ledger.test_host_leases import WHO, start
from tests.ledger.test_revisit_digests import PAGE, admit, settings, wacz  # noqa: F401 - fixture
from tests.fixtures.ledger import open_ledger

pytestmark = pytest.mark.anyio


async def ask(h, crawl: str, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    r = await h.client.post(f"/api/crawls/{crawl}/digests", headers=WHO,
                            json={"digests": [], "resources": [{"uri": u, "digest": d} for u, d in pairs]})
    assert r.status_code == 200, r.text
    return sorted((w["uri"], w["digest"]) for w in r.json()["written"])


async def test_a_crawl_answers_the_pairs_its_own_archives_hold(settings, s3_server):  # noqa: F811
    digest = payload_digest(PAGE)
    other_body = payload_digest(PAGE + b"x")
    async with open_ledger(settings) as h:
        crawl = await start(h, ["https://s.test/"], 0)
        assert await ask(h, crawl, [("https://s.test/style.css", digest)]) == []  # nothing admitted yet
        await admit(h, s3_server, crawl, "acme", wacz("https://s.test/style.css", PAGE))
        asked = [("https://s.test/style.css", digest),  # held: same URL, same payload
                 ("https://s.test/style.css", other_body),  # the URL changed its payload
                 ("https://s.test/copy.css", digest),  # the payload at another URL: a revisit, not left out
                 ("https://s.test/style.css", digest.rstrip("="))]  # BrowserHive's unpadded form
        assert await ask(h, crawl, asked) == sorted([asked[0], asked[3]])
        # a revisit record of the crawl counts as written too (replay resolves it in the collection)
        held = {digest: {"uri": "https://s.test/style.css", "date": "2026-11-30T10:00:00Z"}}
        await admit(h, s3_server, crawl, "acme", wacz("https://s.test/copy.css", PAGE, held))
        assert await ask(h, crawl, [asked[2]]) == [asked[2]]
        # another crawl of the same organization: held (a revisit), but not written by *it*
        again = await start(h, ["https://s.test/"], 0)
        assert await ask(h, again, asked) == []
        r = await h.client.post(f"/api/crawls/{again}/digests", headers=WHO, json={"digests": [digest]})
        assert r.json()["held"][digest]["uri"] == "https://s.test/style.css" and "written" not in r.json()
        bad = [await h.client.post(f"/api/crawls/{crawl}/digests", headers=WHO, json=b) for b in (
            {"digests": [], "resources": []}, {"digests": [], "resources": [{"uri": "", "digest": digest}]},
            {"digests": [], "resources": [{"uri": "https://s.test/" + "a" * 2000, "digest": digest}]},
            {"digests": [], "resources": [{"uri": "https://s.test/", "digest": "no colon"}]})]
        assert [b.status_code for b in bad] == [400] * 4, [b.text for b in bad]


async def test_behavior_sources_count_only_where_stored(settings, s3_server):  # noqa: F811
    """A WACZ whose datapackage says it stores a behavior source makes that source written for
    the crawl; one that only names it (``sourceStored: false``) does not."""
    import hashlib
    source_digest = "sha256:" + hashlib.sha256(b"scroll()").hexdigest()
    pair = ("urn:behavior:autoscroll", source_digest)
    async with open_ledger(settings) as h:
        crawl = await start(h, ["https://s.test/"], 0)
        await admit(h, s3_server, crawl, "acme", wacz("https://s.test/a", PAGE, behaviors=[
            {"id": "autoscroll", "origin": "custom", "sha256": source_digest, "sourceStored": False}]))
        assert await ask(h, crawl, [pair]) == []
        runtime = ("urn:behaviors:runtime.js", "sha256:" + hashlib.sha256(b"host()").hexdigest())
        await admit(h, s3_server, crawl, "acme", wacz("https://s.test/b", PAGE, behaviors=[
            {"id": "autoscroll", "origin": "custom", "sha256": source_digest, "sourceStored": True}],
            runtime={"sha256": runtime[1], "sourceStored": False}))
        assert await ask(h, crawl, [pair, runtime]) == [pair]
        await admit(h, s3_server, crawl, "acme", wacz("https://s.test/c", PAGE, behaviors=[],
                                                      runtime={"sha256": runtime[1], "sourceStored": True}))
        assert await ask(h, crawl, [pair, runtime]) == sorted([pair, runtime])
