"""Identity (ledger.md §3, §12.9–§12.12): JWT against the dev issuer's JWKS over real HTTP,
the dev header, deny mode, /api/me, /api/scripts, start-up notes and the error policy."""

from __future__ import annotations

import base64
import json
import logging
import time

import httpx
import jwt
import pytest

from devstack.issuer import SigningKey, parse_span
from ledger.api.identity import (
    DenyResolver,
    HeaderResolver,
    JwtResolver,
    choose_resolver,
    organizations_from_claim,
    organizations_from_header,
    startup_notes,
)
from ledger.settings import Settings
from tests.fixtures.ledger import LedgerHarness, ledger_settings, open_ledger

pytestmark = pytest.mark.anyio


def s(**kw) -> Settings:
    return Settings(_env_file=None, **kw)


def test_mode_selection():
    assert isinstance(choose_resolver(s()), DenyResolver)
    assert isinstance(choose_resolver(s(dev_identity=True)), HeaderResolver)
    jwt_mode = choose_resolver(s(dev_identity=True, oidc_issuer="http://127.0.0.1:9"))
    assert isinstance(jwt_mode, JwtResolver) and jwt_mode.audience == "waggle"


def test_claim_and_header_parsing():
    assert organizations_from_claim(["acme", "", 42, None, "beta"]) == ["acme", "beta"]
    assert organizations_from_claim("acme") == [] and organizations_from_claim(None) == []
    assert organizations_from_header(" acme , , contoso ,") == ["acme", "contoso"]
    assert organizations_from_header(None) == []


def test_issuer_spans():
    assert parse_span("1h") == 3600 and parse_span("-1h") == -3600 and parse_span("30m") == 1800
    assert parse_span(None) == 3600 and parse_span(45) == 45
    with pytest.raises(ValueError):
        parse_span("soon")


def test_startup_notes_name_the_mode():
    notes = startup_notes(s(dev_identity=True, crawl_webhook_url="http://w", crawl_webhook_token="t"),
                          HeaderResolver(), "127.0.0.1", 7070)
    texts = [t for _, t in notes]
    assert notes[0][0] == logging.WARNING and "Never enable this outside local development" in texts[0]
    assert any("Crawl level reports will be refused (401)" in t for t in texts)
    assert texts[-1].endswith("identity: dev header; crawl level reports: blocked")
    texts = [t for _, t in startup_notes(s(dev_identity=True), HeaderResolver(), "0.0.0.0", 7070)]
    assert any("dev header is trusted on 0.0.0.0:7070" in t for t in texts)
    notes = startup_notes(s(), DenyResolver(), "127.0.0.1", 7070)
    assert notes[0][1].startswith("No identity is configured") and notes[-1][1].endswith("crawl level reports: off")
    iss = "http://127.0.0.1:9099"
    notes = startup_notes(s(oidc_issuer=iss, dev_identity=True, crawl_webhook_url="http://w", crawl_webhook_token="t"),
                          JwtResolver(iss, "waggle"), "0.0.0.0", 7070)
    assert all(level == logging.INFO for level, _ in notes)
    assert "is ignored" in notes[0][1]
    assert notes[-1][1].endswith(f"identity: JWT ({iss}); crawl level reports: ready")


def forge(claims: dict, *, kid: str | None = None, key: SigningKey | None = None, alg: str = "RS256") -> str:
    key = key or SigningKey()
    return jwt.encode(claims, key.private, algorithm=alg, headers={"kid": kid or key.kid})


def unsigned(claims: dict, kid: str) -> str:
    enc = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()  # noqa: E731
    return f"{enc({'alg': 'none', 'typ': 'JWT', 'kid': kid})}.{enc(claims)}."


@pytest.fixture
def jwt_settings(migrated_db_url, ledger_fga, dev_issuer):
    return ledger_settings(migrated_db_url, ledger_fga, None, dev_identity=True, oidc_issuer=dev_issuer.issuer)


async def me(h, headers):
    return await h.client.get("/api/me", headers=headers)


