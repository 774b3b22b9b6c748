# /// script
# requires-python = ">=3.11"
# dependencies = ["httpx==0.28.1", "wmill==1.850.0", "protego==0.7.0", "google-re2==1.1.20251105"]
# ///
"""One page's capture: submit, judge the answer, retry a transient failure once after the gap.

Split out of f/waggle/crawl_host.py (issue 30 item 5), no change of behaviour.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from f.waggle import slowhost
from f.waggle.failures import TRANSIENT, refusal_class
from f.waggle.host_gap import BACKOFF_STATUSES, HostGap, clock, gap_start, remaining_gap_s
from f.waggle.endpoints import Answer, ConnectionLost, Endpoint, ServerUnavailable, capture_on_any, describe_refusal
from f.waggle.capture_outcome import LINKS_PER_PAGE, Outcome, _failed, judge_answer


MAX_ATTEMPTS = 2


@dataclass
class Raw:
    """One submission before judging: the answer or the exception that ended it, when the
    answered submission went out (``sent``) and when it ended (``received``), epoch s."""

    url: str
    answer: Answer | None
    error: Exception | None
    sent: float
    received: float


def submit_once(endpoints: Sequence[Endpoint], request: dict, index: int, *, sleep: Callable[[float], None],
                busy_jitter_ms: tuple[float, float], log: Callable[[str], None], now: Callable[[], float],
                down: set[str] | None = None) -> Raw:
    """One submission (after any busy rounds); raises :class:`ServerUnavailable` only.
    ``down``: the host level's unreachable targets (:func:`capture_on_any`)."""
    # submittedAt is politeness evidence (scheduler.md §5): when the submission that got an
    # answer went out, not when busy rounds began (hosts outnumber browsers, plan_level).
    sent: list[float] = []
    try:
        answer = capture_on_any(endpoints, request, index, sleep=sleep, busy_jitter_ms=busy_jitter_ms, log=log,
                                sent=sent, now=now, down=down)
    except ServerUnavailable:
        raise
    except Exception as exc:  # noqa: BLE001 - a deadline (or anything else) fails this page only
        received = now()
        return Raw(request["url"], None, exc, sent[-1] if sent else received, received)
    return Raw(request["url"], answer, None, sent[-1], now())


def outcome_of(raw: Raw, crawl_id: str, log: Callable[[str], None], links_per_page: int = LINKS_PER_PAGE,
               gap_from: float | None = None, honour_robots: bool = False, rules: dict | None = None) -> Outcome:
    """The :class:`Outcome` of one submission. ``gap_from``: where the seal put the gap (epoch s,
    clamped to [sent, received]); None → from the answer (:func:`gap_start`), or its arrival."""
    if gap_from is not None:
        gap_from = min(raw.received, max(raw.sent, gap_from))
    if raw.error is not None:
        reason = str(raw.error) or type(raw.error).__name__
        if isinstance(raw.error, TimeoutError) and not isinstance(raw.error, ConnectionLost) and "deadline" not in reason:
            reason = f"deadline passed: {reason}"
        result = _failed(raw.url, raw.sent, raw.received, reason, TRANSIENT, gap_from)
        return Outcome(result, None, raw.received if gap_from is None else gap_from)
    answer = raw.answer
    assert answer is not None
    if answer.status != 200:
        # a refusal is never retried (scheduler.md §4.3), whatever its class
        result = _failed(raw.url, raw.sent, raw.received, describe_refusal(answer), refusal_class(answer.status),
                         gap_from)
        return Outcome(result, None, raw.received if gap_from is None else gap_from)
    if gap_from is None:
        gap_from = gap_start(answer.body, raw.sent, raw.received)
    outcome = judge_answer(raw.url, crawl_id, answer.body, (raw.sent, raw.received, gap_from), log, links_per_page,
                           honour_robots, rules)
    outcome.document_ms = slowhost.document_ms(answer.body)
    return outcome


def attempt_once(endpoints: Sequence[Endpoint], request: dict, index: int, *, crawl_id: str,
                 sleep: Callable[[float], None], busy_jitter_ms: tuple[float, float],
                 log: Callable[[str], None], now: Callable[[], float],
                 links_per_page: int = LINKS_PER_PAGE, down: set[str] | None = None) -> Outcome:
    """One submission (after any busy rounds) and its outcome; raises :class:`ServerUnavailable`."""
    raw = submit_once(endpoints, request, index, sleep=sleep, busy_jitter_ms=busy_jitter_ms, log=log, now=now,
                      down=down)
    return outcome_of(raw, crawl_id, log, links_per_page, honour_robots=bool(request.get("honourNoarchive")),
                      rules=request.get("navigationRules"))


def capture_one(
    endpoints: Sequence[Endpoint],
    request: dict,
    index: int,
    *,
    crawl_id: str,
    gap: "HostGap",
    sleep: Callable[[float], None],
    busy_jitter_ms: tuple[float, float],
    log: Callable[[str], None],
    now: Callable[[], float] = clock,
    links_per_page: int = LINKS_PER_PAGE,
    down: set[str] | None = None,
    await_turn: Callable[[float], None] | None = None,
) -> Outcome:
    """Capture one page with at most MAX_ATTEMPTS. A 429/503 main document backs the host's
    ``gap`` off first; only a retryable ``transient`` failure is tried again, once ``gap.ms``
    has passed since that attempt's ``gapFrom`` — ``await_turn(gapFrom)`` waits it where given
    (the host job's admission, decision 301)."""
    for attempt in range(1, MAX_ATTEMPTS + 1):
        outcome = attempt_once(endpoints, request, index, crawl_id=crawl_id, sleep=sleep,
                               busy_jitter_ms=busy_jitter_ms, log=log, now=now, links_per_page=links_per_page,
                               down=down)
        if outcome.doc_status in BACKOFF_STATUSES:
            gap.back_off(outcome.doc_status, outcome.retry_after_ms)
        if not outcome.retryable or attempt == MAX_ATTEMPTS:
            return outcome
        wait = remaining_gap_s(gap.ms, outcome.gap_from, now())
        log(f"retrying {request['url']} ({outcome.result.get('skipReason', '')[:120]}), waiting {int(wait * 1000)} ms")
        if await_turn is not None:
            await_turn(outcome.gap_from)
        elif wait > 0:
            sleep(wait)
    raise AssertionError("unreachable")  # pragma: no cover
