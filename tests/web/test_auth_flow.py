"""Sign-in of the web page over real HTTP: the dev issuer's authorization-code flow with PKCE,
the ledger's /auth routes, session cookies, CSRF, and the archive filters — against a real
ledger (Postgres, real OpenFGA server, S3 stand-in) in JWT mode."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from devstack.issuer import s256
from tests.archive.ledger_stack import serve, settings_for


@pytest.fixture(scope="module")
def web_ledger(archive_ledger, dev_issuer) -> Iterator[object]:
    server = serve(settings_for(archive_ledger.db_url, archive_ledger.fga, archive_ledger.s3,
                                oidc_issuer=dev_issuer.issuer, oidc_audience=dev_issuer.audience))
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def sign_in(ledger_url: str, subject: str, organizations: str) -> Iterator[httpx.Client]:
    """A browser-like client that went through /auth/login → the issuer's form → /auth/callback."""
    with httpx.Client(timeout=15) as client:
        yield _signed_in(client, ledger_url, subject, organizations)


def _signed_in(client: httpx.Client, ledger_url: str, subject: str, organizations: str) -> httpx.Client:
    start = client.get(ledger_url + "/auth/login")
    assert start.status_code == 303
    authorize = start.headers["location"]
    query = parse_qs(urlsplit(authorize).query)
    assert query["code_challenge_method"] == ["S256"] and query["response_type"] == ["code"]
    assert query["redirect_uri"] == [ledger_url + "/auth/callback"]
    form = client.get(authorize)  # no --user on this issuer: the sign-in form
    assert form.status_code == 200 and 'name="code_challenge"' in form.text
    fields = dict(re.findall(r'name="([a-z_]+)" value="([^"]*)"', form.text))
    fields.update(subject=subject, organizations=organizations)
    back = client.post(authorize.split("?")[0], data=fields)
    assert back.status_code == 302 and back.headers["location"].startswith(ledger_url + "/auth/callback?code=")
    done = client.get(back.headers["location"])
    assert done.status_code == 303 and done.headers["location"] == "/", done.text
    cookie = done.headers["set-cookie"]
    assert "waggle_session=" in cookie and "HttpOnly" in cookie and "SameSite=lax" in cookie
    assert "Secure" not in cookie  # plain http on loopback
    return client


def test_issuer_code_flow_checks_pkce_and_single_use(dev_issuer) -> None:
    verifier = "v" * 43
    params = {"response_type": "code", "client_id": "waggle", "redirect_uri": "http://127.0.0.1:1/cb",
              "state": "s1", "code_challenge": s256(verifier), "code_challenge_method": "S256"}
    with httpx.Client(timeout=10) as c:
        assert c.get(dev_issuer.url + "/authorize", params={**params, "redirect_uri": "http://evil.example/cb"}).status_code == 400
        assert c.get(dev_issuer.url + "/authorize", params={**params, "code_challenge_method": "plain"}).status_code == 400
        back = c.post(dev_issuer.url + "/authorize", data={**params, "subject": "dora", "organizations": "acme, x"})
        code = parse_qs(urlsplit(back.headers["location"]).query)
        assert code["state"] == ["s1"]
        grant = {"grant_type": "authorization_code", "code": code["code"][0], "redirect_uri": params["redirect_uri"],
                 "client_id": "waggle", "code_verifier": "w" * 43}
        wrong = c.post(dev_issuer.url + "/token", data=grant)
        assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"
        # a failed attempt used the code up: a code is good for one exchange only
        again = c.post(dev_issuer.url + "/token", data={**grant, "code_verifier": verifier})
        assert again.status_code == 400
        back = c.post(dev_issuer.url + "/authorize", data={**params, "subject": "dora", "organizations": "acme"})
        grant["code"] = parse_qs(urlsplit(back.headers["location"]).query)["code"][0]
        ok = c.post(dev_issuer.url + "/token", data={**grant, "code_verifier": verifier})
        assert ok.status_code == 200 and ok.json()["token_type"] == "Bearer" and ok.json()["id_token"]
        assert c.post(dev_issuer.url + "/token", data={**grant, "code_verifier": verifier}).status_code == 400
        discovery = c.get(dev_issuer.url + "/.well-known/openid-configuration").json()
        assert discovery["authorization_endpoint"] == dev_issuer.url + "/authorize"
        assert discovery["code_challenge_methods_supported"] == ["S256"]


