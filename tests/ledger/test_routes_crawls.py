"""Crawl routes over the app (real Postgres, real OpenFGA server, fake Windmill webhook over
HTTP): reference/ledger.md §12.1 translated, plus waggle's script and seed rules."""

from __future__ import annotations

import asyncio
import uuid

import psycopg
import pytest

from tests.fixtures.ledger import LedgerHarness, ledger_settings, open_ledger

pytestmark = pytest.mark.anyio
WHO = LedgerHarness.who()
NOBODY = LedgerHarness.who("mallory", "acme")


@pytest.fixture
def settings(migrated_db_url, ledger_fga, fake_webhook):
    return ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url)


def rows(db_url, sql, *args):
    with psycopg.connect(db_url) as conn:
        return conn.execute(sql, args).fetchall()


@pytest.mark.parametrize("body,needle", [
    ({"seeds": []}, "seeds"),
    ({"seeds": ["https://a.test/"], "signed": True}, "unknown field signed"),
    ({"seeds": ["https://a.test/"], "signing": "yes"}, "signing"),  # a JSON boolean, never coerced
    ({"seeds": ["https://a.test/"], "scope": "same-site"}, "scope"),
    ({"seeds": ["https://a.test/"], "maxPages": 0}, "maxPages"),
    ({"seeds": ["https://a.test/"], "maxDepth": -1}, "maxDepth"),
    ({"seeds": ["https://a.test/"], "maxDepth": 11}, "maxDepth"),
    ({"seeds": ["https://a.test/"], "hostParallelism": 0}, "hostParallelism"),
    ({"seeds": ["https://a.test/"], "perHostDelayMs": 600001}, "perHostDelayMs"),
    ({"seeds": ["https://a.test/"], "fromTargets": {}}, "exactly one of seeds or fromTargets"),
    ({}, "exactly one of seeds or fromTargets"),
    ({"fromTargets": {"limit": 0}}, "limit"),
    ({"seeds": ["https://a.test/"], "scripts": [{"name": "x", "phase": "behavior"}]}, "source"),
    # numeric settings are strict JSON integers: never coerced from strings, floats or booleans
    ({"seeds": ["https://a.test/"], "perHostDelayMs": "500"},
     'perHostDelayMs: must be a JSON integer, not the string "500": send 500 without quotes'),
    ({"seeds": ["https://a.test/"], "perHostDelayMs": 500.0}, "perHostDelayMs: must be a JSON integer, not 500.0"),
    ({"seeds": ["https://a.test/"], "maxPages": True}, "maxPages: must be a JSON integer, not true"),
    ({"seeds": ["https://a.test/"], "maxDepth": "1"}, "maxDepth: must be a JSON integer"),
    ({"seeds": ["https://a.test/"], "hostParallelism": "2"}, "hostParallelism: must be a JSON integer"),
    ({"fromTargets": {"limit": "3"}}, "fromTargets.limit: must be a JSON integer"),
])
async def test_validation_400_before_authentication(settings, body, needle):
    async with open_ledger(settings) as h:
        r = await h.client.post("/api/crawls", json=body)  # anonymous: validation still comes first
        assert r.status_code == 400, r.text
        assert needle in r.json()["error"]
        assert rows(settings.database_url, "SELECT count(*) FROM crawls")[0][0] == 0


@pytest.mark.parametrize("content,content_type,needle", [
    (b"seeds=https://a.test/", "application/json", "the body is not JSON (Expecting value at character 0)"),
    (b'{"seeds": ["https://a.test/"]', "application/json", "the body is not JSON ("),
    (b"seeds=https://a.test/", "application/x-www-form-urlencoded", "the body is not JSON: send a JSON object"),
    (b'["https://a.test/"]', "application/json", "the body must be a JSON object, not an array"),
])
async def test_a_body_that_is_no_json_object_says_so(settings, content, content_type, needle):
    async with open_ledger(settings) as h:
        r = await h.client.post("/api/crawls", content=content, headers={**WHO, "content-type": content_type})
    assert r.status_code == 400, r.text
    assert needle in r.json()["error"]
    assert list(r.json()["fields"]) == ["body"]  # never a character position as a field name
    assert rows(settings.database_url, "SELECT count(*) FROM crawls")[0][0] == 0


