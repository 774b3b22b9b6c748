"""scripts/doctor and scripts/windmill-variables against real servers on loopback: the local
Windmill runner (devstack.windmill), the real ledger (JWT mode), the dev issuer, the OpenFGA,
S3, capture (BrowserHive v12) and ts-compile stand-ins. Each failure must name its fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from devstack.serving import start_module
from ledger.client import doctor
from ledger.client import windmill_vars as wv
from tests.client.conftest import RealLedger
from tests.client.servers import serve_in_thread
from tests.fixtures.ledger import ServerThread, refused_url

REPO = Path(__file__).resolve().parents[2]
TOKEN = "wm-test-token"


@dataclass
class Runner:
    url: str
    store: object


def start_runner(state: Path, root: Path) -> tuple[ServerThread, Runner]:
    """The local Windmill runner's real app, in a thread; ``root`` holds (or not) f/waggle."""
    from devstack.windmill.app import create_app
    from devstack.windmill.engine import Engine
    from devstack.windmill.store import Store

    store = Store(state)
    server = ServerThread(None, lifespan="on")
    engine = Engine(store, root, base_url=server.url, token=TOKEN, workspace="waggle")
    server.app = server.server.config.app = create_app(engine, store, token=TOKEN, workspace="waggle")
    return server.start(), Runner(server.url, store)


@pytest.fixture(scope="module")
def runner(tmp_path_factory) -> Iterator[Runner]:
    server, r = start_runner(tmp_path_factory.mktemp("wm"), REPO)
    try:
        yield r
    finally:
        server.stop()


@pytest.fixture(scope="module")
def capture_url(s3_server, tmp_path_factory) -> Iterator[str]:
    proc, url = start_module("waggle_capture", "--allow-private", "--s3-endpoint", s3_server.endpoint,
                             tmp_dir=tmp_path_factory.mktemp("capture"))
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.fixture(scope="module")
def tscompile_url(tmp_path_factory) -> Iterator[str]:
    proc, url = start_module("devstack.tscompile", tmp_dir=tmp_path_factory.mktemp("tsc"))
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(15)


@pytest.fixture(scope="module")
def flow_token(dev_issuer) -> str:
    return dev_issuer.mint("waggle-flow", ["acme"], "30d")


@pytest.fixture
def healthy(real_ledger: RealLedger, runner, capture_url, tscompile_url, dev_issuer, fga_server, s3_server, flow_token):
    """A stack where everything is in place: the five variables written through the REST API."""
    values = wv.build_values(flow_token, real_ledger.url, [capture_url], "", tscompile_url)
    written = wv.write_variables(runner.url, TOKEN, "waggle", values)
    assert {w.path for w in written} == set(wv.VARIABLES)
    return doctor.Target(api_url=real_ledger.url, windmill_url=runner.url, windmill_token=TOKEN, workspace="waggle",
                         issuer_url=dev_issuer.url, fga_url=fga_server.api_url, s3_endpoint=s3_server.endpoint)


@pytest.fixture(autouse=True)
def patient_doctor(monkeypatch):
    """These tests judge what each check concludes, not the 3 s budget: on a loaded 2-core
    machine a healthy stand-in once took longer than 3 s to answer, and the check failed."""
    monkeypatch.setattr(doctor, "TIMEOUT_S", 20.0)


def results(target: doctor.Target) -> dict[str, doctor.Outcome]:
    return {c.name: o for c, o in doctor.run_checks(target)}


def set_var(runner: Runner, path: str, value: str) -> None:
    wv.write_variables(runner.url, TOKEN, "waggle", {path: value})


def failed(res: dict[str, doctor.Outcome]) -> list[str]:
    return [n for n, o in res.items() if o.status == doctor.FAIL]


def test_a_healthy_stack_passes_every_check(healthy):
    res = results(healthy)
    assert failed(res) == [], doctor.report(list(zip(doctor.checks_for(healthy), res.values())))
    assert set(res) == {"ledger", "issuer", "crawl route", "windmill", "variables", "flow", "flow token",
                        "flow → ledger", "browserhive", "ts-compile", "openfga", "s3"}
    assert all(o.status == doctor.OK for o in res.values())
    assert "waggle-flow may submit for acme" in res["flow token"].detail


