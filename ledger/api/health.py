"""``GET /api/health``: the ledger's policy and whether its dependencies answer (issue #7).

No authentication (probes call it); it shows no seeds, URLs or subjects. Answer (camelCase)::

    {"status": "ok" | "degraded",
     "degraded": ["database" | "openfga" | "s3", ...],   # the dependencies that did not answer
     "privateHostsBlocked": bool, "identity": "jwt" | "header" | "deny",
     "maxPages": int, "maxPagesPerHost": int | null, "crawlStallS": float,
     "database": {"ok": bool, "latencyMs": float, "error"?: str},
     "openfga":  {"ok": bool, "latencyMs": float, "error"?: str},
     "s3":       {"ok": bool, "latencyMs": float, "error"?: str},
     "outbox":   {"pending": int, "oldestPendingAgeS": float | null} | null,
     "runningCrawl": {"crawlId", "startedAt", "ageS", "currentDepth", "idleS"} | null,
     "crawls": {"running": int, "waitingLevels": int, "leasedHosts": int} | null,
     "replicas": [{"id": "host:pid", "startedAt", "seenAgoS", "self": bool}] | null}

``runningCrawl`` is the oldest running crawl; several may run at once (issue 12).

200 only when the database, OpenFGA and S3 all answer within :data:`CHECK_TIMEOUT_S`; else 503
with the same body: ``degraded`` names the dependencies that did not answer and each carries its
``error`` — a degraded dependency, not a fault of the ledger (documented as the 503 answer of the
OpenAPI schema; tests/hostile/test_openapi_fuzz.py tells it from a server error by that body). OpenFGA is asked for the
configured authorization model (``GET /stores/{store}/authorization-models/{model}``), S3 for the
configured bucket (``HeadBucket``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Literal

import anyio
import httpx
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from ledger.crawl.times import iso_ms

router = APIRouter()

CHECK_TIMEOUT_S = 3.0
DEPENDENCIES = ("database", "openfga", "s3")


class DependencyCheck(BaseModel):
    """One dependency's answer to the probe."""

    ok: bool
    latencyMs: float
    error: str | None = Field(None, description="why it did not answer (absent when ok)")


class HealthAnswer(BaseModel):
    """The body of ``GET /api/health``, with 200 and with 503 (documentation of the answer)."""

    model_config = ConfigDict(extra="allow")
    status: Literal["ok", "degraded"]
    degraded: list[Literal["database", "openfga", "s3"]] = Field(
        description="the dependencies that did not answer within the probe's timeout (empty when ok)")
    privateHostsBlocked: bool
    identity: Literal["jwt", "header", "deny"]
    maxPages: int
    maxPagesPerHost: int | None
    crawlStallS: float
    database: DependencyCheck
    openfga: DependencyCheck
    s3: DependencyCheck
    outbox: dict[str, Any] | None
    runningCrawl: dict[str, Any] | None
    crawls: dict[str, Any] | None
    replicas: list[dict[str, Any]] | None


def identity_mode(settings: Any) -> str:
    """``jwt`` (issuer configured; wins), ``header`` (``WAGGLE_DEV_IDENTITY=1``) or ``deny``."""
    if settings.oidc_issuer:
        return "jwt"
    return "header" if settings.dev_identity else "deny"


def policy_notes(settings: Any) -> list[str]:
    """Lines the ledger logs at start-up: host policy, identity mode, caps."""
    policy = (
        "private hosts ALLOWED (WAGGLE_ALLOW_PRIVATE_HOSTS=1): seeds and links on loopback/private"
        " networks will be crawled" if settings.allow_private_hosts
        else "private hosts blocked (loopback, RFC 1918, link-local, CGNAT, ULA, metadata names)"
    )
    mode = identity_mode(settings)
    ident = {
        "jwt": f"identity: JWT from {settings.oidc_issuer} (audience {settings.oidc_audience})",
        "header": "identity: dev headers X-Waggle-Subject/X-Waggle-Organizations (WAGGLE_DEV_IDENTITY=1)",
        "deny": "identity: none configured — every call is 401 (set WAGGLE_OIDC_ISSUER or WAGGLE_DEV_IDENTITY=1)",
    }[mode]
    per_host = settings.max_pages_per_host or "no cap"
    caps = (f"caps: max pages per crawl {settings.max_pages}, per host {per_host},"
            f" stall after {settings.crawl_stall_s:g} s")
    return [policy, ident, caps]


def _failure(exc: BaseException) -> str:
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return f"no answer within {CHECK_TIMEOUT_S:g} s"
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]


async def _timed(coro: Any) -> tuple[dict, Any]:
    started = time.perf_counter()
    try:
        value = await asyncio.wait_for(coro, CHECK_TIMEOUT_S)
        part: dict = {"ok": True}
    except Exception as exc:  # every failure becomes a line in the answer, never a 500
        value, part = None, {"ok": False, "error": _failure(exc)}
    part["latencyMs"] = round((time.perf_counter() - started) * 1000, 1)
    return part, value


