# /// script
# requires-python = ">=3.11"
# dependencies = ["httpx==0.28.1", "wmill==1.850.0", "protego==0.7.0", "google-re2==1.1.20251105"]
# ///
"""What one capture's answer means: its PageResult, failure class, gapFrom and back-off inputs.

Split out of f/waggle/crawl_host.py (issue 30 item 5), no change of behaviour.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from f.waggle.breaker import challenge_reason
from f.waggle.common import iso_now, one_line
from f.waggle.failures import PERMANENT, POLICY, TRANSIENT, classify_report
from f.waggle.landing import landing_refusal


NO_MANIFEST = "the capture response carried no manifest outcome"
# Links per PageResult sent inline to the ledger (the rest counted in linksOverflow); the
# ledger's WAGGLE_REPORT_LINKS_PER_PAGE (sent as the flow input links_per_page) wins.
LINKS_PER_PAGE = 1000
# The skipReason of a page whose site asked not to archive it (the capture server's policy failure).
NOARCHIVE_REASON = "the site asked not to archive it (noarchive)"


def incomplete_note(url: str, report: dict) -> str | None:
    """One log line for a success answered with ``incomplete`` (extension 14), else None."""
    inc = report.get("incomplete")
    if not isinstance(inc, dict):
        return None
    pending = [u for u in inc.get("pendingUrls") or [] if isinstance(u, str)][:3]
    count = inc.get("pendingCount") if isinstance(inc.get("pendingCount"), int) else len(pending)
    return one_line(f"{url}: captured incomplete ({inc.get('reason')}), {count} request(s) still pending: "
                    + " ".join(pending))


def _http_status(report: dict) -> int | None:
    details = report.get("errorDetails") if isinstance(report.get("errorDetails"), dict) else {}
    for value in (details.get("httpStatusCode"), report.get("httpStatusCode")):
        if isinstance(value, int):
            return value
    return None


@dataclass
class Outcome:
    """One page's outcome: the PageResult, the main document's status when a failed capture
    had one (for the 429/503 back-off), when the next gap runs from (epoch s), and whether the
    failure may be retried: only a ``transient`` capture report (a deadline may not — the
    capture may still be running; a refused submission may not — scheduler.md §4.3)."""

    result: dict
    doc_status: int | None
    gap_from: float
    retryable: bool = False
    retry_after_ms: int | None = None  # the 429/503 document's Retry-After (answer retryAfterMs)
    document_ms: int | None = None  # how long the main document took (answer documentMs; slowhost)


def _failed(url: str, submitted: float, finished: float, reason: str, failure_class: str,
            gap_from: float | None = None) -> dict:
    return {"url": url, "status": "failed", "submittedAt": iso_now(submitted), "finishedAt": iso_now(finished),
            "gapFrom": iso_now(finished if gap_from is None else gap_from), "skipReason": one_line(reason),
            "failureClass": failure_class}


def _manifest_fields(body: dict) -> dict:
    """Exactly one manifest field (the ledger refuses anything else); call only with a taskId."""
    manifest = body.get("manifest") if isinstance(body.get("manifest"), dict) else {}
    if isinstance(manifest.get("location"), str) and manifest["location"]:
        return {"manifestLocation": manifest["location"]}
    if isinstance(manifest.get("error"), str) and manifest["error"]:
        return {"manifestError": manifest["error"]}
    return {"manifestError": NO_MANIFEST}


def failure_reason(report: dict) -> str:
    """``"{status}[: {message}][ (HTTP n)]"`` on one line for a report that is not a success."""
    details = report.get("errorDetails") if isinstance(report.get("errorDetails"), dict) else {}
    message = details.get("message")
    reason = str(report.get("status") or "no report")
    if isinstance(message, str) and message:
        reason += f": {message}"
    status_code = _http_status(report)
    if status_code is not None and str(status_code) not in reason:
        reason += f" (HTTP {status_code})"
    return one_line(reason)


def inline_links(body: dict, cap: int) -> dict:
    """``{"links": [{href, rel}], "linksOverflow": n}`` from the capture answer's inline
    ``links`` (waggle's v12 extension, docs/internals.md "Level report v2"), at most ``cap``
    links in answer order (``linksOverflow`` = how many more there were, only when > 0).
    ``{}`` when the answer has no inline links (a real BrowserHive v12): the result then
    carries only ``linksLocation`` and the ledger reads the ``.links.json`` itself."""
    items = body.get("links")
    if not isinstance(items, list):
        return {}
    kept: list[dict] = []
    usable = 0
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("href"), str) or not item["href"]:
            continue
        usable += 1
        if len(kept) < cap:
            rel = item.get("rel")
            kept.append({"href": item["href"], "rel": rel if isinstance(rel, str) else None})
    out: dict = {"links": kept}
    if usable > len(kept):
        out["linksOverflow"] = usable - len(kept)
    return out


SUMMARY_STATUSES = frozenset({"success", "failed", "timeout", "http_error"})


def manifest_summary(report: dict) -> dict:
    """What archive admission needs from the ``.result.json``, as this answer's ``report``
    said it (the manifest is that report serialized, contracts.md §B.3): ``{status, wacz?}``,
    or ``{}`` when the report's status is not a v12 one (the result then has no summary, and
    the ledger checks the manifest's task id only). The ledger admits only after reading the
    manifest and finding it agrees."""
    status = report.get("status")
    if status not in SUMMARY_STATUSES:
        return {}
    summary: dict = {"status": status}
    artifacts = report.get("artifacts") if isinstance(report.get("artifacts"), dict) else {}
    if isinstance(artifacts.get("wacz"), str) and artifacts["wacz"]:
        summary["wacz"] = artifacts["wacz"]
    return summary
FINAL_URL_MAX_CHARS = 8192  # the ledger's limit for PageResult.finalUrl


def usable_final_url(value: Any) -> str | None:
    """The report's ``finalUrl`` when the ledger can take it (a string of 1–8,192 characters
    without NUL or lone surrogates), else None: a page-chosen value must never cost the level
    its report. Whether it is a usable http(s) URL is the ledger's judgement."""
    if not isinstance(value, str) or not 0 < len(value) <= FINAL_URL_MAX_CHARS or "\x00" in value:
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return value


