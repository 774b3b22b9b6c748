# /// script
# requires-python = ">=3.11"
# dependencies = ["httpx==0.28.1", "wmill==1.850.0", "protego==0.7.0", "google-re2==1.1.20251105"]
# ///
"""One host's sequence of captures: each page after the host's gap, one after the other or pipelined
(:mod:`f.waggle.pipeline`), duplicates of earlier redirect targets skipped, progress events.

Split out of f/waggle/crawl_host.py (issue 30 item 5), no change of behaviour.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import ada_url

from f.waggle import pipeline, slowhost
from f.waggle.breaker import HostBreaker, blocked_after as breaker_after
from f.waggle.host_gap import BACKOFF_STATUSES, BUSY_JITTER_MS, BUSY_REF_GAP_MS, FLOW_RETRY_S, HostGap, backed_off_gap, busy_window, clock, first_wait_s, gap_start, remaining_gap_s, rest_before_retry_s
from f.waggle.capture_request import capture_request
from f.waggle.host_admission import ADMIT_LEAD_S, Admission
from f.waggle.endpoints import Endpoint, describe_refusal
from f.waggle.capture_outcome import LINKS_PER_PAGE, retry_after_ms
from f.waggle.one_capture import MAX_ATTEMPTS, Raw, capture_one, outcome_of, submit_once


# A page of the level that is the final URL of a capture made earlier in this host's chain
# (A → 301 → B, B also listed) is not captured again: reported skipped with this reason + A.
REDIRECT_DUPLICATE = "already captured in this level as the redirect target of "
def page_key(url: str) -> str:
    """``url`` as the same-level duplicate check compares it: its WHATWG serialization by
    ada-url (scheme and host lower-cased, default port and dot segments gone, an empty path
    written ``/``) without the fragment. Anything unparsable stays as given, minus its fragment."""
    base = url.partition("#")[0]
    try:
        return ada_url.URL(base).href
    except ValueError:
        return base


def _notify(on_page: Callable[..., None] | None, say: Callable[[str], None], *event: object) -> None:
    if on_page is None:
        return
    try:
        on_page(*event)
    except Exception as exc:  # noqa: BLE001 - progress is a courtesy; the capture goes on
        say(f"progress hook failed ({type(exc).__name__}: {exc})")


def capture_host(
    endpoints: Sequence[Endpoint],
    host: str,
    urls: Sequence[str],
    crawl_id: str,
    *,
    formats: dict,
    signing: bool,
    scripts: Sequence[dict] | None,
    artifact_sink: dict | None = None,
    delay_ms: int,
    initial_delay_ms: int = 0,
    not_before: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
    busy_jitter_ms: tuple[float, float] = BUSY_JITTER_MS,
    busy_ref_gap_ms: float = BUSY_REF_GAP_MS,
    log: Callable[[str], None] = print,
    now: Callable[[], float] = clock,
    on_page: Callable[..., None] | None = None,
    links_per_page: int = LINKS_PER_PAGE,
    ignore_robots_meta: bool = False,
    rules: dict | None = None,
    blocked_after: int | None = None,
    delay_factor: float = 0.0,
    gap_out: dict | None = None,
    admission: Admission | None = None,
    own_delay_ms: int | None = None,
    gap_from: float | None = None,
) -> list[dict]:
    """Capture ``urls`` of ``host``, one after the other; one PageResult per URL, in order.

    Where an endpoint advertises ``sealWait`` the next capture is submitted once the previous
    one's page network is sealed, while it still packages (:mod:`f.waggle.pipeline`); otherwise
    each capture waits for the previous answer (a real BrowserHive v12). Raises
    :class:`ServerUnavailable` (aborting the host and so the level) when every endpoint is
    unreachable for a page. ``not_before`` (epoch s, the plan's ``notBefore``) shortens the
    first wait to what is left of ``initial_delay_ms`` when this job started late (never
    lengthens it). ``sleep``/``now`` are injectable for tests (real timers).
    ``on_page(url, "started")`` / ``on_page(url, "done", result)`` around each capture (progress
    events, :mod:`f.waggle.progress`), ``on_page(url, "queued")`` first for a capture submitted
    held behind the previous page (its ``started`` comes once that page sealed: decision 401);
    whatever it raises is logged, never fails the page.
    ``ignore_robots_meta`` (the crawl's ``ignoreRobotsMeta``): archive noarchive pages and follow
    nofollow pages' links; by default both are honoured where the endpoint reports them
    (extension robotsMeta; a real v12 reports nothing, and nothing changes).
    ``rules``: the ``navigationRules`` of every capture (:func:`navigation_rules`), or None.
    ``blocked_after``: blocked answers (403/429/503) in a row that pause the host
    (:mod:`f.waggle.breaker`; None → its default, 0 → only a challenge signature does).
    ``delay_factor``: a slow host's gap (:mod:`f.waggle.slowhost`; 0 = none). ``gap_out``
    (optional): gets ``{"ms": the gap at the end}`` — what the next host of the server keeps.
    ``admission``: reads the host's shared delay right before each submission (decision 301;
    None: the planned delay only); ``own_delay_ms``: the crawl's own part of ``delay_ms``, the
    floor a shared delay may fall back to (None: ``delay_ms``); ``gap_from``: epoch s of the
    host's last request before this job (the plan's ``gapFrom``), from which an admitted longer
    delay is measured for the first capture.
    """
    if not endpoints:
        raise ValueError("no BrowserHive endpoints")

    def say(text: str) -> None:
        log(f"[{host}] {text}")

    job = HostJob(list(urls), crawl_id, formats, signing, scripts, artifact_sink,
                  HostGap(max(0, int(delay_ms or 0)), say, factor=delay_factor,
                          own=-1 if own_delay_ms is None else max(0, int(own_delay_ms))),
                  busy_jitter_ms, busy_ref_gap_ms, say, now, sleep, on_page, links_per_page,
                  honour_robots=not ignore_robots_meta, navigation_rules=rules,
                  breaker=HostBreaker(breaker_after(blocked_after), say), admission=admission)
    initial_s = first_wait_s(initial_delay_ms, not_before, now())
    if initial_s > 0:
        say(f"waiting {initial_s * 1000:.0f} ms (rest of the gap since this host's last capture)")
    # the cross-level rest is one more gap of the chain, from the host's last request; the plan's
    # gapFrom where known (a longer delay admitted later is measured from it), else as planned
    first_gap_from = now() + initial_s - job.gap.ms / 1000 if initial_s > 0 else None
    if isinstance(gap_from, (int, float)) and not isinstance(gap_from, bool):
        first_gap_from = max(first_gap_from or float(gap_from), float(gap_from))
    try:
        if any(pipeline.EXT_SEAL in pipeline.extensions_of(e) for e in endpoints):
            # its first capture may use startAfterMs too
            pipeline.Chain(endpoints, ChainPages(job), now=now, sleep=sleep).run(len(job.urls), first_gap_from)
            return [r for r in job.results if r is not None]
        return capture_sequentially(endpoints, job, first_gap_from)
    except Exception:
        rest = rest_before_retry_s(job.gap.ms, job.contacted)
        if rest > 0:
            say(f"failing; waiting {rest * 1000:.0f} ms first so that the flow's retry"
                f" ({FLOW_RETRY_S} s later) keeps the gap ({job.gap.ms} ms)")
            sleep(rest)
        raise
    finally:
        if gap_out is not None:
            gap_out["ms"] = job.gap.ms


@dataclass
class HostJob:
    """One host's capture job as :func:`capture_host` received it; ``results`` by URL index."""

    urls: list[str]
    crawl_id: str
    formats: dict
    signing: bool
    scripts: Sequence[dict] | None
    artifact_sink: dict | None
    gap: HostGap
    busy_jitter_ms: tuple[float, float]
    busy_ref_gap_ms: float
    say: Callable[[str], None]
    now: Callable[[], float]
    sleep: Callable[[float], None]
    on_page: Callable[..., None] | None
    links_per_page: int
    results: list[dict | None] = field(default_factory=list)
    finals: dict[str, str] = field(default_factory=dict)  # page_key(final URL) → the URL captured
    sealed_finals: dict[str, str] = field(default_factory=dict)  # the same from seal answers (not answered yet)
    contacted: bool = False  # a page was submitted (the site may have been reached)
    down: set[str] = field(default_factory=set)  # endpoints found unreachable: not tried again this level
    honour_robots: bool = True  # the crawl honours robots meta / X-Robots-Tag (noarchive, nofollow)
    navigation_rules: dict | None = None  # extension navigationRules (decision 105)
    breaker: HostBreaker = field(default_factory=HostBreaker)  # challenge / block pages (f.waggle.breaker)
    admission: Admission | None = None  # the host's shared delay read before each submission (decision 301)

    def admit(self) -> None:
        """Read the host's shared delay now into :attr:`gap` (no-op without an admission)."""
        if self.admission is not None:
            self.admission(self.gap)

    def await_turn(self, gap_from: float | None) -> None:
        """Wait until the host's gap has passed since ``gap_from`` (epoch s; None: nothing to wait
        for), admitting the submission :data:`ADMIT_LEAD_S` before the gap ends: a longer shared
        delay read then lengthens the rest of the wait."""
        if gap_from is None:
            return
        left = remaining_gap_s(self.gap.ms, gap_from, self.now())
        if left > ADMIT_LEAD_S:
            self.sleep(left - ADMIT_LEAD_S)
        self.admit()
        if (left := remaining_gap_s(self.gap.ms, gap_from, self.now())) > 0:
            self.sleep(left)

    def request(self, index: int) -> dict:
        """The capture request of page ``index``, its settle bounded by the current gap."""
        return capture_request(self.urls[index], self.crawl_id, self.formats, self.signing, self.scripts,
                               self.artifact_sink, pipeline.settle_for_gap(self.gap.ms), self.honour_robots,
                               self.navigation_rules)

    def busy(self) -> tuple[float, float]:
        return busy_window(self.busy_jitter_ms, self.gap.ms, self.busy_ref_gap_ms)

    def started(self, index: int) -> None:
        self.contacted = True
        self.say(f"{index + 1}/{len(self.urls)} {self.urls[index]}")
        _notify(self.on_page, self.say, self.urls[index], "started")

    def queued(self, index: int) -> None:
        """Page ``index`` was submitted held behind the host's loading page (extension
        ``holdAfter``): nothing of it reaches the site before that page sealed and the gap passed,
        so progress shows it queued, not capturing (decision 401); :meth:`started` follows."""
        self.contacted = True
        self.say(f"{index + 1}/{len(self.urls)} {self.urls[index]} (held behind the previous page)")
        _notify(self.on_page, self.say, self.urls[index], "queued")

    def __post_init__(self) -> None:
        self.results = [None] * len(self.urls)

    def done(self, index: int, result: dict, doc_status: int | None = None) -> None:
        self.breaker.observe(result, doc_status)  # may turn it blocked (the streak's last page)
        self.results[index] = result
        final = result.get("finalUrl")
        if result.get("status") == "captured" and final and page_key(final) != page_key(self.urls[index]):
            self.finals.setdefault(page_key(final), self.urls[index])
        _notify(self.on_page, self.say, self.urls[index], "done", result)

    def duplicate(self, index: int) -> bool:
        """Whether page ``index`` is the final URL of a capture this job already concluded (a
        redirect target listed in the level too): then it is recorded ``skipped`` with
        :data:`REDIRECT_DUPLICATE` and never submitted (no capture, no gap, no progress event).
        A capture still in flight is not known yet: its duplicate is captured (both recorded).
        Once the host's breaker tripped, every page not yet submitted is ``blocked`` the same way."""
        if (held := self.breaker.held(self.urls[index])) is not None:
            self.say(f"{index + 1}/{len(self.urls)} {self.urls[index]}: blocked, not captured")
            self.results[index] = held
            return True
        source = self.finals.get(page_key(self.urls[index]))
        if source is None:
            return False
        self.say(f"{index + 1}/{len(self.urls)} {self.urls[index]}: not captured again, the redirect target of {source}")
        self.results[index] = {"url": self.urls[index], "status": "skipped", "skipReason": REDIRECT_DUPLICATE + source}
        return True