_DB = """
SELECT
  (SELECT count(*) FROM fga_outbox WHERE processed_at IS NULL) AS pending,
  (SELECT extract(epoch FROM now() - min(created_at)) FROM fga_outbox WHERE processed_at IS NULL) AS oldest_s,
  (SELECT count(*) FROM crawls WHERE state = 'running') AS running,
  (SELECT count(*) FROM crawls WHERE state = 'running' AND level_state = 'waiting') AS waiting,
  (SELECT count(*) FROM host_leases WHERE host NOT LIKE '@%%') AS leased,  -- hosts, not server keys (decision 241)
  now() AS db_now
"""
_RUNNING = """
SELECT id, started_at, current_depth, last_progress_at,
       extract(epoch FROM now() - started_at) AS age_s,
       extract(epoch FROM now() - last_progress_at) AS idle_s
FROM crawls WHERE state = 'running' ORDER BY started_at LIMIT 1
"""


_REPLICAS = """
SELECT id, started_at, extract(epoch FROM now() - seen_at) AS seen_s FROM ledger_replicas
WHERE seen_at > now() - make_interval(secs => %s) ORDER BY started_at
"""


async def _database(pool: Any) -> dict:
    from ledger.loops import REPLICA_FRESH_S, replica_id

    async with pool.connection(timeout=CHECK_TIMEOUT_S) as conn:
        cur = await conn.execute(_DB)
        stats = await cur.fetchone()
        cur = await conn.execute(_RUNNING)
        crawl = await cur.fetchone()
        cur = await conn.execute(_REPLICAS, (REPLICA_FRESH_S,))
        replicas = [{"id": r["id"], "startedAt": iso_ms(r["started_at"]), "seenAgoS": round(float(r["seen_s"]), 1),
                     "self": r["id"] == replica_id()} for r in await cur.fetchall()]
    oldest = stats["oldest_s"]
    out: dict = {
        "outbox": {
            "pending": int(stats["pending"]),
            "oldestPendingAgeS": round(float(oldest), 1) if oldest is not None else None,
        },
        "runningCrawl": None,
        "crawls": {"running": int(stats["running"]), "waitingLevels": int(stats["waiting"]),
                   "leasedHosts": int(stats["leased"])},
        "replicas": replicas,
    }
    if crawl:
        out["runningCrawl"] = {
            "crawlId": str(crawl["id"]),
            "startedAt": iso_ms(crawl["started_at"]),
            "ageS": round(float(crawl["age_s"]), 1),
            "currentDepth": crawl["current_depth"],
            "idleS": round(float(crawl["idle_s"]), 1),
        }
    return out


async def _openfga(http: httpx.AsyncClient, settings: Any) -> None:
    if not (settings.fga_store_id and settings.fga_model_id):
        raise RuntimeError("WAGGLE_FGA_STORE_ID / WAGGLE_FGA_MODEL_ID not set")
    url = (f"{settings.fga_api_url.rstrip('/')}/stores/{settings.fga_store_id}"
           f"/authorization-models/{settings.fga_model_id}")
    headers = {"authorization": f"Bearer {settings.fga_api_token}"} if settings.fga_api_token else {}
    resp = await http.get(url, headers=headers, timeout=CHECK_TIMEOUT_S)
    if resp.status_code != 200:
        raise RuntimeError(f"{resp.status_code} for the configured store/model: {resp.text[:200]}")


async def _s3(s3: Any) -> None:
    if s3 is None:
        raise RuntimeError("S3 is not configured (WAGGLE_S3_*)")
    # boto3 is synchronous; the thread is abandoned (not killed) if the timeout fires.
    await anyio.to_thread.run_sync(lambda: s3.client.head_bucket(Bucket=s3.bucket), abandon_on_cancel=True)


async def health_report(services: Any) -> tuple[int, dict]:
    """``(status_code, body)`` as documented in the module docstring; never raises."""
    settings = services.settings
    (db, db_value), (fga, _), (s3, _) = await asyncio.gather(
        _timed(_database(services.pool)),
        _timed(_openfga(services.http, settings)),
        _timed(_s3(services.s3)),
    )
    parts = {"database": db, "openfga": fga, "s3": s3}
    degraded = [name for name in DEPENDENCIES if not parts[name]["ok"]]
    healthy = not degraded
    body = {
        "status": "ok" if healthy else "degraded",
        "degraded": degraded,
        "privateHostsBlocked": not settings.allow_private_hosts,
        "identity": identity_mode(settings),
        "maxPages": settings.max_pages,
        "maxPagesPerHost": settings.max_pages_per_host,
        "crawlStallS": settings.crawl_stall_s,
        "database": db,
        "openfga": fga,
        "s3": s3,
        "outbox": (db_value or {}).get("outbox"),
        "runningCrawl": (db_value or {}).get("runningCrawl"),
        "crawls": (db_value or {}).get("crawls"),
        "replicas": (db_value or {}).get("replicas"),
    }
    return (200 if healthy else 503), body


@router.get("/api/health", response_model=None, responses={
    200: {"model": HealthAnswer, "description": "every dependency answered"},
    503: {"model": HealthAnswer, "description": 'a dependency is degraded: `status` is "degraded" and `degraded` '
          "names the dependencies that did not answer, each with its `error` (not a fault of the ledger)"},
})
async def get_health(request: Request) -> JSONResponse:
    """Health and policy of this ledger; 200 when every dependency answers, else 503 naming the degraded ones."""
    status, body = await health_report(request.app.state.services)
    return JSONResponse(body, status_code=status)
