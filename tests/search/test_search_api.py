"""Index and search over real HTTP: /api/crawls/{id}/index, GET /api/search (issue 26)."""

from __future__ import annotations

import concurrent.futures
import time
from datetime import datetime, timedelta, timezone

import httpx
import psycopg
import pytest

from tests.search.helpers import html_page

ACME = {"X-Waggle-Subject": "alice", "X-Waggle-Organizations": "acme"}
CONTOSO = {"X-Waggle-Subject": "carol", "X-Waggle-Organizations": "contoso"}
FLOW = {"X-Waggle-Subject": "flow", "X-Waggle-Organizations": "acme,contoso"}


def index(stack, crawl: str, headers=FLOW, url: str | None = None) -> httpx.Response:
    return httpx.post(f"{url or stack.url}/api/crawls/{crawl}/index", headers=headers, timeout=60)


def find(stack, headers=ACME, **params) -> httpx.Response:
    return httpx.get(f"{stack.url}/api/search", headers=headers, params=params, timeout=30)


def urls(r: httpx.Response) -> list[str]:
    assert r.status_code == 200, r.text
    return [h["url"] for h in r.json()["hits"]]


@pytest.fixture(scope="module")
def indexed(search_stack):
    s = search_stack
    first = index(s, s.crawls["a"])
    assert first.status_code == 200, first.text
    assert first.json() == {"indexed": 4, "pages": 4, "withoutText": 0, "deferred": 0, "alreadyIndexed": 0, "remaining": 0}
    for key in ("b", "c"):
        assert index(s, s.crawls[key]).json()["indexed"] == 1
    return s


def test_index_is_idempotent_and_picks_up_late_archives(indexed):
    s = indexed
    again = index(s, s.crawls["a"]).json()
    assert again == {"indexed": 0, "pages": 0, "withoutText": 0, "deferred": 0, "alreadyIndexed": 4, "remaining": 0}
    s.admit("late", org="acme", crawl=s.crawls["a"], url="https://harbour.example/late",
            body=html_page("https://harbour.example/late", "<html lang=en><title>Late page</title><body>breakwater</body></html>"),
            timestamp="2026-09-24T12:00:00Z")
    s.wait_outbox()
    late = index(s, s.crawls["a"]).json()
    assert (late["indexed"], late["alreadyIndexed"]) == (1, 4)
    assert urls(find(s, q="breakwater")) == ["https://harbour.example/late"]


def test_an_archive_without_text_is_indexed_once_with_its_reason(indexed):
    s = indexed
    url = "https://harbour.example/logo.png"
    from tests.search.helpers import wacz
    s.admit("png", org="acme", crawl=s.crawls["b"], url=url, body=wacz(url, [(url, 200, "image/png", b"\x89PNG", {})]),
            timestamp="2026-09-24T12:00:00Z")
    s.wait_outbox()
    got = index(s, s.crawls["b"]).json()
    assert (got["indexed"], got["pages"], got["withoutText"]) == (1, 0, 1)
    assert index(s, s.crawls["b"]).json()["indexed"] == 0
    with psycopg.connect(s.db_url) as conn:
        problem = conn.execute("SELECT problem FROM archive_text WHERE archive_id = %s", (s.archives["png"],)).fetchone()[0]
    assert "no HTML or PDF" in problem


def test_index_of_another_organizations_crawl_is_404(indexed):
    s = indexed
    r = index(s, s.crawls["c"], headers={"X-Waggle-Subject": "flow", "X-Waggle-Organizations": "acme"})
    assert r.status_code == 404


def test_ranked_title_over_body_and_only_own_organization(indexed):
    s = indexed
    got = urls(find(s, q="lighthouse"))
    assert got[0] == "https://harbour.example/keeper"  # in the title (weight A)
    assert set(got) == {"https://harbour.example/keeper", "https://harbour.example/tides", "https://coast.example/old"}
    assert urls(find(s, headers=CONTOSO, q="lighthouse")) == ["https://contoso.example/lh"]
    assert urls(find(s, headers={"X-Waggle-Subject": "mallory", "X-Waggle-Organizations": "evil"}, q="lighthouse")) == []


