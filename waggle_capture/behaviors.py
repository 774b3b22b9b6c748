"""Behaviors (contracts.md §A.4 ``behaviors``): the ``__bh`` host object and running them."""

from __future__ import annotations

import asyncio
import json
import time

from playwright.async_api import Page

from waggle_capture.state import Run

# The behavior host object, evaluated before behaviors and archived byte-for-byte as
# behaviors/runtime.js. Called with [opts, budgetMs].
RUNTIME_JS = """([opts, budgetMs]) => {
  const started = Date.now();
  const reports = [];
  Object.defineProperty(globalThis, "__bhReports", { value: reports, configurable: true });
  globalThis.__bh = {
    opts,
    get remainingMs() { return Math.max(0, budgetMs - (Date.now() - started)); },
    report(id, data) { reports.push({ id: String(id), elapsedMs: Date.now() - started, data }); },
  };
}
"""


async def run_behaviors(run: Run, page: Page, cdp, behaviors: list[dict], budget_ms: int) -> list[dict]:
    """Run ``behaviors`` in order within ``budget_ms`` (milliseconds, shared); returns the
    reports they made plus one ``{id, error}`` per behavior that threw or ran out of time.

    The ``__bh`` host object is installed on the same CDP session as the first behavior, sent
    together with it (the page evaluates them in order): one round trip less between the page's
    last request and its seal, where every round trip counts (issue 11; ~100 ms each on a loaded
    2-core machine). Raises :class:`RuntimeError` when the page refuses the host object."""
    opts = {b["id"]: b.get("options") for b in behaviors}
    install = asyncio.ensure_future(cdp.send("Runtime.evaluate", {
        "expression": f"({RUNTIME_JS})({json.dumps([opts, budget_ms])})", "returnByValue": True}))
    end = time.monotonic() + budget_ms / 1000
    errors: list[dict] = []
    try:
        for i, b in enumerate(behaviors):
            left = min(end - time.monotonic(), run.remaining_s() - 1)
            if left <= 0:
                errors.append({"id": b["id"], "error": "behavior budget exhausted before it ran"})
                continue
            evaluation = asyncio.ensure_future(cdp.send("Runtime.evaluate", {
                "expression": b["source"], "awaitPromise": True, "returnByValue": False}))
            if i == 0 or not install.done():
                done = await asyncio.wait_for(asyncio.shield(install), run.op_timeout(10_000))
                if done.get("exceptionDetails"):
                    evaluation.cancel()
                    raise RuntimeError(f"the behavior host object was refused: {_error_text(done)}"[:500])
            try:
                res = await asyncio.wait_for(evaluation, left)
                if res.get("exceptionDetails"):
                    errors.append({"id": b["id"], "error": _error_text(res)[:500]})
            except asyncio.TimeoutError:
                errors.append({"id": b["id"], "error": "behavior did not finish within its budget"})
        await asyncio.wait_for(asyncio.shield(install), run.op_timeout(10_000))
    finally:
        install.cancel()
    reports = await asyncio.wait_for(page.evaluate("() => globalThis.__bhReports || []"), run.op_timeout(5000))
    return reports + errors


def _error_text(res: dict) -> str:
    details = res["exceptionDetails"]
    return str(details.get("exception", {}).get("description") or details.get("text"))