async def test_jwt_accepted_and_every_bad_token_401(jwt_settings, dev_issuer, caplog):
    caplog.set_level(logging.INFO, logger="waggle.identity")
    good = dev_issuer.mint("alice", ["acme", "beta"])
    kid = jwt.get_unverified_header(good)["kid"]
    now = int(time.time())
    base = {"sub": "alice", "organizations": ["acme"], "iss": dev_issuer.issuer, "aud": "waggle",
            "iat": now, "exp": now + 600}
    bad = {
        "expired": dev_issuer.mint("alice", ["acme"], expires_in="-1h"),
        "other key, same kid": forge(base, kid=kid),
        "unknown kid": forge(base),
        "wrong issuer": forge({**base, "iss": "http://evil.test"}, kid=kid),
        "alg none": unsigned(base, kid),
        "HS256": jwt.encode(base, "secret", algorithm="HS256", headers={"kid": kid}),
        "garbage": "not.a.jwt",
    }
    async with open_ledger(jwt_settings) as h:
        r = await me(h, {"authorization": f"Bearer {good}"})
        assert r.json() == {"subject": "alice", "organizations": ["acme", "beta"], "canSubmit": True}
        for name, token in bad.items():
            r = await me(h, {"authorization": f"Bearer {token}"})
            assert (r.status_code, r.json()) == (401, {"error": "unauthenticated"}), name
        for headers in ({"authorization": f"Sneaky {good}"}, {"authorization": f"bearer {good}"},
                        {"X-Waggle-Subject": "alice", "X-Waggle-Organizations": "acme"}, {}):
            assert (await me(h, headers)).status_code == 401  # header mode is ignored with an issuer
    logged = caplog.text
    assert "JWT rejected" in logged and good not in logged and "acme" not in logged


def test_claims_mapping_with_a_local_key():
    key = SigningKey()
    resolver = JwtResolver("http://issuer.test", "waggle")

    resolver._key_for = lambda kid: type("K", (), {"key": key.private.public_key()})()
    now = int(time.time())
    base = {"iss": "http://issuer.test", "aud": ["other", "waggle"], "iat": now, "exp": now + 60}
    assert resolver.verify(key.sign({**base, "sub": "alice", "organizations": ["acme", ""]})).organizations == ["acme"]
    assert resolver.verify(key.sign({**base, "sub": "alice"})).organizations == []
    assert resolver.verify(key.sign({**base, "sub": "alice", "organizations": "acme"})).organizations == []
    assert resolver.verify(key.sign(base)) is None
    assert resolver.verify(key.sign({**base, "sub": ""})) is None
    no_exp = {k: v for k, v in base.items() if k != "exp"}
    assert resolver.verify(key.sign({**no_exp, "sub": "alice"})) is None


async def test_wrong_audience(migrated_db_url, ledger_fga, dev_issuer):
    # an issuer whose tokens carry another audience: same JWKS, wrong aud
    settings = ledger_settings(migrated_db_url, ledger_fga, None, oidc_issuer=dev_issuer.issuer,
                               oidc_audience="not-waggle")
    async with open_ledger(settings) as h:
        r = await me(h, {"authorization": f"Bearer {dev_issuer.mint('alice', ['acme'])}"})
        assert r.status_code == 401


async def test_me_and_scripts(migrated_db_url, ledger_fga):
    settings = ledger_settings(migrated_db_url, ledger_fga, None)
    async with open_ledger(settings) as h:
        assert (await me(h, {})).status_code == 401
        r = await me(h, LedgerHarness.who("mallory", "acme"))
        assert r.json() == {"subject": "mallory", "organizations": ["acme"], "canSubmit": False}
        r = await me(h, LedgerHarness.who("alice", ""))
        assert r.json() == {"subject": "alice", "organizations": [], "canSubmit": False}
        r = await me(h, {"X-Waggle-Subject": "alice", "X-Waggle-Organizations": " other , acme "})
        assert r.json()["canSubmit"] is True  # any organization with a grant
        assert (await h.client.get("/api/scripts", headers=LedgerHarness.who("mallory", "acme"))).status_code == 404
        async with h.services.pool.connection() as conn:
            from ledger.crawl.scripts import load_defaults
            await load_defaults(conn)
        r = await h.client.get("/api/scripts", headers=LedgerHarness.who())
        (item,) = r.json()["scripts"]
        assert set(item) == {"id", "version", "phase", "sha256"} and item["id"] == "autoscroll"


async def test_deny_mode_refuses_everyone(migrated_db_url, ledger_fga):
    settings = ledger_settings(migrated_db_url, ledger_fga, None, dev_identity=False)
    async with open_ledger(settings) as h:
        assert (await me(h, LedgerHarness.who())).status_code == 401


async def test_unexpected_error_is_a_bare_500(migrated_db_url, ledger_fga, caplog):
    settings = ledger_settings(migrated_db_url, ledger_fga, None)

    class Exploding:
        async def can_submit(self, identity):
            raise RuntimeError('duplicate key value violates unique constraint "secret_detail" (22007)')

    async with open_ledger(settings) as h:
        h.services.authz = Exploding()
        r = await me(h, LedgerHarness.who())
    assert (r.status_code, r.json()) == (500, {"error": "internal error"})
    assert "secret_detail" in caplog.text


