"""Crawl routes (reference/ledger.md §6.7–§6.10, §6.12): JSON camelCase, unknown body keys →
400, validation before authentication, denial → 404. Registered only when the crawl webhook
is configured (``WAGGLE_CRAWL_WEBHOOK_URL`` + ``_TOKEN``)."""

from __future__ import annotations

import re
import uuid
from datetime import date
from typing import Annotated, Any, ClassVar, Literal

import orjson
from fastapi import APIRouter, BackgroundTasks, Query, Request
from fastapi.responses import JSONResponse, Response
from fastapi.exceptions import RequestValidationError
from pydantic import (AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, StrictBool, ValidationError,
                      field_validator, model_validator, TypeAdapter)
from typing_extensions import Required, TypedDict

from ledger.api.authorize import submitter
from ledger.api.identity import Identity
from ledger.api.read_token import crawl_reader
from ledger.crawl import crawls as crawl_store
from ledger.crawl import pages as pages_store
from ledger.crawl import progress as progress_store
from ledger.crawl import hosts as host_politeness
from ledger.crawl import robots_cache, salvage, sitemaps
from ledger.crawl import scope as scope_rules
from ledger.crawl import control
from ledger.crawl.collection import collection_bytes
from ledger.crawl.crawls import DEFAULT_PER_HOST_DELAY_MS
from ledger.crawl.dispatch import dispatch_level, dispatch_waiting
from ledger.crawl.errors import Refused
from ledger.archive.verify import verify_level
from ledger.crawl.levels import record_level
from ledger.crawl.watchdog import cancel_job
from ledger.crawl.report_limits import check_counts, check_progress_links
from ledger.settings import CAPTURE_FORMAT_NAMES

router = APIRouter()

