"""The OpenFGA stand-in's HTTP contract: stores, models, write errors, read paging, checks,
consistency, persistence across restarts, preshared key."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.fixtures.fga import MODEL_JSON, FgaProcess, create_store

TAIL = "tuple to be written already existed or the tuple to be deleted did not exist"


def post(store, path: str, body: dict) -> httpx.Response:
    return httpx.post(f"{store.api_url}/stores/{store.store_id}/{path}", json=body, timeout=10)


def test_duplicate_write_and_absent_delete_answer_like_openfga(fga_store) -> None:
    t = {"user": "user:bob", "relation": "submitter", "object": "organization:acme"}
    new = {"user": "user:eve", "relation": "submitter", "object": "organization:acme"}
    assert post(fga_store, "write", {"writes": {"tuple_keys": [t]}}).json() == {}
    r = post(fga_store, "write", {"writes": {"tuple_keys": [new, t]}})
    assert r.status_code == 400 and r.json() == {
        "code": "write_failed_due_to_invalid_input",
        "message": f"cannot write a tuple which already exists: user: 'user:bob', relation: 'submitter',"
                   f" object: 'organization:acme': {TAIL}"}
    assert new not in fga_store.read()  # the whole batch was refused
    r = post(fga_store, "write", {"deletes": {"tuple_keys": [{**t, "user": "user:nobody"}]}})
    assert r.status_code == 400 and r.json()["message"].startswith(
        "cannot delete a tuple which does not exist: user: 'user:nobody'")
    r = post(fga_store, "write", {"writes": {"tuple_keys": [new, new]}})
    assert r.json()["code"] == "cannot_allow_duplicate_tuples_in_one_request"
    assert post(fga_store, "write", {"writes": {"tuple_keys": [t], "on_duplicate": "ignore"}}).status_code == 200
    r = post(fga_store, "write", {"writes": {"tuple_keys": [{**t, "relation": "can_submit"}]}})
    assert r.status_code == 400 and r.json()["code"] == "validation_error"  # not directly assignable
    r = post(fga_store, "write", {"writes": {"tuple_keys": [{**t, "relation": "nope"}]}})
    assert r.status_code == 400 and r.json()["code"] == "relation_not_found"
    r = post(fga_store, "write", {"writes": {"tuple_keys": [
        {"user": "user:bob", "relation": "viewer", "object": "archive:a"}]}})  # needs the condition
    assert r.status_code == 400 and "archive:a#viewer@user:bob" in r.json()["message"]
    assert post(fga_store, "write", {}).json()["code"] == "invalid_write_input"


def test_read_filters_and_pages(fga_store) -> None:
    fga_store.write([f"user:u{i} member organization:acme" for i in range(7)] + ["user:z owner capture_job:j"])
    r = post(fga_store, "read", {"tuple_key": {"object": "organization:acme", "relation": "member"}, "page_size": 3})
    page = r.json()
    assert len(page["tuples"]) == 3 and page["continuation_token"]
    seen = [t["key"]["user"] for t in page["tuples"]]
    while page["continuation_token"]:
        page = post(fga_store, "read", {"tuple_key": {"object": "organization:acme"}, "page_size": 3,
                                        "continuation_token": page["continuation_token"]}).json()
        seen += [t["key"]["user"] for t in page["tuples"]]
    assert sorted(seen) == sorted(f"user:u{i}" for i in range(7))
    assert [t["key"]["object"] for t in post(fga_store, "read", {"tuple_key": {"object": "capture_job:"}}).json()["tuples"]] == ["capture_job:j"]
    assert post(fga_store, "read", {"tuple_key": {"user": "user:z"}}).status_code == 400


def test_check_consistency_context_and_errors(fga_store) -> None:
    fga_store.write([{"user": "user:dave", "relation": "viewer", "object": "archive:a",
                      "condition": {"name": "non_expired_grant",
                                    "context": {"grant_time": "2026-07-29T00:00:00Z", "grant_duration": "1h"}}}])
    key = {"user": "user:dave", "relation": "can_view", "object": "archive:a"}
    for consistency in ("HIGHER_CONSISTENCY", "MINIMIZE_LATENCY", "UNSPECIFIED"):
        r = post(fga_store, "check", {"tuple_key": key, "consistency": consistency,
                                      "context": {"current_time": "2026-07-29T00:30:00Z"}})
        assert r.json()["allowed"] is True
    assert post(fga_store, "check", {"tuple_key": key, "consistency": "STRONG"}).status_code == 400
    r = post(fga_store, "check", {"tuple_key": key})  # no current_time: the condition cannot be evaluated
    assert r.status_code == 400 and "missing context parameters '[current_time]'" in r.json()["message"]
    r = post(fga_store, "check", {"tuple_key": {**key, "object": "folder:a"}})
    assert r.status_code == 400 and "type 'folder' not found" in r.json()["message"]
    r = post(fga_store, "check", {"tuple_key": key, "authorization_model_id": "01HZZZZZZZZZZZZZZZZZZZZZZZ"})
    assert (r.status_code, r.json()["code"]) == (400, "authorization_model_not_found")


def test_checks_follow_every_write_and_delete(fga_store) -> None:
    """The stand-in's index is updated per Write (not rebuilt): Checks see each change at once."""
    key = {"user": "user:bob", "relation": "can_view", "object": "archive:a"}
    links = [{"user": "capture_job:j", "relation": "parent", "object": "archive:a"},
             {"user": "user:bob", "relation": "owner", "object": "capture_job:j"}]
    other = {"user": "user:eve", "relation": "owner", "object": "capture_job:j"}

    def allowed(user: str = "user:bob") -> bool:
        r = post(fga_store, "check", {"tuple_key": {**key, "user": user}, "context": {"current_time": "2026-07-29T00:00:00Z"}})
        assert r.status_code == 200, r.text
        return r.json()["allowed"]

    assert not allowed()
    assert post(fga_store, "write", {"writes": {"tuple_keys": links + [other]}}).status_code == 200
    assert allowed() and allowed("user:eve")
    assert post(fga_store, "write", {"deletes": {"tuple_keys": [links[1]]}}).status_code == 200
    assert not allowed() and allowed("user:eve")  # only bob's owner tuple left the index
    assert post(fga_store, "write", {"writes": {"tuple_keys": [links[1]]}, "deletes": {"tuple_keys": [other]}}).status_code == 200
    assert allowed() and not allowed("user:eve")
    refused = post(fga_store, "write", {"writes": {"tuple_keys": [other, links[0]]}})
    assert refused.status_code == 400 and not allowed("user:eve")  # a refused Write changes nothing