def test_an_outsiders_answer_does_not_tell_whether_others_hold_a_word(indexed):
    """Found by a new user: a count of refused candidates told another organization whether a
    word is in these archives. A word they hold and a word nobody holds answer alike."""
    s = indexed
    mallory = {"X-Waggle-Subject": "mallory", "X-Waggle-Organizations": "evil"}
    held, absent = find(s, headers=mallory, q="lighthouse").json(), find(s, headers=mallory, q="zzqxnotaword").json()
    assert held == absent and held["hits"] == []


def test_web_search_syntax(indexed):
    s = indexed
    assert urls(find(s, q='"lighthouse keeper"')) == ["https://harbour.example/keeper", "https://harbour.example/tides"] \
        or set(urls(find(s, q='"lighthouse keeper"'))) == {"https://harbour.example/keeper", "https://harbour.example/tides"}
    assert urls(find(s, q='"keeper lighthouse"')) == []
    assert "https://harbour.example/tides" not in urls(find(s, q="lighthouse -tide"))
    assert set(urls(find(s, q="rocks OR museum"))) == {"https://harbour.example/keeper", "https://coast.example/old"}


def test_language_configuration_stems_per_page(indexed):
    s = indexed
    assert urls(find(s, q="Schiff")) == ["https://harbour.example/de"]  # german stemmer: Schiffe → schiff
    assert urls(find(s, q="tides")) and "https://harbour.example/tides" in urls(find(s, q="tides"))  # english: tides → tide


def test_pdf_text_is_searchable(indexed):
    assert urls(find(indexed, q='"annual tide report"')) == ["https://harbour.example/report.pdf"]


def test_filters(indexed):
    s = indexed
    assert urls(find(s, q="lighthouse", crawl=s.crawls["b"])) == ["https://coast.example/old"]
    assert urls(find(s, q="lighthouse", host="Coast.Example")) == ["https://coast.example/old"]
    assert set(urls(find(s, q="lighthouse", **{"from": "2026-01-01"}))) == {
        "https://harbour.example/keeper", "https://harbour.example/tides"}
    assert urls(find(s, q="lighthouse", to="2025-05-01")) == ["https://coast.example/old"]  # a date is the whole day
    assert urls(find(s, q="lighthouse", **{"from": "2026-09-24T00:00:00Z", "to": "2026-09-24T23:00:00+00:00"})) == [
        "https://harbour.example/tides"]


def test_hit_shape_snippet_and_replay_link(indexed):
    s = indexed
    hit = find(s, q="spring tide").json()["hits"][0]
    assert hit["archiveId"] == s.archives["tides"] and hit["crawlId"] == s.crawls["a"]
    assert hit["title"] == "Tide tables" and hit["capturedAt"] == "2026-09-24T10:00:00.000Z"
    assert "<mark>spring</mark>" in hit["snippetHtml"] and "\x02" not in hit["snippet"]
    escaped = find(s, q="quay").json()["hits"][0]["snippetHtml"]  # the page's text: "Fish & chips <3 at the quay."
    assert "Fish &amp; chips &lt;3 at the <mark>quay</mark>" in escaped
    assert hit["replay"].startswith("/#/replay?archive=" + s.archives["tides"])
    assert hit["replay"].endswith("&crawl=" + s.crawls["a"])  # opens inside its crawl's collection


def test_paging(indexed):
    s = indexed
    pages = [find(s, q="lighthouse", size=1, page=n).json() for n in (1, 2, 3, 4)]
    seen = [p["hits"][0]["url"] for p in pages[:3]]
    assert len(set(seen)) == 3 and seen == urls(find(s, q="lighthouse"))
    assert [p["more"] for p in pages] == [True, True, False, False] and pages[3]["hits"] == []


