"""HTTP routes of the capture stand-in (contracts.md §A.1, §A.2, §A.7, §A.10).

``POST /captures``: 415/406 for a ``content-type`` other than exactly ``application/json`` or an
``Accept`` without JSON → 400 ``ValidationException`` (nothing started) → 429 ``Busy`` at once when a
capture is running (no queue) → run the capture and answer 200 ``{taskId, report, manifest}``
only after the manifest write. ``GET /status``. With ``--faults-endpoint``: ``GET/PUT /faults``
reads/sets the fault knobs (tests). Unknown paths → 404 ``UnknownOperationException``. Every
error carries ``x-amzn-errortype``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import asdict

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from devstack.restjson import accepts_json as _accepts_json
from devstack.restjson import error_response as _error
from devstack.capture import names
from devstack.capture.browser import BrowserHolder, BrowserUnavailable
from devstack.capture.capture import Ctx, run_capture
from devstack.capture.settings import BUILD, ServerSettings
from devstack.capture.sink import S3Sink
from devstack.capture.validation import ValidationError, validate_request

log = logging.getLogger("devstack.capture")


def create_app(settings: ServerSettings) -> FastAPI:
    """The capture server app; the lifespan launches Chromium (refuses to start without it)."""
    holder = BrowserHolder(settings.chromium, settings.recycle_every, settings.max_rss_mb)
    s3 = (S3Sink(settings.s3_endpoint, settings.s3_bucket, settings.s3_access_key, settings.s3_secret_key,
                 settings.s3_region, settings.s3_key_prefix) if settings.s3_endpoint else None)
    ctx = Ctx(settings=settings, browser=holder, s3=s3)
    lock = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        await holder.start()
        try:
            yield
        finally:
            await ctx.aclose()
            await holder.close()

    app = FastAPI(title="BrowserHive v12 stand-in", lifespan=lifespan, openapi_url=None, docs_url=None, redoc_url=None)
    app.state.ctx = ctx

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception):  # never a stack trace on the wire
        return _error(500, "InternalFailure")

    @app.post("/captures")
    async def captures(request: Request):
        if settings.faults.refuse_500:
            return _error(500, "InternalFailure")
        # restJson1 framing of the generated server (contracts.md §A.7, §C.4, §E.12).
        if request.headers.get("content-type") != "application/json":
            return _error(415, "UnsupportedMediaTypeException")
        if not _accepts_json(request):
            return _error(406, "NotAcceptableException")
        try:
            body = json.loads(await request.body())
        except (ValueError, UnicodeDecodeError):
            return _error(400, "ValidationException", {"message": "request body is not valid JSON"})
        try:
            req = validate_request(body)
            if names.name_too_long(req.get("correlationId"), names.clean_labels(req.get("labels"))):
                raise ValidationError("labels/correlationId: the .result.json file name would exceed 255 UTF-8 bytes")
            if s3 is None and not req.get("artifactSink"):
                raise ValidationError("artifactSink is required: this server has no bucket of its own",
                                      [{"path": "/artifactSink", "message": "Member must not be null"}])
        except ValidationError as e:
            return _error(400, "ValidationException", e.body())
        if lock.locked():
            return _error(429, "Busy", {"message": "a capture is already running on this browser"})
        async with lock:
            result = await run_capture(ctx, req)
            ctx.captures += 1
            # Already JSON types: FastAPI's jsonable_encoder walk of a dict return took 0.15 s for
            # the 14,000 inline links of a long page.
            return JSONResponse(result)

    @app.get("/status")
    async def status():
        out = {
            "busy": lock.locked(),
            "browser": {"url": f"playwright:{settings.chromium}", "connected": holder.connected},
            "build": BUILD,
            "limits": {"maxResponseBytes": settings.max_response_bytes, "maxTaskBytes": settings.max_task_bytes,
                       "maxPendingRequests": settings.max_pending_requests},
            "defaultUrlPolicies": settings.default_url_policies,
            "defaultContentTypePolicies": settings.default_content_type_policies,
        }
        if holder.connected and holder.version:
            out["browser"]["version"] = holder.version
        # Not part of the v12 contract: observability of the stand-in (recycling, C13).
        out["standin"] = {"captures": ctx.captures, "sparesTaken": ctx.spare.taken,
                          "launches": holder.launches, "recycles": holder.recycles,
                          "capturesSinceLaunch": holder.captures_since_launch, "allowPrivate": settings.allow_private,
                          "lastPhasesMs": ctx.last_phases_ms}
        return out

    if settings.faults_endpoint:
        @app.get("/faults")
        async def get_faults():
            return asdict(settings.faults)

        @app.put("/faults")
        async def put_faults(request: Request):
            try:
                settings.faults.update(json.loads(await request.body()))
            except (ValueError, TypeError, AttributeError) as e:
                return JSONResponse({"error": str(e)}, status_code=400)
            return asdict(settings.faults)

    @app.api_route("/{path:path}", methods=["GET", "POST", "PUT", "DELETE", "PATCH"])
    async def unknown(path: str):
        return _error(404, "UnknownOperationException")

    return app


__all__ = ["create_app", "BrowserUnavailable"]
