"""``python -m tests.bench [--quick] [--list] [--table] [--no-record] [name ...]``: run benchmarks, print tables, write JSON.

No name runs every benchmark in order. ``--quick`` shrinks sizes for a smoke run (numbers
from a quick run are not the ones the targets speak of; the record marks them). Each run
replaces its benchmark's entry in ``tests/bench/results.json`` (``--no-record``: not) and
rewrites the table in ``tests/bench/README.md``; ``--table`` only rewrites the table. Exit
status 1 when a benchmark did not finish (an error is printed and recorded), else 0 — a
missed target is a result, not a failure.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import traceback

from tests.bench import record
from tests.bench.harness import Context, render, write

# name → "module:function" (imported on demand so one benchmark's parts never slow another)
BENCHMARKS = {
    "level-report": "tests.bench.ledger_scale:level_report",
    "signing": "tests.bench.ledger_scale:signing",
    "outbox": "tests.bench.ledger_scale:outbox",
    "reconciler": "tests.bench.ledger_scale:reconciler",
    "frontier-insert": "tests.bench.frontier_insert:frontier_insert",
    "level-report-curve": "tests.bench.ledger_scale:level_report_curve",
    "level-report-overlap": "tests.bench.ledger_scale:level_report_overlap",
    "level-progress": "tests.bench.ledger_scale:level_progress",
    "capture": "tests.bench.capture:capture",
    "real-pages": "tests.bench.real_pages:real_pages",
    "politeness-500": "tests.bench.politeness:politeness_500",
    "politeness-2000": "tests.bench.politeness:politeness_2000",
    "orchestration": "tests.bench.orchestration:orchestration",
    "concurrent-crawls": "tests.bench.concurrent:concurrent_crawls",
    "search": "tests.bench.search:search_bench",
    "authz-many": "tests.bench.authz:authz_many",
    "archives-list": "tests.bench.authz:archives_list",
    "crawl-collection": "tests.bench.collection:crawl_collection",
    "recrawl": "tests.bench.recrawl:recrawl",
}


def _resolve(spec: str):
    module, _, func = spec.partition(":")
    return getattr(importlib.import_module(module), func)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="waggle bench", description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help=f"benchmarks to run (default all): {', '.join(BENCHMARKS)}")
    ap.add_argument("--quick", action="store_true", help="reduced sizes (smoke run)")
    ap.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    ap.add_argument("--table", action="store_true", help="rewrite tests/bench/README.md's table from results.json and exit")
    ap.add_argument("--no-record", action="store_true", help="leave tests/bench/results.json and the README as they are")
    args = ap.parse_args(argv)
    if args.table:
        print(f"table rewritten: {record.write_table()}")
        return 0
    if args.list:
        for name, spec in BENCHMARKS.items():
            doc = (_resolve(spec).__doc__ or "").strip().splitlines()[0]
            print(f"{name:14} {doc}")
        return 0
    unknown = [n for n in args.names if n not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}", file=sys.stderr)
        return 2
    failed = 0
    interrupted = False
    for name in args.names or list(BENCHMARKS):
        ctx = Context(name, quick=args.quick)
        error = None
        try:
            _resolve(BENCHMARKS[name])(ctx)
        except KeyboardInterrupt:  # recorded as not finished (a time budget's SIGINT), then the run stops
            error = "interrupted (SIGINT) before the end"
            interrupted = True
        except Exception as exc:  # noqa: BLE001 - recorded and reported, next benchmark runs
            error = f"{type(exc).__name__}: {exc}"
            traceback.print_exc()
            failed += 1
        render(ctx, error)
        path = write(ctx, error)
        print(f"results: {path}")
        if not args.no_record:
            record.save(json.loads(path.read_text()), list(BENCHMARKS))
            print(f"recorded in {record.RESULTS}; table rewritten: {record.write_table()}")
        if interrupted:
            return 130
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
