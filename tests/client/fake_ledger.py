"""A small ledger that speaks the documented API shapes (reference/ledger.md §6; issues 2 and 3).

Used for client paths the real ledger cannot be steered into cheaply (a crawl that never ends,
a crawl with failures and skips at chosen levels, archive listing lag). It keeps one running
crawl at a time (409 with ``crawlId``/``startedAt``), answers 401 ``{"error":"unauthenticated"}``
without the right Bearer token, and serves "signed" WACZ downloads under ``/s3/``.

A crawl's levels advance with real time: level ``i`` completes ``(i + 1) * level_s`` after the
start; its archives become listable ``archive_lag_s`` later (the outbox delay).
"""

from __future__ import annotations

import io
import threading
import uuid
import zipfile
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

CRAWL_KEYS = {"seeds", "fromTargets", "scope", "maxDepth", "maxPages", "perHostDelayMs", "hostParallelism", "scripts",
              "formats", "ignoreRobotsMeta", "useSitemap", "sitemapLastmodAfter"}


def iso(ts: datetime) -> str:
    return ts.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def wacz_bytes(url: str) -> bytes:
    """A small zip standing in for a WACZ (first bytes ``PK``), distinct per URL.

    The entry's date is fixed so the bytes are a pure function of ``url`` (a name-only
    ``writestr`` stamps the wall clock, and two calls a second apart differ).
    """
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(zipfile.ZipInfo("datapackage.json", date_time=(2026, 1, 1, 0, 0, 0)), '{"profile": "data-package", "resources": [], "mainPageURL": "%s"}' % url)
    return buf.getvalue()


@dataclass
class Level:
    captured: list[str]
    failed: list[tuple[str, str]] = field(default_factory=list)  # (url, reason)
    skipped: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class FakeCrawl:
    id: str
    body: dict
    started: datetime
    levels: list[Level]
    level_s: float
    endless: bool
    stop_reason: str
    state: str = "running"
    finished: datetime | None = None
    error: str | None = None
    fail_reasons: list[str] = field(default_factory=list)

    def done_levels(self, now: datetime) -> int:
        n = int((now - self.started).total_seconds() / self.level_s)
        return min(n, len(self.levels) if not self.endless else len(self.levels) - 1)

    def level_done_at(self, i: int) -> datetime:
        return self.started + timedelta(seconds=(i + 1) * self.level_s)

    def refresh(self, now: datetime) -> None:
        if self.state == "running" and not self.endless and self.done_levels(now) >= len(self.levels):
            self.state = "succeeded"
            self.finished = self.level_done_at(len(self.levels) - 1)

    def view(self, now: datetime) -> dict:
        self.refresh(now)
        done = self.done_levels(now) if self.state != "failed" else self._done_at_fail
        levels = self.levels[:done]
        failures = [
            {"url": u, "depth": i, "reason": r} for i, lv in enumerate(levels) for (u, r) in lv.failed
        ][::-1][:5]
        in_flight = [] if self.state != "running" or done >= len(self.levels) else sorted(
            {u.split("/")[2] for u in self.levels[done].captured}
        )
        return {
            "crawlId": self.id,
            "seeds": self.body["seeds"],
            "scope": self.body.get("scope", "same-origin"),
            "state": self.state,
            "stopReason": self.stop_reason if self.state == "succeeded" else ("failed" if self.state == "failed" else None),
            "maxDepth": self.body.get("maxDepth", 2),
            "maxPages": self.body.get("maxPages", 30),
            "perHostDelayMs": self.body.get("perHostDelayMs", 2000),
            "hostParallelism": self.body.get("hostParallelism", 4),
            "startedAt": iso(self.started),
            "finishedAt": iso(self.finished) if self.finished else None,
            "pagesDiscovered": sum(len(lv.captured) + len(lv.failed) + len(lv.skipped) for lv in self.levels[: done + 1]),
            "pagesCaptured": sum(len(lv.captured) for lv in levels),
            "pagesFailed": sum(len(lv.failed) for lv in levels),
            "pagesSkipped": sum(len(lv.skipped) for lv in levels),
            "currentDepth": min(done, len(self.levels) - 1),
            "hostsInFlight": in_flight,
            "drops": {"out_of_scope": 3, "nofollow": 1} if done >= 2 else {},
            "error": self.error,
            "lastJob": {"id": str(uuid.uuid4()), "depth": min(done, len(self.levels) - 1)},
            "failures": failures,
            "scripts": [],
            **self.bytes_view(now),
        }

    archive_lag_s: float = 0.0
    archive_bytes: int = 0  # each archive's size in totalBytes (0: the ledger does not send it)

    def bytes_view(self, now: datetime) -> dict:
        """``totalBytes`` of the archives admitted so far (as the ledger sums them): an archive
        counts once it is listable, ``archive_lag_s`` after its level ended."""
        if not self.archive_bytes:
            return {}
        done = self.done_levels(now) if self.state != "failed" else self._done_at_fail
        admitted = sum(len(lv.captured) for i, lv in enumerate(self.levels[:done])
                       if self.level_done_at(i) + timedelta(seconds=self.archive_lag_s) <= now)
        return {"totalBytes": admitted * self.archive_bytes, "bytesUnknown": 0}

    _done_at_fail: int = 0


