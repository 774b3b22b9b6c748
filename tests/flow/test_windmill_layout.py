"""The Windmill layout: every script's schema equals what Windmill's own parser infers from
``main`` (npm windmill-parser-wasm-py, run with node), every ``path:`` in flow.yaml exists, every
input name is a ``main`` parameter, and the flow keeps the contract of reference/scheduler.md §2."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from tests.flow.wmschema import ROOT, infer, schema_from_sig

WAGGLE = ROOT / "f" / "waggle"
SCRIPTS = sorted(WAGGLE.glob("*.py"))
FLOW = yaml.safe_load((WAGGLE / "crawl_level.flow" / "flow.yaml").read_text())


@pytest.fixture(scope="module")
def signatures() -> dict[str, dict]:
    return infer(SCRIPTS)


def semantic(schema: dict) -> dict:
    """The parts of a schema inference decides (descriptions are free text)."""
    props = {
        name: {k: v for k, v in prop.items() if k in ("type", "items", "default", "enum", "format", "properties")}
        for name, prop in (schema.get("properties") or {}).items()
    }
    return {"properties": props, "required": sorted(schema.get("required") or [])}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_script_yaml_schema_equals_windmill_inference(signatures, script):
    sig = signatures[str(script.relative_to(ROOT))]
    assert sig != {"type": "Invalid"}, f"{script.name} does not parse"
    meta = yaml.safe_load(script.with_suffix(".script.yaml").read_text())
    assert meta["kind"] == "script" and meta.get("summary")
    inferred = schema_from_sig(sig)
    assert semantic(meta["schema"]) == semantic(inferred)
    if "order" in meta["schema"]:
        assert meta["schema"]["order"] == inferred["order"]
    for arg in sig["args"]:
        assert arg["typ"] != "unknown", f"{script.name}: {arg['name']} has no plain type"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_pep723_pins_are_exact(script):
    text = script.read_text()
    head = text.split("def main(")[0]
    assert head.startswith("# /// script\n") and "# ///\n" in head[10:]
    block = head.split("# ///\n")[0]
    deps = [d.strip().strip('",') for d in block.split("dependencies = [")[1].split("]")[0].split(",") if d.strip()]
    assert all("==" in d for d in deps), deps
    assert deps or "def main(" not in text, "a script with main names its dependencies"  # a library may need none
    assert 'requires-python = ">=3.11"' in block


def all_script_modules(modules):
    for m in modules:
        value = m["value"]
        if value["type"] == "script":
            yield m
        for inner in value.get("modules", []):
            yield from all_script_modules([inner])


def main_params(path: str) -> list[str]:
    tree = ast.parse((ROOT / f"{path}.py").read_text())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main")
    assert not fn.args.kwonlyargs and not fn.args.vararg and not fn.args.kwarg
    return [a.arg for a in fn.args.args]


MODULES = list(all_script_modules(FLOW["value"]["modules"])) + [FLOW["value"]["failure_module"]]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m["id"])
def test_flow_paths_exist_and_inputs_match_main(module):
    path = module["value"]["path"]
    assert (ROOT / f"{path}.py").is_file() and (ROOT / f"{path}.script.yaml").is_file()
    params = main_params(path)
    given = list(module["value"]["input_transforms"])
    assert set(given) <= set(params), f"{module['id']}: unknown inputs {set(given) - set(params)}"
    required = yaml.safe_load((ROOT / f"{path}.script.yaml").read_text())["schema"]["required"]
    assert set(required) <= set(given), f"{module['id']}: required inputs not wired {set(required) - set(given)}"
    for spec in module["value"]["input_transforms"].values():
        assert spec["type"] in ("javascript", "static")
        if spec["type"] == "javascript":
            assert "iter.value" not in spec["expr"] or "flow_input.iter.value" in spec["expr"]


def test_flow_shape_matches_the_contract():
    value = FLOW["value"]
    assert [m["id"] for m in value["modules"]] == ["plan", "compile", "hosts", "report", "index"]
    hosts = value["modules"][2]
    assert hosts["value"]["type"] == "forloopflow" and hosts["value"]["parallel"] is True
    assert hosts["value"]["iterator"] == {"type": "javascript", "expr": "results.plan.groups"}
    assert hosts["value"]["parallelism"] == {"type": "javascript", "expr": "results.plan.parallelism"}
    assert hosts["value"]["skip_failures"] is False
    cap = hosts["value"]["modules"][0]
    assert cap["id"] == "cap" and cap["value"]["path"] == "f/waggle/crawl_host"
    assert cap["value"]["input_transforms"]["scripts"]["expr"] == "results.compile.scripts"  # JS, never the TS input
    assert cap["retry"] == {"constant": {"attempts": 2, "seconds": 30}}
    assert value["failure_module"]["id"] == "failure"
    assert value["failure_module"]["value"]["input_transforms"]["error"] == {"type": "javascript", "expr": "error"}
    schema = FLOW["schema"]
    assert schema["required"] == ["crawl_id", "depth", "frontier", "capture_formats", "signing", "scripts"]
    assert schema["order"] == ["crawl_id", "depth", "frontier", "per_host_delay_ms", "host_parallelism",
                               "respect_robots", "capture_formats", "signing"]
    assert schema["properties"]["host_parallelism"]["default"] == 4
    assert schema["properties"]["per_host_delay_ms"]["default"] == 2000


OPENFLOW_MODULE_KEYS = {"id", "summary", "value", "stop_after_if", "stop_after_all_iters_if", "skip_if", "sleep",
                        "timeout", "cache_ttl", "retry", "continue_on_error", "suspend", "mock", "priority",
                        "delete_after_secs"}
OPENFLOW_VALUE_KEYS = {"script": {"type", "path", "input_transforms", "hash", "tag_override"},
                       "forloopflow": {"type", "modules", "iterator", "skip_failures", "parallel", "parallelism", "squash"}}


def test_flow_uses_only_openflow_keys():
    assert set(FLOW) <= {"summary", "description", "value", "schema"}
    assert set(FLOW["value"]) <= {"modules", "failure_module", "preprocessor_module", "same_worker"}

    def walk(modules):
        for m in modules:
            assert set(m) <= OPENFLOW_MODULE_KEYS, m["id"]
            assert set(m["value"]) <= OPENFLOW_VALUE_KEYS[m["value"]["type"]], m["id"]
            walk(m["value"].get("modules", []))

    walk(FLOW["value"]["modules"] + [FLOW["value"]["failure_module"]])


def test_wmill_yaml_and_schedule():
    cfg = yaml.safe_load((ROOT / "wmill.yaml").read_text())
    assert cfg["includes"] == ["f/**"] and cfg["nonDottedPaths"] is False
    assert cfg["includeSchedules"] is True and cfg["skipSecrets"] is True and cfg["skipVariables"] is True
    assert "**/tests/**" in cfg["excludes"] and "**/conftest.py" in cfg["excludes"]
    sched = yaml.safe_load((WAGGLE / "daily.schedule.yaml").read_text())
    assert sched["script_path"] == "f/waggle/trigger_crawl" and sched["is_flow"] is False
    assert sched["args"] == {"token": "$var:u/admin/waggle_token", "waggle_url": "$var:u/admin/waggle_api_url"}
    assert str(sched["schedule"]).split() == ["0", "0", "4", "*", "*", "*"]


def test_nothing_but_scripts_under_f():
    for path in (ROOT / "f").rglob("*"):
        if "__pycache__" in path.parts or path.is_dir():
            continue
        assert not path.name.startswith("test_") and path.name not in ("conftest.py", "__init__.py"), path
        if path.suffix == ".py":
            assert path.with_suffix(".script.yaml").is_file(), f"{path} has no .script.yaml"
