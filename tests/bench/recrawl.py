"""Recrawl of an unchanged site (issue 27 item 1): what the second crawl stores against the first.

Parts: the whole local stack (``devstack.stack.up`` on free loopback ports, 2 capture servers, as
``waggle dev up`` runs it) and a copy of Debian's Python 3.11 docs (``python3.11-doc``) on a
loopback port, every file made this run's own (so no earlier crawl in the organization holds its
payloads). The copy is crawled twice in one organization with the real client ``waggle crawl``
(depth 2, 40 pages, delay 200 ms; ``--quick``: depth 1, 10 pages), each crawl's WACZs downloaded.

Metrics: ``stored_bytes_ratio`` = the second crawl's WACZ bytes / the first's (target ≤ 0.10,
issue 27), and the capture servers' CPU per page of the second crawl / the first's (target
≤ 1.10: a revisit must not cost capture time).

``BENCH_KEEP_WACZ=DIR`` keeps both crawls' WACZs in ``DIR/first`` and ``DIR/again`` (for
``python -m tests.bench.wacz_bytes --one``: where one unchanged page's bytes go).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from tests.bench.harness import Context
from tests.bench.wacz_bytes import breakdown


def recrawl(ctx: Context) -> None:
    """The docs copy crawled twice, unchanged: stored WACZ bytes of the second crawl / the first (≤ 0.10)."""
    from devstack.stack import StackConfig, down, up
    from tests.e2e import test_revisit_recrawl as revisit
    from tests.e2e.site import Site
    from tests.fixtures.stack import LocalStack, stack_ports

    revisit.DEPTH, revisit.PAGES = (1, 10) if ctx.quick else (2, 40)
    ctx.size = f"depth {revisit.DEPTH}, at most {revisit.PAGES} pages, delay 200 ms, 2 capture servers"
    with tempfile.TemporaryDirectory(prefix="waggle-bench-recrawl-") as tmp:
        root = Path(tmp)
        copy = root / "docs"
        shutil.copytree(revisit.DOCS, copy, symlinks=False)
        revisit.unique_payloads(copy)
        state = root / "stack"
        t0 = time.monotonic()
        try:
            stack = LocalStack(state_dir=state, info=up(StackConfig(state_dir=state, captures=2,
                                                                    ports=stack_ports(2))))
            ctx.detail("stack_up_s", round(time.monotonic() - t0, 1))
            site = Site(copy, "User-agent: *\nAllow: /\n")
            try:
                seed = f"{site.url}/index.html"
                first = revisit.run_crawl(stack, seed, root / "first")
                again = revisit.run_crawl(stack, seed, root / "again")
                for label, c in (("first", first), ("again", again)):  # where the bytes go (decision 321)
                    b = breakdown(c["files"])
                    ctx.detail(f"bytes_{label}", {k: dict(v.most_common()) for k, v in b.items()})
                    if os.environ.get("BENCH_KEEP_WACZ"):
                        shutil.copytree(root / label, Path(os.environ["BENCH_KEEP_WACZ"]) / label, dirs_exist_ok=True)
            finally:
                site.stop()
        finally:
            down(state)
    rows = {}
    for label, c in (("first", first), ("again", again)):
        n = len(c["pages"])
        rows[label] = {"crawl": c["id"], "pages": n, "wacz_bytes": c["bytes"],
                       "revisit_records": sum(p[2] for p in c["pages"]),
                       "main_documents_revisits": sum(p[1] == "revisit" for p in c["pages"]),
                       "capture_cpu_s": round(c["cpu_s"], 2), "elapsed_s": round(c["elapsed_s"], 1)}
    ctx.detail("crawls", rows)
    f, a = rows["first"], rows["again"]
    ctx.metric("pages captured, first / second crawl", f["pages"], "pages", note=f"second: {a['pages']}",
               key="pages")
    ctx.metric("stored WACZ bytes, second crawl / first", a["wacz_bytes"] / f["wacz_bytes"], "ratio", 0.10, "<=",
               f"{a['wacz_bytes']:,} / {f['wacz_bytes']:,} B; {a['main_documents_revisits']} of {a['pages']} "
               "main documents are revisits", key="stored_bytes_ratio")
    per_page = [r["capture_cpu_s"] / max(1, r["pages"]) for r in (f, a)]
    ctx.metric("capture CPU per page, second crawl / first", per_page[1] / per_page[0] if per_page[0] else None,
               "ratio", 1.10, "<=", f"{per_page[0]:.2f} → {per_page[1]:.2f} s per page (capture servers + Chromium)",
               key="capture_cpu_ratio")
