"""The benchmarks' committed record and its table (issue 30 item 2).

``tests/bench/results.json`` is what a program reads: per benchmark its date, commit, load before
and after, and ``metrics`` as ``{key: {value, unit, target, bound, met, note}}``, with at least
the keys of :data:`tests.bench.record.REQUIRED`. ``tests/bench/README.md``'s table is generated
from it and must match it; the benchmarks' code records every required key.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.bench import record
from tests.bench.__main__ import BENCHMARKS

RECORD = record.load()


def test_the_committed_readme_table_is_the_one_generated_from_results_json():
    text = record.README.read_text()
    assert record.BEGIN in text and record.END in text
    assert text == record.readme_with_table(text, RECORD), "run `waggle bench --table` and commit the README"


def test_every_required_benchmark_exists_and_its_code_records_the_required_keys():
    for name, keys in record.REQUIRED.items():
        assert name in BENCHMARKS, name
        source = (record.HERE / f"{BENCHMARKS[name].split(':')[0].rsplit('.', 1)[1]}.py").read_text()
        for key in keys:
            assert re.search(rf'key=(?:[^\n]*)"{key}"', source), f"{name}: no metric recorded with key {key!r}"


def test_every_required_benchmark_was_run_and_recorded():
    assert set(record.REQUIRED) <= set(RECORD["benchmarks"]), set(record.REQUIRED) - set(RECORD["benchmarks"])


@pytest.mark.parametrize("name", sorted(RECORD["benchmarks"]))
def test_each_entry_has_its_run_and_metrics_in_the_documented_shape(name):
    run = RECORD["benchmarks"][name]
    assert name in BENCHMARKS
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", run["date"])
    assert re.fullmatch(r"[0-9a-f]{40}", run["commit"])
    for load in (run["loadBefore"], run["loadAfter"]):
        assert len(load) == 3 and all(isinstance(x, (int, float)) and x >= 0 for x in load)
    assert isinstance(run["quick"], bool) and run["cores"] >= 1
    if run["error"] is None:  # a run that finished records every required key
        assert set(record.REQUIRED.get(name, [])) <= set(run["metrics"]), name
    for key, m in run["metrics"].items():
        assert re.fullmatch(r"[a-z0-9_]+", key), key
        assert set(m) == {"value", "unit", "target", "bound", "met", "note"}
        if m["value"] is None or m["target"] is None or m["bound"] is None:
            assert m["met"] is None, (key, m)
        else:
            ok = m["value"] <= m["target"] if m["bound"] == "<=" else m["value"] >= m["target"]
            assert m["met"] is ok, (key, m)


def _doc(name: str, value: float, error: str | None = None) -> dict:
    return {"benchmark": name, "finishedAt": "2026-12-02T02:00:00+00:00", "wallSeconds": 12.5, "quick": True,
            "machine": {"cores": 2}, "loadavgAtStart": [1.0, 2.0, 3.0], "loadavgAtEnd": [4.0, 5.0, 6.0],
            "size": "10 pages", "commit": {"sha": "a" * 40, "dirty": False}, "error": error,
            "metrics": [{"name": "p95 of the worst", "value": value, "unit": "ms", "target": 150, "bound": "<=",
                         "note": "n=20", "key": "query_p95_ms", "ratio": value / 150, "met": value <= 150},
                        {"name": "a detail only", "value": 1.0, "unit": "s", "target": None, "bound": None,
                         "note": "", "key": None, "ratio": None, "met": None}]}


def test_save_replaces_the_benchmarks_entry_keeps_the_others_and_orders_them(tmp_path):
    path = tmp_path / "results.json"
    record.save(_doc("search", 300.0), ["level-report", "search"], path)
    record.save(_doc("level-report", 1.0), ["level-report", "search"], path)
    saved = record.save(_doc("search", 120.0, error=None), ["level-report", "search"], path)
    assert list(saved["benchmarks"]) == ["level-report", "search"]
    search = json.loads(path.read_text())["benchmarks"]["search"]
    assert search["metrics"] == {"query_p95_ms": {"value": 120.0, "unit": "ms", "target": 150, "bound": "<=",
                                                  "met": True, "note": "n=20"}}  # the unkeyed row stays out
    assert search["loadBefore"] == [1.0, 2.0, 3.0] and search["loadAfter"] == [4.0, 5.0, 6.0]
    assert search["commit"] == "a" * 40 and search["quick"] is True and search["size"] == "10 pages"


def test_the_table_shows_each_metric_its_target_and_whether_it_was_met_and_an_error():
    rec = {"benchmarks": {"search": record.entry(_doc("search", 300.0, error="TimeoutError: OpenFGA"))}}
    table = record.table(rec)
    assert "| `search` (quick) | `query_p95_ms` | 300.0 | ms | <= 150 | **no** | 2026-12-02 02:00 | aaaaaaaa |" \
           " 1/2/3 → 4/5/6 |" in table
    assert "did not finish: TimeoutError: OpenFGA" in table and "size: 10 pages" in table


def test_readme_with_table_replaces_only_between_the_markers():
    text = f"# head\n{record.BEGIN}\nold table\n{record.END}\n## tail\n"
    out = record.readme_with_table(text, {"benchmarks": {"search": record.entry(_doc("search", 100.0))}})
    assert out.startswith(f"# head\n{record.BEGIN}\n\n| benchmark |") and out.endswith(f"{record.END}\n## tail\n")
    assert "old table" not in out and "| yes |" in out