async def test_a_seed_given_twice_is_kept_once_in_order(settings, fake_webhook):
    seeds = ["https://b.test/", "https://a.test/x", "https://b.test/", "HTTPS://A.test/x", "https://c.test/"]
    async with open_ledger(settings) as h:
        r = await h.client.post("/api/crawls", json={"seeds": seeds, "scripts": []}, headers=WHO)
        assert r.status_code == 202, r.text
        view = (await h.client.get(f"/api/crawls/{r.json()['crawlId']}", headers=WHO)).json()
    assert view["seeds"] == ["https://b.test/", "https://a.test/x", "https://c.test/"]
    assert view["maxPages"] == 30  # max(30, #seeds): counted once each
    assert [f["url"] for f in fake_webhook.bodies()[0]["frontier"]] == view["seeds"]


@pytest.mark.parametrize("seed", [
    "https://a.test/" + "p" * 2100,  # as given
    "https://a.test/" + "é" * 700,   # 715 characters as given, 4,215 once serialized (%C3%A9 each)
])
async def test_a_seed_longer_than_2048_characters_is_refused_and_nothing_created(settings, fake_webhook, seed):
    async with open_ledger(settings) as h:
        r = await h.client.post("/api/crawls", json={"seeds": ["https://a.test/ok", seed], "scripts": []},
                                headers=WHO)
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert "seeds longer than 2,048 characters are refused" in error and "shorten it" in error
        assert len(error) < 400  # the seed is named by its start, not echoed whole
        assert r.json()["fields"]["seeds"] == error
        assert rows(settings.database_url, "SELECT count(*) FROM crawls")[0][0] == 0
        assert rows(settings.database_url, "SELECT count(*) FROM crawl_pages")[0][0] == 0
        assert fake_webhook.bodies() == []
        ok = await h.client.post("/api/crawls", json={"seeds": ["https://a.test/" + "p" * 2033], "scripts": []},
                                 headers=WHO)
        assert ok.status_code == 202  # 2,048 characters exactly: still a seed


async def test_a_saved_target_longer_than_2048_characters_refuses_the_crawl(settings, fake_webhook):
    with psycopg.connect(settings.database_url) as conn:  # saved before targets add refused such URLs
        conn.execute("INSERT INTO capture_targets (url, org_id) VALUES (%s, 'acme')", ("https://a.test/" + "q" * 2100,))
    async with open_ledger(settings) as h:
        r = await h.client.post("/api/crawls", json={"fromTargets": {}, "scripts": []}, headers=WHO)
        assert r.status_code == 400, r.text
        assert "saved targets longer than 2,048 characters" in r.json()["error"]
        assert list(r.json()["fields"]) == ["fromTargets"]
        assert rows(settings.database_url, "SELECT count(*) FROM crawls")[0][0] == 0


@pytest.mark.parametrize("seed", ["http://user:secretpw@127.0.0.1:8765/index.html", "https://user@a.test/"])
async def test_a_seed_with_credentials_is_refused_and_nothing_created(migrated_db_url, ledger_fga, fake_webhook, seed):
    # the trial's local site: private hosts allowed, so only the credentials refuse it
    settings = ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url, allow_private_hosts=True)
    async with open_ledger(settings) as h:
        r = await h.client.post("/api/crawls", json={"seeds": ["https://a.test/ok", seed], "scripts": []},
                                headers=WHO)
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert "credentials in a URL are not crawled or archived; remove user:password@" in error
        assert "secretpw" not in r.text and "user@" not in error  # named by its origin only
        assert r.json()["fields"] == {"seeds": error}
        assert rows(settings.database_url, "SELECT count(*) FROM crawls")[0][0] == 0
        assert rows(settings.database_url, "SELECT count(*) FROM crawl_pages")[0][0] == 0
        assert fake_webhook.bodies() == []


async def test_every_unusable_seed_is_named_in_one_answer(migrated_db_url, ledger_fga, fake_webhook):
    """Not one kind of problem per submit (the trial's form took four): a seed that is no URL and
    one with credentials are both named at once, nothing created."""
    settings = ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url, allow_private_hosts=True)
    async with open_ledger(settings) as h:
        r = await h.client.post("/api/crawls", json={"seeds": ["not a url", "http://user:pw@127.0.0.1:8765/"],
                                                     "scripts": []}, headers=WHO)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert "unusable: 'not a url'" in error and "user:password@ are refused" in error and ":pw@" not in error, error
    assert rows(settings.database_url, "SELECT count(*) FROM crawls")[0][0] == 0