def capture_sequentially(endpoints: Sequence[Endpoint], job: HostJob, gap_from: float | None = None) -> list[dict]:
    """Each capture after the previous answer, the gap since its ``gapFrom`` (no extensions);
    ``gap_from``: the host's last request before the first capture (None: none to wait for)."""
    for i in range(len(job.urls)):
        if job.duplicate(i):
            continue
        job.await_turn(gap_from)
        job.started(i)
        outcome = capture_one(endpoints, job.request(i), i, crawl_id=job.crawl_id, gap=job.gap, sleep=job.sleep,
                              busy_jitter_ms=job.busy(), log=job.say, now=job.now,
                              links_per_page=job.links_per_page, down=job.down, await_turn=job.await_turn)
        job.done(i, outcome.result, outcome.doc_status)
        job.gap.adapt(outcome.document_ms)
        gap_from = outcome.gap_from
    return [r for r in job.results if r is not None]


class ChainPages:
    """crawl_host's side of :class:`f.waggle.pipeline.Chain` (its ``Pages`` protocol)."""

    def __init__(self, job: HostJob) -> None:
        self.job = job
        self._backed_off: set[int] = set()  # pages whose seal answer backed off (one flight per page at a time)

    def gap_ms(self) -> int:
        return self.job.gap.ms

    def admit(self) -> None:
        self.job.admit()

    def started(self, index: int) -> None:
        self.job.started(index)

    def queued(self, index: int) -> None:
        self.job.queued(index)

    def skip(self, index: int) -> bool:
        return self.job.duplicate(index)

    def maybe_duplicate(self, index: int) -> bool:
        """Whether a capture whose seal answer named page ``index``'s URL as where it landed
        (extension 8 ``finalUrl``) may make it a duplicate once it answers."""
        return page_key(self.job.urls[index]) in self.job.sealed_finals

    def attempt(self, index: int, attempt: int, endpoints: Sequence[Endpoint], nap: Callable[[float], None]) -> Raw:
        """In a worker thread: one submission of page ``index``."""
        return submit_once(endpoints, self.job.request(index), index, sleep=nap, busy_jitter_ms=self.job.busy(),
                           log=self.job.say, now=self.job.now, down=self.job.down)

    def hold_gaps_ms(self) -> tuple[int, int, float]:
        """The host's gap now and after a 429/503 back-off (ms), and the crawl's delayFactor (the
        server applies it to the previous page's document time: the client learns it too late),
        for a held submission."""
        return self.job.gap.ms, backed_off_gap(self.job.gap.ms), self.job.gap.factor

    def hold_admission(self) -> dict | None:
        """``holdAfter.admission`` (extension ``holdAdmission``): the ledger read the capture server
        makes before releasing a held capture; None without admission (decision 302)."""
        return None if self.job.admission is None else self.job.admission.hold_member()

    def attempt_held(self, index: int, attempt: int, endpoint: Endpoint) -> Raw | None:
        """In a worker thread: one submission of page ``index`` held behind the host's loading
        capture on ``endpoint`` (extension ``holdAfter``); None when it was not taken (429, 409,
        unreachable: nothing started, it is submitted again the usual way)."""
        request = self.job.request(index)
        sent = self.job.now()
        try:
            answer = endpoint.capture(request)
        except TimeoutError as exc:  # the capture may be running: a page failure, as submit_once
            return Raw(request["url"], None, exc, sent, self.job.now())
        except Exception as exc:  # noqa: BLE001 - not taken
            self.job.say(f"{index + 1}/{len(self.job.urls)} held submission not taken ({exc}); submitting it again")
            return None
        if answer.status in (409, 429):
            self.job.say(f"{index + 1}/{len(self.job.urls)} held submission not taken ({describe_refusal(answer)[:120]});"
                         " submitting it again")
            return None
        return Raw(request["url"], answer, None, sent, self.job.now())

    def seal_gap_from(self, index: int, body: dict, submitted: float, received: float) -> float:
        """``gapFrom`` from a seal answer (:func:`gap_start`: the same rule and clamp as an answer's).
        A seal answer with ``httpStatusCode`` 429/503 (and ``retryAfterMs``; extension 18) backs the
        gap off now, before the next submission is made or held (its answer then does not again)."""
        self.job.say(f"{index + 1}/{len(self.job.urls)} sealed {int((received - submitted) * 1000)} ms after"
                     f" submission, {body.get('sinceLastRequestMs')} ms after its last request")
        if isinstance(body.get("taskId"), str):  # who it is and where its manifest goes: a crawl failed
            # before its answer still admits it (the ledger's salvage.record_sealed)
            _notify(self.job.on_page, self.job.say, self.job.urls[index], "sealed",
                    {k: body[k] for k in ("taskId", "manifestLocation") if isinstance(body.get(k), str)})
        final = body.get("finalUrl")
        if isinstance(final, str) and final and page_key(final) != page_key(self.job.urls[index]):
            self.job.sealed_finals.setdefault(page_key(final), self.job.urls[index])
        if (status := body.get("httpStatusCode")) in BACKOFF_STATUSES:  # the document answered 429/503
            self._backed_off.add(index)
            self.job.gap.back_off(status, retry_after_ms(body))
        self.job.gap.adapt(slowhost.document_ms(body))  # before the next submission is made or held
        return gap_start(body, submitted, received)

    def conclude(self, flight: "pipeline.Flight") -> tuple[float, bool]:
        """The flight's outcome (its back-off applied); returns (its gapFrom, retry it?)."""
        raw: Raw = flight.future.result()  # ServerUnavailable propagates: the level fails
        if flight.tracker.sent_at is not None:
            raw.sent = max(raw.sent, flight.tracker.sent_at)  # after any wait before the POST
        job = self.job
        if flight.gap_from is None and raw.answer is not None and raw.answer.status == 200:
            job.say(f"{flight.index + 1}/{len(job.urls)} answered before its seal was known: gap from the answer")
        outcome = outcome_of(raw, job.crawl_id, job.say, job.links_per_page, flight.gap_from, job.honour_robots,
                             job.navigation_rules)
        sealed_back_off = flight.index in self._backed_off
        self._backed_off.discard(flight.index)
        if outcome.doc_status in BACKOFF_STATUSES and not sealed_back_off:
            job.gap.back_off(outcome.doc_status, outcome.retry_after_ms)
        job.gap.adapt(outcome.document_ms)
        retry = outcome.retryable and flight.attempt < MAX_ATTEMPTS
        if retry:
            job.say(f"retrying {raw.url} ({outcome.result.get('skipReason', '')[:120]}), "
                    f"waiting the gap ({job.gap.ms} ms) from the last capture's gapFrom")
        else:
            job.done(flight.index, outcome.result, outcome.doc_status)
        return outcome.gap_from, retry
