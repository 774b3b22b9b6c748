"""Read tokens of one crawl for capture servers (decision 405): the flow asks for one with its own
token; the capture server's three reads (digests, previous capture, politeness) take it for that
crawl only; every other route — and every other crawl — refuses it, and the ledger keeps only its
hash. JWT identity as in production (the dev issuer), real Postgres, the real OpenFGA server."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from tests.fixtures.ledger import ledger_settings, open_ledger

pytestmark = pytest.mark.anyio
SEEDS = ["https://a.test/", "https://a.test/x"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def settings(migrated_db_url, ledger_fga, fake_webhook, dev_issuer):
    return ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url, dev_identity=False,
                           oidc_issuer=dev_issuer.issuer)


def _rows(db_url: str, query: str) -> list[tuple]:
    with psycopg.connect(db_url) as conn:
        return conn.execute(query).fetchall()


def _run(db_url: str, statement: str) -> None:
    with psycopg.connect(db_url) as conn:  # committed on leaving the block
        conn.execute(statement)


async def _crawl(h, flow: dict) -> str:
    r = await h.client.post("/api/crawls", json={"seeds": SEEDS, "maxDepth": 1, "scripts": []}, headers=flow)
    assert r.status_code == 202, r.text
    return r.json()["crawlId"]


async def _reads(h, crawl_id: str, headers: dict) -> list[int]:
    """The status codes of the capture server's three reads of ``crawl_id``."""
    base = f"/api/crawls/{crawl_id}"
    return [(await h.client.post(f"{base}/digests", json={"digests": ["sha256:AAAA"]}, headers=headers)).status_code,
            (await h.client.post(f"{base}/previous", json={"url": SEEDS[0]}, headers=headers)).status_code,
            (await h.client.get(f"{base}/politeness", params={"host": "a.test"}, headers=headers)).status_code]


async def test_a_read_token_reads_its_crawl_and_does_nothing_else(settings, dev_issuer):
    flow = {"authorization": f"Bearer {dev_issuer.mint('waggle-flow', ['acme'])}"}
    async with open_ledger(settings) as h:
        crawl_id, other = await _crawl(h, flow), await _crawl(h, flow)
        r = await h.client.post(f"/api/crawls/{crawl_id}/read-token", headers=flow)
        assert r.status_code == 201, r.text
        given = r.json()
        assert given["token"].startswith("wgr_") and given["crawlId"] == crawl_id
        assert f"GET /api/crawls/{crawl_id}/politeness" in given["routes"] and len(given["routes"]) == 3
        reader = {"authorization": f"Bearer {given['token']}"}

        assert await _reads(h, crawl_id, reader) == [200, 200, 200]
        assert await _reads(h, crawl_id, flow) == [200, 200, 200]  # the flow's own token still reads
        assert await _reads(h, other, reader) == [401, 401, 401]  # another crawl: nothing

        base = f"/api/crawls/{crawl_id}"
        report = {"depth": 0, "results": [], "compiled": {"typescript": "5", "hostTypes": "1", "scripts": []}}
        attempts = {
            "report a level": await h.client.post(f"{base}/pages", json=report, headers=reader),
            "progress": await h.client.post(f"{base}/progress", json={"url": SEEDS[0], "phase": "started"}, headers=reader),
            "fail the crawl": await h.client.post(f"{base}/failed", json={"reason": "x"}, headers=reader),
            "stop it": await h.client.post(f"{base}/stop", headers=reader),
            "pause it": await h.client.post(f"{base}/pause", headers=reader),
            "index": await h.client.post(f"{base}/index", headers=reader),
            "read its view": await h.client.get(base, headers=reader),
            "read its pages": await h.client.get(f"{base}/pages", headers=reader),
            "its collection": await h.client.get(f"{base}/collection", headers=reader),
            "start a crawl": await h.client.post("/api/crawls", json={"seeds": SEEDS, "scripts": []}, headers=reader),
            "list crawls": await h.client.get("/api/crawls", headers=reader),
            "list archives": await h.client.get("/api/archives", headers=reader),
            "search": await h.client.get("/api/search", params={"q": "a"}, headers=reader),
            "who am I": await h.client.get("/api/me", headers=reader),
            "workflows": await h.client.get("/api/workflows", headers=reader),
            "another read token": await h.client.post(f"{base}/read-token", headers=reader),
        }
        assert {what: r.status_code for what, r in attempts.items()} == {what: 401 for what in attempts}
        view = (await h.client.get(base, headers=flow)).json()
        listed = (await h.client.get("/api/crawls", headers=flow)).json()["crawls"]
    assert view["state"] == "running" and view["pagesCaptured"] == 0  # nothing it tried happened
    assert sorted(c["crawlId"] for c in listed) == sorted([crawl_id, other])
    # only the hash is kept
    stored = _rows(settings.database_url, "SELECT token_hash, crawl_id::text FROM crawl_read_tokens")
    assert [c for _, c in stored] == [crawl_id] and given["token"].encode() not in bytes(stored[0][0])


async def test_an_expired_or_unknown_read_token_is_refused_and_only_running_crawls_get_one(settings, dev_issuer):
    flow = {"authorization": f"Bearer {dev_issuer.mint('waggle-flow', ['acme'])}"}
    stranger = {"authorization": f"Bearer {dev_issuer.mint('waggle-flow', ['contoso'])}"}
    async with open_ledger(settings) as h:
        crawl_id = await _crawl(h, flow)
        token = (await h.client.post(f"/api/crawls/{crawl_id}/read-token", headers=flow)).json()["token"]
        # a token of a crawl that has ended reads nothing, though it has not expired
        other = await _crawl(h, flow)
        other_token = (await h.client.post(f"/api/crawls/{other}/read-token", headers=flow)).json()["token"]
        assert await _reads(h, other, {"authorization": f"Bearer {other_token}"}) == [200, 200, 200]
        await h.client.post(f"/api/crawls/{other}/failed", json={"reason": "done"}, headers=flow)
        ended = await _reads(h, other, {"authorization": f"Bearer {other_token}"})
        forged = {"authorization": "Bearer wgr_" + "A" * 43}
        assert await _reads(h, crawl_id, forged) == [401, 401, 401]
        _run(settings.database_url, "UPDATE crawl_read_tokens SET expires_at = now() - interval '1 second'")
        assert await _reads(h, crawl_id, {"authorization": f"Bearer {token}"}) == [401, 401, 401]
        not_ours = await h.client.post(f"/api/crawls/{crawl_id}/read-token", headers=stranger)
        unknown = await h.client.post(f"/api/crawls/{uuid.uuid4()}/read-token", headers=flow)
        await h.client.post(f"/api/crawls/{crawl_id}/failed", json={"reason": "done"}, headers=flow)
        closed = await h.client.post(f"/api/crawls/{crawl_id}/read-token", headers=flow)
        nobody = await h.client.post(f"/api/crawls/{crawl_id}/read-token")
    assert ended == [401, 401, 401]
    assert not_ours.status_code == unknown.status_code == 404
    assert closed.status_code == 409 and "not running" in closed.json()["error"]
    assert nobody.status_code == 401
