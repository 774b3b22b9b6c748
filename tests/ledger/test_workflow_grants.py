"""Grants on a crawl workflow through the routes (decision 351), on real Postgres and the real
OpenFGA server: an editor or the organization's admin gives a user viewer, runner or editor; a
new role replaces the old; revoking takes it back; the tuples go through the outbox and a
deleted workflow leaves none behind; who may not grant gets a 4xx that says why."""

from __future__ import annotations

import pytest

from tests.fixtures.ledger import LedgerHarness
from tests.ledger.test_level_reports import rows, store_of
from tests.ledger.test_workflows_api import WHO, created, run, settings  # noqa: F401 — the fixture

pytestmark = pytest.mark.anyio
FRANK = LedgerHarness.who("frank", "contoso")  # of another organization: nothing unless granted
CAROL = LedgerHarness.who("carol", "acme")  # a member of acme: views the workflow, edits nothing
ERIN = LedgerHarness.who("erin", "acme")  # acme's admin: may grant


async def grant(h, wid, user, role, headers=WHO):
    return await h.client.put(f"/api/workflows/{wid}/grants", json={"user": user, "role": role}, headers=headers)


async def revoke(h, wid, user, headers=WHO):
    return await h.client.delete(f"/api/workflows/{wid}/grants/{user}", headers=headers)


async def status_of(h, wid, headers):
    """(view, run, edit) answers of ``headers`` on the workflow."""
    view = (await h.client.get(f"/api/workflows/{wid}", headers=headers)).status_code
    ran = await run(h, wid, headers=headers)
    if ran.status_code == 202:  # end that crawl, so the next run is not skipped
        await h.client.post(f"/api/crawls/{ran.json()['crawlId']}/stop", headers=WHO)
    edit = (await h.client.patch(f"/api/workflows/{wid}", json={"notes": "n"}, headers=headers)).status_code
    return view, ran.status_code, edit


async def test_viewer_runner_editor_grants_open_exactly_their_doors(settings, s3_server, fake_webhook):
    async with open_ledger_(settings, s3_server) as h:
        wid = (await created(h))["workflowId"]
        assert await status_of(h, wid, FRANK) == (404, 404, 404)
        r = await grant(h, wid, "frank", "viewer")
        assert r.status_code == 200, r.text
        assert (r.json()["grant"]["role"], r.json()["previousRole"]) == ("viewer", None)
        assert await status_of(h, wid, FRANK) == (200, 404, 404)
        r = await grant(h, wid, "user:frank", "runner")  # the tuple's form of the user is taken too
        assert r.json()["previousRole"] == "viewer"
        assert await status_of(h, wid, FRANK) == (200, 202, 404)
        assert (await grant(h, wid, "frank", "editor", headers=ERIN)).status_code == 200  # the admin grants
        assert await status_of(h, wid, FRANK) == (200, 202, 200)
        assert (await grant(h, wid, "frank", "viewer")).json()["previousRole"] == "editor"
        assert await status_of(h, wid, FRANK) == (200, 404, 404)  # the old role's tuple went
        shown = (await h.client.get(f"/api/workflows/{wid}", headers=WHO)).json()["grants"]
        assert [(g["user"], g["role"], g["grantedBy"]) for g in shown] == [("alice", "editor", "alice"),
                                                                          ("frank", "viewer", "alice")]
        r = await revoke(h, wid, "frank")
        assert r.status_code == 200 and r.json()["revoked"] == {"user": "frank", "role": "viewer"}
        assert await status_of(h, wid, FRANK) == (404, 404, 404)
        again = await revoke(h, wid, "frank")
    assert again.status_code == 404 and "'frank' has no grant" in again.json()["error"]
    assert rows(settings.database_url, "SELECT count(*) FROM fga_outbox WHERE processed_at IS NULL") == [(0,)]


async def test_only_an_editor_or_the_admin_may_grant(settings, s3_server, fake_webhook):
    dave = LedgerHarness.who("dave", "contoso")
    async with open_ledger_(settings, s3_server) as h:
        wid = (await created(h))["workflowId"]
        member = await grant(h, wid, "frank", "viewer", headers=CAROL)  # sees it, may not grant
        outsider = await grant(h, wid, "frank", "viewer", headers=dave)  # does not see it
        member_revoke = await revoke(h, wid, "alice", headers=CAROL)
        listed = await h.client.get(f"/api/workflows/{wid}/grants", headers=CAROL)
        outsider_list = await h.client.get(f"/api/workflows/{wid}/grants", headers=dave)
        await grant(h, wid, "carol", "runner")
        runner = await grant(h, wid, "frank", "viewer", headers=CAROL)  # a runner may not grant either
    assert member.status_code == member_revoke.status_code == runner.status_code == 403
    assert "only an editor of this workflow or an admin of its organization" in member.json()["error"]
    assert outsider.status_code == outsider_list.status_code == 404
    assert listed.status_code == 200 and [g["user"] for g in listed.json()["grants"]] == ["alice"]
    assert rows(settings.database_url, "SELECT subject, role FROM workflow_grants ORDER BY subject") == [
        ("alice", "editor"), ("carol", "runner")]