REASON_MAX_CHARS = 2000
HREF_MAX_CHARS = 8192  # longer is no URL a crawl follows (traps.url_too_long is far lower)
REL_MAX_CHARS = 256
LOCATION_MAX_CHARS = 2048


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _storable(value: object, path: str = "body") -> None:
    """Refuse text Postgres cannot store: NUL characters and lone UTF-16 surrogates."""
    if isinstance(value, str):
        if _UNSTORABLE.search(value):
            raise ValueError(f"{path} contains a NUL character or a lone surrogate; remove it")
    elif isinstance(value, dict):
        for key, item in value.items():
            _storable(key, path)
            _storable(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _storable(item, f"{path}.{index}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # False for models only ever validated inside one that walks (the level report's parts):
    # a report of 100,000 links is walked once, not once per nesting level
    walks_text: ClassVar[bool] = True

    @model_validator(mode="before")
    @classmethod
    def _no_unstorable_text(cls, data: object) -> object:
        if cls.walks_text:
            _storable_quick(data, cls.__name__)
        return data


def _storable_quick(value: object, path: str) -> None:
    """:func:`_storable` in one orjson pass (a 9 MB level report: ~20 ms instead of ~0.3 s of
    walking): orjson refuses lone surrogates and writes NUL as ``\\u0000``; only then (or for
    what orjson cannot write, e.g. an integer beyond 64 bits) does the walk run, to name the
    place or to pass."""
    try:
        text = orjson.dumps(value)
    except orjson.JSONEncodeError:
        _storable(value, path)
        return
    if b"\\u0000" in text:  # also matches an escaped backslash before "u0000": the walk decides
        _storable(value, path)


def _uuid_text(value: str) -> str:
    try:
        uuid.UUID(value)
    except ValueError:
        raise ValueError("must be a UUID (BrowserHive task id)") from None
    return value


NonEmpty = Annotated[str, Field(min_length=1)]


def _setting(default: int | None, **bounds: int) -> Any:
    """A numeric crawl setting: a JSON integer (strict: ``"500"``, ``500.0`` and ``true`` are
    refused, never coerced) within ``bounds`` (``ge``/``le``)."""
    return Field(default, strict=True, **bounds)

FINAL_URL_MAX_CHARS = 8192  # a longer "URL" is not one; usable values are checked by ledger.crawl.redirects


class DiscoveredLink(TypedDict, total=False):
    """One inline link (``.links.json`` item without ``text``). A TypedDict, not a model: a
    report may carry 100,000 of them (a third of the validation cost); its text is checked by
    the report's walk (:class:`_Strict`)."""

    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]
    href: Required[Annotated[str, Field(min_length=1, max_length=HREF_MAX_CHARS)]]
    rel: Annotated[str | None, Field(max_length=REL_MAX_CHARS)]


class ManifestSummary(BaseModel):
    """What the capture answer's report said of its manifest: ``status`` and ``wacz``."""

    model_config = ConfigDict(extra="forbid")
    status: Literal["success", "failed", "timeout", "http_error"]
    wacz: str | None = Field(None, min_length=1, max_length=LOCATION_MAX_CHARS)


class FromTargets(_Strict):
    limit: int | None = _setting(None, ge=1)


class InlineScript(_Strict):
    name: str = Field(min_length=1, max_length=57)
    phase: Literal["behavior", "preload"]
    source: str = Field(min_length=1)
    options: dict | None = None


class CrawlRequest(_Strict):
    seeds: list[NonEmpty] | None = Field(None, min_length=1)
    fromTargets: FromTargets | None = None
    # scope type (ledger.crawl.scope; same-origin / same-host: today's names, kept as aliases)
    scope: Literal["page", "prefix", "host", "domain", "origin", "same-origin", "same-host"] = "origin"
    include: list[str] | None = Field(None, max_length=scope_rules.MAX_PATTERNS)  # RE2 over the normalized URL
    exclude: list[str] | None = Field(None, max_length=scope_rules.MAX_PATTERNS)  # wins over scope and include
    extraHops: int = _setting(0, ge=0, le=scope_rules.MAX_EXTRA_HOPS)
    # limits (ledger.crawl.limits): each ends the crawl (or the host) with its own stop reason
    timeLimitS: int | None = _setting(None, ge=1, le=30 * 86400)  # wall-clock seconds from the start
    maxBytes: int | None = _setting(None, ge=1)  # sum of the crawl's admitted WACZ sizes
    maxPagesPerHost: int | None = _setting(None, ge=1)  # pages per host (with WAGGLE_MAX_PAGES_PER_HOST)
    # sitemaps (ledger.crawl.sitemaps): the seed hosts' sitemap URLs in scope, queued after the seeds
    useSitemap: StrictBool = False
    sitemapLastmodAfter: date | AwareDatetime | None = None  # only URLs with a later lastmod (a date: 00:00 UTC)
    maxDepth: int | None = _setting(None, ge=0, le=10)
    maxPages: int | None = _setting(None, ge=1)
    perHostDelayMs: int = _setting(DEFAULT_PER_HOST_DELAY_MS, ge=0, le=600000)
    hostParallelism: int = _setting(4, ge=1, le=32)
    scripts: list[Annotated[str, Field(min_length=1)] | InlineScript] | None = None
    # The capture formats of this crawl (None: WAGGLE_CAPTURE_FORMATS); always with wacz.
    formats: list[Literal["png", "webp", "html", "links", "mhtml", "wacz"]] | None = Field(None, min_length=1)
    # Archive pages whose robots meta / X-Robots-Tag says noarchive and follow nofollow pages' links.
    ignoreRobotsMeta: StrictBool = False  # "yes" or 1 is a 400, not read as true
    # Signed WACZ (wacz-auth) for every capture of this crawl (None: WAGGLE_CAPTURE_SIGNING).
    signing: StrictBool | None = None
    # politeness per server (decisions 241–242): hosts sharing an address are one server (one
    # gap, one lease); "domain" groups each registered domain's hosts too
    groupHosts: Literal["address", "domain"] = "address"
    delayFactor: float = Field(5.0, strict=True, ge=0, le=60, allow_inf_nan=False)  # a slow host's gap ≥ this × its document time

    @model_validator(mode="after")
    def _one_source(self) -> "CrawlRequest":
        if (self.seeds is None) == (self.fromTargets is None):
            raise ValueError("provide exactly one of seeds or fromTargets")
        return self

    @model_validator(mode="after")
    def _sitemap_options(self) -> "CrawlRequest":
        """A lastmod date without useSitemap, or useSitemap with maxDepth 0 → 400 naming the field."""
        try:
            sitemaps.check_spec(self.useSitemap, sitemaps.as_moment(self.sitemapLastmodAfter),
                                1 if self.maxDepth is None else self.maxDepth)
        except Refused as exc:
            raise ValueError(exc.error) from None
        return self

    @field_validator("scope")
    @classmethod
    def _canonical_scope(cls, value: str) -> str:
        return scope_rules.canonical(value)

    @field_validator("include", "exclude")
    @classmethod
    def _patterns(cls, value: list[str] | None, info: Any) -> list[str] | None:
        """Every pattern compiles under RE2 (linear time); a bad one is named (400)."""
        if value:
            try:
                scope_rules.compile_patterns(value, info.field_name)
            except scope_rules.InvalidPattern as exc:
                raise ValueError(exc.reason()) from None
        return value

    @field_validator("formats", mode="before")
    @classmethod
    def _no_empty_format(cls, value: object) -> object:
        if isinstance(value, list):
            empty = [str(i) for i, f in enumerate(value) if isinstance(f, str) and not f.strip()]
            if empty:
                raise ValueError(f"empty format at position {', '.join(empty)} (a comma too many?):"
                                 " name each format, e.g. wacz,png")
        return value

    @field_validator("formats")
    @classmethod
    def _formats(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        if len(set(value)) != len(value):
            raise ValueError("list each format once")
        if "wacz" not in value:
            raise ValueError('formats must include "wacz": the ledger lists and serves a crawl\'s WACZ archives')
        return [f for f in CAPTURE_FORMAT_NAMES if f in value]  # canonical order


class PageResult(_Strict):
    """One page's outcome (ledger.md §6.9) plus level report v2 (docs/internals.md): inline
    ``links``, ``linksOverflow`` and ``manifestSummary``. Counts are capped by
    :func:`ledger.crawl.report_limits.check_counts` (413), shapes here (400)."""

    walks_text: ClassVar[bool] = False  # LevelReport's walk covers it
    url: NonEmpty
    status: Literal["captured", "failed", "skipped", "blocked"]  # blocked: decision 231
    skipReason: str | None = None
    taskId: Annotated[str, AfterValidator(_uuid_text)] | None = None
    correlationId: str | None = None
    submittedAt: AwareDatetime | None = None
    finishedAt: AwareDatetime | None = None
    gapFrom: AwareDatetime | None = None
    failureClass: Literal["transient", "permanent", "policy"] | None = None
    linksLocation: str | None = None
    finalUrl: Annotated[str, Field(min_length=1, max_length=FINAL_URL_MAX_CHARS)] | None = None  # contract 4
    manifestLocation: NonEmpty | None = None
    manifestError: NonEmpty | None = None
    links: list[DiscoveredLink] | None = None
    linksOverflow: int | None = Field(None, ge=0, le=10_000_000)
    manifestSummary: ManifestSummary | None = None
    # ms the capture waited behind the previous page (held: startAfterMs / holdAfter; issue 24 item 8)
    waitMs: int | None = Field(None, ge=0, le=3_600_000)

    @model_validator(mode="after")
    def _wait_within_capture(self) -> "PageResult":
        """waitMs lies within the submission (submittedAt → finishedAt): the flow clamps it."""
        if self.waitMs is None:
            return self
        if self.submittedAt is None or self.finishedAt is None:
            raise ValueError("waitMs needs submittedAt and finishedAt")
        if self.waitMs > (self.finishedAt - self.submittedAt).total_seconds() * 1000 + 1:
            raise ValueError("waitMs must not be longer than the capture (finishedAt − submittedAt)")
        return self

    @model_validator(mode="after")
    def _gap_from_within_capture(self) -> "PageResult":
        """gapFrom (issue 11) lies in [submittedAt, finishedAt]: the flow clamps it before it
        reports, so a value outside is a broken or hostile reporter and is refused, not clamped."""
        if self.gapFrom is None:
            return self
        if self.submittedAt is None or self.finishedAt is None:
            raise ValueError("gapFrom needs submittedAt and finishedAt")
        if not self.submittedAt <= self.gapFrom <= self.finishedAt:
            raise ValueError("gapFrom must lie between submittedAt and finishedAt (the page's last request"
                             " cannot end before the submission or after the answer)")
        return self

    @model_validator(mode="after")
    def _class_of_a_failure(self) -> "PageResult":
        if self.failureClass is not None and self.status == "captured":
            raise ValueError("failureClass is only for failed or skipped results")
        return self

    @model_validator(mode="after")
    def _manifest_rule(self) -> "PageResult":
        has_location, has_error = self.manifestLocation is not None, self.manifestError is not None
        if self.taskId:
            if has_location == has_error:
                raise ValueError("a result with taskId needs exactly one of manifestLocation or manifestError")
        elif has_location or has_error:
            raise ValueError("manifestLocation and manifestError need a taskId")
        if self.manifestSummary is not None and not has_location:
            raise ValueError("manifestSummary needs a manifestLocation (it describes that manifest)")
        return self


class CompiledScript(_Strict):
    id: NonEmpty
    version: int = Field(ge=1)
    sha256: Annotated[str, Field(pattern=r"^[0-9a-fA-F]{64}$")]


class Compiled(_Strict):
    typescript: NonEmpty
    hostTypes: NonEmpty
    scripts: list[CompiledScript]


class RobotsEntry(_Strict):
    """One robots.txt outcome plan_level fetched, for the crawl's cache (docs/internals.md
    "robots.txt cache"); sizes are capped by ``ledger.crawl.robots_cache.check_sizes`` (413)."""

    walks_text: ClassVar[bool] = False  # LevelReport's walk covers it
    host: Annotated[str, Field(min_length=1, max_length=300, pattern=r"^[^\s/?#@]+$")]
    fetchedAt: AwareDatetime
    state: Literal["allowed", "unavailable", "unreachable"]
    body: str | None = None


class SitemapHost(_Strict):
    """What plan_level read from one seed host's sitemaps (issue 29 item 2, ledger.crawl.sitemaps)."""

    walks_text: ClassVar[bool] = False  # LevelReport's walk covers it
    host: Annotated[str, Field(min_length=1, max_length=300, pattern=r"^[^\s/?#@]+$")]
    urls: list[Annotated[str, Field(min_length=1, max_length=HREF_MAX_CHARS)]] = Field(default_factory=list)
    files: int = Field(0, ge=0, le=1_000_000)  # sitemap files fetched
    found: int = Field(0, ge=0, le=10**12)  # <url> entries read
    older: int = Field(0, ge=0, le=10**12)  # left out by the lastmod filter
    notes: list[Annotated[str, Field(max_length=1000)]] = Field(default_factory=list, max_length=100)
    lastRequestAt: AwareDatetime | None = None  # when the host's last sitemap request ended


class LevelReport(_Strict):
    depth: int = Field(ge=0)
    results: list[PageResult]
    compiled: Compiled
    robots: list[RobotsEntry] | None = None  # optional (docs/internals.md "robots.txt cache")
    sitemaps: list[SitemapHost] | None = Field(None, max_length=10_000)  # optional (ledger.crawl.sitemaps)

    @model_validator(mode="after")
    def _robots_rules(self) -> "LevelReport":
        robots_cache.check_entries([e.model_dump() for e in self.robots or []])
        sitemaps.check_entries([e.model_dump() for e in self.sitemaps or []])
        return self


class FailedBody(_Strict):
    reason: str | None = Field(None, max_length=REASON_MAX_CHARS)


def _spec(body: CrawlRequest) -> crawl_store.CrawlSpec:
    return crawl_store.CrawlSpec(
        seeds=body.seeds,
        from_targets_limit=body.fromTargets.limit if body.fromTargets else None,
        scope=body.scope,
        include=body.include or [],
        exclude=body.exclude or [],
        extra_hops=body.extraHops,
        time_limit_s=body.timeLimitS,
        max_bytes=body.maxBytes,
        max_pages_per_host=body.maxPagesPerHost,
        use_sitemap=body.useSitemap,
        sitemap_lastmod_after=sitemaps.as_moment(body.sitemapLastmodAfter),
        max_depth=body.maxDepth,
        max_pages=body.maxPages,
        per_host_delay_ms=body.perHostDelayMs,
        host_parallelism=body.hostParallelism,
        scripts=None if body.scripts is None else [
            s if isinstance(s, str) else s.model_dump() for s in body.scripts
        ],
        formats=body.formats,
        ignore_robots_meta=body.ignoreRobotsMeta,
        signing=body.signing,
        group_hosts=body.groupHosts,
        delay_factor=body.delayFactor,
    )


@router.post("/api/crawls", status_code=202)
async def start_crawl(body: CrawlRequest, request: Request, background: BackgroundTasks) -> JSONResponse:
    """Start a crawl → 202 ``{crawlId}``; 429 ``{error, running, limit}`` when the organization
    already runs ``WAGGLE_MAX_RUNNING_CRAWLS_PER_ORG`` crawls. A seed given twice is kept once,
    in the order given (``ledger.crawl.crawls.start_crawl``)."""
    check_limits(request, body)
    identity = await submitter(request)
    crawl = await launch(request, body, background, subject=identity.subject, org_id=identity.organizations[0])
    return JSONResponse({"crawlId": str(crawl["id"])}, status_code=202, background=background)


def check_limits(request: Request, body: CrawlRequest) -> None:
    """What the model cannot check alone (it depends on settings): 400 naming the field. The
    seeds too (:func:`ledger.crawl.crawls.parse_seeds`), so a workflow saved with a seed no run
    could use is refused when saved, not at every scheduled run."""
    settings = request.app.state.services.settings
    limit = settings.max_pages
    if body.maxPages is not None and body.maxPages > limit:
        why = f"maxPages must be between 1 and {limit} (WAGGLE_MAX_PAGES)"
        raise Refused(400, why, fields={"maxPages": why})
    if body.seeds:
        crawl_store.parse_seeds(body.seeds, settings.allow_private_hosts)


async def launch(request: Request, body: CrawlRequest, background: BackgroundTasks, *, subject: str, org_id: str,
                 workflow_id: uuid.UUID | None = None) -> dict:
    """Start the crawl ``body`` describes (checked by :func:`check_limits`) for ``org_id`` and queue
    its level-0 dispatch on ``background``; returns the crawl row. Also a workflow's run (decision
    201). Raises :class:`Refused` like ``ledger.crawl.crawls.start_crawl``."""
    services = request.app.state.services
    crawl, pages = await crawl_store.start_crawl(
        services.pool, _spec(body), subject=subject, org_id=org_id,
        max_pages_limit=services.settings.max_pages, allow_private=services.settings.allow_private_hosts,
        max_running=services.settings.max_running_crawls_per_org, workflow_id=workflow_id,
    )
    background.add_task(dispatch_level, services, crawl, 0, pages)
    return crawl


async def _member(request: Request, crawl_id: uuid.UUID) -> Identity:
    """``submitter`` plus: the crawl belongs to one of the caller's organizations. A crawl of
    another organization is as absent as an unknown id (404): several organizations' crawls
    run side by side (issue 12), and none may read or close another's."""
    identity = await submitter(request)
    if not await crawl_store.crawl_in_orgs(request.app.state.services.pool, crawl_id, identity.organizations):
        raise Refused(404, "not found")
    return identity


ID_PREFIX = re.compile(r"^[0-9a-f][0-9a-f-]{3,35}$")


@router.get("/api/crawls")
async def list_crawls(request: Request, limit: int = 20,
                      id_prefix: Annotated[str | None, Query(alias="idPrefix")] = None) -> dict:
    """The most recent crawls (``limit`` 1–100, default 20), newest first, with level and page
    counts by state (see ``ledger.crawl.crawls.list_crawls``). ``idPrefix`` (4–36 hex digits or
    dashes, case-insensitive): only the crawls whose id starts with it, however old (how the
    client resolves a short id). Same authorization either way: your organizations' crawls."""
    if not 1 <= limit <= 100:
        raise Refused(400, "limit must be between 1 and 100")
    prefix = id_prefix.strip().lower() if id_prefix is not None else None
    if prefix is not None and not ID_PREFIX.match(prefix):
        raise Refused(400, "idPrefix must be the start of a crawl id: 4 to 36 hex digits or dashes, e.g. ad7cac4d")
    identity = await submitter(request)
    return {"crawls": await crawl_store.list_crawls(request.app.state.services.pool, limit,
                                                    orgs=identity.organizations, id_prefix=prefix)}


@router.get("/api/crawls/{crawl_id}")
async def get_crawl(crawl_id: uuid.UUID, request: Request) -> dict:
    """State, stop reason, limits, counters, drops, last job, 5 newest failures, pinned scripts,
    and the archives' ``totalBytes`` (measured ones; ``bytesUnknown``: how many are not yet)."""
    identity = await _member(request, crawl_id)
    pool = request.app.state.services.pool
    view = await crawl_store.get_crawl(pool, crawl_id, identity.organizations)
    if view is None:
        raise Refused(404, "not found")
    view.update(await collection_bytes(pool, crawl_id))
    return view


@router.get("/api/crawls/{crawl_id}/pages")
async def list_pages(crawl_id: uuid.UUID, request: Request, state: str | None = None,
                     limit: int = pages_store.LIMIT_DEFAULT, cursor: str | None = None) -> dict:
    """Every page of the crawl, oldest first → ``{pages: [{url, finalUrl, depth, state,
    failureClass, reason, captureMs, archiveId, archiveComplete, title, httpStatus, contentType,
    bytes, thumbnailUrl}], nextCursor}`` (null: unknown); ``state`` filters
    (captured|failed|skipped|blocked|pending), ``limit`` 1–500 (default 100), ``cursor`` = the previous
    answer's ``nextCursor``. Same authorization as ``GET /api/crawls/{id}`` (404 to outsiders)."""
    if state is not None and state not in pages_store.STATES:
        raise Refused(400, f"state must be one of {', '.join(pages_store.STATES)}")
    if not 1 <= limit <= pages_store.LIMIT_MAX:
        raise Refused(400, f"limit must be between 1 and {pages_store.LIMIT_MAX}")
    if cursor is not None and not (cursor.isascii() and cursor.isdigit() and len(cursor) <= 18):
        raise Refused(400, "cursor must be the nextCursor of a previous answer")
    await _member(request, crawl_id)
    services = request.app.state.services
    view = await pages_store.list_pages(services.pool, crawl_id, state=state, limit=limit,
                                        after=int(cursor or 0), s3=services.s3)
    if view is None:
        raise Refused(404, "not found")
    return view


@router.post("/api/crawls/{crawl_id}/pages")
async def report_level(crawl_id: uuid.UUID, body: LevelReport, request: Request,
                       background: BackgroundTasks) -> JSONResponse:
    """The level report → 200 ``{next: [{url, host, depth}], stopReason}``; see ledger.crawl.levels."""
    services = request.app.state.services
    check_counts(body.results, services.settings)
    robots_cache.check_sizes(body.robots, services.settings)
    await _member(request, crawl_id)
    report = body.model_dump(mode="json", exclude_unset=True)
    outcome = await record_level(services, crawl_id, report)
    if outcome.dispatch is not None:
        crawl, depth, pages = outcome.dispatch
        background.add_task(dispatch_level, services, crawl, depth, pages)
    background.add_task(dispatch_waiting, services)  # this level's host leases just ended
    if outcome.verify is not None:  # admission after the answer, last (S3 reads: seconds)
        background.add_task(verify_level, services, crawl_id, *outcome.verify)
    if outcome.body is not None:  # serialized once by record_level (a 90,000-page answer: 7 MB)
        return Response(outcome.body, status_code=outcome.status, media_type="application/json", background=background)
    return JSONResponse(outcome.answer, status_code=outcome.status, background=background)


class ProgressEvent(_Strict):
    """One capture event of ``crawl_host`` (issue 15): a page's capture queued (submitted held behind
    the host's loading page, nothing sent to the site yet: decision 401), started, sealed (its
    ``taskId`` and ``manifestLocation``-to-be, so a crawl failed before the capture answers
    still admits it: ledger.crawl.salvage), or ended; a captured page's end may carry its capture (``taskId``, ``manifestLocation``,
    ``manifestSummary``: optional, for a crawl failed before its level report)."""

    url: str = Field(min_length=1, max_length=FINAL_URL_MAX_CHARS)
    phase: Literal["queued", "started", "sealed", "done"]  # queued: held behind the host's loading page (401)
    status: Literal["captured", "failed"] | None = None
    taskId: Annotated[str, AfterValidator(_uuid_text)] | None = None
    manifestLocation: Annotated[str, Field(min_length=1, max_length=LOCATION_MAX_CHARS)] | None = None
    manifestSummary: ManifestSummary | None = None
    links: list[DiscoveredLink] | None = None  # ≤ WAGGLE_REPORT_LINKS_PER_PAGE (413 beyond)

    @model_validator(mode="after")
    def _status_with_done(self) -> "ProgressEvent":
        if (self.phase == "done") != (self.status is not None):
            raise ValueError("status (captured|failed) goes with phase 'done', and only with it")
        if self.phase == "sealed":  # the capture sealed: its task and manifest-to-be (issue 24 item 5)
            if self.taskId is None or self.manifestSummary is not None or self.links is not None:
                raise ValueError("a 'sealed' event carries taskId (and manifestLocation) only")
            return self
        if self.taskId is not None and self.status != "captured":
            raise ValueError("taskId goes with status 'captured' only")
        if (self.manifestLocation is not None or self.manifestSummary is not None) and self.taskId is None:
            raise ValueError("manifestLocation and manifestSummary need a taskId")
        if self.links is not None and self.status != "captured":
            raise ValueError("links go with status 'captured' only (a captured page's links)")
        return self

    def capture(self) -> dict | None:
        """The capture fields given (camelCase, JSON-ready), or None."""
        if self.taskId is None:
            return None
        return self.model_dump(mode="json", include={"taskId", "manifestLocation", "manifestSummary"},
                               exclude_none=True)


PROGRESS_BATCH_MAX = 32  # events in one request (f/waggle/progress.py sends a host's queued events)


class _BatchedEvent(ProgressEvent):
    walks_text: ClassVar[bool] = False  # the batch walks its text once


class ProgressBatch(_Strict):
    """Several progress events of one crawl, applied in order (docs/internals.md "Progress
    events in batches")."""

    events: list[_BatchedEvent] = Field(min_length=1, max_length=PROGRESS_BATCH_MAX)


async def _progress_body(request: Request) -> ProgressEvent | ProgressBatch:
    """The body as one event, or as a batch when it is an object with ``events`` (400 with the
    field otherwise, as a declared body would be)."""
    raw = await request.body()
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        data = None
    model: type[_Strict] = ProgressBatch if isinstance(data, dict) and "events" in data else ProgressEvent
    try:
        return model.model_validate_json(raw)  # type: ignore[return-value]
    except ValidationError as exc:
        raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]) from None