class FakeLedger:
    """State + FastAPI app. ``plan`` = the levels every new crawl will report."""

    def __init__(self, token: str = "test-token", level_s: float = 0.25, archive_lag_s: float = 0.0):
        self.token = token
        self.level_s = level_s
        self.archive_lag_s = archive_lag_s
        self.endless = False
        self.stop_reason = "max_depth"
        self.archive_bytes = 0  # > 0: crawls send totalBytes, this much per admitted archive
        self.plan: list[Level] = [
            Level(captured=["http://a.test/"]),
            Level(captured=["http://a.test/one", "http://b.test/"], failed=[("http://a.test/broken", "http: 500")],
                  skipped=[("http://a.test/private/x", "robots.txt disallows it")]),
            Level(captured=["http://b.test/two"], failed=[("http://b.test/slow", "timeout: navigation exceeded 30 s")]),
        ]
        self.crawls: dict[str, FakeCrawl] = {}
        self.bodies: list[dict] = []
        self.controls: list[tuple[str, str]] = []  # (crawl id, stop|pause|resume) as posted
        self.hidden_archives: set[str] = set()
        self.lock = threading.Lock()
        self.base_url = ""  # set by the fixture once served
        self.issued: list[dict] = []  # POST /token bodies (dev-issuer stand-in)
        self.app = self._build()

    # -- helpers -------------------------------------------------------------
    def running(self) -> FakeCrawl | None:
        now = datetime.now(timezone.utc)
        for c in self.crawls.values():
            c.refresh(now)
            if c.state == "running":
                return c
        return None

    def start_crawl(self, body: dict) -> FakeCrawl:
        crawl = FakeCrawl(
            id=str(uuid.uuid4()), body=body, started=datetime.now(timezone.utc), levels=list(self.plan),
            level_s=self.level_s, endless=self.endless, stop_reason=self.stop_reason,
            archive_lag_s=self.archive_lag_s, archive_bytes=self.archive_bytes,
        )
        self.crawls[crawl.id] = crawl
        return crawl

    def archives(self, crawl: str | None = None) -> list[dict]:
        """Archive rows as ``GET /api/archives`` gives them, newest first; ``crawl``: only that
        crawl's (the ledger's ``crawl=`` filter)."""
        now = datetime.now(timezone.utc)
        rows = []
        for c in self.crawls.values():
            if crawl is not None and c.id != crawl:
                continue
            c.refresh(now)
            done = c.done_levels(now) if c.state != "failed" else c._done_at_fail
            for i, lv in enumerate(c.levels[:done]):
                visible_at = c.level_done_at(i) + timedelta(seconds=self.archive_lag_s)
                if visible_at > now:
                    continue
                for j, url in enumerate(lv.captured):
                    task = uuid.uuid5(uuid.NAMESPACE_URL, c.id + url)
                    rows.append({
                        "id": str(uuid.uuid5(uuid.NAMESPACE_OID, str(task))),
                        "taskId": str(task),
                        "sourceUrl": url,
                        "labels": [],
                        "waczComplete": j % 2 == 0,
                        "capturedAt": iso(c.level_done_at(i) - timedelta(milliseconds=10 * (j + 1))),
                        "objectKey": f"{task}_{c.id[:8]}.wacz",
                        "missingBodyUrls": [] if j % 2 == 0 else [url + "poll"],
                        "missingBodyCount": 0 if j % 2 == 0 else 3,
                        "truncatedUrls": [],
                        "incompleteReason": None,
                    })
        rows = [r for r in rows if r["id"] not in self.hidden_archives]
        return sorted(rows, key=lambda r: r["capturedAt"], reverse=True)

    # -- the app ---------------------------------------------------------------
    def _build(self) -> FastAPI:
        app = FastAPI()
        fake = self

        def denied(request: Request) -> JSONResponse | None:
            if request.headers.get("authorization") != f"Bearer {fake.token}":
                return JSONResponse({"error": "unauthenticated"}, status_code=401)
            return None

        @app.get("/healthz")
        def healthz():
            return {"status": "ok"}

        @app.post("/token")  # the dev issuer's token endpoint, for stack.json tests
        async def token(request: Request):
            body = await request.json()
            fake.issued.append(body)
            return {"access_token": fake.token, "token_type": "Bearer"}

        @app.get("/api/me")
        def me(request: Request):
            return denied(request) or {"subject": "alice", "organizations": ["acme"], "canSubmit": True}

        @app.post("/api/crawls")
        async def submit(request: Request):
            body = await request.json()
            unknown = set(body) - CRAWL_KEYS
            if unknown:
                return JSONResponse({"error": f"unknown keys: {sorted(unknown)}"}, status_code=400)
            if not body.get("seeds"):
                return JSONResponse({"error": "provide exactly one of seeds or fromTargets"}, status_code=400)
            if (resp := denied(request)) is not None:
                return resp
            with fake.lock:
                other = fake.running()
                if other is not None:
                    return JSONResponse(
                        {"error": "a crawl is already in progress", "crawlId": other.id, "startedAt": iso(other.started)},
                        status_code=409,
                    )
                fake.bodies.append(body)
                crawl = fake.start_crawl(body)
            return JSONResponse({"crawlId": crawl.id}, status_code=202)

        @app.get("/api/crawls")
        def list_crawls(request: Request):
            if (resp := denied(request)) is not None:
                return resp
            now = datetime.now(timezone.utc)
            views = [c.view(now) for c in fake.crawls.values()]
            return {"crawls": sorted(views, key=lambda v: v["startedAt"], reverse=True)}

        @app.get("/api/crawls/{crawl_id}")
        def get_crawl(crawl_id: str, request: Request):
            if (resp := denied(request)) is not None:
                return resp
            crawl = fake.crawls.get(crawl_id)
            if crawl is None:
                return JSONResponse({"error": "not found"}, status_code=404)
            return crawl.view(datetime.now(timezone.utc))

        for action, state in (("stop", "succeeded"), ("pause", "pausing"), ("resume", "running")):
            def control(crawl_id: str, request: Request, action: str = action, state: str = state):
                if (resp := denied(request)) is not None:
                    return resp
                if crawl_id not in fake.crawls:
                    return JSONResponse({"error": "not found"}, status_code=404)
                ended = fake.crawls[crawl_id]
                ended.refresh(datetime.now(timezone.utc))
                if ended.state not in ("running", "paused"):  # as ledger.crawl.control refuses
                    return JSONResponse({"error": f"the crawl is {ended.state} already; only a running or paused"
                                                  " crawl can be stopped", "state": ended.state}, status_code=409)
                fake.controls.append((crawl_id, action))
                return {"state": state}
            app.post(f"/api/crawls/{{crawl_id}}/{action}")(control)

        @app.post("/api/crawls/{crawl_id}/failed")
        async def failed(crawl_id: str, request: Request):
            body = await request.json()
            if set(body) - {"reason"} or len(body.get("reason", "")) > 2000:
                return JSONResponse({"error": "body must be {reason} with at most 2000 characters"}, status_code=400)
            if (resp := denied(request)) is not None:
                return resp
            crawl = fake.crawls.get(crawl_id)
            now = datetime.now(timezone.utc)
            if crawl is None:
                return {"closed": False}
            crawl.refresh(now)
            if crawl.state != "running":
                return {"closed": False}
            crawl._done_at_fail = crawl.done_levels(now)
            crawl.state, crawl.finished = "failed", now
            crawl.error = body.get("reason") or "the flow failed without saying why"
            crawl.fail_reasons.append(crawl.error)
            return {"closed": True}

        @app.get("/api/archives")
        def archives(request: Request, before: str | None = None, crawl: str | None = None):
            if (resp := denied(request)) is not None:
                return resp
            rows = fake.archives(crawl)
            if before:
                rows = [r for r in rows if r["capturedAt"] < before]
            return {"archives": rows[:50]}

        @app.post("/api/archives/{archive_id}/url")
        def sign(archive_id: str, request: Request):
            if (resp := denied(request)) is not None:
                return resp
            row = next((r for r in fake.archives() if r["id"] == archive_id), None)
            if row is None:
                return JSONResponse({"error": "not found"}, status_code=404)
            return {"url": f"{fake.base_url}/s3/browserhive/{row['objectKey']}?X-Amz-Expires=300&X-Amz-Signature=abc",
                    "expiresIn": 300}

        @app.get("/s3/browserhive/{key}")
        def object_(key: str, request: Request):
            if request.query_params.get("X-Amz-Signature") != "abc":
                return Response(status_code=403)
            row = next((r for r in fake.archives() if r["objectKey"] == key), None)
            if row is None:
                return Response(status_code=404)
            return Response(wacz_bytes(row["sourceUrl"]), media_type="application/zip")

        return app