def turn_wait_ms(body: Any, submitted: float, received: float) -> int | None:
    """The answer's ``turnWaitMs`` (our capture server: ms the capture waited behind the previous
    page, ``startAfterMs`` / ``holdAfter``), at most the submission's own length (``received −
    submitted``, epoch s); None when absent (a real v12; a capture that was not held, whose
    submission went out after the flow's own wait)."""
    value = body.get("turnWaitMs") if isinstance(body, dict) else None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        return None
    return min(value, max(0, int((received - submitted) * 1000)))


def robots_wishes(body: Any) -> dict:
    """The answer's ``robots`` (extension robotsMeta: what the page's robots meta and
    ``X-Robots-Tag`` asked of us) as ``{"noarchive": bool, "nofollow": bool}``; both False when
    absent (a real v12)."""
    robots = body.get("robots") if isinstance(body, dict) else None
    robots = robots if isinstance(robots, dict) else {}
    return {k: robots.get(k) is True for k in ("noarchive", "nofollow")}


def nofollow_links(result: dict) -> int:
    """Mark every inline link of ``result`` ``rel=nofollow`` (the page's robots ``nofollow`` covers
    all its links), so the ledger drops each with its ``nofollow`` reason wherever it scopes links
    (progress events and the level report); returns how many. Links left in ``.links.json``
    (``linksOverflow``) are never followed anyway."""
    links = result.get("links") or []
    for link in links:
        rel = link.get("rel") if isinstance(link.get("rel"), str) else ""
        link["rel"] = f"{rel} nofollow".strip()
    return len(links)


