# /// script
# requires-python = ">=3.11"
# dependencies = ["httpx==0.28.1", "wmill==1.850.0", "protego==0.7.0", "google-re2==1.1.20251105"]
# ///
"""crawl_host: capture one host's URLs one after the other, the host's gap running from the page's last request.

reference/scheduler.md §4.3 (the politeness core) on BrowserHive v12 (contracts.md §A):

* the first page waits ``initial_delay_ms`` (the remainder of the cross-level gap), counted
  from the plan (to ``not_before``) rather than from this job's start, which a busy for-each
  may delay; every
  later page is submitted once the host's gap has passed since the previous page's
  ``gapFrom`` (retry included; see below);
* page ``i`` starts at endpoint ``i mod n``; 429 → next endpoint; all busy → uniform
  0.5–1.5 s and another round; an unreachable endpoint is not tried again for the rest of the
  host's level (issue 24 item 9: no connection attempt to a dead server before every page); all
  unreachable → :class:`ServerUnavailable` (fails the level, never a page failure);
* a 145 s deadline per call; a deadline is a page failure (class ``transient``, not retried:
  the capture may still be running) and never moves to another endpoint;
* every failed PageResult has ``failureClass`` (``transient | permanent | policy``, from what
  happened: f/waggle/failures.py) and a one-line ``skipReason``; at most 2 attempts, retrying
  only a ``transient`` capture report, after the same gap (a refused submission is not retried);
* beyond upstream: a main document answering 429 or 503 doubles that host's gap for the
  rest of the level (capped at :data:`BACKOFF_CAP_MS`, logged; before the retry too) — C3 —
  and makes it at least the answer's ``Retry-After`` where our capture server reports it
  (``retryAfterMs``, capped the same; from the seal answer when pipelined).

Where the gap is measured from (issue 11, superseding issue 8's "from completion"): the
moment the page's last network request ended, where the capture answer says so. Our capture
server adds ``sinceLastRequestMs`` to the v12 answer (ms on its own monotonic clock from the
end of the page's last request to the answer; the page's network is sealed before it
answers), so ``gapFrom = answer received − sinceLastRequestMs`` needs no cross-machine clock
comparison; the HTTP transfer of the answer only makes ``gapFrom`` later (safe). It is clamped
to ``[submittedAt, finishedAt]`` (a claim before the submission or after the answer cannot be
true) and is ``finishedAt`` when the field is absent: a real BrowserHive v12 keeps the old rule,
whose ``settle`` times and ``timestamp`` do not bound the last request from above, and the
answer — sent after the whole task and its manifest write — is the one moment known to follow
it. All times come from :func:`clock` (epoch seconds read off the monotonic clock). The ledger
stores ``gapFrom`` and hands it back as the next level's ``lastFinishedAt``.

Pipelining and settle (issue 11, docs/internals.md): endpoints are asked once per job what
extensions they advertise (``GET /status``). Where one advertises ``sealWait``, the next capture
is submitted when the previous one's page network is sealed — while it still packages — with
``startAfterMs`` holding its navigation until the gap has passed (:mod:`f.waggle.pipeline`: at most
two captures of a host in flight, ``gapFrom`` from the seal answer; a short-gap host's next capture
held behind the loading one where ``holdAfter`` is advertised); otherwise the loop below, each
capture after the previous answer. Every request carries a ``loadWait`` whose quiet window fits
the host's gap (:func:`f.waggle.pipeline.settle_for_gap`; none for a gap ≥ 1.2 s).

Hosts may outnumber browsers (plan_level ``parallelism_for``, when sleeping hosts would
otherwise idle them): a host that finds every endpoint busy goes round again after 0.5–1.5 s — faster for a host with a long gap
(:func:`busy_window`), so the level's slowest host wins the next free browser — which only
ever lengthens its gap.

This step is :func:`main` only; the work is in modules with one job each: :mod:`f.waggle.endpoints`
(the capture servers, submitting to the first that takes a capture), :mod:`f.waggle.host_gap` (the
clock, where a gap starts, back-off, the rest before a retry), :mod:`f.waggle.capture_request` and
:mod:`f.waggle.capture_outcome` (one capture's request and what its answer means),
:mod:`f.waggle.one_capture` (submit, judge, retry once) and :mod:`f.waggle.host_sequence` (the host's
pages in order, sequential or pipelined).
"""


from __future__ import annotations

from typing import Optional

from f.waggle import pipeline, servers, slowhost
from f.waggle.progress import poster as progress_poster
from f.waggle.common import VAR_API_URL, VAR_ENDPOINTS, VAR_TLS_CA, VAR_TOKEN, read_variable
from f.waggle.capture_outcome import LINKS_PER_PAGE
from f.waggle.capture_request import navigation_rules, revisit_member
from f.waggle.endpoints import HttpEndpoint, build_client, parse_endpoints
from f.waggle.host_admission import Admission, LedgerReader
from f.waggle.host_gap import clock
from f.waggle.host_sequence import capture_host
from f.waggle.read_token import read_token