@pytest.mark.parametrize("params, says", [
    ({"q": ""}, "give words"), ({"q": "   "}, "give words"), ({}, "give words"),
    ({"q": "the and of"}, "only stop words"), ({"q": "-lighthouse"}, "only excludes"),
    ({"q": "OR"}, "OR joins two words"), ({"q": '"OR" or'}, "OR joins two words"),
    ({"q": '""'}, "no words"), ({"q": "!!! ---"}, "no words"), ({"q": "x" * 501}, "at most 500"),
    ({"q": "tide", "crawl": "nope"}, "crawl must be"), ({"q": "tide", "host": "http://a/"}, "host must be"),
    ({"q": "tide", "from": "yesterday"}, "from must be"), ({"q": "tide", "from": "2026-02-02", "to": "2026-01-01"}, "from is after"),
    ({"q": "tide", "page": "0"}, "page must be"), ({"q": "tide", "size": "51"}, "size must be"),
])
def test_bad_queries_are_400_saying_why(indexed, params, says):
    r = find(indexed, **params)
    assert r.status_code == 400 and says in r.json()["error"], r.text


def test_400_before_authentication(indexed):
    r = httpx.get(f"{indexed.url}/api/search", params={"q": ""}, timeout=10)
    assert r.status_code == 400
    assert httpx.get(f"{indexed.url}/api/search", params={"q": "tide"}, timeout=10).status_code == 401


def test_two_replicas_index_each_archive_once(search_stack):
    s = search_stack
    second = s.servers[1] if len(s.servers) > 1 else s.start()
    for n in range(12):
        url = f"https://many.example/{n}"
        s.admit(f"many{n}", org="contoso", crawl=s.crawls["c"], url=url,
                body=html_page(url, f"<html lang=en><title>Many {n}</title><body>quayside {n}</body></html>"),
                timestamp="2026-09-24T12:00:00Z")
    s.wait_outbox()
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda u: index(s, s.crawls["c"], url=u).json(), [s.url, second.url, s.url, second.url]))
    assert sum(a["indexed"] for a in answers) == 12  # each archive by exactly one call
    assert [a["remaining"] for a in answers] == [0, 0, 0, 0]  # a call waits for rows the other replica holds
    with psycopg.connect(s.db_url) as conn:
        left = conn.execute("SELECT count(*) FROM archives WHERE indexed_at IS NULL AND correlation_id = %s",
                            (s.crawls["c"],)).fetchone()[0]
    assert left == 0
    assert len(urls(find(s, headers=CONTOSO, q="quayside", size=50))) == 12


def test_the_search_sweep_indexes_late_archives_without_a_call(search_stack):
    s = search_stack
    sweeper = s.start(search_sweep_interval_s=0.2, search_sweep_grace_s=0)
    try:
        url = "https://harbour.example/reconciled"
        aid = s.admit("reconciled", org="acme", crawl=s.crawls["b"], url=url,
                      body=html_page(url, "<html lang=en><title>Found late</title><body>slipway</body></html>"),
                      timestamp="2026-09-24T12:00:00Z")
        s.wait_outbox()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with psycopg.connect(s.db_url) as conn:
                if conn.execute("SELECT indexed_at FROM archives WHERE id = %s", (aid,)).fetchone()[0]:
                    break
            time.sleep(0.1)
        assert urls(find(s, q="slipway")) == [url]
    finally:
        sweeper.stop()
        s.servers.remove(sweeper)


def test_search_off_answers_404_on_both_routes(search_stack):
    s = search_stack
    off = s.start(search_url="off")
    try:
        assert httpx.get(f"{off.url}/api/search", headers=ACME, params={"q": "tide"}, timeout=10).status_code == 404
        r = index(s, s.crawls["a"], url=off.url)
        assert r.status_code == 404 and "off" in r.json()["error"]
    finally:
        off.stop()
        s.servers.remove(off)


def test_an_external_search_url_is_refused_at_start():
    from pydantic import ValidationError

    from ledger.settings import Settings

    with pytest.raises(ValidationError, match="OpenSearch"):
        Settings(_env_file=None, search_url="https://opensearch.internal:9200")  # type: ignore[call-arg]


def test_many_matches_rank_only_the_newest_window(indexed, monkeypatch):
    from ledger.search import query

    assert find(indexed, q="lighthouse").json()["rankedNewest"] is False
    monkeypatch.setattr(query, "RANK_WINDOW", 2)  # the ledger serves in this process
    body = find(indexed, q="lighthouse").json()
    # the two newest matches of alice's organization (contoso's newer page is not in her window), ranked
    assert [h["url"] for h in body["hits"]] == ["https://harbour.example/keeper", "https://harbour.example/tides"]
    assert body["rankedNewest"] is True
    body = find(indexed, headers=CONTOSO, q="lighthouse").json()
    assert [h["url"] for h in body["hits"]] == ["https://contoso.example/lh"]