async def test_a_saved_target_with_credentials_refuses_the_crawl(settings, fake_webhook):
    with psycopg.connect(settings.database_url) as conn:  # saved before targets add refused such URLs
        conn.execute("INSERT INTO capture_targets (url, org_id) VALUES (%s, 'acme')", ("https://u:pw@a.test/",))
    async with open_ledger(settings) as h:
        r = await h.client.post("/api/crawls", json={"fromTargets": {}, "scripts": []}, headers=WHO)
        assert r.status_code == 400, r.text
        assert "saved targets with user:password@ are refused" in r.json()["error"]
        assert list(r.json()["fields"]) == ["fromTargets"]
        assert rows(settings.database_url, "SELECT count(*) FROM crawls")[0][0] == 0


async def test_max_pages_above_configured_limit_is_400(migrated_db_url, ledger_fga, fake_webhook):
    settings = ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url, max_pages=50)
    async with open_ledger(settings) as h:
        r = await h.client.post("/api/crawls", json={"seeds": ["https://a.test/"], "maxPages": 51}, headers=WHO)
        assert r.status_code == 400 and "WAGGLE_MAX_PAGES" in r.json()["error"]
        r = await h.client.post("/api/crawls", json={"seeds": [f"https://a.test/{i}" for i in range(51)],
                                                     "scripts": []}, headers=WHO)
        assert r.status_code == 400 and "51 seeds" in r.json()["error"]
        r = await h.client.post("/api/crawls", json={"seeds": [f"https://a.test/{i}" for i in range(40)],
                                                     "scripts": []}, headers=WHO)
        assert r.status_code == 202
        view = (await h.client.get(f"/api/crawls/{r.json()['crawlId']}", headers=WHO)).json()
        assert view["maxPages"] == 40  # default max(30, number of seeds)


async def test_body_not_json_and_bad_path_id(settings):
    async with open_ledger(settings) as h:
        r = await h.client.post("/api/crawls", content=b"{nope", headers={**WHO, "content-type": "application/json"})
        assert r.status_code == 400 and "JSON" in r.json()["error"]
        r = await h.client.get("/api/crawls/not-a-uuid", headers=WHO)
        assert r.status_code == 400


async def test_per_host_delay_zero_is_allowed(settings, fake_webhook):
    async with open_ledger(settings) as h:
        r = await h.client.post("/api/crawls", json={"seeds": ["https://a.test/"], "perHostDelayMs": 0, "scripts": []},
                                headers=WHO)
        assert r.status_code == 202
        assert fake_webhook.bodies()[0]["per_host_delay_ms"] == 0


async def test_no_identity_401_and_denied_404(settings, fake_webhook):
    body = {"seeds": ["https://a.test/"], "scripts": []}
    async with open_ledger(settings) as h:
        r = await h.client.post("/api/crawls", json=body)
        assert (r.status_code, r.json()) == (401, {"error": "unauthenticated"})
        r = await h.client.post("/api/crawls", json=body, headers=NOBODY)
        assert (r.status_code, r.json()) == (404, {"error": "not found"})
        r = await h.client.post("/api/crawls", json=body, headers=LedgerHarness.who("alice", ""))
        assert r.status_code == 404  # no organizations → no Check, no permission
    assert fake_webhook.calls == []
    assert rows(settings.database_url, "SELECT count(*) FROM crawls")[0][0] == 0


async def test_seed_rules(settings, fake_webhook):
    async with open_ledger(settings) as h:
        r = await h.client.post("/api/crawls", json={"seeds": ["ftp://example.com/x"], "scripts": []}, headers=WHO)
        assert r.status_code == 400 and "ftp://example.com/x" in r.json()["error"]
        r = await h.client.post("/api/crawls", json={"seeds": ["https://a.test/", "not a url"], "scripts": []},
                                headers=WHO)
        assert r.status_code == 400 and "not a url" in r.json()["error"]
        r = await h.client.post("/api/crawls", json={"seeds": ["http://127.0.0.1:8080/"], "scripts": []},
                                headers=WHO)
        assert r.status_code == 400 and "127.0.0.1" in r.json()["error"]
        assert fake_webhook.calls == []
        r = await h.client.post("/api/crawls", json={
            "seeds": ["https://a.example.com/1", "https://b.example.com/2", "https://a.example.com/1#dup",
                      "https://example.com/start#top"], "scripts": []}, headers=WHO)
        assert r.status_code == 202
        crawl_id = r.json()["crawlId"]
    (body,) = fake_webhook.bodies()
    assert [f["url"] for f in body["frontier"]] == [
        "https://a.example.com/1", "https://b.example.com/2", "https://example.com/start"]
    assert all(f["lastFinishedAt"] is None for f in body["frontier"])
    (seeds,) = rows(settings.database_url, "SELECT seeds FROM crawls WHERE id = %s", uuid.UUID(crawl_id))[0]
    assert seeds[-1] == "https://example.com/start"