def test_batch_check_by_correlation_id(fga_store) -> None:
    fga_store.write(["organization:acme parent capture_job:j", "capture_job:j parent archive:a"])
    member = {"tuple_keys": [{"user": "user:bob", "relation": "member", "object": "organization:acme"}]}
    checks = [{"tuple_key": {"user": "user:bob", "relation": "can_view", "object": f"archive:{o}"},
               "contextual_tuples": member, "correlation_id": f"id-{o}"} for o in ("b", "a")]
    r = post(fga_store, "batch-check", {"checks": checks, "consistency": "HIGHER_CONSISTENCY"})
    assert r.json() == {"result": {"id-b": {"allowed": False}, "id-a": {"allowed": True}}}
    assert post(fga_store, "batch-check", {"checks": checks[:1] * 2}).status_code == 400  # duplicate id
    assert post(fga_store, "batch-check", {"checks": []}).status_code == 400
    many = [{**checks[0], "correlation_id": str(i)} for i in range(51)]
    assert post(fga_store, "batch-check", {"checks": many}).status_code == 400
    bad = post(fga_store, "batch-check", {"checks": [{**checks[0], "tuple_key": {
        "user": "user:bob", "relation": "nope", "object": "archive:a"}}]}).json()
    assert bad["result"]["id-b"]["error"]["input_error"] == "validation_error"


