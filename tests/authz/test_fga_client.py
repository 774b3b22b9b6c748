"""``ledger.authz.fga.Authz`` against the real OpenFGA server over real HTTP."""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import pytest
from openfga_sdk.exceptions import ApiException

from ledger.authz.fga import Authz, FgaUnavailable, is_already_in_desired_state, is_unreachable


@dataclass
class Who:
    subject: str
    organizations: list[str] = field(default_factory=list)


def authz_for(store) -> Authz:
    return Authz(store.api_url, store.store_id, store.model_id)


def run(coro):
    return asyncio.run(coro)


def test_can_submit_needs_a_stored_grant(fga_store) -> None:
    fga_store.write(["user:bob submitter organization:acme", "user:erin admin organization:acme"])
    az = authz_for(fga_store)

    async def go():
        try:
            return (
                await az.can_submit(Who("bob", ["acme"])),
                await az.can_submit(Who("erin", ["beta", "acme"])),
                await az.can_submit(Who("carol", ["acme"])),  # claims membership only
                await az.can_submit(Who("bob", ["beta"])),  # grant elsewhere
                await az.can_submit(Who("bob", [])),
            )
        finally:
            await az.close()

    assert run(go()) == (True, True, False, False, False)


def test_no_organizations_means_no_call() -> None:
    az = Authz("http://127.0.0.1:9", "01HZZZZZZZZZZZZZZZZZZZZZZZ", "01HZZZZZZZZZZZZZZZZZZZZZZZ")
    assert run(az.can_submit(Who("bob", []))) is False  # port 9 would refuse: no call was made
    assert run(az.viewable(Who("bob", ["acme"]), [])) == set()


def test_view_by_membership_owner_and_share(fga_store) -> None:
    a1, a2, a3 = (str(uuid.uuid4()) for _ in range(3))
    fga_store.write([
        "organization:acme parent capture_job:t1", "user:alice owner capture_job:t1",
        f"capture_job:t1 parent archive:{a1}", f"capture_job:t1 parent archive:{a2}",
        "organization:contoso parent capture_job:t2", f"capture_job:t2 parent archive:{a3}",
    ])
    az = authz_for(fga_store)

    async def go():
        try:
            return (
                await az.can_view(Who("bob", ["acme"]), a1),
                await az.can_view(Who("bob", ["contoso"]), a1),
                await az.can_view(Who("alice", []), a2),
                await az.can_view(Who("mallory", []), a1),
                await az.viewable(Who("bob", ["acme"]), [a3, a1, a2]),
                await az.viewable(Who("carol", ["contoso", "beta"]), [a1, a2, a3]),
                await az.viewable(Who("mallory", []), [a1, a2, a3]),
            )
        finally:
            await az.close()

    r = run(go())
    assert r[:4] == (True, False, True, False)
    assert r[4] == {a1, a2} and r[5] == {a3} and r[6] == set()