def _inlined(schema: dict) -> dict:
    """``schema`` (pydantic's, with ``$defs``) with every ``$ref`` replaced by its definition: the
    route reads its body itself, so FastAPI does not list these models under components."""
    defs = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return walk(defs[ref[len("#/$defs/"):]])
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(schema)


_PROGRESS_BODY = _inlined(TypeAdapter(ProgressEvent | ProgressBatch).json_schema())


@router.post("/api/crawls/{crawl_id}/progress", openapi_extra={"requestBody": {"required": True, "content": {
    "application/json": {"schema": _PROGRESS_BODY}}}})
async def post_progress(crawl_id: uuid.UUID, request: Request, background: BackgroundTasks) -> JSONResponse:
    """A capture started or ended → 200 ``{"recorded": true}`` (idempotent; the flow's token, the
    level report's authorization). 404 unknown crawl; 409 not running, or ``url`` not a pending
    page of its level in flight; 413 more ``links`` than ``WAGGLE_REPORT_LINKS_PER_PAGE``. Shown in
    ``GET /api/crawls/{id}`` ``levelProgress``; ``links`` go into the frontier during the level
    (docs/internals.md "Links from progress"). A captured page's ``done`` (with ``taskId``) that
    arrives after its crawl was failed is recorded as the close would have
    (``ledger.crawl.salvage.record_late``; its archive admitted after the answer).

    ``{events: [event, …]}`` (1–:data:`PROGRESS_BATCH_MAX`) records several in order, in one
    request → 200 ``{"results": [{"recorded": true} | {"recorded": false, "status": 409,
    "error"}]}``, one per event; a shape or size problem in any event refuses the whole batch
    (400 / 413 naming ``events.N``), an unknown crawl too (404)."""
    body = await _progress_body(request)  # validation before authentication
    await submitter(request)
    services = request.app.state.services
    batch = isinstance(body, ProgressBatch)
    events: list[ProgressEvent] = list(body.events) if isinstance(body, ProgressBatch) else [body]
    for i, event in enumerate(events):
        check_progress_links(event.links, services.settings, f"events.{i}.links" if batch else "links")
    captures = [event.capture() for event in events]
    outcomes = await progress_store.record_many(
        services.pool, crawl_id, [progress_store.Event(e.url, e.phase, e.status, c, e.links)
                                  for e, c in zip(events, captures)], services.settings)
    if outcomes is None:
        raise Refused(404, "not found")
    for i, (event, capture, refused) in enumerate(zip(events, captures, outcomes)):
        late = None
        if refused is not None and refused.status == 409 and capture:
            record = salvage.record_sealed_late if event.phase == "sealed" else salvage.record_late
            late = await record(services.pool, crawl_id, event.url, capture, services.settings.s3_bucket)
        if late is None:
            continue
        outcomes[i] = None
        if late[1] and event.phase == "sealed":
            background.add_task(salvage.await_sealed, services, crawl_id, late[0], late[1])
        elif late[1]:
            background.add_task(verify_level, services, crawl_id, late[0], set(), late[1])
    if not batch:
        if outcomes[0] is not None:
            raise outcomes[0]
        return JSONResponse({"recorded": True}, background=background)
    return JSONResponse({"results": [{"recorded": True} if r is None else {"recorded": False, "status": r.status, **r.body()}
                                     for r in outcomes]}, background=background)