def test_variables_are_created_then_updated(runner, flow_token):
    values = wv.build_values(flow_token, "http://ledger:7070", ["http://bh-1:50051", "http://bh-2:50051"], "", "http://tsc:8080")
    first = wv.write_variables(runner.url, TOKEN, "waggle", {wv.TS_COMPILE_URL: "http://other:1"})
    again = wv.write_variables(runner.url, TOKEN, "waggle", values)
    assert [w.action for w in again if w.path == wv.TS_COMPILE_URL] == ["updated"]
    assert first[0].path == wv.TS_COMPILE_URL
    assert runner.store.get_variable(wv.ENDPOINTS)["value"] == '["http://bh-1:50051", "http://bh-2:50051"]'
    assert runner.store.get_variable(wv.TOKEN)["is_secret"] is True
    assert runner.store.get_variable(wv.TLS_CA)["value"] == ""  # written even when empty


@pytest.mark.parametrize("args, message", [
    (("", "http://l:1", ["http://b:1"], "", "http://t:1"), "u/admin/waggle_token would be empty"),
    (("t", "ledger:7070", ["http://b:1"], "", "http://t:1"), "u/admin/waggle_api_url must be an http"),
    (("t", "http://l:1", ["browserhive-1:50051"], "", "http://t:1"), "u/admin/browserhive_endpoints must be an http"),
    (("t", "http://l:1", [" "], "", "http://t:1"), "needs at least one BrowserHive endpoint"),
    (("t", "http://l:1", ["http://b:1"], "not a pem", "http://t:1"), "must be a PEM certificate"),
])
def test_bad_variable_values_are_refused_before_writing(args, message):
    with pytest.raises(wv.VariableError, match=message):
        wv.build_values(*args)


def test_missing_variables_are_listed_and_block_their_children(healthy, tmp_path):
    server, empty = start_runner(tmp_path / "wm", REPO)
    try:
        res = results(replace(healthy, windmill_url=empty.url))
    finally:
        server.stop()
    assert failed(res) == ["variables"]
    assert all(p in res["variables"].detail for p in wv.VARIABLES)
    assert "scripts/windmill-variables" in res["variables"].fix
    for child in ("flow token", "flow → ledger", "browserhive", "ts-compile"):
        assert res[child].status == doctor.SKIP and res[child].detail == "variables first"
    assert res["flow"].status == doctor.OK


def test_a_wrong_windmill_token_is_named(healthy):
    res = results(replace(healthy, windmill_token="nope"))
    assert res["variables"].status == doctor.FAIL and "refuses WINDMILL_TOKEN (401)" in res["variables"].detail
    assert res["flow"].status == doctor.FAIL


def test_flow_not_deployed(healthy, tmp_path):
    server, bare = start_runner(tmp_path / "wm", tmp_path)  # a root without f/waggle
    try:
        wv.write_variables(bare.url, TOKEN, "waggle", {p: healthy_value for p, healthy_value in _values(healthy).items()})
        res = results(replace(healthy, windmill_url=bare.url))
    finally:
        server.stop()
    assert failed(res) == ["flow"]
    assert "wmill sync push" in res["flow"].fix


def _values(target: doctor.Target) -> dict[str, str]:
    import httpx

    out = {}
    for path in wv.VARIABLES:
        r = httpx.get(f"{target.windmill_url}/api/w/waggle/variables/get_value/{path}",
                      headers={"Authorization": f"Bearer {TOKEN}"})
        out[path] = r.json()
    return out


def test_flow_token_refused_or_not_a_submitter(healthy, runner, dev_issuer):
    set_var(runner, wv.TOKEN, "not.a.jwt")
    res = results(healthy)
    assert failed(res) == ["flow token"]
    assert "refuses the flow's token" in res["flow token"].detail
    assert "WAGGLE_OIDC_ISSUER" in res["flow token"].fix

    set_var(runner, wv.TOKEN, dev_issuer.mint("mallory", ["evil"]))
    res = results(healthy)
    assert res["flow token"].detail == "mallory may not submit for evil"
    assert res["flow token"].fix == "grant it: `waggle grant submitter mallory evil`"

    set_var(runner, wv.TOKEN, dev_issuer.mint("loner", []))
    res = results(healthy)
    assert "carries no organizations" in res["flow token"].detail


