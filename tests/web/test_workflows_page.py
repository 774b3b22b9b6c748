"""The workflows page in real Chromium against the whole local stack (issue 27 item 2): create a
workflow with the crawl form (a bad cron expression said next to its field), see its next runs,
edit it (the form shows the saved options), run it, see the run in its history, delete it."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.e2e.site import Site
from tests.fixtures.tls import client_tls
from tests.web.test_browser import new_page, page_html, sign_in, sign_in_as, stray_nulls, wait_final

pytestmark = pytest.mark.e2e


def test_create_edit_run_and_delete_a_workflow_on_the_page(local_stack, browser, tmp_path) -> None:
    (tmp_path / "index.html").write_text(page_html("Hives", ["a.html"]))
    (tmp_path / "a.html").write_text(page_html("Hive A", []))
    site = Site(tmp_path, "User-agent: *\nAllow: /\n")
    context, page = new_page(browser)
    try:
        sign_in(local_stack, page)
        page.goto(local_stack.api_url + "/#/workflows")
        page.click("#new-workflow")
        page.fill("#name", "hives weekly")
        page.fill("#notes", "the hive pages, every Monday")
        page.fill("#seeds", f"{site.url}/index.html")
        page.fill("#maxDepth", "0")
        page.fill("#schedule", "0 25 * * 1")
        page.fill("#timeZone", "Europe/Paris")
        page.click("#start")
        page.wait_for_selector("#schedule-error:not(:empty)")
        assert "'0 25 * * 1' is not a valid cron expression" in page.inner_text("#schedule-error")
        assert page.inner_text("#start") == "Save workflow"  # a refused save stays a save button (trial)
        page.fill("#schedule", "0 4 * * 1")
        page.click("#start")
        page.wait_for_selector("#next-runs li")
        assert page.inner_text("h1") == "hives weekly"
        runs = page.locator("#next-runs li").all_inner_texts()
        assert len(runs) == 3 and all("T04:00:00+0" in t for t in runs)  # Paris: +01:00 or +02:00
        workflow_url = page.url
        # a grant made through the API (or `waggle workflows grant`) shows on the workflow's view
        wid = workflow_url.rsplit("/", 1)[-1]
        with httpx.Client(base_url=local_stack.api_url, headers={"Authorization": "Bearer " + local_stack.token()},
                          timeout=30, verify=client_tls()) as api:
            r = api.put(f"/api/workflows/{wid}/grants", json={"user": "frank", "role": "runner"})
            assert r.status_code == 200, r.text
        page.reload()
        page.wait_for_selector("#grants")
        granted = page.inner_text("#grants")
        assert "(editor)" in granted and "frank (runner)" in granted, granted
        assert stray_nulls(page, "main") == []
        # frank, of another organization, sees the workflow granted to him (decision 351) — with
        # no "New workflow" (he submits nowhere) and no stray "null" where that link would be
        other, theirs = new_page(browser)
        try:
            sign_in_as(local_stack, theirs, "frank", "elsewhere")
            theirs.goto(local_stack.api_url + "/#/workflows")
            theirs.wait_for_selector(f'table#workflows tr[data-workflow="{wid}"]')
            assert theirs.locator("#new-workflow").count() == 0
            assert stray_nulls(theirs, "main") == []
            theirs.goto(workflow_url)
            theirs.wait_for_selector("#grants")
            assert theirs.inner_text("h1") == "hives weekly" and theirs.locator("#run").count() == 1
            assert theirs.locator("#edit").count() == 0 and stray_nulls(theirs, "main") == []
        finally:
            other.close()

        page.click("#edit")
        page.wait_for_selector("#name")
        assert page.input_value("#seeds") == f"{site.url}/index.html"
        assert (page.input_value("#maxDepth"), page.input_value("#schedule")) == ("0", "0 4 * * 1")
        page.fill("#maxDepth", "1")
        page.click("#start")
        page.wait_for_selector("#options", state="attached")  # inside the closed "Crawl options"
        assert '"maxDepth": 1' in page.locator("#options").text_content()
        assert page.locator("#schedule-warning").count() == 0  # weekly: no warning
        # more often than hourly: the form says so before, the saved workflow says so after (decision 403)
        page.click("#edit")
        page.wait_for_selector("#schedule")
        assert "More often than hourly is saved with a warning" in page.inner_text("main")
        page.fill("#schedule", "*/10 * * * *")
        page.click("#start")
        page.wait_for_selector("#schedule-warning")
        assert "every 10 minutes at its closest, more often than once an hour" in page.inner_text("#schedule-warning")
        page.click("#edit")
        page.wait_for_selector("#schedule")
        page.fill("#schedule", "0 4 * * 1")
        page.click("#start")
        page.wait_for_selector("#next-runs li")
        assert page.locator("#schedule-warning").count() == 0

        page.click("#run")
        page.wait_for_url("**/#/crawls/*")
        assert wait_final(page) == "succeeded"
        # the crawl names the workflow that ran it, linked back to it
        assert page.locator(f'dd[data-fact="workflow"] a[href="#/workflows/{wid}"]').count() == 1
        page.goto(workflow_url)
        page.wait_for_selector("table#runs tbody tr")
        row = page.locator("table#runs tbody tr").first.inner_text()
        assert "manual" in row and "started" in row and "succeeded" in row

        # frank runs it too: the crawl is the workflow's organization's, which he may not open —
        # he stays on the workflow, told so, not sent to "No such crawl"; its last run is no link
        other, theirs = new_page(browser)
        try:
            sign_in_as(local_stack, theirs, "frank", "elsewhere")
            theirs.goto(local_stack.api_url + "/#/workflows")
            theirs.wait_for_selector(f'table#workflows tr[data-workflow="{wid}"]')
            assert theirs.locator(f'table#workflows tr[data-workflow="{wid}"] a[href^="#/crawls/"]').count() == 0
            theirs.goto(workflow_url)
            theirs.click("#run")
            theirs.wait_for_function("(document.getElementById('run-note')?.textContent ?? '').includes('Started crawl')")
            assert theirs.url == workflow_url and "only its members see" in theirs.inner_text("#run-note")
        finally:
            other.close()
        wait_for_end_of_runs(local_stack, wid)

        page.on("dialog", lambda d: d.accept())
        page.click("#delete")
        page.wait_for_url("**/#/workflows")
        page.wait_for_selector("h1")
        assert "hives weekly" not in page.inner_text("main")
    finally:
        context.close()
        site.stop()


def wait_for_end_of_runs(local_stack, wid: str) -> None:
    """Until no crawl of the organization runs, workflow ``wid``'s included (the next module on
    this stack may start crawls)."""
    with httpx.Client(base_url=local_stack.api_url, headers={"Authorization": "Bearer " + local_stack.token()},
                      timeout=30, verify=client_tls()) as api:
        deadline = time.monotonic() + 180
        while any(c["state"] == "running" for c in api.get("/api/crawls?limit=20").json()["crawls"]):
            assert time.monotonic() < deadline
            time.sleep(1)