_HOST = re.compile(r"^[^\s/?#@]{1,262}$")  # a frontier host (name or [v6], optional :port)


@router.get("/api/crawls/{crawl_id}/politeness")
async def get_politeness(crawl_id: uuid.UUID, request: Request,
                         host: Annotated[list[str] | None, Query()] = None) -> dict:
    """The hosts' politeness now → 200 ``{"hosts": {host: {lastFinishedAt, hostDelayMs}}}`` (the
    flow's token): what plan_level reads before a level's first request to a host, so a crawl
    started meanwhile counts (ledger.crawl.hosts.current). 400 no ``host``, more than 1,000, or
    one that is not a host; 404 unknown crawl; 409 not running. Also taken with the crawl's read
    token (decision 405: a capture server's read before it releases a held capture)."""
    await crawl_reader(request, crawl_id)
    hosts = host or []
    if not hosts or len(hosts) > host_politeness.HOSTS_MAX:
        raise Refused(400, f"give 1 to {host_politeness.HOSTS_MAX} host query parameters (?host=a.test&host=b.test)")
    bad = next((h for h in hosts if not _HOST.match(h)), None)
    if bad is not None:
        raise Refused(400, f"host {bad[:80]!r} is not a host name (no scheme, path, user or spaces; at most 262 characters)")
    found = await host_politeness.current(request.app.state.services.pool, crawl_id, hosts)
    if found is None:
        raise Refused(404, "not found")
    return {"hosts": found}