def test_list_viewable_is_what_can_view_allows(fga_store) -> None:
    """ListObjects with the caller's contextual membership: the organization's archives, the
    owned ones, a running share and an ``organization#member`` share; not an expired share,
    not another organization's archive. Past 1,000 objects (the server's default cap, lifted
    by how waggle runs it) nothing is cut off."""
    many = [str(uuid.uuid4()) for _ in range(1100)]
    a_owned, a_other, a_share, a_old, a_orgshare = (str(uuid.uuid4()) for _ in range(5))

    def share(aid: str, at: str) -> dict:
        return {"user": "user:bob", "relation": "viewer", "object": f"archive:{aid}",
                "condition": {"name": "non_expired_grant", "context": {"grant_time": at, "grant_duration": "1h"}}}

    now = datetime.now(timezone.utc)
    tuples = ["organization:acme parent capture_job:t1", "organization:contoso parent capture_job:t2",
              "user:bob owner capture_job:t3", f"capture_job:t3 parent archive:{a_owned}",
              f"capture_job:t2 parent archive:{a_other}", f"organization:beta#member viewer archive:{a_orgshare}",
              share(a_share, (now - timedelta(minutes=5)).isoformat().replace("+00:00", "Z")),
              share(a_old, (now - timedelta(hours=2)).isoformat().replace("+00:00", "Z"))]
    tuples += [f"capture_job:t1 parent archive:{a}" for a in many]
    for i in range(0, len(tuples), 100):
        fga_store.write(tuples[i:i + 100])
    az = authz_for(fga_store)

    async def go():
        try:
            return (await az.list_viewable(Who("bob", ["acme", "beta"])), await az.list_viewable(Who("bob", [])),
                    await az.list_viewable(Who("", ["acme"])), await az.viewable(Who("bob", ["acme", "beta"]),
                                                                               many[:3] + [a_other, a_old, a_share]))
        finally:
            await az.close()

    everything, alone, nobody, batch = run(go())
    assert everything == set(many) | {a_owned, a_share, a_orgshare}
    assert alone == {a_owned, a_share}  # no organizations claimed: own and shared only
    assert nobody == set()
    assert batch == set(many[:3]) | {a_share}  # BatchCheck agrees on the same ids


def test_viewable_matches_results_by_object_for_a_full_page(fga_store) -> None:
    """50 ids in one BatchCheck, every other one visible: the set is exact (order-independent)."""
    ids = [str(uuid.uuid4()) for _ in range(50)]
    fga_store.write(["organization:acme parent capture_job:t"] + [f"capture_job:t parent archive:{i}" for i in ids[::2]])
    az = authz_for(fga_store)

    async def go():
        try:
            return await az.viewable(Who("bob", ["acme"]), ids)
        finally:
            await az.close()

    assert run(go()) == set(ids[::2])


def test_write_errors_are_classified(fga_store) -> None:
    az = authz_for(fga_store)
    t = {"user": "user:bob", "relation": "submitter", "object": "organization:acme"}

    async def go():
        await az.write([t])
        errors = []
        for call in (az.write([t]), az.write(None, [{**t, "user": "user:nobody"}]),
                     az.write([{**t, "relation": "member_of"}])):
            try:
                await call
                errors.append(None)
            except ApiException as exc:
                errors.append(exc)
        await az.close()
        return errors

    dup, absent, invalid = run(go())
    assert is_already_in_desired_state(dup) and "already exists" in dup.error_message
    assert is_already_in_desired_state(absent) and "does not exist" in absent.error_message
    assert invalid is not None and not is_already_in_desired_state(invalid)
    assert not is_unreachable(invalid)


def test_unreachable_is_reported_as_such() -> None:
    az = Authz("http://127.0.0.1:9", "01HZZZZZZZZZZZZZZZZZZZZZZZ", "01HZZZZZZZZZZZZZZZZZZZZZZZ")

    async def go():
        try:
            await az.can_view(Who("bob", ["acme"]), str(uuid.uuid4()))
        finally:
            await az.close()

    with pytest.raises(FgaUnavailable) as info:
        run(go())
    assert is_unreachable(info.value)
    assert "127.0.0.1:9" in str(info.value) and "waggle dev up" in str(info.value)


def _batch_proxy(fga_store, rewrite, list_rewrite=None):
    """A loopback proxy in front of the real server whose BatchCheck answers pass through
    ``rewrite(result_dict) -> result_dict`` and ListObjects answers through ``async
    list_rewrite(objects) -> objects``; everything else unchanged."""
    import httpx
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from tests.fixtures.ledger import ServerThread

    async def forward(request: Request) -> Response:
        async with httpx.AsyncClient(base_url=fga_store.api_url) as client:
            r = await client.request(request.method, request.url.path, content=await request.body(),
                                     headers={"content-type": "application/json"})
        body = r.content
        if request.url.path.endswith("/batch-check") and r.is_success:
            data = r.json()
            data["result"] = rewrite(data["result"])
            body = json.dumps(data).encode()
        if request.url.path.endswith("/list-objects") and r.is_success and list_rewrite:
            data = r.json()
            data["objects"] = await list_rewrite(data["objects"])
            body = json.dumps(data).encode()
        return Response(body, status_code=r.status_code, media_type="application/json")

    return ServerThread(Starlette(routes=[Route("/{path:path}", forward, methods=["GET", "POST"])]),
                        lifespan="off").start()


