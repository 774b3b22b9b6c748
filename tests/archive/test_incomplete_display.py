"""How a capture taken at the page-load deadline (docs/capture-server.md extension 14) shows:
the manifest's ``incomplete`` read into the archive row, the CLI's ``complete`` cell and the
crawl pages' ``reason``. Pure functions: the admission and the routes are tested with Postgres
in test_admission.py / test_routes.py."""

from __future__ import annotations

from ledger.archive.manifest import read_manifest
from ledger.client.render import complete_cell
from ledger.crawl.pages import incomplete_reason
from tests.archive.helpers import manifest

HANG = "https://example.org/hang.png"


def test_the_manifest_member_makes_the_row_incomplete_with_its_reason():
    report = read_manifest(manifest(incomplete={"reason": "page-load-deadline", "deadlineMs": 30000,
                                                "pendingUrls": [HANG], "pendingCount": 1}))
    row = report.completeness_row()
    assert row["incomplete_reason"] == "page-load-deadline" and row["wacz_complete"] is False
    assert report.has_archive  # a success: an archive, not a timeout
    plain = read_manifest(manifest()).completeness_row()  # a real v12: no member
    assert plain["incomplete_reason"] is None and plain["wacz_complete"] is True


def test_the_cli_cell_names_the_deadline_and_the_missing_bodies():
    cell = complete_cell({"waczComplete": False, "incompleteReason": "page-load-deadline", "missingBodyCount": 1})
    assert str(cell) == "incomplete (load deadline, 1 without body)"
    assert str(complete_cell({"waczComplete": False, "missingBodyCount": 3})) == "incomplete (3 without body)"


def test_the_crawl_page_reason_names_the_deadline_and_the_pending_url():
    why = incomplete_reason({"wacz_complete": False, "incomplete_reason": "page-load-deadline",
                             "missing_body_urls": [HANG], "missing_body_count": 1})
    assert why == f"archive incomplete: captured at the page-load deadline, still loading {HANG}; 1 without a body"


def test_the_crawl_view_lists_a_deadline_capture_among_the_incomplete_archives():
    from ledger.crawl.crawls import _problem

    row = {"incomplete_reason": "page-load-deadline", "missing_body_urls": [HANG], "wacz_problem": None}
    assert _problem(row) == f"captured at the page-load deadline, still loading {HANG}"
    assert _problem({**row, "incomplete_reason": None, "wacz_problem": "no pages"}) == "no pages"


def test_the_crawl_summary_names_chosen_formats():
    from rich.console import Console

    from ledger.client.render import summary_view

    console = Console(width=100, record=True)
    console.print(summary_view({"crawlId": "c", "state": "succeeded", "formats": ["png", "wacz"]}))
    assert "png, wacz" in console.export_text()