async def test_private_seeds_allowed_when_opted_out(migrated_db_url, ledger_fga, fake_webhook):
    settings = ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url, allow_private_hosts=True)
    async with open_ledger(settings) as h:
        r = await h.client.post("/api/crawls", json={"seeds": ["http://127.0.0.1:8080/"], "scripts": []}, headers=WHO)
        assert r.status_code == 202


async def test_defaults_stored_and_webhook_body(settings, fake_webhook):
    async with open_ledger(settings) as h:
        async with h.services.pool.connection() as conn:
            from ledger.crawl.scripts import load_defaults
            await load_defaults(conn)
        r = await h.client.post("/api/crawls", json={"seeds": ["https://a.test/"]}, headers=WHO)
        assert r.status_code == 202
        crawl_id = r.json()["crawlId"]
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
    assert (view["state"], view["scope"], view["maxDepth"], view["maxPages"], view["perHostDelayMs"],
            view["hostParallelism"]) == ("running", "origin", 2, 30, 2000, 4)
    assert [s["id"] for s in view["scripts"]] == ["autoscroll"]
    assert "source" not in view["scripts"][0]
    (call,) = fake_webhook.calls
    assert call["headers"]["authorization"] == "Bearer wm-token"
    body = call["body"]
    assert set(body) == {"crawl_id", "depth", "frontier", "per_host_delay_ms", "host_parallelism",
                         "capture_formats", "signing", "scripts", "links_per_page", "blocked_after", "delay_factor"}
    assert body["delay_factor"] == 5.0  # a slow host's gap factor (decision 242)
    assert body["links_per_page"] == 1000  # WAGGLE_REPORT_LINKS_PER_PAGE (level report v2)
    assert body["capture_formats"] == {"png": False, "webp": False, "html": False, "links": True,
                                       "mhtml": False, "wacz": True}
    assert body["signing"] is False and body["depth"] == 0 and body["crawl_id"] == crawl_id
    (script,) = body["scripts"]
    assert set(script) == {"id", "version", "phase", "source", "sha256", "options"}
    import hashlib
    assert script["sha256"] == hashlib.sha256(script["source"].encode("utf-8")).hexdigest()
    assert view["lastJob"] == {"id": fake_webhook.job_ids[0], "depth": 0}


async def test_scripts_explicit_inline_unknown_and_empty_catalogue(settings, fake_webhook):
    async with open_ledger(settings) as h:
        r = await h.client.post("/api/crawls", json={"seeds": ["https://a.test/"]}, headers=WHO)
        assert r.status_code == 400 and "load-defaults" in r.json()["error"]  # empty default set
        async with h.services.pool.connection() as conn:
            from ledger.crawl.scripts import add_script
            await add_script(conn, "autoscroll", "1;")
            await add_script(conn, "autoscroll", "2;")
        r = await h.client.post("/api/crawls", json={"seeds": ["https://a.test/"],
                                                     "scripts": ["autoscroll@1", "nope", "gone@3"]}, headers=WHO)
        assert r.status_code == 400
        assert "nope" in r.json()["error"] and "gone@3" in r.json()["error"]
        assert rows(settings.database_url, "SELECT count(*) FROM crawls")[0][0] == 0
        r = await h.client.post("/api/crawls", json={"seeds": ["https://a.test/"], "scripts": [
            {"name": "banner", "phase": "preload", "source": "document.title;"}, "autoscroll@1", "autoscroll"]},
            headers=WHO)
        assert r.status_code == 202, r.text
    sent = fake_webhook.bodies()[0]["scripts"]
    assert [(s["id"], s["version"], s["phase"]) for s in sent] == [
        ("inline-banner", 1, "preload"), ("autoscroll", 1, "behavior"), ("autoscroll", 2, "behavior")]