async def test_dev_issuer_endpoints(dev_issuer):
    async with httpx.AsyncClient(base_url=dev_issuer.url) as c:
        disc = (await c.get("/.well-known/openid-configuration")).json()
        assert disc["issuer"] == dev_issuer.issuer
        assert disc["jwks_uri"] == dev_issuer.issuer + "/.well-known/jwks.json"
        (key,) = (await c.get("/.well-known/jwks.json")).json()["keys"]
        assert (key["alg"], key["use"], key["kty"]) == ("RS256", "sig", "RSA") and "d" not in key
        r = await c.post("/token", json={"organizations": ["acme"]})
        assert (r.status_code, r.json()) == (400, {"error": "subject is required"})
        r = await c.post("/token", json={"subject": "  bob  ", "organizations": ["acme", "", 3]})
    claims = jwt.decode(r.json()["access_token"], options={"verify_signature": False})
    assert claims["sub"] == "bob" and claims["organizations"] == ["acme"] and claims["aud"] == "waggle"
    assert 3590 <= claims["exp"] - claims["iat"] <= 3600


def test_unknown_kid_refetch_is_rate_limited(dev_issuer):
    resolver = JwtResolver(dev_issuer.issuer, "waggle")
    fetches = []
    fetch = resolver.jwks.fetch_data
    resolver.jwks.fetch_data = lambda: (fetches.append(1), fetch())[1]
    good = dev_issuer.mint("alice", ["acme"])
    assert resolver.verify(good).subject == "alice"
    now = int(time.time())
    forged = {"sub": "alice", "iss": dev_issuer.issuer, "aud": "waggle", "iat": now, "exp": now + 60}
    for _ in range(5):
        assert resolver.verify(forge(forged)) is None
    assert resolver.verify(good).subject == "alice"
    assert len(fetches) == 2  # the first fetch and one refetch for the first unknown kid


async def test_unstorable_text_is_a_400(migrated_db_url, ledger_fga, fake_webhook):
    settings = ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url)
    async with open_ledger(settings) as h:
        for body in (rb'{"seeds": ["https://a.test/\u0000x"]}', rb'{"seeds": ["https://a.test/\ud800"]}',
                     rb'{"seeds": ["https://a.test/"], "scripts": [{"name": "x", "phase": "behavior",'
                     rb' "source": "1;", "options": {"k": "\u0000"}}]}'):
            r = await h.client.post("/api/crawls", content=body,
                                    headers={**LedgerHarness.who(), "content-type": "application/json"})
            assert r.status_code == 400 and "NUL" in r.json()["error"]
    assert fake_webhook.calls == []


def test_issuer_module_runs_on_loopback(tmp_path):
    """``python -m devstack.issuer --port 0 --ready-file F`` serves discovery with its URL as issuer."""
    import os
    import subprocess
    import sys

    ready = tmp_path / "ready.json"
    proc = subprocess.Popen([sys.executable, "-m", "devstack.issuer", "--host", "127.0.0.1", "--port", "0",
                             "--audience", "waggle", "--ready-file", str(ready)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "issuer did not start"
            time.sleep(0.05)
        info = json.loads(ready.read_text())
        disc = httpx.get(info["url"] + "/.well-known/openid-configuration", timeout=10).json()
        assert disc["issuer"] == info["issuer"] == info["url"]
    finally:
        proc.terminate()
        proc.wait(10)
        proc.stderr.close()
    refused = subprocess.run([sys.executable, "-m", "devstack.issuer", "--host", "0.0.0.0", "--port", "0"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "loopback only" in refused.stderr and "Traceback" not in refused.stderr


async def test_oversized_body_is_413(migrated_db_url, ledger_fga, fake_webhook):
    from ledger.api.errors import MAX_BODY_BYTES

    settings = ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url)
    async with open_ledger(settings) as h:
        big = b'{"seeds": ["https://a.test/' + b"x" * MAX_BODY_BYTES + b'"]}'
        r = await h.client.post("/api/crawls", content=big, headers={"content-type": "application/json"})
        assert r.status_code == 413 and "MiB" in r.json()["error"]
        r = await h.client.post("/api/crawls", content=b"seeds", headers={"content-type": "text/plain"})
        assert r.status_code == 400