def test_a_call_starts_no_batch_after_its_budget_and_leaves_the_rest(search_stack):
    import asyncio
    import uuid

    from ledger.db.pool import open_pool
    from ledger.search.indexer import BATCH, index_archives
    from tests.search.helpers import insert_crawl

    s = search_stack
    crawl = insert_crawl(s.db_url, "acme")
    n = BATCH + 4
    for k in range(n):
        url = f"https://budget.example/{k}"
        s.admit(f"budget{k}", org="acme", crawl=crawl, url=url,
                body=html_page(url, f"<html lang=en><title>B {k}</title><body>mooring</body></html>"),
                timestamp="2026-09-24T12:00:00Z")

    async def go():
        pool = await open_pool(s.db_url, max_size=2)
        try:
            first = await index_archives(pool, s.store, uuid.UUID(crawl), budget_s=0.0)
            rest = await index_archives(pool, s.store, uuid.UUID(crawl))
            return first, rest
        finally:
            await pool.close()

    first, rest = asyncio.run(go())
    assert first.indexed in (0, BATCH) and first.remaining == n - first.indexed  # stopped before the second batch
    assert rest.indexed == n - first.indexed and rest.remaining == 0


# -- the candidate scope (decision 311): organizations OpenFGA confirms, shares, then a BatchCheck --

def _grant(obj: str, user: str, start: datetime, duration: str = "1h") -> dict:
    return {"user": user, "relation": "viewer", "object": obj,
            "condition": {"name": "non_expired_grant",
                          "context": {"grant_time": start.strftime("%Y-%m-%dT%H:%M:%SZ"), "grant_duration": duration}}}


def _key(t: dict) -> dict:  # a delete names the tuple without its condition
    return {k: v for k, v in t.items() if k != "condition"}


def test_a_member_of_another_organization_finds_nothing_of_this_one(indexed):
    s = indexed
    for word in ("keeper", "lighthouse", "tide", "museum"):  # acme's words; contoso holds only "lighthouse"
        assert "harbour.example" not in " ".join(urls(find(s, headers=CONTOSO, q=word)))
        assert "coast.example" not in " ".join(urls(find(s, headers=CONTOSO, q=word)))
    assert urls(find(s, headers=CONTOSO, q="museum")) == []


def test_a_direct_grant_shows_exactly_the_granted_archive(indexed):
    s = indexed
    grace = {"X-Waggle-Subject": "grace", "X-Waggle-Organizations": "elsewhere"}
    assert urls(find(s, headers=grace, q="lighthouse")) == []
    grant = _grant(f"archive:{s.archives['tides']}", "user:grace", datetime.now(timezone.utc) - timedelta(minutes=5))
    s.fga.write([grant])
    try:
        assert urls(find(s, headers=grace, q="lighthouse")) == ["https://harbour.example/tides"]
        assert urls(find(s, headers=grace, q="keeper")) == ["https://harbour.example/tides"]  # not /keeper
        assert urls(find(s, headers=grace, q="museum")) == []
    finally:
        s.fga.write(deletes=[_key(grant)])
    assert urls(find(s, headers=grace, q="lighthouse")) == []  # revoked: gone in the next request


def test_an_expired_grant_shows_nothing(indexed):
    s = indexed
    heidi = {"X-Waggle-Subject": "heidi", "X-Waggle-Organizations": ""}
    grant = _grant(f"archive:{s.archives['keeper']}", "user:heidi", datetime.now(timezone.utc) - timedelta(hours=2))
    s.fga.write([grant])
    try:
        assert urls(find(s, headers=heidi, q="lighthouse")) == []
        assert urls(find(s, headers=heidi, q="keeper")) == []
    finally:
        s.fga.write(deletes=[_key(grant)])