async def test_empty_scripts_runs_nothing(settings, fake_webhook):
    async with open_ledger(settings) as h:
        r = await h.client.post("/api/crawls", json={"seeds": ["https://a.test/"], "scripts": [],
                                                     "maxDepth": 0}, headers=WHO)
        assert r.status_code == 202
    body = fake_webhook.bodies()[0]
    assert body["scripts"] == []
    assert body["capture_formats"]["links"] is False  # no level can follow a depth-0 crawl


async def test_second_crawl_runs_beside_the_first_and_waits_for_its_host(settings, fake_webhook):
    """Issue 12: no 409 for a running crawl. Both crawls run; the second one's only host is
    leased to the first one's level, so its level waits (no webhook) instead of touching it."""
    async with open_ledger(settings) as h:
        first = await h.client.post("/api/crawls", json={"seeds": ["https://a.test/"], "scripts": []}, headers=WHO)
        second = await h.client.post("/api/crawls", json={"seeds": ["https://a.test/x"], "scripts": []}, headers=WHO)
        third = await h.client.post("/api/crawls", json={"seeds": ["https://b.test/"], "scripts": []}, headers=WHO)
        assert [r.status_code for r in (first, second, third)] == [202, 202, 202]
        views = [(await h.client.get(f"/api/crawls/{r.json()['crawlId']}", headers=WHO)).json()
                 for r in (first, second, third)]
    assert [v["state"] for v in views] == ["running"] * 3
    assert sorted(b["crawl_id"] for b in fake_webhook.bodies()) == sorted(
        [first.json()["crawlId"], third.json()["crawlId"]])
    state = dict(rows(settings.database_url, "SELECT id::text, level_state FROM crawls"))
    assert state[second.json()["crawlId"]] == "waiting"
    leases = rows(settings.database_url, "SELECT host, crawl_id::text FROM host_leases ORDER BY host")
    assert leases == [("a.test", first.json()["crawlId"]), ("b.test", third.json()["crawlId"])]


async def test_org_limit_429_race_free(migrated_db_url, ledger_fga, fake_webhook):
    """``WAGGLE_MAX_RUNNING_CRAWLS_PER_ORG``: concurrent starts never exceed it (advisory lock
    per organization); another organization is not counted; a finished crawl frees a place."""
    settings = ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url, max_running_crawls_per_org=2)
    ledger_fga.write(writes=["user:bob submitter organization:globex"], ignore_existing=True)
    async with open_ledger(settings) as h:
        answers = await asyncio.gather(*[
            h.client.post("/api/crawls", json={"seeds": [f"https://h{i}.test/"], "scripts": []}, headers=WHO)
            for i in range(6)])
        codes = sorted(a.status_code for a in answers)
        assert codes == [202, 202, 429, 429, 429, 429], [a.text for a in answers]
        refused = next(a for a in answers if a.status_code == 429).json()
        assert "WAGGLE_MAX_RUNNING_CRAWLS_PER_ORG (2)" in refused["error"] and refused["limit"] == 2
        other = await h.client.post("/api/crawls", json={"seeds": ["https://o.test/"], "scripts": []},
                                    headers=LedgerHarness.who("bob", "globex"))
        assert other.status_code == 202, other.text  # another organization: its own limit
        done = next(a for a in answers if a.status_code == 202).json()["crawlId"]
        await h.client.post(f"/api/crawls/{done}/failed", json={"reason": "operator"}, headers=WHO)
        again = await h.client.post("/api/crawls", json={"seeds": ["https://h9.test/"], "scripts": []}, headers=WHO)
        assert again.status_code == 202, again.text
    assert rows(settings.database_url, "SELECT count(*) FROM crawls WHERE org_id = 'acme' AND state = 'running'"
                )[0][0] == 2


