"""Differential test: the OpenFGA server waggle runs answers exactly like ``fga model test``.

The model tests (``model.fga.yaml``) run in the ``fga`` CLI's embedded engine (``--verbose``
prints each Check's ``got``/``error``); the ledger asks the pinned server
(``.tools/go/bin/openfga``), a separately versioned build, through the model as deployed over
HTTP (``model.json``) and with membership as contextual tuples. This holds the model tests
true of what actually runs: the server is asked over HTTP (batch-check) with the same tuples —
once written as stored tuples, once sent as contextual tuples — and the same context. Answers
are compared three-valued: allowed, denied, or error (e.g. missing condition context).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.fixtures.fga import FgaStore, _http, create_store

ROOT = Path(__file__).resolve().parents[2]
FGA = ROOT / ".venv" / "bin" / "fga"
AUTHZ = ROOT / "ledger" / "authz"


def key(c: dict) -> tuple:
    return c["user"], c["relation"], c["object"], json.dumps(c.get("context") or None, sort_keys=True)


def engine_answers(test_file: Path) -> dict[str, dict[tuple, Any]]:
    """Per test name, ``{(user, relation, object, context): answer}`` from ``fga model test
    --verbose`` (the CLI walks each check's assertions in map order, so match by key, not
    position); answer True/False/"error"."""
    out = subprocess.run([str(FGA), "model", "test", "--tests", str(test_file), "--verbose"],
                         capture_output=True, text=True, timeout=120)
    results, _ = json.JSONDecoder().raw_decode(out.stdout)
    return {test["name"]: {key(c["request"]): "error" if c["error"] is not None else c["got"]
                           for c in test["check_results"]} for test in results}


def server_answers(store: FgaStore, checks: list[dict], contextual: list[dict] | None = None) -> list[Any]:
    """Answers of the server to ``checks`` (``{user, relation, object, context?}``) via batch-check."""
    out: list[Any] = []
    for start in range(0, len(checks), 50):
        chunk = checks[start:start + 50]
        body = {"authorization_model_id": store.model_id, "consistency": "HIGHER_CONSISTENCY", "checks": [
            {"tuple_key": {k: c[k] for k in ("user", "relation", "object")}, "correlation_id": f"c{start + i}",
             **({"context": c["context"]} if c.get("context") else {}),
             **({"contextual_tuples": {"tuple_keys": contextual}} if contextual else {})}
            for i, c in enumerate(chunk)]}
        r = _http().post(f"{store.api_url}/stores/{store.store_id}/batch-check", json=body)
        r.raise_for_status()
        result = r.json()["result"]
        for i in range(len(chunk)):
            item = result[f"c{start + i}"]
            out.append("error" if item.get("error") else item["allowed"])
    return out


def _tuple_key(t: dict) -> dict:
    k = {"user": t["user"], "relation": t["relation"], "object": t["object"]}
    if t.get("condition"):
        k["condition"] = t["condition"]
    return k


def test_assertions_file_matches_the_real_engine(fga_server) -> None:
    spec = yaml.safe_load((AUTHZ / "model.fga.yaml").read_text())
    answers = engine_answers(AUTHZ / "model.fga.yaml")
    assert sum(len(a) for a in answers.values()) >= 22
    for test in spec["tests"]:
        tuples = [_tuple_key(t) for t in spec["tuples"] + test.get("tuples", [])]
        checks = [{"user": c["user"], "relation": rel, "object": c["object"], "context": c.get("context")}
                  for c in test["check"] for rel in c["assertions"]]
        expected = [answers[test["name"]][key(c)] for c in checks]
        # the engine agrees with the file's own expectations ...
        assert expected == [c_assert for c in test["check"] for c_assert in c["assertions"].values()]
        # ... and the server agrees with the engine, with stored and with contextual tuples
        stored = fga_server.new_store()
        stored.write(tuples)
        assert server_answers(stored, checks) == expected, test["name"]
        empty = fga_server.new_store()
        assert server_answers(empty, checks, contextual=tuples) == expected, test["name"]


# -- generated tuple sets -----------------------------------------------------------------------
USERS = ["user:ann", "user:ben", "user:cat"]
ORGS = ["organization:o1", "organization:o2"]
JOBS = ["capture_job:j1", "capture_job:j2"]
ARCHIVES = ["archive:x1", "archive:x2"]
TIMES = ["2026-07-29T00:00:00Z", "2026-07-29T12:00:00Z", "2026-08-05T00:00:00Z"]
DURATIONS = ["1h", "24h", "168h", "30m"]


def _conditioned(user: str, obj: str, grant_time: str, duration: str, drop: str | None) -> dict:
    ctx = {"grant_time": grant_time, "grant_duration": duration}
    if drop:
        ctx.pop(drop)  # parameters missing from the tuple must come from the request, or error
    return {"user": user, "relation": "viewer", "object": obj, "condition": {"name": "non_expired_grant", "context": ctx}}


tuple_strategy = st.one_of(
    st.builds(lambda u, r, o: {"user": u, "relation": r, "object": o},
              st.sampled_from(USERS), st.sampled_from(["member", "admin", "submitter"]), st.sampled_from(ORGS)),
    st.builds(lambda u, o: {"user": u, "relation": "owner", "object": o}, st.sampled_from(USERS), st.sampled_from(JOBS)),
    st.builds(lambda u, o: {"user": u, "relation": "parent", "object": o}, st.sampled_from(ORGS), st.sampled_from(JOBS)),
    st.builds(lambda u, o: {"user": u, "relation": "parent", "object": o}, st.sampled_from(JOBS),
              st.sampled_from(ARCHIVES)),
    st.builds(lambda u, o: {"user": f"{u}#member", "relation": "viewer", "object": o}, st.sampled_from(ORGS),
              st.sampled_from(ARCHIVES)),
    st.builds(_conditioned, st.sampled_from(USERS), st.sampled_from(ARCHIVES), st.sampled_from(TIMES),
              st.sampled_from(DURATIONS), st.sampled_from([None, None, None, "grant_duration"])),
)


def _checks(current_time: str | None) -> list[dict]:
    ctx = {"current_time": current_time} if current_time else None
    out = []
    for u in USERS:
        for a in ARCHIVES:
            out += [{"user": u, "relation": r, "object": a, "context": ctx} for r in ("can_view", "can_delete", "viewer")]
        for o in ORGS:
            out += [{"user": u, "relation": r, "object": o} for r in ("can_submit", "member")]
        for j in JOBS:
            out += [{"user": u, "relation": r, "object": j} for r in ("member", "owner")]
    return out


scenario = st.fixed_dictionaries({
    "tuples": st.lists(tuple_strategy, max_size=14, unique_by=lambda t: (t["user"], t["relation"], t["object"])),
    "current_time": st.sampled_from(TIMES + ["2026-07-29T01:00:00Z", None]),
    "as_contextual": st.booleans(),
})


@settings(max_examples=3, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate], suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scenarios=st.lists(scenario, min_size=12, max_size=12))
def test_generated_tuple_sets_match_the_real_engine(fga_server, tmp_path_factory, scenarios) -> None:
    """Each example: 12 generated scenarios as 12 tests of one ``fga model test`` run (one
    engine start), each compared with a fresh store on the server."""
    # one fixed scenario per run makes sure all three answers occur: a share lacking its duration
    # errors without context, the organization path still allows, the rest is denied
    scenarios = scenarios + [{"tuples": [
        _conditioned("user:ann", "archive:x1", TIMES[0], "1h", "grant_duration"),
        {"user": "organization:o1", "relation": "parent", "object": "capture_job:j1"},
        {"user": "capture_job:j1", "relation": "parent", "object": "archive:x2"},
        {"user": "user:ben", "relation": "member", "object": "organization:o1"},
    ], "current_time": None, "as_contextual": False}]
    folder = tmp_path_factory.mktemp("diff")
    (folder / "model.fga").write_text((AUTHZ / "model.fga").read_text())
    tests = []
    for n, sc in enumerate(scenarios):
        tests.append({"name": f"s{n}", "tuples": sc["tuples"], "check": [
            {"user": c["user"], "object": c["object"], **({"context": c["context"]} if c.get("context") else {}),
             "assertions": {c["relation"]: True}} for c in _checks(sc["current_time"])]})
    (folder / "t.fga.yaml").write_text(json.dumps({"name": "generated", "model_file": "./model.fga", "tests": tests}))
    engine = engine_answers(folder / "t.fga.yaml")  # JSON is YAML
    seen: set = set()
    for n, sc in enumerate(scenarios):
        checks, tuples = _checks(sc["current_time"]), sc["tuples"]
        assert len(engine[f"s{n}"]) == len(checks)
        store = create_store(fga_server.api_url)
        if sc["as_contextual"]:
            mine = server_answers(store, checks, contextual=tuples or None)
        else:
            if tuples:
                store.write(tuples)
            mine = server_answers(store, checks)
        theirs = [engine[f"s{n}"][key(c)] for c in checks]
        assert mine == theirs, [(c, m, t) for c, m, t in zip(checks, mine, theirs) if m != t]
        seen.update(theirs)
    assert seen == {True, False, "error"}