@router.post("/api/crawls/{crawl_id}/failed")
async def close_failed(crawl_id: uuid.UUID, body: FailedBody, request: Request,
                       background: BackgroundTasks) -> JSONResponse:
    """Close a running crawl as failed → 200 ``{closed: true|false}`` (reason ≤ 2,000 chars);
    an unknown crawl, or one of another organization, is ``{closed: false}`` alike. Closing
    cancels the crawl's Windmill job (best effort, after the answer), records the pending pages
    whose progress events reported a capture as captured (their archives admitted after the
    answer: ledger.crawl.salvage) and skips the other pending pages."""
    identity = await submitter(request)
    services = request.app.state.services
    closed = None
    if await crawl_store.crawl_in_orgs(services.pool, crawl_id, identity.organizations):
        closed = await crawl_store.close_failed(services.pool, crawl_id, body.reason, services.settings.s3_bucket)
    if closed and closed.job:  # its level may still be capturing: stop it, or the site keeps getting requests
        background.add_task(cancel_job, services.http, services.settings, closed.job, "waggle: the crawl was failed")
    if closed is not None:  # its host leases ended with it
        background.add_task(dispatch_waiting, services)
    if closed and closed.tasks:  # admission after the answer, as for a level report
        background.add_task(verify_level, services, crawl_id, closed.depth, set(), closed.tasks)
    if closed and closed.sealed:  # captures past their seal finish without the flow: admit them as they land
        background.add_task(salvage.await_sealed, services, crawl_id, closed.depth, closed.sealed)
    return JSONResponse({"closed": closed is not None}, background=background)