def test_browserhive_problems_are_named_per_endpoint(healthy, runner, capture_url):
    wrong = FastAPI()

    @wrong.get("/status")
    def status():
        return JSONResponse({"message": "unsupported"}, status_code=415)

    down = refused_url().split("/api/")[0]
    with serve_in_thread(wrong) as wrong_url:
        set_var(runner, wv.ENDPOINTS, json.dumps([capture_url, down, wrong_url]))
        res = results(healthy)
    outcome = res["browserhive"]
    assert outcome.status == doctor.FAIL
    assert f"{down}: connection refused" in outcome.detail
    assert f"{wrong_url}/status → http=415" in outcome.detail
    assert capture_url not in outcome.detail
    assert "docker compose logs capture-1" in outcome.fix and "docker compose logs browserhive-1" in outcome.fix


def test_container_only_names_are_not_checked_and_do_not_block(healthy, runner):
    set_var(runner, wv.ENDPOINTS, json.dumps(["http://browserhive-1.invalid:50051"]))
    set_var(runner, wv.TS_COMPILE_URL, "http://ts-compile.invalid:8080")
    set_var(runner, wv.API_URL, "http://ledger.invalid:7070")
    res = results(healthy)
    assert failed(res) == []
    for name in ("browserhive", "ts-compile", "flow → ledger"):
        assert res[name].status == doctor.NOT_CHECKED
        assert "docker compose exec ledger scripts/doctor" in res[name].detail


def test_ts_compile_and_api_url_down(healthy, runner):
    set_var(runner, wv.TS_COMPILE_URL, refused_url().split("/api/")[0])
    set_var(runner, wv.API_URL, refused_url().split("/api/")[0])
    res = results(healthy)
    assert sorted(failed(res)) == ["flow → ledger", "ts-compile"]
    assert "connection refused" in res["ts-compile"].detail
    assert "WAGGLE_API_HOST" in res["flow → ledger"].fix


def test_ledger_down_skips_what_needs_it(healthy):
    res = results(replace(healthy, api_url=refused_url().split("/api/")[0]))
    assert failed(res) == ["ledger"]
    assert res["crawl route"].detail == "ledger first"
    assert res["flow token"].detail == "ledger first"
    assert "docker compose up -d ledger" in res["ledger"].fix


def test_windmill_down_names_the_failed_ancestor(healthy):
    res = results(replace(healthy, windmill_url=refused_url().split("/api/")[0], api_url=refused_url().split("/api/")[0]))
    assert sorted(failed(res)) == ["ledger", "windmill"]
    assert res["flow token"].detail == "ledger and windmill first"  # not "variables first"
    assert res["browserhive"].detail == "windmill first"


def test_ledger_without_crawl_webhook(healthy, real_ledger: RealLedger):
    from ledger.api.app import create_app

    settings = real_ledger.settings.model_copy(update={"crawl_webhook_url": None, "crawl_webhook_token": None})
    server = ServerThread(create_app(settings, periodic=False)).start()
    try:
        res = results(replace(healthy, api_url=server.url))
    finally:
        server.stop()
    assert failed(res) == ["crawl route"]
    assert "WAGGLE_CRAWL_WEBHOOK_URL" in res["crawl route"].fix


def test_a_crashing_probe_does_not_hide_the_others(healthy):
    def boom(ctx):
        raise RuntimeError("broken")

    checks = [doctor.Check("first", "", boom), doctor.Check("ledger", "", doctor.LEDGER),
              doctor.Check("child", "", doctor.LEDGER, ("first",))]
    res = {c.name: o for c, o in doctor.run_checks(healthy, checks)}
    assert "the check itself crashed: RuntimeError('broken')" in res["first"].detail
    assert res["ledger"].status == doctor.OK and res["child"].detail == "first first"
    with pytest.raises(ValueError, match="needs"):
        doctor.run_checks(healthy, [doctor.Check("x", "", boom, ("later",))])


def _script(name: str, env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("WAGGLE_", "WINDMILL_"))}
    return subprocess.run([sys.executable, str(REPO / "scripts" / name), *args], cwd=cwd, env={**clean, **env},
                          capture_output=True, text=True, timeout=120)


