"""Links from progress (issue 14, docs/internals.md "Links from progress"): a captured page's
``done`` event carries its links, the ledger puts them into the frontier during the level, and
the level report — still the authority, still carrying every link — skips the results whose
links landed and applies the rest. Real Postgres, in-process ledger (two real ``waggle serve``
replicas in the last test)."""

from __future__ import annotations

import asyncio
import sys

import httpx
import psycopg
import pytest

import ledger.crawl.frontier as frontier
from ledger.crawl.scope import LinkFilter
from tests.ledger.test_frontier_exact import X, Y, collide  # noqa: F401 - fixture
from tests.ledger.test_level_reports import (
    WHO, open_ledger, post, report, rows, settings, start, store_of,  # noqa: F401 - fixture
)
from tests.ledger.test_replicas import NO_SCRIPTS, replicas  # noqa: F401 - fixture

pytestmark = pytest.mark.anyio
SEEDS = ["https://a.test/", "https://a.test/s1", "https://a.test/s2"]


def _links(i: int) -> list[dict]:
    """Page i's links: five of its own, two shared with every page, one out of scope, one nofollow."""
    own = [{"href": f"https://a.test/p{i}/{k}", "rel": None} for k in range(5)]
    return [*own, {"href": "https://a.test/shared"}, {"href": "https://a.test/shared#again"},
            {"href": "https://elsewhere.test/"}, {"href": f"https://a.test/nf{i}", "rel": "nofollow"}]


def _results(links_of=_links) -> list[dict]:
    return [{"url": u, "status": "captured", "links": links_of(i)} for i, u in enumerate(SEEDS)]


async def _done(h, crawl_id, url, links, headers=WHO):
    return await h.client.post(f"/api/crawls/{crawl_id}/progress", headers=headers,
                               json={"url": url, "phase": "done", "status": "captured", "links": links})


@pytest.fixture
def sent(monkeypatch):
    """Every URL the level report's streamed insert was given (the links it inserts itself)."""
    urls: list[str] = []
    real = frontier.insert_stream

    async def spy(conn, crawl_id, depth, chunks):
        def seen(chunks):
            for chunk in chunks:
                urls.extend(p.url for p in chunk)
                yield chunk
        return await real(conn, crawl_id, depth, seen(chunks))

    monkeypatch.setattr(frontier, "insert_stream", spy)
    return urls


async def _plain_answer(h, results) -> dict:
    """The answer of the same report on a fresh crawl without progress events."""
    crawl_id = await start(h, seeds=SEEDS, maxDepth=2)
    r = await post(h, crawl_id, report(0, results))
    assert r.status_code == 200, r.text
    return r.json()


def _page_rows(db_url, crawl_id) -> list[tuple]:
    return rows(db_url, "SELECT url, depth, state, from_progress FROM crawl_pages WHERE crawl_id = %s ORDER BY id",
                crawl_id)


async def test_links_landed_from_progress_are_not_inserted_again_and_the_answer_is_the_same(settings, s3_server,
                                                                                           sent):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        want = await _plain_answer(h, _results())
        sent.clear()
        crawl_id = await start(h, seeds=SEEDS, maxDepth=2)
        for i in (2, 0):  # captures finish in any order
            r = await _done(h, crawl_id, SEEDS[i], _links(i))
            assert r.status_code == 200, r.text
        early = [u for u, d, _, mark in _page_rows(settings.database_url, crawl_id) if mark]
        assert sorted(early) == sorted({f"https://a.test/p{i}/{k}" for i in (0, 2) for k in range(5)}
                                       | {"https://a.test/shared"})
        r = await post(h, crawl_id, report(0, _results()))
        assert r.status_code == 200, r.text
        assert r.json() == want  # same pages, same discovery order as without progress
        # the report inserted only page 1's own links (pages 0 and 2 were skipped; "shared" is
        # page 0's first, so an in-report duplicate on page 1)
        assert sent == [f"https://a.test/p1/{k}" for k in range(5)]
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
        plain = rows(settings.database_url, "SELECT pages_discovered, drops FROM crawls WHERE id = %s", crawl_id)
        assert view["pagesDiscovered"] == len(want["next"]) and plain[0][1]["out_of_scope"] == 3
    urls = [u for u, *_ in _page_rows(settings.database_url, crawl_id)]
    assert len(urls) == len(set(urls)) == 3 + len(want["next"])