def _viewable_via(proxy, fga_store, ids: list[str]) -> set[str]:
    az = Authz(proxy.url, fga_store.store_id, fga_store.model_id)

    async def go():
        try:
            return await az.viewable(Who("bob", ["acme"]), ids)
        finally:
            await az.close()

    return run(go())


def test_viewable_does_not_depend_on_result_order(fga_store) -> None:
    """The real server's BatchCheck answer, passed through a proxy that reverses the order of
    its results: they are matched by correlation id, never by position."""
    batches = []

    def reverse(result: dict) -> dict:
        batches.append(list(result))
        return dict(reversed(list(result.items())))

    proxy = _batch_proxy(fga_store, reverse)
    try:
        ids = [str(uuid.uuid4()) for _ in range(5)]
        fga_store.write(["organization:acme parent capture_job:t", f"capture_job:t parent archive:{ids[0]}",
                         f"capture_job:t parent archive:{ids[3]}"])
        assert _viewable_via(proxy, fga_store, ids) == {ids[0], ids[3]}
        assert len(batches) == 1 and len(batches[0]) == 5
    finally:
        proxy.stop()


def test_viewable_asks_failed_items_once_more(fga_store) -> None:
    """Items answered with an error (the overloaded server's ``deadline_exceeded``) are asked
    again; an item that fails twice counts as not viewable, the others are exact."""
    ids = [str(uuid.uuid4()) for _ in range(50)]  # one request: the archives list's page
    fga_store.write(["organization:acme parent capture_job:t"] + [f"capture_job:t parent archive:{i}" for i in ids[:30]])
    deadline = {"internal_error": "deadline_exceeded", "message": "context deadline exceeded"}
    rounds: list[int] = []

    def fail_some(result: dict) -> dict:
        rounds.append(len(result))
        doomed = list(result)[:5] if len(rounds) == 1 else list(result)[:1]  # 5 fail, then 1 of them again
        return {k: ({"error": deadline} if k in doomed else v) for k, v in result.items()}

    proxy = _batch_proxy(fga_store, fail_some)
    try:
        got = _viewable_via(proxy, fga_store, ids)
    finally:
        proxy.stop()
    assert rounds == [50, 5]
    assert got <= set(ids[:30]) and len(set(ids[:30]) - got) <= 1  # exact but for the one that failed twice


def test_viewable_of_many_ids_uses_list_objects(fga_store) -> None:
    """More than a page of ids: one ListObjects (no BatchCheck) gives the exact set."""
    ids = [str(uuid.uuid4()) for _ in range(120)]
    tuples = ["organization:acme parent capture_job:t", "organization:beta parent capture_job:u"]
    tuples += [f"capture_job:{'t' if n % 3 else 'u'} parent archive:{i}" for n, i in enumerate(ids)]
    for i in range(0, len(tuples), 100):
        fga_store.write(tuples[i:i + 100])
    batches: list[int] = []
    listed: list[int] = []

    async def count(objects: list[str]) -> list[str]:
        listed.append(len(objects))
        return objects

    proxy = _batch_proxy(fga_store, lambda r: batches.append(len(r)) or r, count)
    try:
        got = _viewable_via(proxy, fga_store, ids)
    finally:
        proxy.stop()
    assert got == {i for n, i in enumerate(ids) if n % 3}
    assert listed == [80] and batches == []