def test_the_scripts_end_to_end(healthy, tmp_path, capture_url, tscompile_url, dev_issuer, real_ledger):
    env = {"WINDMILL_URL": healthy.windmill_url, "WINDMILL_TOKEN": TOKEN, "WINDMILL_WORKSPACE": "waggle"}
    wrote = _script("windmill-variables", env, "--issuer", dev_issuer.url, "--organization", "acme",
                    "--api-url", real_ledger.url, "--browserhive", capture_url, "--ts-compile-url", tscompile_url,
                    cwd=tmp_path)
    assert wrote.returncode == 0, wrote.stderr
    assert wrote.stderr.count("updated u/admin/") == 5  # the fixture created them already
    assert "waggle grant submitter waggle-flow acme" in wrote.stderr

    # .env is read from the working directory; the shell wins over it
    (tmp_path / ".env").write_text(f"WAGGLE_API_URL={healthy.api_url}\nWAGGLE_OIDC_ISSUER={healthy.issuer_url}\n"
                                   f"WAGGLE_FGA_API_URL={healthy.fga_url}\nWAGGLE_S3_ENDPOINT={healthy.s3_endpoint}\n")
    ok = _script("doctor", env, "--compose", cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "nothing to fix" in ok.stdout and "✗" not in ok.stdout



def _load_script(name: str):
    """A scripts/ file (no .py suffix) as a module, to call its main() in-process."""
    import importlib.machinery
    import importlib.util

    loader = importlib.machinery.SourceFileLoader(f"script_{name.replace('-', '_')}", str(REPO / "scripts" / name))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    return module


def test_the_scripts_fail_with_what_to_change(healthy, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for key in [k for k in os.environ if k.startswith(("WAGGLE_", "WINDMILL_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("WINDMILL_URL", healthy.windmill_url)
    assert _load_script("windmill-variables").main(["--flow-token", "x"]) == 1
    assert "WINDMILL_TOKEN is not set" in capsys.readouterr().err

    monkeypatch.setenv("WINDMILL_TOKEN", TOKEN)
    assert _load_script("windmill-variables").main(["--api-url", "ledger:7070", "--flow-token", "x"]) == 1
    assert "u/admin/waggle_api_url must be an http" in capsys.readouterr().err

    monkeypatch.setenv("WINDMILL_URL", refused_url().split("/api/")[0])
    monkeypatch.setenv("WAGGLE_API_URL", healthy.api_url)
    monkeypatch.setenv("WAGGLE_FGA_API_URL", healthy.fga_url)
    monkeypatch.setenv("WAGGLE_S3_ENDPOINT", healthy.s3_endpoint)
    assert _load_script("doctor").main(["--compose"]) == 1
    out = capsys.readouterr().out
    assert "things to fix (1):" in out and "windmill — Windmill does not answer" in out


def test_local_mode_reads_stack_json(tmp_path):
    (tmp_path / "stack.json").write_text(json.dumps({
        "services": {"ledger": "http://127.0.0.1:7171", "windmill": "http://127.0.0.1:8101", "issuer": "http://127.0.0.1:9199",
                     "openfga": "http://127.0.0.1:8191", "s3": "http://127.0.0.1:8334"},
        "workspace": "waggle"}))
    (tmp_path / "secrets.json").write_text(json.dumps({"windmill_token": "local-secret"}))
    target = doctor.target_from_env({"WAGGLE_STATE_DIR": str(tmp_path)})
    assert (target.compose, target.api_url, target.windmill_url, target.windmill_token) == (
        False, "http://127.0.0.1:7171", "http://127.0.0.1:8101", "local-secret")
    assert target.s3_endpoint == "http://127.0.0.1:8334" and target.issuer_url == "http://127.0.0.1:9199"
    # WINDMILL_URL set → the compose stack, with its defaults
    compose = doctor.target_from_env({"WAGGLE_STATE_DIR": str(tmp_path), "WINDMILL_URL": "http://127.0.0.1:8000",
                                      "WAGGLE_API_URL": ""})
    assert compose.compose and compose.api_url == "http://127.0.0.1:7070"  # empty means absent
    with pytest.raises(FileNotFoundError, match="waggle dev up"):
        doctor.target_from_env({"WAGGLE_STATE_DIR": str(tmp_path / "none")}, local=True)