def test_session_sees_what_the_api_allows_and_needs_csrf(web_ledger, archive_ledger) -> None:
    a = archive_ledger.archives
    with sign_in(web_ledger.url, "bob", "acme") as browser:
        me = browser.get(web_ledger.url + "/auth/session").json()
        assert me["subject"] == "bob" and me["organizations"] == ["acme"] and me["csrfToken"]
        listed = [x["id"] for x in browser.get(web_ledger.url + "/api/archives").json()["archives"]]
        assert listed == [a["acme_new"]["id"], a["acme_old"]["id"]]
        sign = web_ledger.url + f"/api/archives/{a['acme_old']['id']}/url"
        refused = browser.post(sign)
        assert refused.status_code == 403 and "X-CSRF-Token" in refused.json()["error"]
        assert browser.post(sign, headers={"X-CSRF-Token": "wrong"}).status_code == 403
        ok = browser.post(sign, headers={"X-CSRF-Token": me["csrfToken"]})
        assert ok.status_code == 200 and ok.json()["expiresIn"] == 300
        other = web_ledger.url + f"/api/archives/{a['contoso']['id']}/url"
        assert browser.post(other, headers={"X-CSRF-Token": me["csrfToken"]}).status_code == 404
        # filters: URL text, and a crawl that captured none of these
        assert [x["id"] for x in browser.get(web_ledger.url + "/api/archives", params={"url": "ACME_OLD"}).json()["archives"]] \
            == [a["acme_old"]["id"]]
        assert browser.get(web_ledger.url + "/api/archives", params={"url": "%"}).json()["archives"] == []
        none = browser.get(web_ledger.url + "/api/archives", params={"crawl": "3f2b8c1e-8d0a-4d59-9f5e-0c6a1b2d3e4f"})
        assert none.status_code == 200 and none.json()["archives"] == []
        assert browser.get(web_ledger.url + "/api/archives", params={"crawl": "nope"}).status_code == 400
        # sign out: the session is gone server-side, the old cookie is worthless
        cookie = browser.cookies.get("waggle_session")
        assert browser.post(web_ledger.url + "/auth/logout").status_code == 403  # CSRF here too
        assert browser.post(web_ledger.url + "/auth/logout", headers={"X-CSRF-Token": me["csrfToken"]}).status_code == 200
    replay = httpx.get(web_ledger.url + "/auth/session", cookies={"waggle_session": cookie}, timeout=10)
    assert replay.status_code == 401


def test_outsider_session_sees_nothing(web_ledger) -> None:
    with sign_in(web_ledger.url, "mallory", "evil") as browser:
        assert browser.get(web_ledger.url + "/auth/session").json()["canSubmit"] is False
        assert browser.get(web_ledger.url + "/api/archives").json() == {"archives": [], "nextBefore": None}


def test_callback_refuses_a_login_not_started_in_this_browser(web_ledger) -> None:
    with httpx.Client(timeout=10) as attacker, httpx.Client(timeout=10) as victim:
        start = attacker.get(web_ledger.url + "/auth/login")
        state = parse_qs(urlsplit(start.headers["location"]).query)["state"][0]
        r = victim.get(web_ledger.url + "/auth/callback", params={"code": "x", "state": state})
        assert r.status_code == 400 and "not started in this browser" in r.text
        assert "waggle_session" not in r.headers.get("set-cookie", "")
        r = attacker.get(web_ledger.url + "/auth/callback", params={"error": "access_denied"})
        assert r.status_code == 400 and "access_denied" in r.text


def test_bearer_callers_need_no_csrf_and_header_mode_has_no_sign_in(web_ledger, archive_ledger, dev_issuer) -> None:
    token = dev_issuer.mint("bob", ["acme"])
    r = httpx.post(web_ledger.url + f"/api/archives/{archive_ledger.archives['acme_old']['id']}/url",
                   headers={"Authorization": "Bearer " + token}, timeout=10)
    assert r.status_code == 200
    assert httpx.get(archive_ledger.url + "/auth/login", timeout=10).status_code == 404
    page = httpx.get(web_ledger.url + "/", timeout=10)
    assert page.status_code == 200 and '<script type="module" src="/static/app.js">' in page.text
    assert httpx.get(web_ledger.url + "/static/app.js", timeout=10).headers["content-type"].startswith("text/javascript")