def test_viewable_completes_a_list_cut_off_by_the_deadline(fga_store, monkeypatch) -> None:
    """A ListObjects answer that took the server's deadline may be partial: the ids it did not
    list are asked by BatchCheck, so the set is still exact."""
    from ledger.authz import fga

    monkeypatch.setattr(fga, "LIST_OBJECTS_DEADLINE_S", 0.3)
    ids = [str(uuid.uuid4()) for _ in range(80)]
    fga_store.write(["organization:acme parent capture_job:t"] + [f"capture_job:t parent archive:{i}" for i in ids[:60]])
    batches: list[int] = []

    async def cut_off(objects: list[str]) -> list[str]:
        await asyncio.sleep(0.4)  # as long as the deadline
        return sorted(objects)[:20]

    proxy = _batch_proxy(fga_store, lambda r: batches.append(len(r)) or r, cut_off)
    try:
        got = _viewable_via(proxy, fga_store, ids)
    finally:
        proxy.stop()
    assert got == set(ids[:60])
    assert sorted(batches) == [10, 50]  # the 60 ids ListObjects did not list


def test_can_view_sends_what_the_sdk_client_check_sends(monkeypatch) -> None:
    """``can_view`` builds its Check on the SDK's generated API; the request must be the very
    one ``OpenFgaClient.check`` sends (same path, headers that matter, JSON body)."""
    from openfga_sdk import OpenFgaClient
    from openfga_sdk.client.configuration import ClientConfiguration
    from openfga_sdk.client.models import ClientCheckRequest, ClientTuple
    from openfga_sdk.credentials import CredentialConfiguration, Credentials
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from ledger.authz import fga
    from tests.fixtures.ledger import ServerThread

    seen: list[tuple[str, dict, dict]] = []

    async def check(request):
        seen.append((request.url.path, {k: request.headers.get(k) for k in ("authorization", "content-type")},
                     await request.json()))
        return JSONResponse({"allowed": True, "resolution": ""})

    monkeypatch.setattr(fga, "now_iso", lambda: "2026-07-29T00:00:00.000Z")
    server = ServerThread(Starlette(routes=[Route("/stores/{sid}/check", check, methods=["POST"])]), lifespan="off").start()
    store, model, aid = "01HZ0000000000000000000001", "01HZ0000000000000000000002", str(uuid.uuid4())
    try:
        async def go():
            az = Authz(server.url, store, model, "s3cret")
            sdk = OpenFgaClient(ClientConfiguration(
                api_url=server.url, store_id=store, authorization_model_id=model,
                credentials=Credentials(method="api_token", configuration=CredentialConfiguration(api_token="s3cret"))))
            try:
                assert await az.can_view(Who("bob", ["acme", "contoso", "acme"]), aid) is True
                await sdk.check(ClientCheckRequest(
                    user="user:bob", relation="can_view", object=f"archive:{aid}",
                    contextual_tuples=[ClientTuple("user:bob", "member", f"organization:{o}") for o in ("acme", "contoso")],
                    context={"current_time": "2026-07-29T00:00:00.000Z"}), {"consistency": "HIGHER_CONSISTENCY"})
                assert await az.can_view(Who("eve", []), aid) is True  # no organizations: no contextual tuples
            finally:
                await az.close()
                await sdk.close()

        run(go())
    finally:
        server.stop()
    assert len(seen) == 3 and seen[0] == seen[1]
    assert seen[0][1] == {"authorization": "Bearer s3cret", "content-type": "application/json"}
    assert seen[0][2]["contextual_tuples"]["tuple_keys"][1]["object"] == "organization:contoso"
    assert seen[0][2]["consistency"] == "HIGHER_CONSISTENCY" and seen[0][2]["authorization_model_id"] == model
    assert "contextual_tuples" not in seen[2][2] and seen[2][2]["tuple_key"]["user"] == "user:eve"