def judge_answer(url: str, crawl_id: str, body: Any, times: tuple[float, float, float],
                 log: Callable[[str], None], links_per_page: int = LINKS_PER_PAGE,
                 honour_robots: bool = False, rules: dict | None = None) -> Outcome:
    """The PageResult of a 200 answer; ``times`` = (submitted, received, gapFrom) in epoch s.
    Level report v2: inline ``links`` (≤ ``links_per_page``) and a ``manifestSummary``.
    ``honour_robots`` (the crawl does not ignore robots meta): a page whose robots meta or
    ``X-Robots-Tag`` says ``nofollow`` has its links marked nofollow (:func:`nofollow_links`); one the
    server refused for ``noarchive`` is ``policy`` with :data:`NOARCHIVE_REASON`. A success that
    landed where ``rules`` (the request's ``navigationRules``) forbid — a server without that
    extension followed the redirect — is ``failed``/``permanent``, its archive not reported
    (:func:`f.waggle.landing.landing_refusal`, decision 105)."""
    submitted, received, gap_from = times
    body = body if isinstance(body, dict) else {}
    report = body.get("report") if isinstance(body.get("report"), dict) else {}
    ok = report.get("status") == "success"
    refused = landing_refusal(url, usable_final_url(report.get("finalUrl")), rules) if ok else None
    if refused is not None:
        log(f"{url}: {refused}")
        return Outcome(_failed(url, submitted, received, refused, PERMANENT, gap_from), None, gap_from)
    task_id = body.get("taskId") if isinstance(body.get("taskId"), str) and body.get("taskId") else None
    result: dict = {"url": url, "status": "captured" if ok else "failed"}
    if task_id:
        result["taskId"] = task_id
    result.update(correlationId=crawl_id, submittedAt=iso_now(submitted), finishedAt=iso_now(received),
                  gapFrom=iso_now(gap_from))
    final_url = usable_final_url(report.get("finalUrl"))
    if final_url is not None:  # contract 4: where the main document ended (HTTP or JS redirects)
        result["finalUrl"] = final_url
    if (waited := turn_wait_ms(body, submitted, received)) is not None:  # issue 24 item 8
        result["waitMs"] = waited
    if task_id:
        result.update(_manifest_fields(body))
        if "manifestLocation" in result and (summary := manifest_summary(report)):
            result["manifestSummary"] = summary
    if ok:
        artifacts = report.get("artifacts") if isinstance(report.get("artifacts"), dict) else {}
        if isinstance(artifacts.get("links"), str) and artifacts["links"]:
            result["linksLocation"] = artifacts["links"]
        result.update(inline_links(body, links_per_page))
        if honour_robots and robots_wishes(body)["nofollow"] and "links" in result:
            log(f"{url}: the site asked not to follow its links (nofollow): {nofollow_links(result)} link(s) not followed")
        if note := incomplete_note(url, report):  # extension captureAtDeadline: not a timeout, not retried
            log(note)
        after = report.get("afterSeal")  # extension sealBeforeFormats: what the sealed page still asked for
        if isinstance(after, dict) and isinstance(after.get("refused"), int) and after["refused"] > 0:
            urls = [u for u in after.get("urls") or [] if isinstance(u, str)][:3]
            log(f"{url}: {after['refused']} request(s) after the seal refused, not archived: {' '.join(urls)}")
        return Outcome(result, None, gap_from)
    status = _http_status(report)
    failure_class, note = classify_report(report, status)
    if note:
        log(f"{url}: {note}")
    reason = failure_reason(report)
    if blocked := challenge_reason(report):  # extension challengeSignature: blocked, not retried (f.waggle.breaker)
        result.update(status="blocked", skipReason=blocked, failureClass=POLICY)
        return Outcome(result, status, gap_from, retry_after_ms=retry_after_ms(body))
    if failure_class == POLICY and honour_robots and robots_wishes(body)["noarchive"]:
        reason = NOARCHIVE_REASON  # nothing was archived (the server wrote no WACZ)
    result.update(skipReason=reason, failureClass=failure_class)
    return Outcome(result, status, gap_from, retryable=failure_class == TRANSIENT,
                   retry_after_ms=retry_after_ms(body))


def retry_after_ms(body: Any) -> int | None:
    """The answer's (or seal answer's) ``retryAfterMs`` (our capture server's extension 18: the
    429/503 main document's ``Retry-After`` in ms), None when absent or not an integer ≥ 0 (a real
    BrowserHive v12 never sends it)."""
    value = body.get("retryAfterMs") if isinstance(body, dict) else None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        return None
    return value