def test_a_session_lives_only_as_long_as_its_token(web_ledger, archive_ledger, dev_issuer) -> None:
    """A stored token that no longer passes (here: expired) ends the session: 401, not its subject."""
    import asyncio
    from datetime import datetime, timedelta, timezone

    from ledger.db.pool import open_pool
    from ledger.web import sessions

    async def store(token: str) -> str:
        pool = await open_pool(archive_ledger.db_url, max_size=1)
        try:
            sid, _ = await sessions.create(pool, token, "bob", datetime.now(timezone.utc) + timedelta(hours=1))
        finally:
            await pool.close()
        return sid

    expired = asyncio.run(store(dev_issuer.mint("bob", ["acme"], expires_in="-1h")))
    live = asyncio.run(store(dev_issuer.mint("bob", ["acme"])))
    get = lambda sid: httpx.get(web_ledger.url + "/api/archives", cookies={"waggle_session": sid}, timeout=10)  # noqa: E731
    assert get(expired).status_code == 401
    assert get(live).status_code == 200 and get(live).json()["archives"]
    assert get("forged-" + live).status_code == 401


def test_web_url_sets_the_redirect_uri_and_secure_cookies(archive_ledger, dev_issuer) -> None:
    server = serve(settings_for(archive_ledger.db_url, archive_ledger.fga, archive_ledger.s3,
                                oidc_issuer=dev_issuer.issuer, oidc_audience=dev_issuer.audience,
                                web_url="https://waggle.example/"))
    try:
        r = httpx.get(server.url + "/auth/login", timeout=10)
        assert r.status_code == 303
        assert parse_qs(urlsplit(r.headers["location"]).query)["redirect_uri"] == ["https://waggle.example/auth/callback"]
        cookie = r.headers["set-cookie"]
        assert "waggle_login=" in cookie and "Secure" in cookie and "HttpOnly" in cookie and "Path=/auth" in cookie
    finally:
        server.stop()


def test_an_unreachable_issuer_is_a_clear_page(archive_ledger) -> None:
    from devstack.supervisor import free_port

    nowhere = f"http://127.0.0.1:{free_port()}"
    server = serve(settings_for(archive_ledger.db_url, archive_ledger.fga, archive_ledger.s3, oidc_issuer=nowhere))
    try:
        r = httpx.get(server.url + "/auth/login", timeout=20)
        assert r.status_code == 502 and "discovery document" in r.text and "openid-configuration" in r.text
    finally:
        server.stop()


def test_replay_runs_only_on_its_own_origin_and_no_session_lives_there(web_ledger) -> None:
    """The loopback twin (localhost ↔ 127.0.0.1) is the replay origin: it serves the replay page,
    opens no sign-in and honours no session cookie; the page's own origin never serves replay."""
    port = web_ledger.url.rsplit(":", 1)[1]
    twin = {"Host": f"localhost:{port}"}
    with sign_in(web_ledger.url, "bob", "acme") as browser:
        me = browser.get(web_ledger.url + "/auth/session").json()
        assert me["replayUrl"] == f"http://localhost:{port}/replay.html"
        cookie = browser.cookies.get("waggle_session")
    assert httpx.get(web_ledger.url + "/replay.html", timeout=10).status_code == 404
    page = httpx.get(web_ledger.url + "/replay.html", headers=twin, timeout=10)
    assert page.status_code == 200 and '<script src="/replay/ui.js">' in page.text
    assert httpx.get(web_ledger.url + "/replay/sw.js", headers=twin, timeout=10).status_code == 200
    for path in ("/replay/sw.js", "/replay/index.html", "/replay/ui.js"):  # the app never runs beside the session
        refused = httpx.get(web_ledger.url + path, timeout=10)
        assert refused.status_code == 404 and "replay origin" in refused.json()["error"], path
    stolen = httpx.get(web_ledger.url + "/api/archives", headers=twin, cookies={"waggle_session": cookie}, timeout=10)
    assert stolen.status_code == 401
    assert httpx.get(web_ledger.url + "/auth/login", headers=twin, timeout=10).status_code == 404
