# /// script
# requires-python = ">=3.11"
# dependencies = ["httpx==0.28.1", "wmill==1.850.0", "protego==0.7.0", "google-re2==1.1.20251105"]
# ///
"""One capture request as the capture contract has it (BrowserHive v12, docs/capture-server.md), with
the members of the extensions an endpoint advertises.

Split out of f/waggle/crawl_host.py (issue 30 item 5), no change of behaviour.
"""

from __future__ import annotations

from collections.abc import Sequence



FORMAT_KEYS = ("png", "webp", "html", "links", "mhtml", "wacz")


EXT_DEADLINE = "captureAtDeadline"  # docs/capture-server.md extension 14
EXT_SHOTS = "screenshotsInWacz"  # docs/capture-server.md extension 15
EXT_REVISIT = "revisit"  # docs/capture-server.md extension "revisit" (decision 181)
EXT_CONDITIONAL = "conditional"  # docs/capture-server.md extension "conditional" (decision 331)
EXT_ROBOTS = "robotsMeta"  # docs/capture-server.md section "wishes"
# Request members of an extension: sent only to an endpoint that lists it (a real v12 answers 400).
EXT_NAVIGATION = "navigationRules"  # docs/capture-server.md section "redirects" (decision 105)
EXTENSION_MEMBERS = {"honourNoarchive": EXT_ROBOTS, "navigationRules": EXT_NAVIGATION}


def revisit_member(api_url: str, token: str, crawl_id: str) -> dict | None:
    """The ``revisit`` member: the ledger's digest lookup of this crawl and the flow's token
    (the lookup answers only the crawl's organization's digests). None without a ledger URL."""
    if not (api_url or "").strip() or not (token or "").strip():
        return None
    return {"url": f"{api_url.strip().rstrip('/')}/api/crawls/{crawl_id}/digests", "token": token.strip()}


def conditional_member(revisit: dict | None) -> dict | None:
    """The ``conditional`` member: the ledger's previous-capture lookup of the same crawl, beside
    the digest lookup of ``revisit`` (same token, same organization). None without it."""
    if not revisit:
        return None
    return {"url": revisit["url"].rsplit("/", 1)[0] + "/previous", "token": revisit["token"]}


def extension_members(request: dict, extensions: frozenset[str], revisit: dict | None = None) -> dict:
    """``request`` with the members of the extensions 14, 15 and revisit the endpoint advertised:
    ``captureAtDeadline`` (a page whose load event misses the page-load budget is captured as
    it is and answered ``success`` with ``incomplete``, not ``timeout``), ``screenshotsInWacz``
    (png/webp also as resource records in the WACZ, when both are asked) and ``revisit`` (the
    digest lookup, when a WACZ is asked; ``conditional``, the previous-capture lookup beside it).
    Members of :data:`EXTENSION_MEMBERS`
    (``honourNoarchive``) stay only where their extension is listed. A real v12 gets the v12
    request (it refuses unknown members with 400)."""
    extra: dict = {}
    if EXT_REVISIT in extensions and revisit and (request.get("captureFormats") or {}).get("wacz"):
        extra[EXT_REVISIT] = revisit
    if EXT_CONDITIONAL in extensions and revisit and (request.get("captureFormats") or {}).get("wacz"):
        extra[EXT_CONDITIONAL] = conditional_member(revisit)  # validators only where a WACZ is written
    if EXT_DEADLINE in extensions:
        extra[EXT_DEADLINE] = True
    formats = request.get("captureFormats") or {}
    if EXT_SHOTS in extensions and formats.get("wacz") and (formats.get("png") or formats.get("webp")):
        extra[EXT_SHOTS] = True
    unsupported = [m for m, ext in EXTENSION_MEMBERS.items() if m in request and ext not in extensions]
    if unsupported:  # e.g. honourNoarchive to a real v12: nothing changes there
        request = {k: v for k, v in request.items() if k not in unsupported}
    return {**request, **extra} if extra else request


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