def test_batch_check_and_list_objects_send_what_the_sdk_client_sends(monkeypatch) -> None:
    """Search's BatchChecks and ListObjects are built on the SDK's generated API with one shared
    configuration (decision 381: the SDK client's per-model Configuration was most of the
    ledger's CPU per search); each request must be the one ``OpenFgaClient`` sends (same path,
    authorization, JSON body but for the correlation ids, which only have to be unique)."""
    from openfga_sdk import OpenFgaClient
    from openfga_sdk.client.configuration import ClientConfiguration
    from openfga_sdk.client.models import ClientBatchCheckItem, ClientBatchCheckRequest, ClientListObjectsRequest, ClientTuple
    from openfga_sdk.credentials import CredentialConfiguration, Credentials
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from ledger.authz import fga
    from tests.fixtures.ledger import ServerThread

    seen: list[tuple[str, str | None, dict]] = []

    async def batch(request):
        body = await request.json()
        seen.append(("batch-check", request.headers.get("authorization"), body))
        return JSONResponse({"result": {c["correlation_id"]: {"allowed": True} for c in body["checks"]}})

    async def listing(request):
        seen.append(("list-objects", request.headers.get("authorization"), await request.json()))
        return JSONResponse({"objects": ["archive:x1"]})

    monkeypatch.setattr(fga, "now_iso", lambda: "2026-07-29T00:00:00.000Z")
    server = ServerThread(Starlette(routes=[Route("/stores/{sid}/batch-check", batch, methods=["POST"]),
                                            Route("/stores/{sid}/list-objects", listing, methods=["POST"])]),
                          lifespan="off").start()
    store, model = "01HZ0000000000000000000001", "01HZ0000000000000000000002"
    ids = [str(uuid.uuid4()) for _ in range(3)]
    orgs, now = ("acme", "contoso"), {"current_time": "2026-07-29T00:00:00.000Z"}
    members = [ClientTuple("user:bob", "member", f"organization:{o}") for o in orgs]
    try:
        async def go():
            az = Authz(server.url, store, model, "s3cret")
            sdk = OpenFgaClient(ClientConfiguration(
                api_url=server.url, store_id=store, authorization_model_id=model,
                credentials=Credentials(method="api_token", configuration=CredentialConfiguration(api_token="s3cret"))))
            who = Who("bob", list(orgs))
            try:
                got = (await az.checked_viewable(who, ids), await az.member_organizations(who), await az.shared_with(who))
                await sdk.batch_check(ClientBatchCheckRequest(checks=[ClientBatchCheckItem(
                    user="user:bob", relation="can_view", object=f"archive:{i}", contextual_tuples=members, context=now)
                    for i in ids]))
                await sdk.batch_check(ClientBatchCheckRequest(checks=[ClientBatchCheckItem(
                    user="user:bob", relation="member", object=f"organization:{o}", contextual_tuples=members)
                    for o in orgs]))
                for relation, ctx in (("viewer", members), ("can_view", None)):
                    await sdk.list_objects(ClientListObjectsRequest(user="user:bob", relation=relation, type="archive",
                                                                    contextual_tuples=ctx, context=now),
                                           {"consistency": "HIGHER_CONSISTENCY"})
                return got
            finally:
                await az.close()
                await sdk.close()

        viewable, member_of, shared = run(go())
    finally:
        server.stop()
    assert viewable == set(ids) and member_of == list(orgs) and shared == {"x1"}

    def same(body: dict) -> dict:
        for check in body.get("checks", []):
            check["correlation_id"] = "-"
        return body

    ours, theirs = seen[:4], seen[4:]
    assert len(seen) == 8 and all(auth == "Bearer s3cret" for _, auth, _ in seen)
    assert all(len({c["correlation_id"] for c in body["checks"]}) == len(body["checks"]) for _, _, body in ours[:2])
    assert [(path, same(body)) for path, _, body in ours[:2]] == [(path, same(body)) for path, _, body in theirs[:2]]
    # the two ListObjects run at once: compare them as a set, by relation
    assert sorted((json.dumps(body, sort_keys=True) for _, _, body in ours[2:])) == \
        sorted((json.dumps(body, sort_keys=True) for _, _, body in theirs[2:]))


