"""The streamed frontier insert (issue 14, third round): the level report scopes chunk n + 1
while Postgres inserts chunk n (``ledger.crawl.levels.STREAM_CHUNK_LINKS``). Chunked or not,
the outcome is the same — answer, drops, discovered count, rows and their order — with
duplicates, traps, query-parameter rules and the per-host cap spread over chunks; a hash
collision across chunks keeps both URLs; a failure in a later chunk leaves nothing recorded.
The set-based tests (test_level_report_sets, test_frontier_exact) run again here with chunks
of two links."""

from __future__ import annotations

import types

import psycopg
import pytest

import ledger.crawl.frontier as frontier
import ledger.crawl.levels as levels
from tests.fixtures.ledger import ledger_settings, open_ledger
from tests.ledger import test_frontier_exact, test_level_report_sets
from tests.ledger.test_frontier_exact import collide  # noqa: F401 - fixture
from tests.ledger.test_level_report_sets import settings  # noqa: F401 - fixture (per-host cap 6)
from tests.ledger.test_level_reports import WHO, post, report, rows, start, store_of

pytestmark = pytest.mark.anyio
A = "https://a.test"
TOKEN = "0123456789abcdef0123"


@pytest.fixture
def rules(migrated_db_url, ledger_fga, fake_webhook, s3_server):
    return ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url, s3_bucket=s3_server.bucket,
                           max_pages_per_host=12, trap_query_variants=3)


@pytest.fixture
def chunk(monkeypatch):
    """Set the chunk size (links per streamed INSERT)."""
    def set_size(n: int) -> None:
        monkeypatch.setattr(levels, "STREAM_CHUNK_LINKS", n)
    return set_size


def links_of_level_0() -> list[dict]:
    """One level's links touching every rule, in an order where chunks of 2–3 split each case."""
    hrefs = [
        f"{A}/p1", f"{A}/p2", f"{A}/", f"{A}/p1#again",  # known seed; a duplicate in a later chunk
        "https://b.test/out", f"{A}/q?v=1", f"{A}/q?v=2",  # out of scope; variants of one path
        f"{A}/s?sid={TOKEN}",  # a session page before its sessionless form…
        f"{A}/x/y/x/y/x/y/",  # repeated segment
        f"{A}/q?v=3", f"{A}/q?v=4", f"{A}/s",  # the fourth variant: over the cap of 3
        f"{A}/" + "l" * 2100,  # too long
        "javascript:void(0)", f"{A}/p3", f"{A}/p2", f"{A}/p4",
        f"{A}/s?sid={TOKEN[::-1]}",  # …and a session variant after it
    ] + [f"{A}/h{i}" for i in range(10)]  # the per-host cap (12) cuts these
    links = [{"href": h} for h in hrefs]
    links.insert(3, {"href": f"{A}/nofollow", "rel": "nofollow"})
    return links


async def run_crawl(settings, s3_server) -> tuple[list, dict, list]:
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, maxDepth=3, maxPages=1000)
        r = await post(h, crawl_id, report(0, [{"url": f"{A}/", "status": "captured", "links": links_of_level_0()}]))
        assert r.status_code == 200, r.text
        first = r.json()
        urls = [n["url"] for n in first["next"]]
        r = await post(h, crawl_id, report(1, [
            {"url": urls[0], "status": "captured", "links": [{"href": f"{A}/q?v=9"}, {"href": f"{A}/p5"},
                                                             {"href": urls[1]}, {"href": f"{A}/s?sid={TOKEN}x"}]},
        ] + [{"url": u, "status": "captured", "links": []} for u in urls[1:]]))
        assert r.status_code == 200, r.text
        crawl = await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)
    view = crawl.json()
    db_rows = rows(settings.database_url, "SELECT url, depth, state FROM crawl_pages WHERE crawl_id = %s ORDER BY id",
                   crawl_id)
    return [first, r.json()], {"drops": view.get("drops"), "discovered": view.get("pagesDiscovered")}, db_rows


async def test_chunked_and_whole_give_the_same_outcome(rules, s3_server, chunk):
    chunk(100_000)
    whole = await run_crawl(rules, s3_server)
    answers, counters, _ = whole
    assert [n["url"] for n in answers[0]["next"]][:6] == [f"{A}/p1", f"{A}/p2", f"{A}/q?v=1", f"{A}/q?v=2",
                                                          f"{A}/s?sid={TOKEN}", f"{A}/q?v=3"]
    for reason in ("query_variants", "repeated_segment", "url_too_long", "session_id", "max_pages_per_host",
                   "nofollow", "out_of_scope", "invalid_url"):
        assert counters["drops"].get(reason), (reason, counters)
    for size in (1, 2, 3, 7):
        chunk(size)
        assert await run_crawl(rules, s3_server) == whole, size