def test_a_share_to_an_organizations_members_shows_that_archive_to_them(indexed):
    s = indexed
    ivan = {"X-Waggle-Subject": "ivan", "X-Waggle-Organizations": "partner"}
    share = {"user": "organization:partner#member", "relation": "viewer", "object": f"archive:{s.archives['coast']}"}
    s.fga.write([share])
    try:
        assert urls(find(s, headers=ivan, q="lighthouse")) == ["https://coast.example/old"]
        # carol (contoso) sees her own page and not the share to partner
        assert urls(find(s, headers=CONTOSO, q="lighthouse")) == ["https://contoso.example/lh"]
    finally:
        s.fga.write(deletes=[share])


def test_a_candidate_openfga_refuses_is_dropped_and_paging_stays_exact(indexed):
    """archive_text.org_id says acme, but OpenFGA no longer links the archive to acme: the
    organization scope proposes it, the BatchCheck drops it, the next candidate takes its place."""
    s = indexed
    with psycopg.connect(s.db_url) as conn:
        task = conn.execute("SELECT task_id::text FROM archives WHERE id = %s", (s.archives["tides"],)).fetchone()[0]
    link = {"user": "organization:acme", "relation": "parent", "object": f"capture_job:{task}"}
    s.fga.write(deletes=[link])
    try:
        whole = urls(find(s, q="lighthouse"))
        assert set(whole) == {"https://harbour.example/keeper", "https://coast.example/old"}
        pages = [find(s, q="lighthouse", size=1, page=n).json() for n in (1, 2, 3)]
        assert [p["hits"][0]["url"] for p in pages[:2]] == whole
        assert [p["more"] for p in pages] == [True, False, False] and pages[2]["hits"] == []
    finally:
        s.fga.write([link])


class _Scope:
    """acme's scope without OpenFGA: for checking what reaches Postgres."""

    async def member_organizations(self, identity):
        return ["acme"]

    async def shared_with(self, identity):
        return set()

    async def checked_viewable(self, identity, ids):
        return set(ids)


def test_the_candidate_statement_is_planned_for_its_own_words_never_prepared(indexed):
    """psycopg prepares a text after 5 runs and Postgres may then use a generic plan that cannot
    see the words (a rare word walked every organization like a common one: seconds at 100,000
    pages). Ten searches of one shape leave no prepared candidate statement on the connection."""
    import asyncio

    from ledger.api.identity import Identity
    from ledger.db.pool import open_pool
    from ledger.search.query import parse, search

    async def go() -> tuple[list[list[str]], int]:
        pool = await open_pool(indexed.db_url, max_size=1)
        try:
            seen = []
            for word in ["lighthouse", "keeper", "tide", "museum", "lamp"] * 2:
                got = await search(pool, _Scope(), Identity("alice", ["acme"]), parse({"q": word}))
                seen.append([h["url"] for h in got["hits"]])
            async with pool.connection() as conn:
                row = await (await conn.execute(
                    "SELECT count(*) AS n FROM pg_prepared_statements WHERE statement LIKE '%%ts_rank_cd%%'")).fetchone()
            return seen, row["n"]
        finally:
            await pool.close()

    seen, prepared = asyncio.run(go())
    assert prepared == 0
    assert seen[0] == seen[5] and "https://harbour.example/keeper" in seen[0] and seen[3] == ["https://coast.example/old"]


def test_a_pages_tsvector_stays_in_its_row_and_its_body_goes_out_of_line(indexed):
    """Decision 381: tsv stays in the row uncompressed (every `@@` of a newest-first walk, every
    phrase recheck and every ts_rank_cd reads it) and the body goes out of line uncompressed
    (read only for a page's snippets). A page of 200 distinct words (~3 KB of body, ~3 KB of
    tsv): with Postgres' defaults both were compressed and tsv moved to TOAST."""
    s = indexed
    words = " ".join(f"quay{n:03d} jetty" for n in range(200))
    url = "https://coast.example/long"
    s.admit("long", org="acme", crawl=s.crawls["b"], url=url, timestamp="2026-09-24T12:00:00Z",
            body=html_page(url, f"<html lang=en><title>Long page</title><body><p>{words}</p></body></html>"))
    s.wait_outbox()
    assert index(s, s.crawls["b"]).json()["indexed"] == 1
    with psycopg.connect(s.db_url) as conn:
        toast = conn.execute("SELECT reltoastrelid::regclass::text FROM pg_class WHERE oid = 'archive_text'::regclass").fetchone()[0]
        row = conn.execute("SELECT pg_column_compression(tsv), pg_column_compression(body), octet_length(body),"
                           " length(tsv) FROM archive_text WHERE archive_id = %s", (s.archives["long"],)).fetchone()
        toasted = conn.execute(f"SELECT coalesce(sum(octet_length(chunk_data)), 0) FROM {toast}").fetchone()[0]
    assert row[0] is None and row[1] is None  # neither compressed
    assert row[2] > 2500 and row[3] >= 200
    assert toasted == row[2]  # the TOAST table holds this body and nothing else: its tsv is in the row
    assert urls(find(s, q="\"quay150 jetty\"")) == [url]


