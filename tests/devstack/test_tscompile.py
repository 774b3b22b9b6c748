"""ts-compile stand-in: the contract cases of contracts.md §C over real HTTP and TypeScript 6.0.3."""

from __future__ import annotations

import hashlib

import httpx
import pytest

JSON = {"content-type": "application/json"}

# Known-answer vector: the fixture `test/fixtures/good.ts` of uraitakahito/ts-compile-service,
# whose emitted JavaScript the service's own test pins to GOOD_JS_SHA256 (contracts.md §C.6).
GOOD_TS = (
    "/** doc comment stays? */\n(async (): Promise<void> => {\n"
    '  const opts = (globalThis.__bh.opts["autoscroll"] ?? {}) as { maxSteps?: unknown }; // trailing\n'
    "  const maxSteps = Number(opts.maxSteps ?? 40);\n  interface Report {\n    reachedBottom: boolean;\n  }\n"
    "  // line comment\n  const r: Report = { reachedBottom: maxSteps > 0 };\n"
    '  globalThis.__bh.report("autoscroll", r satisfies Report);\n})();\n'
)
GOOD_JS_SHA256 = "f9bf89ea9a05683a948b30141eb6327f45439a41d795ec86bd2b68e6496d1708"


def h(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def script(id_: str, source: str, **extra) -> dict:
    return {"id": id_, "version": 1, "phase": "behavior", "source": source, "sha256": h(source), **extra}


def post(url: str, body, headers=JSON) -> httpx.Response:
    return httpx.post(f"{url}/compile", json=body, headers=headers, timeout=60)


def test_known_fixture_compiles_to_the_real_services_hash(tscompile_url):
    opts = {"maxSteps": 3}
    r = post(tscompile_url, {"scripts": [script("autoscroll", GOOD_TS, options=opts)]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["typescript"] == "6.0.3" and body["hostTypes"] == "v0.2.0"
    (out,) = body["scripts"]
    assert out["sha256"] == GOOD_JS_SHA256 == h(out["source"])
    assert out["source"].startswith('"use strict";\n/** doc comment stays? */')
    assert "satisfies" not in out["source"] and "export" not in out["source"]
    assert (out["id"], out["version"], out["phase"], out["options"]) == ("autoscroll", 1, "behavior", opts)
    again = post(tscompile_url, {"scripts": [script("autoscroll", GOOD_TS)]}).json()
    assert again["cached"] is True and body["cached"] is False
    assert again["scripts"][0]["sha256"] == GOOD_JS_SHA256 and "options" not in again["scripts"][0]


def test_type_errors_give_422_with_diagnostics_and_no_javascript(tscompile_url):
    bad = "const n: number = 'x';\n__bh.remaining;\n"
    r = post(tscompile_url, {"scripts": [script("fine", GOOD_TS), script("bad", bad)]})
    assert r.status_code == 422
    assert r.headers["x-amzn-errortype"] == "CompileFailed"
    body = r.json()
    assert "scripts" not in body and "use strict" not in r.text
    assert body["typescript"] == "6.0.3"
    got = [(d["file"], d["line"], d["col"], d["code"]) for d in body["diagnostics"]]
    assert got == [("bad.ts", 1, 7, "TS2322"), ("bad.ts", 2, 6, "TS2551")]
    assert "Did you mean 'remainingMs'?" in body["diagnostics"][1]["message"]


def test_one_program_rejects_duplicate_globals_enums_and_host_conflicts(tscompile_url):
    r = post(tscompile_url, {"scripts": [
        script("a", "const shared = 1;\n"), script("b", "const shared = 2;\nenum E { X }\nlet name = 1;\n"),
        script("c", "var __bh: number;\n")]})
    assert r.status_code == 422
    got = {(d.get("file"), d["code"]) for d in r.json()["diagnostics"]}
    # duplicate globals across scripts, an enum (erasableSyntaxOnly), a clash with lib.dom's
    # `name`, and a redeclaration of the host object (reported in host.d.ts, which is checked)
    assert {("a.ts", "TS2451"), ("b.ts", "TS2451"), ("b.ts", "TS1294"), ("host.d.ts", "TS2403")} <= got


def test_hash_mismatch_is_409_before_compiling(tscompile_url):
    broken = script("b", "this is not typescript at all (((")
    broken["sha256"] = h("something else")
    r = post(tscompile_url, {"scripts": [script("ok", "const k = 1;\n"), broken]})
    assert r.status_code == 409
    assert r.headers["x-amzn-errortype"] == "SourceHashMismatch"
    assert r.json()["id"] == "b"


def test_validation_collects_every_field(tscompile_url):
    s = script("Bad_Id", "const z = 1;\n")
    s["sha256"] = s["sha256"].upper()
    s["phase"] = "later"
    r = post(tscompile_url, {"scripts": [s, {"id": "x", "version": 1, "phase": "preload"}]})
    assert r.status_code == 400 and r.headers["x-amzn-errortype"] == "ValidationException"
    paths = {f["path"] for f in r.json()["fieldList"]}
    assert paths == {"/scripts/0/id", "/scripts/0/sha256", "/scripts/0/phase", "/scripts/1/source", "/scripts/1/sha256"}
    missing = post(tscompile_url, {})
    assert missing.status_code == 400 and missing.json()["fieldList"][0]["path"] == "/scripts"


def test_empty_list_is_200_and_cached_second_time(tscompile_url):
    first = post(tscompile_url, {"scripts": []})
    second = post(tscompile_url, {"scripts": []})
    assert first.status_code == second.status_code == 200
    assert first.json()["scripts"] == [] and first.json()["typescript"] == "6.0.3"
    assert second.json()["cached"] is True


@pytest.mark.parametrize(
    ("method", "path", "headers", "body", "status", "kind"),
    [
        ("POST", "/compile", {"content-type": "application/json; charset=utf-8"}, b'{"scripts": []}', 415, "UnsupportedMediaTypeException"),
        ("POST", "/compile", {"content-type": "application/json", "accept": "text/html"}, b'{"scripts": []}', 406, "NotAcceptableException"),
        ("POST", "/compile", {"content-type": "application/json"}, b"[1, 2]", 400, "SerializationException"),
        ("POST", "/compile", {"content-type": "application/json"}, b'{"scripts": [{"id": "a", "version": 1.5, "phase": "preload", "source": "x", "sha256": "0"}]}', 400, "SerializationException"),
        ("DELETE", "/compile", {}, None, 404, "UnknownOperationException"),
        ("GET", "/healthz", {"content-type": "application/json"}, None, 415, "UnsupportedMediaTypeException"),
    ],
)
def test_framework_errors_carry_errortype(tscompile_url, method, path, headers, body, status, kind):
    r = httpx.request(method, tscompile_url + path, headers=headers, content=body, timeout=30)
    assert r.status_code == status
    assert r.headers["x-amzn-errortype"] == kind
    assert r.json() == {}


def test_healthz(tscompile_url):
    r = httpx.get(f"{tscompile_url}/healthz")
    assert r.status_code == 200
    assert r.json() == {"ok": True, "typescript": "6.0.3", "hostTypes": "v0.2.0"}