async def test_get_unknown_404_and_failures_listed(settings, fake_webhook):
    fake_webhook.mode = "noid"
    async with open_ledger(settings) as h:
        r = await h.client.get(f"/api/crawls/{uuid.uuid4()}", headers=WHO)
        assert (r.status_code, r.json()) == (404, {"error": "not found"})
        crawl_id = (await h.client.post("/api/crawls", json={
            "seeds": ["https://nonexistent.invalid/", "https://a.test/"], "scripts": [], "maxDepth": 0},
            headers=WHO)).json()["crawlId"]
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
        assert view["lastJob"] is None and view["failures"] == []  # no job id in the answer → none stored
        r = await h.client.post(f"/api/crawls/{crawl_id}/pages", json={"depth": 0, "results": [
            {"url": "https://nonexistent.invalid/", "status": "failed", "skipReason": "net::ERR_NAME_NOT_RESOLVED",
             "failureClass": "permanent"},
            {"url": "https://a.test/", "status": "captured"}],
            "compiled": {"typescript": "6.0.3", "hostTypes": "v0.2.0", "scripts": []}}, headers=WHO)
        assert r.json() == {"next": [], "stopReason": "max_depth"}
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
        listed = (await h.client.get("/api/crawls", headers=WHO)).json()["crawls"]
    assert view["failures"] == [{"url": "https://nonexistent.invalid/", "depth": 0,
                                 "reason": "net::ERR_NAME_NOT_RESOLVED", "failureClass": "permanent"}]
    assert (view["state"], view["stopReason"], view["pagesCaptured"]) == ("succeeded", "max_depth", 1)
    assert view["finishedAt"].endswith("Z") and len(view["finishedAt"]) == 24
    assert [c["crawlId"] for c in listed] == [crawl_id]


TARGETS = [("https://a.test/1", True, "acme"), ("https://b.test/2", True, "acme"),
           ("https://c.test/3", False, "acme"), ("https://d.test/4", True, "other")]


def add_targets(db_url):
    with psycopg.connect(db_url) as conn:
        for url, enabled, org in TARGETS:
            conn.execute("INSERT INTO capture_targets (url, enabled, org_id) VALUES (%s, %s, %s)", (url, enabled, org))


async def test_from_targets(settings, fake_webhook):
    add_targets(settings.database_url)
    async with open_ledger(settings) as h:
        r = await h.client.post("/api/crawls", json={"fromTargets": {}, "scripts": []}, headers=WHO)
        assert r.status_code == 202
        crawl_id = r.json()["crawlId"]
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
        assert [f["url"] for f in fake_webhook.bodies()[0]["frontier"]] == ["https://a.test/1", "https://b.test/2"]
        assert view["maxDepth"] == 0 and view["maxPages"] >= 2
        await h.client.post(f"/api/crawls/{crawl_id}/failed", json={"reason": "test"}, headers=WHO)
        r = await h.client.post("/api/crawls", json={"fromTargets": {"limit": 1}, "maxDepth": 2, "scripts": []},
                                headers=WHO)
        view = (await h.client.get(f"/api/crawls/{r.json()['crawlId']}", headers=WHO)).json()
        assert view["maxDepth"] == 2
        assert len(fake_webhook.bodies()[1]["frontier"]) == 1


async def test_from_targets_none_enabled(settings):
    async with open_ledger(settings) as h:
        r = await h.client.post("/api/crawls", json={"fromTargets": {}, "scripts": []},
                                headers=LedgerHarness.who("alice", "acme"))
        assert r.status_code == 400 and "no enabled capture targets" in r.json()["error"]