def test_a_query_is_checked_and_parsed_in_one_round_trip(indexed):
    """The checks (no words, only stop words, only exclusions) and the parse by every
    configuration in use are one statement: a round trip less before the candidates."""
    import asyncio

    from ledger.db.pool import open_pool
    from ledger.search.query import BadQuery, parsed_queries

    class Counting:
        def __init__(self, conn):
            self.conn, self.calls = conn, 0

        async def execute(self, *args, **kwargs):
            self.calls += 1
            return await self.conn.execute(*args, **kwargs)

    async def go():
        pool = await open_pool(indexed.db_url, max_size=1)
        out = []
        try:
            for text in ("lighthouse keeper", "the and of", "-lighthouse", "!!!"):
                async with pool.connection() as conn:
                    counting = Counting(conn)
                    try:
                        got = await parsed_queries(counting, text)
                    except BadQuery as exc:
                        got = str(exc)
                    out.append((counting.calls, got))
        finally:
            await pool.close()
        return out

    (n1, parsed), (n2, stop), (n3, neg), (n4, none) = asyncio.run(go())
    assert (n1, n2, n3, n4) == (1, 1, 1, 1)
    assert {c for c, _ in parsed} >= {"english", "german"} and "only stop words" in stop
    assert "only excludes" in neg and "no words" in none


def test_common_and_rare_texts_find_the_same_newest_window(indexed):
    """Decision 381: a text the planner expects in ≥ 1 % of the pages is matched by
    ``ts_match_vq`` (the GIN hidden: every branch walks newest first); the candidates are the
    same, in the same order, as with ``@@`` and the planner's own plan, for words, phrases,
    exclusions, OR and filters; with no statistics yet (``reltuples`` ≤ 0) the planner decides."""
    import asyncio

    from ledger.db.pool import open_pool
    from ledger.search.query import candidate_sql, parse, parsed_and_pages, walk_only

    s = indexed
    with psycopg.connect(s.db_url, autocommit=True) as conn:
        conn.execute("ANALYZE archive_text")
    texts = [{"q": "lighthouse"}, {"q": "keeper"}, {"q": '"lighthouse keeper"'}, {"q": "lighthouse -museum"},
             {"q": "tide OR museum"}, {"q": "lighthouse", "host": "harbour.example"},
             {"q": "lighthouse", "from": "2026-01-01", "to": "2026-12-31"}, {"q": "Leuchttürme"}]

    async def go():
        pool = await open_pool(s.db_url, max_size=1)
        out = []
        try:
            async with pool.connection() as conn:
                for params in texts:
                    query = parse(params)
                    parsed, pages = await parsed_and_pages(conn, query.text)
                    got = []
                    for walk in (False, True):
                        sql, args = candidate_sql(parsed, ["acme", "contoso"], [], query, walk)
                        assert ("ts_match_vq" in sql) is walk and ("@@" in sql) is not walk
                        got.append([r["id"] for r in await (await conn.execute(sql, args, prepare=False)).fetchall()])
                    out.append((params, got, pages, await walk_only(conn, parsed, pages), await walk_only(conn, parsed, -1)))
        finally:
            await pool.close()
        return out

    for params, (planned, walked), pages, walk, unknown in asyncio.run(go()):
        assert planned == walked and planned, params
        assert pages > 0 and walk is True and unknown is False  # any matching word is ≥ 1 % of a few pages