def _callers() -> set[str]:
    """The modules of every frame calling this one."""
    frame, names = sys._getframe(1), set()
    while frame is not None:
        names.add(frame.f_globals.get("__name__", ""))
        frame = frame.f_back
    return names


class Scoped(list):
    """Every href the level's scoping gave ``LinkFilter.accept`` (the list), and apart
    (``counted``) those the per-page link counts gave it (ledger.crawl.link_counts, decision 232)."""

    def __init__(self) -> None:
        super().__init__()
        self.counted: list[str] = []

    def clear(self) -> None:
        super().clear()
        self.counted.clear()


@pytest.fixture
def scoped(monkeypatch):
    """:class:`Scoped`, filled wherever ``LinkFilter.accept`` runs."""
    hrefs = Scoped()
    real = LinkFilter.accept

    def spy(self, links, *args, **kwargs):  # hops and whatever accept takes besides
        links = list(links)
        into = hrefs.counted if "ledger.crawl.link_counts" in _callers() else hrefs
        into.extend(link["href"] for link in links)
        return real(self, links, *args, **kwargs)

    monkeypatch.setattr(LinkFilter, "accept", spy)
    return hrefs


def _with_traps(i: int) -> list[dict]:
    """:func:`_links` plus a URL trap, a link with credentials, an unparseable one and one whose
    dedup key is not its URL."""
    return [*_links(i), {"href": f"https://a.test/t{i}/x/x/x/"}, {"href": "https://u:p@a.test/secret"},
            {"href": "https://a.test/p0/0#frag", "rel": "next"}, {"href": "mailto:x@a.test"},
            {"href": f"HTTPS://A.TEST:443/é/%7eq{i}?a=%2f"}]


@pytest.mark.parametrize("verdicts_kept", [True, False])
async def test_the_report_takes_the_scope_of_landed_links_from_progress(settings, s3_server, scoped, verdicts_kept):
    """The report does not scope a landed page's links again, neither for the frontier nor for
    its per-page link counts (decision 411): the event's verdicts (accepted URLs, trap verdicts,
    drops) give the same answer — ``pageLinks`` included —, drops and pagesDiscovered. Without
    them (landed by a ledger before migration 131) the report scopes those links itself."""
    results = _results(_with_traps)
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        plain_id = await start(h, seeds=SEEDS, maxDepth=2, maxPages=100)
        want = (await post(h, plain_id, report(0, results))).json()
        crawl_id = await start(h, seeds=SEEDS, maxDepth=2, maxPages=100)
        for i in (0, 2):
            assert (await _done(h, crawl_id, SEEDS[i], _with_traps(i))).status_code == 200
        if not verdicts_kept:
            with psycopg.connect(settings.database_url) as conn:
                conn.execute("UPDATE crawl_progress SET links_scoped = NULL WHERE crawl_id = %s", (crawl_id,))
        scoped.clear()
        r = await post(h, crawl_id, report(0, results))
        assert r.status_code == 200, r.text
        assert r.json() == want
        again = [link["href"] for i in ((0, 1, 2) if not verdicts_kept else (1,)) for link in _with_traps(i)]
        assert scoped == again
        assert scoped.counted == again  # the counts scope (from the report's href cache) only those too
        assert r.json()["pageLinks"] and [p["discovered"] for p in r.json()["pageLinks"]] == [14, 14, 14]
        sql = "SELECT pages_discovered, drops FROM crawls WHERE id = %s"
        assert rows(settings.database_url, sql, crawl_id) == rows(settings.database_url, sql, plain_id)