async def test_close_failed(settings):
    async with open_ledger(settings) as h:
        crawl_id = (await h.client.post("/api/crawls", json={"seeds": ["https://a.test/"], "scripts": []},
                                        headers=WHO)).json()["crawlId"]
        r = await h.client.post(f"/api/crawls/{crawl_id}/failed", json={"reason": "x" * 2001}, headers=WHO)
        assert r.status_code == 400 and "reason" in r.json()["error"] and "2000" in r.json()["error"]
        r = await h.client.post(f"/api/crawls/{crawl_id}/failed", json={"reason": "r", "extra": 1}, headers=WHO)
        assert r.status_code == 400
        r = await h.client.post(f"/api/crawls/{crawl_id}/failed", json={"reason": "r"}, headers=NOBODY)
        assert r.status_code == 404
        r = await h.client.post(f"/api/crawls/{crawl_id}/failed", json={"reason": "[crawl_host] " + "y" * 1987},
                                headers=WHO)
        assert r.json() == {"closed": True}
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
        assert (view["state"], view["stopReason"]) == ("failed", "failed")
        assert len(view["error"]) == 2000
        r = await h.client.post(f"/api/crawls/{crawl_id}/failed", json={"reason": "again"}, headers=WHO)
        assert r.json() == {"closed": False}
        assert (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()["error"] == view["error"]
        r = await h.client.post(f"/api/crawls/{uuid.uuid4()}/failed", json={}, headers=WHO)
        assert r.json() == {"closed": False}
        # a closed crawl no longer blocks the next one
        r = await h.client.post("/api/crawls", json={"seeds": ["https://a.test/"], "scripts": []}, headers=WHO)
        assert r.status_code == 202
        r = await h.client.post(f"/api/crawls/{r.json()['crawlId']}/failed", json={}, headers=WHO)
        view = (await h.client.get("/api/crawls", headers=WHO)).json()["crawls"][0]
        assert view["error"] == "the flow failed without saying why"


async def test_index_404_for_an_unknown_crawl_and_when_search_is_off(settings):
    async with open_ledger(settings) as h:  # search is on by default (Postgres full-text search)
        r = await h.client.post(f"/api/crawls/{uuid.uuid4()}/index", headers=WHO)
        assert r.status_code == 404 and r.json() == {"error": "not found"}
    async with open_ledger(settings.model_copy(update={"search_url": "off"})) as h:
        r = await h.client.post(f"/api/crawls/{uuid.uuid4()}/index", headers=WHO)
        assert r.status_code == 404 and "WAGGLE_SEARCH_URL=off" in r.json()["error"]


async def test_crawl_routes_absent_without_webhook(migrated_db_url, ledger_fga):
    settings = ledger_settings(migrated_db_url, ledger_fga, None)
    async with open_ledger(settings) as h:
        r = await h.client.post("/api/crawls", json={"seeds": ["https://a.test/"]}, headers=WHO)
        assert r.status_code == 404
        assert r.json() == {"error": "Route POST:/api/crawls not found"}
        assert (await h.client.get("/healthz")).json() == {"status": "ok"}


async def test_another_organizations_crawl_is_not_found(settings, fake_webhook, ledger_fga):
    """Crawls of several organizations run side by side: a submitter of one organization can
    neither list, read, page through, report on nor close a crawl of another (404 as unknown)."""
    ledger_fga.write(writes=["user:carol submitter organization:initech"])
    carol = LedgerHarness.who("carol", "initech")
    async with open_ledger(settings) as h:
        crawl_id = (await h.client.post("/api/crawls", json={"seeds": ["https://a.test/"], "scripts": []},
                                        headers=WHO)).json()["crawlId"]
        mine = (await h.client.post("/api/crawls", json={"seeds": ["https://c.test/"], "scripts": []},
                                    headers=carol)).json()["crawlId"]
        listed = (await h.client.get("/api/crawls", headers=carol)).json()["crawls"]
        assert [c["crawlId"] for c in listed] == [mine]
        r = await h.client.post(f"/api/crawls/{crawl_id}/failed", json={"reason": "not yours"}, headers=carol)
        assert r.json() == {"closed": False}  # as for an unknown crawl
        for method, path, body in (("GET", "", None), ("GET", "/pages", None),
                                   ("POST", "/pages", {"depth": 0, "results": [], "compiled": {
                                       "typescript": "6.0.3", "hostTypes": "v0.2.0", "scripts": []}})):
            r = await h.client.request(method, f"/api/crawls/{crawl_id}{path}", json=body, headers=carol)
            assert (r.status_code, r.json()) == (404, {"error": "not found"}), (method, path, r.text)
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
        assert view["state"] == "running"  # the outsider's close did nothing
        both = (await h.client.get("/api/crawls", headers=LedgerHarness.who("alice", "acme,initech"))).json()
    assert {c["crawlId"] for c in both["crawls"]} == {crawl_id, mine}


async def test_failing_a_crawl_cancels_its_job_and_skips_its_pending_pages(settings, fake_webhook):
    """A failed crawl stops capturing: its Windmill job is cancelled (else the site keeps getting
    requests while another crawl takes the host) and its pages left pending become skipped."""
    async with open_ledger(settings) as h:
        crawl_id = (await h.client.post("/api/crawls", json={"seeds": ["https://a.test/", "https://b.test/"],
                                                              "scripts": []}, headers=WHO)).json()["crawlId"]
        job = fake_webhook.job_ids[-1]
        r = await h.client.post(f"/api/crawls/{crawl_id}/failed", json={"reason": "operator"}, headers=WHO)
        assert r.json() == {"closed": True}
        pages = (await h.client.get(f"/api/crawls/{crawl_id}/pages", headers=WHO)).json()["pages"]
    assert fake_webhook.cancelled == [job]
    assert {(p["state"], p["reason"]) for p in pages} == {
        ("skipped", "the crawl was failed before this page was captured")}