@router.post("/api/crawls/{crawl_id}/stop")
async def stop_crawl(crawl_id: uuid.UUID, request: Request, background: BackgroundTasks) -> JSONResponse:
    """Stop a running or paused crawl gracefully → 200 ``{state: "succeeded", stopReason:
    "stopped"}``: no new capture starts (its level's Windmill job is cancelled after the answer),
    captures in flight finish and are admitted, pending pages are skipped (ledger.crawl.control).
    404 unknown (or another organization's); 409 already finished."""
    await _member(request, crawl_id)
    services = request.app.state.services
    done = await control.stop(services.pool, crawl_id, services.settings.s3_bucket)
    if done.job:  # its level may still be capturing: no new capture may start
        background.add_task(cancel_job, services.http, services.settings, done.job, "waggle: the crawl was stopped")
    background.add_task(dispatch_waiting, services)  # its host leases ended with it
    if done.tasks:
        background.add_task(verify_level, services, crawl_id, done.depth, set(), done.tasks)
    if done.sealed:  # captures past their seal finish without the flow: admit them as they land
        background.add_task(salvage.await_sealed, services, crawl_id, done.depth, done.sealed)
    return JSONResponse({"state": done.state, "stopReason": "stopped"}, background=background)


@router.post("/api/crawls/{crawl_id}/pause")
async def pause_crawl(crawl_id: uuid.UUID, request: Request, background: BackgroundTasks) -> JSONResponse:
    """Pause a running crawl → 200 ``{state: "paused" | "pausing"}`` (``pausing``: the level in
    flight finishes and reports first, then the crawl pauses; the frontier is kept and its host
    leases end). 404 unknown; 409 finished."""
    await _member(request, crawl_id)
    services = request.app.state.services
    done = await control.pause(services.pool, crawl_id)
    if done.state == "paused":
        background.add_task(dispatch_waiting, services)  # hosts it waited for are free for others
    return JSONResponse({"state": done.state}, background=background)