def test_check_session_skips_env_lookups_only_when_nothing_applies(monkeypatch, tmp_path) -> None:
    """No proxy variable and no ~/.netrc entry for OpenFGA's host → the Check session does not
    look them up per request; a proxy that applies keeps the SDK's env-reading session."""
    from openfga_sdk import ApiClient
    from openfga_sdk.client.configuration import ClientConfiguration

    from ledger.authz.fga import env_applies, skip_env_lookups

    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    url = "http://fga.internal:8080"

    async def session_trusts_env() -> tuple[bool, bool]:
        client = ApiClient(ClientConfiguration(api_url=url))
        try:
            replaced = await skip_env_lookups(client, url)
            return replaced, client.rest_client.pool_manager.trust_env
        finally:
            await client.close()

    assert not env_applies(url) and run(session_trusts_env()) == (True, False)
    (tmp_path / "netrc").write_text("machine fga.internal login u password p\n")
    assert env_applies(url) and run(session_trusts_env()) == (False, True)
    (tmp_path / "netrc").write_text("machine elsewhere login u password p\n")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.internal:3128")
    assert env_applies(url) and run(session_trusts_env()) == (False, True)
    monkeypatch.setenv("NO_PROXY", "fga.internal")
    assert not env_applies(url)


def test_write_sends_what_the_sdk_client_write_sends() -> None:
    """``Authz.write`` builds its Write on the SDK's generated API; the request must be the one
    ``OpenFgaClient.write`` sends (writes with a condition, deletes, model id)."""
    from openfga_sdk import OpenFgaClient
    from openfga_sdk.client.configuration import ClientConfiguration
    from openfga_sdk.client.models import ClientTuple, ClientWriteRequest
    from openfga_sdk.models.relationship_condition import RelationshipCondition
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from tests.fixtures.ledger import ServerThread

    seen: list[tuple[str, dict]] = []

    async def write(request):
        seen.append((request.url.path, await request.json()))
        return JSONResponse({})

    server = ServerThread(Starlette(routes=[Route("/stores/{sid}/write", write, methods=["POST"])]), lifespan="off").start()
    store, model = "01HZ0000000000000000000001", "01HZ0000000000000000000002"
    grant = {"name": "non_expired_grant", "context": {"grant_time": "2026-07-29T00:00:00Z", "grant_duration": "1h"}}
    writes = [{"user": "capture_job:j", "relation": "parent", "object": "archive:a"},
              {"user": "user:dave", "relation": "viewer", "object": "archive:a", "condition": grant}]
    deletes = [{"user": "user:eve", "relation": "owner", "object": "capture_job:j"}]
    try:
        async def go():
            az = Authz(server.url, store, model)
            sdk = OpenFgaClient(ClientConfiguration(api_url=server.url, store_id=store, authorization_model_id=model))
            try:
                await az.write(writes, deletes)
                await sdk.write(ClientWriteRequest(
                    writes=[ClientTuple(t["user"], t["relation"], t["object"],
                                        RelationshipCondition(**t["condition"]) if "condition" in t else None) for t in writes],
                    deletes=[ClientTuple(t["user"], t["relation"], t["object"]) for t in deletes]))
                await az.write(None, deletes)
                await sdk.write(ClientWriteRequest(deletes=[ClientTuple(t["user"], t["relation"], t["object"]) for t in deletes]))
            finally:
                await az.close()
                await sdk.close()

        run(go())
    finally:
        server.stop()
    assert len(seen) == 4 and seen[0] == seen[1] and seen[2] == seen[3]
    assert seen[0][1]["writes"]["tuple_keys"][1]["condition"]["name"] == "non_expired_grant"
    assert "writes" not in seen[2][1] and seen[2][1]["authorization_model_id"] == model