# The step's names as they were before the split (issue 30 item 5), for code and tests that import
# them from here; each lives in the module named.
from f.waggle.capture_outcome import NOARCHIVE_REASON, judge_answer, retry_after_ms, turn_wait_ms  # noqa: E402,F401
from f.waggle.capture_request import capture_request, extension_members  # noqa: E402,F401
from f.waggle.endpoints import Answer, ConnectionLost, ServerUnavailable, describe_refusal  # noqa: E402,F401
from f.waggle.host_gap import (  # noqa: E402,F401
    BACKOFF_CAP_MS, FLOW_RETRY_S, HostGap, backed_off_gap, busy_window, first_wait_s, gap_start,
    remaining_gap_s, rest_before_retry_s,
)
from f.waggle.host_sequence import REDIRECT_DUPLICATE  # noqa: E402,F401


def main(
    crawl_id: str,
    host: str,
    urls: list[str],
    per_host_delay_ms: int,
    capture_formats: dict,
    signing: bool,
    scripts: list[dict],
    initial_delay_ms: int = 0,
    artifact_sink: Optional[dict] = None,
    links_per_page: Optional[int] = None,
    not_before: Optional[float] = None,
    ignore_robots_meta: Optional[bool] = None,
    robots_txt: Optional[str] = None,
    exclude: Optional[list[str]] = None,
    blocked_after: Optional[int] = None,
    delay_factor: Optional[float] = None,
    members: Optional[list[dict]] = None,
    own_delay_ms: Optional[int] = None,
    gap_from: Optional[float] = None,
):
    missing = [n for n, v in (("crawl_id", crawl_id), ("host", host), ("urls", urls),
                              ("capture_formats", capture_formats), ("signing", signing), ("scripts", scripts)) if v is None]
    if missing:
        raise ValueError(f"crawl_host: required input(s) arrived null: {', '.join(missing)} (check the flow's input_transforms)")
    targets = parse_endpoints(read_variable(VAR_ENDPOINTS))
    ca_pem = read_variable(VAR_TLS_CA)  # must exist; empty = plaintext only
    client = build_client(targets, ca_pem)
    on_page = progress_poster(crawl_id, log=lambda text: print(f"[{host}] {text}"))
    # capture servers read the ledger with a read-only token of this crawl, not the flow's (decision 405)
    for_servers = read_token(read_variable(VAR_API_URL), read_variable(VAR_TOKEN), crawl_id,
                             log=lambda text: print(f"[{host}] {text}"))
    revisit = revisit_member(read_variable(VAR_API_URL), for_servers, crawl_id)
    # each submission reads the host's shared delay again (decision 301)
    reader = LedgerReader(read_variable(VAR_API_URL), read_variable(VAR_TOKEN), crawl_id, server_token=for_servers)
    try:
        endpoints = [HttpEndpoint(t, client, extensions=pipeline.read_extensions(client, t), revisit=revisit)
                     for t in targets]
        for e in endpoints:
            print(f"[{host}] {e.target}: extensions {', '.join(sorted(e.extensions)) or 'none (plain v12)'}")

        def run(group: dict, wait_ms: int, at: float | None, gap_out: dict) -> list[dict]:
            return capture_host(
                endpoints, group["host"], group["urls"], crawl_id,
                formats=capture_formats, signing=signing, scripts=scripts,
                artifact_sink=artifact_sink or None,
                delay_ms=group.get("delayMs") or 0, initial_delay_ms=wait_ms or 0, not_before=at,
                on_page=on_page,
                links_per_page=links_per_page if isinstance(links_per_page, int) and links_per_page >= 0 else LINKS_PER_PAGE,
                ignore_robots_meta=ignore_robots_meta is True,
                rules=navigation_rules(group.get("robotsTxt"), exclude),
                blocked_after=blocked_after,
                delay_factor=slowhost.factor_of(delay_factor), gap_out=gap_out,
                admission=Admission(group["host"], reader, lambda text: print(f"[{group['host']}] {text}")),
                own_delay_ms=group.get("ownDelayMs"),
                gap_from=group.get("gapFrom"),
            )

        if members:  # hosts of one server (f/waggle/servers.py): one after the other, one gap
            return servers.capture_members(members, run, delay_ms=per_host_delay_ms or 0,
                                           initial_delay_ms=initial_delay_ms or 0, not_before=not_before, now=clock)
        return run({"host": host, "urls": urls, "delayMs": per_host_delay_ms, "robotsTxt": robots_txt,
                    "ownDelayMs": own_delay_ms, "gapFrom": gap_from}, initial_delay_ms or 0, not_before, {})
    finally:
        reader.close()
        on_page.close()
        client.close()
