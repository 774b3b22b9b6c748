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
"""

from __future__ import annotations

import json
import random
import ssl
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, Protocol

import ada_url
import httpx

from f.waggle import pipeline, servers, slowhost
from f.waggle.progress import poster as progress_poster
from f.waggle.common import VAR_API_URL, VAR_ENDPOINTS, VAR_TLS_CA, VAR_TOKEN, iso_now, one_line, read_variable
from f.waggle.failures import PERMANENT, POLICY, TRANSIENT, classify_report, refusal_class
from f.waggle.landing import landing_refusal

CAPTURE_DEADLINE_S = 145.0  # 130 s task budget + 10 s manifest write + 5 s slack
MAX_ATTEMPTS = 2
BUSY_JITTER_MS = (500.0, 1500.0)
# A host whose gap is longer than this goes round proportionally faster while every browser is
# busy (down to BUSY_MIN_FACTOR of the window): it is the level's critical path — nothing but
# a browser the moment its gap ends shortens its chain — while a short-gap host loses little
# by waiting. See busy_window.
BUSY_REF_GAP_MS = 4000
BUSY_MIN_FACTOR = 0.2
BACKOFF_STATUSES = frozenset({429, 503})
BACKOFF_MIN_MS = 1000  # what a zero gap becomes (doubling zero would stay zero)
BACKOFF_CAP_MS = 120_000
FORMAT_KEYS = ("png", "webp", "html", "links", "mhtml", "wacz")
NO_MANIFEST = "the capture response carried no manifest outcome"
# Links per PageResult sent inline to the ledger (the rest counted in linksOverflow); the
# ledger's WAGGLE_REPORT_LINKS_PER_PAGE (sent as the flow input links_per_page) wins.
LINKS_PER_PAGE = 1000
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


_EPOCH_MINUS_MONOTONIC = time.time() - time.monotonic()


def clock() -> float:
    """Epoch seconds read off the monotonic clock (anchored once per process at import), so
    the differences crawl_host sleeps by never jump with a wall-clock step."""
    return _EPOCH_MINUS_MONOTONIC + time.monotonic()


class ServerUnavailable(RuntimeError):
    """Every BrowserHive endpoint was unreachable for one page: the level fails."""


class CaptureDeadline(TimeoutError):
    """A capture call passed its deadline; the page fails, the endpoint is not marked down."""


class ConnectionLost(CaptureDeadline):
    """The connection broke after the submission went out (a crashed or restarted capture
    server, a dropped proxy): treated like a deadline (the capture may still be running, so the
    page is not retried), but named for what happened."""


class EndpointUnreachable(ConnectionError):
    """An endpoint refused the connection, did not resolve, or failed TLS."""


@dataclass
class Answer:
    """One HTTP answer of ``POST /captures``: status, ``x-amzn-errortype`` (or None), body (JSON or text)."""

    status: int
    error_type: str | None
    body: Any


class Endpoint(Protocol):
    target: str

    def capture(self, request: dict) -> Answer: ...


class HttpEndpoint:
    """A BrowserHive endpoint spoken to over HTTP (``POST {target}/captures``).

    ``capture`` returns an :class:`Answer` for any HTTP status, raises
    :class:`CaptureDeadline` once ``deadline_s`` has passed after the request was sent,
    and :class:`EndpointUnreachable` when no connection could be made.
    """

    def __init__(self, target: str, client: httpx.Client, deadline_s: float = CAPTURE_DEADLINE_S,
                 extensions: frozenset[str] = frozenset(), revisit: dict | None = None) -> None:
        self.target = target
        self._client = client
        self._deadline_s = deadline_s
        self.extensions = extensions  # what GET /status advertised (f.waggle.pipeline); none = plain v12
        self.revisit = revisit  # the ledger's digest lookup (:func:`revisit_member`), sent where advertised

    def seal(self, key: str, timeout_ms: int) -> tuple[dict, float] | None:
        """Extension ``sealWait``: one long-poll (:func:`f.waggle.pipeline.poll_seal`)."""
        return pipeline.poll_seal(self._client, self.target, key, timeout_ms, clock)

    def capture(self, request: dict, headers: dict | None = None) -> Answer:
        started = time.monotonic()
        timeout = httpx.Timeout(self._deadline_s, connect=min(10.0, self._deadline_s))
        try:
            with self._client.stream(
                "POST",
                f"{self.target}/captures",
                content=json.dumps(extension_members(request, self.extensions, self.revisit)).encode(),
                headers={"content-type": "application/json", **(headers or {})},
                timeout=timeout,
            ) as response:
                chunks = []
                for chunk in response.iter_bytes():
                    chunks.append(chunk)
                    if time.monotonic() - started > self._deadline_s:
                        raise CaptureDeadline(f"deadline {int(self._deadline_s * 1000)}ms passed")
                text = b"".join(chunks).decode("utf-8", "replace")
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol, ssl.SSLError) as exc:
            raise EndpointUnreachable(f"{self.target}: {type(exc).__name__}: {exc}") from exc
        except httpx.TimeoutException as exc:
            raise CaptureDeadline(f"deadline {int(self._deadline_s * 1000)}ms passed") from exc
        except httpx.TransportError as exc:
            # The connection broke after the request went out: like a deadline, the
            # submission may have reached BrowserHive, so do not move to another endpoint.
            raise ConnectionLost(f"connection lost before the answer ({type(exc).__name__}: {exc})") from exc
        try:
            body: Any = json.loads(text)
        except ValueError:
            body = text
        return Answer(response.status_code, response.headers.get("x-amzn-errortype"), body)


EXT_DEADLINE = "captureAtDeadline"  # docs/capture-server.md extension 14
EXT_SHOTS = "screenshotsInWacz"  # docs/capture-server.md extension 15
EXT_REVISIT = "revisit"  # docs/capture-server.md extension "revisit" (decision 181)
EXT_ROBOTS = "robotsMeta"  # docs/capture-server.md section "wishes"
# Request members of an extension: sent only to an endpoint that lists it (a real v12 answers 400).
EXT_NAVIGATION = "navigationRules"  # docs/capture-server.md section "redirects" (decision 105)
EXTENSION_MEMBERS = {"honourNoarchive": EXT_ROBOTS, "navigationRules": EXT_NAVIGATION}
# The skipReason of a page whose site asked not to archive it (the capture server's policy failure).
NOARCHIVE_REASON = "the site asked not to archive it (noarchive)"


def revisit_member(api_url: str, token: str, crawl_id: str) -> dict | None:
    """The ``revisit`` member: the ledger's digest lookup of this crawl and the flow's token
    (the lookup answers only the crawl's organization's digests). None without a ledger URL."""
    if not (api_url or "").strip() or not (token or "").strip():
        return None
    return {"url": f"{api_url.strip().rstrip('/')}/api/crawls/{crawl_id}/digests", "token": token.strip()}


def extension_members(request: dict, extensions: frozenset[str], revisit: dict | None = None) -> dict:
    """``request`` with the members of the extensions 14, 15 and revisit the endpoint advertised:
    ``captureAtDeadline`` (a page whose load event misses the page-load budget is captured as
    it is and answered ``success`` with ``incomplete``, not ``timeout``), ``screenshotsInWacz``
    (png/webp also as resource records in the WACZ, when both are asked) and ``revisit`` (the
    digest lookup, when a WACZ is asked). Members of :data:`EXTENSION_MEMBERS`
    (``honourNoarchive``) stay only where their extension is listed. A real v12 gets the v12
    request (it refuses unknown members with 400)."""
    extra: dict = {}
    if EXT_REVISIT in extensions and revisit and (request.get("captureFormats") or {}).get("wacz"):
        extra[EXT_REVISIT] = revisit
    if EXT_DEADLINE in extensions:
        extra[EXT_DEADLINE] = True
    formats = request.get("captureFormats") or {}
    if EXT_SHOTS in extensions and formats.get("wacz") and (formats.get("png") or formats.get("webp")):
        extra[EXT_SHOTS] = True
    unsupported = [m for m, ext in EXTENSION_MEMBERS.items() if m in request and ext not in extensions]
    if unsupported:  # e.g. honourNoarchive to a real v12: nothing changes there
        request = {k: v for k, v in request.items() if k not in unsupported}
    return {**request, **extra} if extra else request


def incomplete_note(url: str, report: dict) -> str | None:
    """One log line for a success answered with ``incomplete`` (extension 14), else None."""
    inc = report.get("incomplete")
    if not isinstance(inc, dict):
        return None
    pending = [u for u in inc.get("pendingUrls") or [] if isinstance(u, str)][:3]
    count = inc.get("pendingCount") if isinstance(inc.get("pendingCount"), int) else len(pending)
    return one_line(f"{url}: captured incomplete ({inc.get('reason')}), {count} request(s) still pending: "
                    + " ".join(pending))


def parse_endpoints(raw: str) -> list[str]:
    """The endpoint variable's JSON array → trimmed ``http(s)://`` URLs without trailing ``/``.

    Raises ValueError naming the variable: not JSON; not a non-empty array of non-blank
    strings; an element without ``http://``/``https://`` (the old gRPC ``host:port`` form).
    """
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"{VAR_ENDPOINTS} is not JSON: {raw[:80]}") from exc
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValueError(f"{VAR_ENDPOINTS} must be a non-empty array of strings: {raw[:80]}")
    targets = [v.strip().rstrip("/") for v in value]
    bad = [t for t in targets if not (t.startswith("http://") or t.startswith("https://"))]
    if bad:
        raise ValueError(
            f"{VAR_ENDPOINTS}: every endpoint must be an http(s):// URL"
            f" (the old host:port form is gone), got {bad[0][:80]}"
        )
    return targets


def build_client(targets: Sequence[str], ca_pem: str) -> httpx.Client:
    """An httpx client for the endpoints: https verified against ``ca_pem`` only (never system roots).

    Raises ValueError when an ``https://`` endpoint is configured but the CA is empty.
    """
    if any(t.startswith("https://") for t in targets):
        if not ca_pem.strip():
            raise ValueError(
                f"{VAR_TLS_CA} is empty but {VAR_ENDPOINTS} has https:// endpoints;"
                " set the CA PEM (system roots are never used)"
            )
        context = ssl.create_default_context(cadata=ca_pem)  # cadata given → no default roots
        return httpx.Client(verify=context)
    return httpx.Client(verify=False)  # plaintext endpoints only: no CA bundle to load


def script_item(script: dict) -> dict:
    """One BrowserHive ``Script``: only id, source, sha256, and options when a non-empty object."""
    item = {"id": script["id"], "source": script["source"], "sha256": script["sha256"]}
    options = script.get("options")
    if isinstance(options, dict) and options:
        item["options"] = options
    return item


def capture_request(
    url: str,
    crawl_id: str,
    formats: dict,
    signing: bool,
    scripts: Sequence[dict] | None,
    artifact_sink: dict | None,
    load_wait: dict | None = None,
    honour_robots: bool = False,
    navigation_rules: dict | None = None,
) -> dict:
    """The ``POST /captures`` body (reference/scheduler.md §4.3): six formats as given, scripts
    split by phase; ``load_wait`` (v12 ``loadWait``, :func:`f.waggle.pipeline.settle_for_gap`) when given;
    ``honourNoarchive: true`` with ``honour_robots`` (extension robotsMeta; dropped by
    :func:`extension_members` where the endpoint does not list it); ``navigationRules``
    (:func:`navigation_rules`) when given, dropped the same way."""
    request: dict = {
        "url": url,
        "labels": [],
        "correlationId": crawl_id,
        "captureFormats": {k: bool((formats or {}).get(k, False)) for k in FORMAT_KEYS},
        "signing": bool(signing),
    }
    behaviors = [script_item(s) for s in scripts or [] if s.get("phase") == "behavior"]
    preload = [script_item(s) for s in scripts or [] if s.get("phase") == "preload"]
    if behaviors:
        request["behaviors"] = behaviors
    if preload:
        request["preload"] = preload
    if artifact_sink:
        request["artifactSink"] = artifact_sink
    if load_wait:
        request["loadWait"] = dict(load_wait)
    if honour_robots:
        request["honourNoarchive"] = True
    if navigation_rules:
        request["navigationRules"] = navigation_rules
    return request


def navigation_rules(robots_txt: str | None, exclude: Sequence[str] | None) -> dict | None:
    """The ``navigationRules`` member (extension navigationRules, decision 105): the host's
    robots.txt in :class:`f.waggle.robots.RobotsRules`' normal form (plan_level's group
    ``robotsTxt``) and the crawl's exclude patterns; None when there is neither. The capture
    server refuses a main-frame redirect hop or script navigation they forbid, unrequested."""
    rules: dict = {}
    if isinstance(robots_txt, str) and robots_txt.strip():
        rules["robotsTxt"] = robots_txt
    patterns = [p for p in exclude or [] if isinstance(p, str) and p]
    if patterns:
        rules["exclude"] = patterns
    return rules or None


def describe_refusal(answer: Answer) -> str:
    """``"{status}[ {errorType}][: {message}]"`` for a non-200 answer."""
    text = f"{answer.status}"
    if answer.error_type:
        text += f" {answer.error_type}"
    message = None
    if isinstance(answer.body, dict) and isinstance(answer.body.get("message"), str):
        message = answer.body["message"]
    elif isinstance(answer.body, str) and answer.body:
        message = answer.body[:200]
    if message:
        text += f": {message}"
    return text


def capture_on_any(
    endpoints: Sequence[Endpoint],
    request: dict,
    index: int,
    *,
    sleep: Callable[[float], None],
    busy_jitter_ms: tuple[float, float],
    log: Callable[[str], None],
    sent: list[float] | None = None,
    now: Callable[[], float] = clock,
    down: set[str] | None = None,
) -> Answer:
    """Submit ``request`` to a free endpoint, starting at ``index mod n`` (see module doc).

    ``sent`` (optional) receives ``now()`` (epoch s) just before each call, so its last
    element is when the answered (or deadline-hit) submission went out, after any busy rounds.
    ``down`` (optional): the targets found unreachable earlier in this host's level; they are
    not tried, and an endpoint found unreachable now is added (the caller keeps the set for the
    rest of the level). Without it the marks last this page only.
    """
    n = len(endpoints)
    start = index % n
    down = set() if down is None else down
    rounds = 0
    while True:
        for k in range(n):
            j = (start + k) % n
            endpoint = endpoints[j]
            if endpoint.target in down:
                continue
            if sent is not None:
                sent.append(now())
            try:
                answer = endpoint.capture(request)
            except TimeoutError:
                raise
            except Exception as exc:  # noqa: BLE001 - any other failure means "not reachable"
                log(f"{endpoint.target} unreachable, not tried again in this host's level ({exc})")
                down.add(endpoint.target)
                continue
            if answer.status == 429:
                continue
            return answer
        if all(e.target in down for e in endpoints):
            raise ServerUnavailable("BrowserHive unreachable: " + ", ".join(e.target for e in endpoints))
        rounds += 1
        if rounds == 1:  # once per page: waiting hosts are normal when hosts outnumber browsers
            lo, hi = busy_jitter_ms
            log(f"all endpoints busy; going round again every {lo / 1000:g}–{hi / 1000:g} s until one is free")
        sleep(random.uniform(*busy_jitter_ms) / 1000.0)


def _http_status(report: dict) -> int | None:
    details = report.get("errorDetails") if isinstance(report.get("errorDetails"), dict) else {}
    for value in (details.get("httpStatusCode"), report.get("httpStatusCode")):
        if isinstance(value, int):
            return value
    return None


def gap_start(body: Any, submitted: float, received: float) -> float:
    """Epoch s the host's gap runs from (BRIEF contract 1–2, issue 11).

    ``received − sinceLastRequestMs / 1000`` clamped to ``[submitted, received]`` when the
    answer carries a non-negative integer ``sinceLastRequestMs`` (ms on the capture server's
    monotonic clock from the end of the page's last request to the answer); ``received``
    (the answer's arrival, today's rule) when the field is absent or not such an integer.
    """
    since = body.get("sinceLastRequestMs") if isinstance(body, dict) else None
    if not isinstance(since, int) or isinstance(since, bool) or since < 0:
        return received
    return min(received, max(submitted, received - since / 1000.0))


def remaining_gap_s(gap_ms: int, gap_from: float, now: float) -> float:
    """Seconds still to wait so that ``gap_ms`` has passed since ``gap_from`` (epoch s); ≥ 0."""
    return max(0.0, gap_ms / 1000.0 - (now - gap_from))


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
) -> Outcome:
    """Capture one page with at most MAX_ATTEMPTS. A 429/503 main document backs the host's
    ``gap`` off first; only a retryable ``transient`` failure is tried again, once ``gap.ms``
    has passed since that attempt's ``gapFrom``."""
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
        if wait > 0:
            sleep(wait)
    raise AssertionError("unreachable")  # pragma: no cover


def busy_window(busy_jitter_ms: tuple[float, float], gap_ms: int,
                ref_gap_ms: float = BUSY_REF_GAP_MS) -> tuple[float, float]:
    """The wait (ms, uniform between the two) between busy rounds for a host with ``gap_ms``.

    ``busy_jitter_ms × clamp(ref_gap_ms / gap_ms, BUSY_MIN_FACTOR, 1)``: 0.5–1.5 s up to a 4 s
    gap, 0.1–0.3 s from a 20 s gap on. Only hosts sleeping long gaps go round faster, and a
    round probes each endpoint once, so the probe rate stays bounded (≤ 10 per endpoint per
    second per waiting long-gap host, ≤ 2 for the others).
    """
    factor = 1.0 if gap_ms <= 0 else min(1.0, max(BUSY_MIN_FACTOR, ref_gap_ms / gap_ms))
    return busy_jitter_ms[0] * factor, busy_jitter_ms[1] * factor


@dataclass
class HostGap:
    """The host's current gap (ms) for this level; :meth:`back_off` after a 429/503 document,
    :meth:`adapt` after each page (a slow host's longer gap, :mod:`f.waggle.slowhost`).
    ``floor``: the gap without that adaptation (delay, Crawl-delay, back-offs); ``ms`` ≥ it."""

    ms: int
    say: Callable[[str], None]
    factor: float = 0.0  # the crawl's delayFactor (0: no adaptation)
    floor: int = -1  # -1: ms

    def __post_init__(self) -> None:
        if self.floor < 0:
            self.floor = self.ms

    def back_off(self, status: int | str, retry_after_ms: int | None = None) -> None:
        """Double the gap (:func:`backed_off_gap`), and make it ≥ the answer's ``Retry-After``
        (ms, capped at BACKOFF_CAP_MS; RFC 9110 §10.2.3): the next capture waits it from gapFrom."""
        new = backed_off_gap(self.floor)
        asked = ""
        if retry_after_ms is not None:
            new = max(new, min(retry_after_ms, BACKOFF_CAP_MS))
            asked = f" (Retry-After {retry_after_ms} ms)"
        self.say(f"main document answered {status}{asked}: gap for the rest of this level {self.ms} → {max(new, self.ms)} ms")
        self.floor, self.ms = new, max(new, self.ms)

    def adapt(self, document_ms: int | None) -> None:
        """The gap after a page whose main document took ``document_ms`` (None: unknown, no
        change): :func:`f.waggle.slowhost.adapted_gap_ms`, never below ``floor``."""
        if document_ms is None:
            return
        new = slowhost.adapted_gap_ms(self.floor, document_ms, self.factor)
        if new != self.ms:
            self.say(f"main document took {document_ms} ms: gap {self.ms} → {new} ms (delay factor {self.factor:g})")
            self.ms = new


def backed_off_gap(gap_ms: int) -> int:
    """The host's gap after a 429/503 main document: doubled (0 → 1 s), capped at BACKOFF_CAP_MS,
    never shorter than before (a longer Crawl-delay stays)."""
    doubled = gap_ms * 2 if gap_ms > 0 else BACKOFF_MIN_MS
    return max(gap_ms, min(doubled, BACKOFF_CAP_MS))


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
    delay_factor: float = 0.0,
    gap_out: dict | None = None,
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
    events, :mod:`f.waggle.progress`); whatever it raises is logged, never fails the page.
    ``ignore_robots_meta`` (the crawl's ``ignoreRobotsMeta``): archive noarchive pages and follow
    nofollow pages' links; by default both are honoured where the endpoint reports them
    (extension robotsMeta; a real v12 reports nothing, and nothing changes).
    ``rules``: the ``navigationRules`` of every capture (:func:`navigation_rules`), or None.
    ``delay_factor``: a slow host's gap (:mod:`f.waggle.slowhost`; 0 = none). ``gap_out``
    (optional): gets ``{"ms": the gap at the end}`` — what the next host of the server keeps.
    """
    if not endpoints:
        raise ValueError("no BrowserHive endpoints")

    def say(text: str) -> None:
        log(f"[{host}] {text}")

    job = HostJob(list(urls), crawl_id, formats, signing, scripts, artifact_sink,
                  HostGap(max(0, int(delay_ms or 0)), say, factor=delay_factor),
                  busy_jitter_ms, busy_ref_gap_ms, say, now, sleep, on_page, links_per_page,
                  honour_robots=not ignore_robots_meta, navigation_rules=rules)
    initial_s = first_wait_s(initial_delay_ms, not_before, now())
    if initial_s > 0:
        say(f"waiting {initial_s * 1000:.0f} ms (rest of the gap since this host's last capture)")
    try:
        if any(pipeline.EXT_SEAL in pipeline.extensions_of(e) for e in endpoints):
            # the cross-level rest is one more gap of the chain: its first capture may use startAfterMs too
            first_gap_from = now() + initial_s - job.gap.ms / 1000 if initial_s > 0 else None
            pipeline.Chain(endpoints, ChainPages(job), now=now, sleep=sleep).run(len(job.urls), first_gap_from)
            return [r for r in job.results if r is not None]
        if initial_s > 0:
            sleep(initial_s)
        return capture_sequentially(endpoints, job)
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


# The flow's retry of this step (crawl_level.flow: retry.constant.seconds; a test keeps them equal).
FLOW_RETRY_S = 30


def rest_before_retry_s(gap_ms: int, contacted: bool) -> float:
    """Seconds to wait before a failing job raises: Windmill retries the step ``FLOW_RETRY_S``
    later from its first page, which must still keep the host's gap (ms) from this attempt's
    last request. Unknown when exactly that was, so it counts from now: ``gap − retry delay``,
    ≥ 0; 0 when this attempt never submitted a page (``contacted`` False)."""
    return max(0.0, gap_ms / 1000.0 - FLOW_RETRY_S) if contacted else 0.0


def first_wait_s(initial_delay_ms: int | None, not_before: float | None, now: float) -> float:
    """Seconds the first capture still waits: ``initial_delay_ms`` (ms, planned), cut to what is
    left until ``not_before`` (epoch s) — a for-each slot that opened late has already waited part
    of it. Never longer than planned, never negative; ``not_before`` None keeps the planned wait.
    The plan and this job compare one clock (Windmill workers of one installation), as the
    ledger's ``lastFinishedAt`` already does."""
    planned = max(0.0, (initial_delay_ms or 0) / 1000.0)
    if not isinstance(not_before, (int, float)) or isinstance(not_before, bool):
        return planned
    return max(0.0, min(planned, float(not_before) - now))


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

    def __post_init__(self) -> None:
        self.results = [None] * len(self.urls)

    def done(self, index: int, result: dict) -> None:
        self.results[index] = result
        final = result.get("finalUrl")
        if result.get("status") == "captured" and final and page_key(final) != page_key(self.urls[index]):
            self.finals.setdefault(page_key(final), self.urls[index])
        _notify(self.on_page, self.say, self.urls[index], "done", result)

    def duplicate(self, index: int) -> bool:
        """Whether page ``index`` is the final URL of a capture this job already concluded (a
        redirect target listed in the level too): then it is recorded ``skipped`` with
        :data:`REDIRECT_DUPLICATE` and never submitted (no capture, no gap, no progress event).
        A capture still in flight is not known yet: its duplicate is captured (both recorded)."""
        source = self.finals.get(page_key(self.urls[index]))
        if source is None:
            return False
        self.say(f"{index + 1}/{len(self.urls)} {self.urls[index]}: not captured again, the redirect target of {source}")
        self.results[index] = {"url": self.urls[index], "status": "skipped", "skipReason": REDIRECT_DUPLICATE + source}
        return True


def capture_sequentially(endpoints: Sequence[Endpoint], job: HostJob) -> list[dict]:
    """Each capture after the previous answer, the gap since its ``gapFrom`` (no extensions)."""
    gap_from: float | None = None
    for i in range(len(job.urls)):
        if job.duplicate(i):
            continue
        if gap_from is not None:
            wait = remaining_gap_s(job.gap.ms, gap_from, job.now())
            if wait > 0:
                job.sleep(wait)
        job.started(i)
        outcome = capture_one(endpoints, job.request(i), i, crawl_id=job.crawl_id, gap=job.gap, sleep=job.sleep,
                              busy_jitter_ms=job.busy(), log=job.say, now=job.now,
                              links_per_page=job.links_per_page, down=job.down)
        job.done(i, outcome.result)
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

    def started(self, index: int) -> None:
        self.job.started(index)

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

    def hold_gaps_ms(self) -> tuple[int, int]:
        """The host's gap now and after a 429/503 back-off (ms), for a held submission."""
        return self.job.gap.ms, backed_off_gap(self.job.gap.ms)

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
            job.done(flight.index, outcome.result)
        return outcome.gap_from, retry


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
    delay_factor: Optional[float] = None,
    members: Optional[list[dict]] = None,
):
    missing = [n for n, v in (("crawl_id", crawl_id), ("host", host), ("urls", urls),
                              ("capture_formats", capture_formats), ("signing", signing), ("scripts", scripts)) if v is None]
    if missing:
        raise ValueError(f"crawl_host: required input(s) arrived null: {', '.join(missing)} (check the flow's input_transforms)")
    targets = parse_endpoints(read_variable(VAR_ENDPOINTS))
    ca_pem = read_variable(VAR_TLS_CA)  # must exist; empty = plaintext only
    client = build_client(targets, ca_pem)
    on_page = progress_poster(crawl_id, log=lambda text: print(f"[{host}] {text}"))
    revisit = revisit_member(read_variable(VAR_API_URL), read_variable(VAR_TOKEN), crawl_id)
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
                delay_factor=slowhost.factor_of(delay_factor), gap_out=gap_out,
            )

        if members:  # hosts of one server (f/waggle/servers.py): one after the other, one gap
            return servers.capture_members(members, run, delay_ms=per_host_delay_ms or 0,
                                           initial_delay_ms=initial_delay_ms or 0, not_before=not_before, now=clock)
        return run({"host": host, "urls": urls, "delayMs": per_host_delay_ms, "robotsTxt": robots_txt},
                   initial_delay_ms or 0, not_before, {})
    finally:
        on_page.close()
        client.close()