@router.post("/api/crawls/{crawl_id}/resume")
async def resume_crawl(crawl_id: uuid.UUID, request: Request, background: BackgroundTasks) -> JSONResponse:
    """Resume a paused crawl → 200 ``{state: "running"}``; its level is dispatched after the
    answer and waits the rest of every host's gap (the hosts' last captures are kept in the
    ledger). A crawl still ``pausing`` keeps running (the pause is withdrawn). 404 unknown; 409
    finished; 429 the organization already runs WAGGLE_MAX_RUNNING_CRAWLS_PER_ORG crawls."""
    await _member(request, crawl_id)
    services = request.app.state.services
    done = await control.resume(services.pool, crawl_id, services.settings.max_running_crawls_per_org)
    if done.dispatch is not None:
        background.add_task(dispatch_level, services, done.dispatch, done.depth)
    return JSONResponse({"state": done.state}, background=background)


INDEX_BUDGET_S = 40.0


@router.post("/api/crawls/{crawl_id}/index")
async def index_level(crawl_id: uuid.UUID, request: Request) -> dict:
    """Index every admitted archive of the crawl not indexed yet (issue 26; ledger.search.indexer)
    → 200 ``{indexed, pages, withoutText, deferred, alreadyIndexed, remaining}``: archives
    indexed by this call, of which with text and without; left for later because S3 did not
    answer; indexed before; still unindexed (a call starts no batch after 40 s: the rest is
    left to the next call and the search sweep). Idempotent; safe beside another replica (claims
    skip locked rows). 404 when search is off (``WAGGLE_SEARCH_URL=off``) and for a crawl that
    is unknown or of another organization."""
    from ledger.search.indexer import index_archives, search_enabled

    identity = await submitter(request)
    services = request.app.state.services
    if not search_enabled(services.settings):
        raise Refused(404, "search is off on this deployment (WAGGLE_SEARCH_URL=off); nothing to index")
    if not await crawl_store.crawl_in_orgs(services.pool, crawl_id, identity.organizations):
        raise Refused(404, "not found")
    if services.s3 is None:
        raise Refused(503, "S3 is not configured: archives cannot be read to index them")
    # within the flow's 60 s HTTP timeout: a level too large for one call leaves `remaining`
    # to the next level's call and the search sweep
    result = await index_archives(services.pool, services.s3, crawl_id, budget_s=INDEX_BUDGET_S)
    return result.as_dict()