def test_stores_models_and_unknown_routes(fga_server) -> None:
    store = fga_server.new_store()
    base = fga_server.api_url
    assert httpx.get(f"{base}/healthz").json() == {"status": "SERVING"}
    ids = [s["id"] for s in httpx.get(f"{base}/stores").json()["stores"]]
    assert store.store_id in ids and fga_server.store_id in ids
    assert httpx.get(f"{base}/stores/{store.store_id}").json()["name"] == "waggle-test"
    models = httpx.get(f"{base}/stores/{store.store_id}/authorization-models").json()["authorization_models"]
    assert [m["id"] for m in models] == [store.model_id]
    got = httpx.get(f"{base}/stores/{store.store_id}/authorization-models/{store.model_id}").json()
    assert got["authorization_model"]["type_definitions"] == json.loads(MODEL_JSON.read_text())["type_definitions"]
    r = httpx.get(f"{base}/stores/01HZZZZZZZZZZZZZZZZZZZZZZZ")
    assert (r.status_code, r.json()["code"]) == (404, "store_id_not_found")
    assert httpx.get(f"{base}/nothing/here").status_code == 404
    r = httpx.post(f"{base}/stores/{store.store_id}/authorization-models", json={"schema_version": "1.1",
                   "type_definitions": [{"type": "doc", "relations": {"v": {"computedUserset": {"relation": "w"}}}}]})
    assert r.status_code == 400 and r.json()["code"] == "invalid_authorization_model"
    assert httpx.delete(f"{base}/stores/{store.store_id}").status_code == 204
    assert httpx.get(f"{base}/stores/{store.store_id}").status_code == 404


def test_data_file_keeps_state_and_preshared_key(tmp_path: Path) -> None:
    proc = FgaProcess(tmp_path / "state.json").start()
    try:
        store = create_store(proc.api_url)
        store.write(["user:bob submitter organization:acme"])
        proc.stop()
        proc.start()
        assert store.check("user:bob", "can_submit", "organization:acme")
    finally:
        proc.stop()
    keyed = FgaProcess(preshared_key="k3y").start()
    try:
        r = httpx.get(f"{keyed.api_url}/stores")
        assert (r.status_code, r.json()["code"]) == (401, "unauthenticated")
        assert httpx.get(f"{keyed.api_url}/stores", headers={"Authorization": "Bearer k3y"}).status_code == 200
    finally:
        keyed.stop()


def test_data_file_journal_replays_compacts_and_survives_a_torn_line(tmp_path: Path) -> None:
    """Tuple Writes are appended to ``<data>.log`` (not a full rewrite each), replayed at start,
    folded into the snapshot every ``compact_every`` Writes; a torn last line is ignored."""
    from devstack.openfga.server import FgaState

    data = tmp_path / "fga.json"
    state = FgaState(data, compact_every=5)
    sid = state.create_store("s")["id"]
    state.write_model(sid, json.loads(MODEL_JSON.read_text()))
    snapshot = data.read_text()
    t = [{"user": f"user:u{i}", "relation": "member", "object": "organization:acme"} for i in range(6)]
    state.write(sid, {"writes": {"tuple_keys": t[:3]}})
    state.write(sid, {"deletes": {"tuple_keys": [t[0]]}})
    assert data.read_text() == snapshot  # appended, not rewritten
    assert len((tmp_path / "fga.json.log").read_text().splitlines()) == 2

    def users(s: FgaState) -> set[str]:
        return {k["key"]["user"] for k in s.read(sid, {"page_size": 100})["tuples"]}

    assert users(FgaState(data)) == {"user:u1", "user:u2"}  # snapshot + journal replayed
    state = FgaState(data, compact_every=5)  # that start folded the journal into the snapshot
    assert not (tmp_path / "fga.json.log").exists()
    for i in range(3, 6):
        state.write(sid, {"writes": {"tuple_keys": [t[i]]}})
    with open(tmp_path / "fga.json.log", "a") as f:
        f.write('{"store": "' + sid + '", "writes": [{"key"')  # a crash mid-append
    again = FgaState(data, compact_every=5)
    assert users(again) == {"user:u1", "user:u2", "user:u3", "user:u4", "user:u5"}
    for i in range(6):  # past compact_every: the snapshot holds everything, the journal restarts
        again.write(sid, {"writes": {"tuple_keys": [{**t[0], "user": f"user:v{i}"}]}})
    assert len(json.loads(data.read_text())["stores"][sid]["tuples"]) >= 10
    assert users(FgaState(data)) == users(again) and len(users(again)) == 11
    r = again.check(sid, {"tuple_key": {"user": "user:v5", "relation": "member", "object": "organization:acme"}})
    assert r["allowed"] is True