@pytest.mark.parametrize("body, field, needle", [
    ({"user": "frank", "role": "owner"}, "role", "role 'owner' is not a workflow role"),
    ({"user": "frank", "role": "can_view"}, "role", "is not a workflow role"),
    ({"user": "*", "role": "viewer"}, "user", "never everyone"),
    ({"user": "user:*", "role": "viewer"}, "user", "never everyone"),
    ({"user": "fr ank", "role": "viewer"}, "user", "no spaces"),
    ({"user": "frank#member", "role": "viewer"}, "user", "'#'"),
    ({"user": "user:", "role": "viewer"}, "user", "is not a user's subject"),
])
async def test_bad_grants_are_400s_that_name_the_field(settings, s3_server, fake_webhook, body, field, needle):
    async with open_ledger_(settings, s3_server) as h:
        wid = (await created(h))["workflowId"]
        r = await h.client.put(f"/api/workflows/{wid}/grants", json=body, headers=WHO)
    assert r.status_code == 400 and needle in r.json()["error"], r.text
    assert field in r.json()["fields"]
    assert rows(settings.database_url, "SELECT count(*) FROM workflow_grants WHERE subject <> 'alice'") == [(0,)]


async def test_deleting_the_workflow_deletes_every_grant_tuple(settings, s3_server, fake_webhook, ledger_fga):
    async with open_ledger_(settings, s3_server) as h:
        wid = (await created(h))["workflowId"]
        await grant(h, wid, "frank", "runner")
        await grant(h, wid, "gus", "viewer")
        await revoke(h, wid, "alice")  # the creator's own grant taken back: its tuple goes too
        mine = sorted((t["user"], t["relation"]) for t in ledger_fga.read() if t["object"] == f"workflow:{wid}")
        assert mine == [("organization:acme", "parent"), ("user:frank", "runner"), ("user:gus", "viewer")]
        r = await h.client.delete(f"/api/workflows/{wid}", headers=ERIN)  # the admin still edits it
        assert r.status_code == 200, r.text
    assert [t for t in ledger_fga.read() if t["object"] == f"workflow:{wid}"] == []
    assert rows(settings.database_url, "SELECT count(*) FROM workflow_grants") == [(0,)]


@pytest.mark.parametrize("change", ["grant", "revoke"])
async def test_a_grant_change_racing_a_delete_is_a_404_that_says_so(settings, s3_server, fake_webhook, ledger_fga,
                                                                    monkeypatch, change):
    """Decision 404: the grant's Check passed, then the workflow's delete committed before the grant
    was written — a foreign-key error (500) before; now a 404 saying the workflow was deleted, and
    neither a grant row nor a tuple left on the deleted workflow."""
    from ledger.api import workflow_grants as routes
    from ledger.crawl.workflow_grants import GONE

    checked = routes._editor
    async with open_ledger_(settings, s3_server) as h:
        wid = (await created(h))["workflowId"]
        assert (await grant(h, wid, "frank", "runner")).status_code == 200

        async def then_deleted(request, workflow_id):
            identity = await checked(request, workflow_id)  # the caller may edit it ...
            gone = await h.client.delete(f"/api/workflows/{wid}", headers=ERIN)  # ... then it is deleted
            assert gone.status_code == 200, gone.text
            return identity

        monkeypatch.setattr(routes, "_editor", then_deleted)
        r = await (grant(h, wid, "gus", "editor") if change == "grant" else revoke(h, wid, "frank"))
        monkeypatch.setattr(routes, "_editor", checked)
        after = await h.client.get(f"/api/workflows/{wid}/grants", headers=WHO)
    assert r.status_code == 404 and r.json()["error"] == GONE, r.text
    assert after.status_code == 404
    assert rows(settings.database_url, "SELECT count(*) FROM workflow_grants") == [(0,)]
    assert [t for t in ledger_fga.read() if t["object"] == f"workflow:{wid}"] == []


def open_ledger_(settings, s3_server):
    from tests.fixtures.ledger import open_ledger

    return open_ledger(settings, s3=store_of(s3_server))