async def test_a_report_after_lost_progress_events_lands_every_link(settings, s3_server):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        want = await _plain_answer(h, _results())
        crawl_id = await start(h, seeds=SEEDS, maxDepth=2)
        assert (await _done(h, crawl_id, SEEDS[1], _links(1))).status_code == 200  # pages 0 and 2: lost
        r = await post(h, crawl_id, report(0, _results()))
        assert r.status_code == 200 and r.json() == want, r.text


async def test_a_report_carrying_other_links_than_progress_wins(settings, s3_server):
    """A landed page whose result carries other links (a re-run capture): the early rows are not
    trusted — deleted, and the report's links land as without progress."""
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        want = await _plain_answer(h, _results())
        crawl_id = await start(h, seeds=SEEDS, maxDepth=2)
        assert (await _done(h, crawl_id, SEEDS[0], [{"href": "https://a.test/gone"}])).status_code == 200
        assert (await _done(h, crawl_id, SEEDS[1], _links(1))).status_code == 200
        r = await post(h, crawl_id, report(0, _results()))
        assert r.status_code == 200 and r.json() == want, r.text
    assert "https://a.test/gone" not in {u for u, *_ in _page_rows(settings.database_url, crawl_id)}


async def test_a_re_sent_done_lands_nothing_more(settings, s3_server):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=SEEDS, maxDepth=2)
        assert (await _done(h, crawl_id, SEEDS[0], _links(0))).status_code == 200
        before = _page_rows(settings.database_url, crawl_id)
        assert (await _done(h, crawl_id, SEEDS[0], [{"href": "https://a.test/later"}])).status_code == 200
        assert _page_rows(settings.database_url, crawl_id) == before


@pytest.mark.parametrize("early_key", [X, Y])
async def test_a_hash_collision_across_progress_and_the_report_keeps_both(settings, s3_server, collide, early_key):
    """Y's key hashes to X's: whichever lands first from progress, the other comes with the
    report's remainder and moves along its probe chain."""
    other = Y if early_key == X else X
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=SEEDS[:2], maxDepth=2)
        assert (await _done(h, crawl_id, SEEDS[0], [{"href": early_key}])).status_code == 200
        r = await post(h, crawl_id, report(0, [
            {"url": SEEDS[0], "status": "captured", "links": [{"href": early_key}]},
            {"url": SEEDS[1], "status": "captured", "links": [{"href": other}, {"href": early_key}]}]))
        assert r.status_code == 200, r.text
        assert [n["url"] for n in r.json()["next"]] == [early_key, other]
    stored = dict(rows(settings.database_url, "SELECT url, url_hash FROM crawl_pages WHERE crawl_id = %s AND depth = 1",
                       crawl_id))
    assert {bytes(stored[early_key]), bytes(stored[other])} == {collide(X), frontier.probe_hash(Y, 1) if
                                                                early_key == X else frontier.probe_hash(X, 1)}


async def test_reports_stay_ordered_and_idempotent_and_late_progress_is_refused(settings, s3_server):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=SEEDS, maxDepth=2)
        for i in range(3):
            assert (await _done(h, crawl_id, SEEDS[i], _links(i))).status_code == 200
        body = report(0, _results())
        first = await post(h, crawl_id, body)
        assert first.status_code == 200, first.text
        after = _page_rows(settings.database_url, crawl_id)
        again = await post(h, crawl_id, body)
        assert again.status_code == 200 and again.json() == first.json()
        other = await post(h, crawl_id, report(0, _results(lambda i: _links(i)[:2])))
        assert other.status_code == 409
        late = await _done(h, crawl_id, SEEDS[0], _links(0))
        assert late.status_code == 409 and "pending" in late.json()["error"]
        assert _page_rows(settings.database_url, crawl_id) == after