async def test_a_collision_across_chunks_keeps_both(settings, s3_server, chunk, monkeypatch):
    """Y's first hash is X's, and they travel in different chunks: Y lands on its probe chain."""
    x, y = f"{A}/x", f"{A}/y"
    real = frontier.url_hash
    monkeypatch.setattr(frontier, "url_hash", lambda key: real(x) if key == y else real(key))
    chunk(2)
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, maxDepth=3, maxPages=1000)
        links = [{"href": x}, {"href": f"{A}/a"}, {"href": f"{A}/b"}, {"href": y}, {"href": f"{A}/c"}]
        r = await post(h, crawl_id, report(0, [{"url": f"{A}/", "status": "captured", "links": links}]))
        assert r.status_code == 200, r.text
        assert [n["url"] for n in r.json()["next"]] == [x, f"{A}/a", f"{A}/b", y, f"{A}/c"]
    stored = dict(rows(settings.database_url, "SELECT url, url_hash FROM crawl_pages WHERE depth = 1"))
    assert bytes(stored[y]) == frontier.probe_hash(y, 1) and bytes(stored[x]) == real(x)


async def test_a_failure_in_a_later_chunk_records_nothing(settings, s3_server, chunk):
    """The third chunk's INSERT fails in Postgres while the first two are already in: the
    report's transaction rolls back all of it, and the flow's retry then succeeds."""
    db = settings.database_url
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                     " IF NEW.url LIKE '%%/boom' THEN RAISE EXCEPTION 'boom'; END IF; RETURN NEW; END $$")
        conn.execute("CREATE TRIGGER boom BEFORE INSERT ON crawl_pages FOR EACH ROW EXECUTE FUNCTION boom()")
    chunk(2)
    body = report(0, [{"url": f"{A}/", "status": "captured",
                       "links": [{"href": f"{A}/p{i}"} for i in range(4)] + [{"href": f"{A}/boom"}]}])
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, maxDepth=3, maxPages=1000)
        r = await post(h, crawl_id, body)
        assert (r.status_code, r.json()) == (500, {"error": "internal error"})
        assert rows(db, "SELECT url, state FROM crawl_pages") == [(f"{A}/", "pending")]
        assert rows(db, "SELECT count(*) FROM crawl_level_reports")[0][0] == 0
        assert rows(db, "SELECT current_depth, pages_discovered, state FROM crawls") == [(0, 0, "running")]
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute("DROP TRIGGER boom ON crawl_pages")
        r = await post(h, crawl_id, body)  # the flow's retry
        assert r.status_code == 200, r.text
        assert len(r.json()["next"]) == 5


async def test_a_ledger_failure_while_chunks_are_in_flight_records_nothing(settings, s3_server, chunk, monkeypatch):
    """The ledger fails making the third chunk while Postgres holds the first two (pipeline
    mode): the pipeline is closed, the transaction rolled back, the retry succeeds."""
    real = levels.trap_reason

    def broken(url, key=None):
        if url.endswith("/p4"):
            raise RuntimeError("trap screen broke")
        return real(url, key)

    chunk(2)
    db = settings.database_url
    body = report(0, [{"url": f"{A}/", "status": "captured", "links": [{"href": f"{A}/p{i}"} for i in range(5)]}])
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, maxDepth=3, maxPages=1000)
        monkeypatch.setattr(levels, "trap_reason", broken)
        r = await post(h, crawl_id, body)
        assert (r.status_code, r.json()) == (500, {"error": "internal error"})
        assert rows(db, "SELECT url FROM crawl_pages") == [(f"{A}/",)]
        assert rows(db, "SELECT count(*) FROM crawl_level_reports")[0][0] == 0
        monkeypatch.setattr(levels, "trap_reason", real)
        r = await post(h, crawl_id, body)
        assert r.status_code == 200 and len(r.json()["next"]) == 5, r.text


@pytest.fixture
def two_links_a_chunk(monkeypatch):
    monkeypatch.setattr(levels, "STREAM_CHUNK_LINKS", 2)


def _copy(func: types.FunctionType, name: str) -> types.FunctionType:
    """A new function object: a mark applied to it must not reach the original module's test
    (pytest keeps marks on the function, so marking the imported one broke it when collected later)."""
    twin = types.FunctionType(func.__code__, func.__globals__, name, func.__defaults__, func.__closure__)
    twin.__kwdefaults__, twin.__qualname__ = func.__kwdefaults__, name
    twin.__dict__.update({k: list(v) if isinstance(v, list) else v for k, v in func.__dict__.items()})
    return twin


# the set-based and exact-dedup tests again, every report in chunks of two links
for _module in (test_level_report_sets, test_frontier_exact):
    for _name in dir(_module):
        if _name.startswith("test_"):
            _twin = _copy(getattr(_module, _name), f"{_name}__chunks_of_2")
            globals()[_twin.__name__] = pytest.mark.usefixtures("two_links_a_chunk")(_twin)
