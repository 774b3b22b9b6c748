"""Count limits of a level report body (issue 14: the body is hostile input).

Shapes and types are the pydantic models' job (``ledger.api.crawls``, 400); this module caps
how much one report may carry, by settings, and answers 413 with the limit and where it was
passed. The body's byte size is capped before parsing (``ledger.api.errors.BodyLimitMiddleware``).
New count limits (fields added by other issues) go into :func:`check_counts`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ledger.crawl.errors import Refused


def check_counts(results: Sequence[Any], settings: Any) -> None:
    """Raise :class:`Refused` 413 when ``results`` (validated PageResults) exceed
    ``WAGGLE_REPORT_RESULTS_MAX`` results, ``WAGGLE_REPORT_LINKS_PER_PAGE`` inline links in one
    result, or ``WAGGLE_REPORT_LINKS_MAX`` inline links in all. Nothing is recorded then."""
    if len(results) > settings.report_results_max:
        raise Refused(413, f"the report has {len(results)} results; at most {settings.report_results_max}"
                           " are accepted in one report (WAGGLE_REPORT_RESULTS_MAX)")
    per_page, total = settings.report_links_per_page, 0
    for index, result in enumerate(results):
        links = getattr(result, "links", None) or ()
        if len(links) > per_page:
            raise Refused(413, f"results.{index}.links has {len(links)} links; at most {per_page} per result"
                               " (WAGGLE_REPORT_LINKS_PER_PAGE) — send the rest as linksOverflow")
        total += len(links)
    if total > settings.report_links_max:
        raise Refused(413, f"the report carries {total} inline links; at most {settings.report_links_max}"
                           " in one report (WAGGLE_REPORT_LINKS_MAX)")


def check_progress_links(links: Sequence[Any] | None, settings: Any, where: str = "links") -> None:
    """Raise :class:`Refused` 413 when a progress event carries more links than one report
    result may (``WAGGLE_REPORT_LINKS_PER_PAGE``); ``where`` names the field in the answer."""
    if links is not None and len(links) > settings.report_links_per_page:
        raise Refused(413, f"{where} has {len(links)} links; at most {settings.report_links_per_page} per page"
                           " (WAGGLE_REPORT_LINKS_PER_PAGE), as in a level report result")