async def test_no_early_rows_when_the_budget_could_cut(settings, s3_server):
    """maxPages leaves less room than the level's links could take: progress lands nothing and
    the report's budget path decides in its own order."""
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=SEEDS, maxDepth=2, maxPages=8)
        assert (await _done(h, crawl_id, SEEDS[2], _links(2))).status_code == 200
        assert [u for u, d, *_ in _page_rows(settings.database_url, crawl_id) if d == 1] == []
        r = await post(h, crawl_id, report(0, _results()))
        assert r.status_code == 200, r.text
        assert [n["url"] for n in r.json()["next"]] == [f"https://a.test/p0/{k}" for k in range(5)]


@pytest.mark.parametrize("extra,status,needle", [
    ({"links": [{"href": "https://a.test/x"}], "status": "failed"}, 400, "links go with status 'captured'"),
    ({"links": ["https://a.test/x"]}, 400, "links.0"),
    ({"links": [{"href": "https://a.test/x", "text": "t"}]}, 400, "unknown field links.0.text"),
    ({"links": [{"href": "h" * 9000}]}, 400, "links.0.href"),
    ({"links": [{"href": "https://a.test/x", "rel": 3}]}, 400, "links.0.rel"),
    ({"links": {"href": "https://a.test/x"}}, 400, "links"),
    ({"links": [{"href": "https://a.test/\x00"}]}, 400, "NUL"),
    ({"links": [{"href": f"https://a.test/{i}"} for i in range(1001)]}, 413, "WAGGLE_REPORT_LINKS_PER_PAGE"),
])
async def test_a_hostile_progress_body_is_refused_with_a_reason_and_lands_nothing(settings, s3_server, extra, status,
                                                                                needle):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=SEEDS, maxDepth=2)
        body = {"url": SEEDS[0], "phase": "done", "status": "captured", **extra}
        r = await h.client.post(f"/api/crawls/{crawl_id}/progress", headers=WHO, json=body)
        assert r.status_code == status and needle in r.json()["error"], r.text
    assert len(_page_rows(settings.database_url, crawl_id)) == 3
    assert rows(settings.database_url, "SELECT count(*) FROM crawl_progress WHERE crawl_id = %s", crawl_id) == [(0,)]


def test_two_replicas_land_progress_links_once_and_agree_on_the_report(replicas, migrated_db_url):
    """Progress events of every page sent to both replicas at once (shared links in each),
    then the report raced on both: one row per URL, one accepted report, one answer."""
    async def go():
        async with httpx.AsyncClient(timeout=60) as http:
            r = await http.post(f"{replicas[0]}/api/crawls", headers=WHO,
                                json={"seeds": SEEDS, "scripts": [], "maxDepth": 2})
            assert r.status_code == 202, r.text
            crawl_id = r.json()["crawlId"]
            events = await asyncio.gather(*[
                http.post(f"{replicas[i % 2]}/api/crawls/{crawl_id}/progress", headers=WHO,
                          json={"url": SEEDS[i % 3], "phase": "done", "status": "captured", "links": _links(i % 3)})
                for i in range(6)])
            assert {e.status_code for e in events} == {200}, [e.text for e in events]
            body = {"depth": 0, "compiled": NO_SCRIPTS, "results": _results()}
            answers = await asyncio.gather(*[
                http.post(f"{replicas[i % 2]}/api/crawls/{crawl_id}/pages", headers=WHO, json=body) for i in range(6)])
            return crawl_id, answers

    crawl_id, answers = asyncio.run(go())
    assert {a.status_code for a in answers} == {200} and {a.text for a in answers} == {answers[0].text}
    want = [f"https://a.test/p{i}/{k}" for i in range(3) for k in range(5)]
    want.insert(5, "https://a.test/shared")
    assert [n["url"] for n in answers[0].json()["next"]] == want
    with psycopg.connect(migrated_db_url) as conn:
        urls = [u for (u,) in conn.execute("SELECT url FROM crawl_pages WHERE crawl_id = %s", (crawl_id,))]
        assert len(urls) == len(set(urls)) == 3 + len(want)
        assert conn.execute("SELECT count(*) FROM crawl_level_reports WHERE crawl_id = %s", (crawl_id,)
                            ).fetchone()[0] == 1
