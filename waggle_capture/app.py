"""HTTP routes of the capture server (contracts.md §A.1, §A.2, §A.7, §A.10).

``POST /captures``: 415/406 for a ``content-type`` other than exactly ``application/json`` or an
``Accept`` without JSON → 400 ``ValidationException`` (nothing started) → 429 ``Busy`` at once when a
capture is loading, or two are running (:class:`CaptureGate`; no queue) → run the capture and answer 200 ``{taskId, report, manifest}``
only after the manifest write. ``GET /status`` (with the waggle ``extensions`` it implements).
Extensions (docs/capture-server.md): the ``Waggle-Capture-Key`` request header and
``GET /captures/seal?key=&timeoutMs=`` (``sealWait``), ``startAfterMs`` in the body, ``holdAfter`` in the body (a capture held behind the host's previous one).
A capture whose client disconnects while it waits for its turn, nothing sent yet, is ended (:mod:`.abandon`). With ``--faults-endpoint``: ``GET/PUT /faults``
reads/sets the fault knobs (tests). Unknown paths → 404 ``UnknownOperationException``. Every
error carries ``x-amzn-errortype``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from dataclasses import asdict
from typing import Callable

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from waggle_capture.restjson import accepts_json as _accepts_json
from waggle_capture.restjson import error_response as _error
from waggle_capture import abandon, holds, names, seals
from waggle_capture.browser import BrowserHolder, BrowserUnavailable
from waggle_capture.capture import Ctx, run_capture
from waggle_capture.settings import BUILD, ServerSettings
from waggle_capture.sink import S3Sink
from waggle_capture.validation import ValidationError, validate_request

log = logging.getLogger("waggle_capture")

# Extensions of the v12 contract this server implements (docs/capture-server.md), listed in
# GET /status so that a client uses one only where it is advertised.
EXTENSIONS = ("sinceLastRequestMs", "sealWait", "startAfterMs", "sealBeforeFormats", "scrollHooks",
              "holdAfter", "captureAtDeadline", "screenshotsInWacz", "retryAfterMs", "robotsMeta", "revisit",
              "navigationRules", "challengeSignature", "conditional", "holdAdmission")
MAX_ACTIVE = 2  # one capture loading, one finishing (CaptureGate)


class CaptureGate:
    """Which captures may start: one **loading** at a time (from acceptance until its page's
    network is sealed), and at most :data:`MAX_ACTIVE` accepted and not yet answered — so the
    next capture loads while the previous one packages its WACZ, uploads and writes its manifest
    (issue 11; the browser is not used after the seal). One exception (extension ``holdAfter``):
    a capture held behind the one loading may join it, one at a time, its egress held until that
    one's seal + gap (:mod:`.holds`), with one more unanswered capture allowed then.
    Event-loop only: no locking needed."""

    def __init__(self) -> None:
        self.loading = 0  # accepted, network not sealed yet
        self.active = 0

    def busy(self) -> bool:
        """Whether ``POST /captures`` answers 429 now (also ``GET /status`` ``busy``)."""
        return self.loading > 0 or self.active >= MAX_ACTIVE

    def may_hold(self, prev_sealed: bool) -> bool:
        """Whether a capture held behind a previous one (sealed or not) may start now: as any
        capture, or beside that previous capture while it is the only one loading."""
        return not self.busy() or (not prev_sealed and self.loading == 1 and self.active <= MAX_ACTIVE)

    def enter(self) -> Callable[[], None]:
        """Take the browser; returns the idempotent release called at the seal (or the end)."""
        self.loading, self.active = self.loading + 1, self.active + 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released, self.loading = True, self.loading - 1

        return release

    def leave(self) -> None:
        self.active -= 1


def create_app(settings: ServerSettings) -> FastAPI:
    """The capture server app; the lifespan launches Chromium (refuses to start without it)."""
    holder = BrowserHolder(settings.chromium, settings.recycle_every, settings.max_rss_mb)
    s3 = (S3Sink(settings.s3_endpoint, settings.s3_bucket, settings.s3_access_key, settings.s3_secret_key,
                 settings.s3_region, settings.s3_key_prefix) if settings.s3_endpoint else None)
    ctx = Ctx(settings=settings, browser=holder, s3=s3)
    gate = CaptureGate()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        await holder.start()
        try:
            yield
        finally:
            await ctx.aclose()
            await holder.close()

    app = FastAPI(title="waggle capture server (BrowserHive v12)", lifespan=lifespan, openapi_url=None, docs_url=None, redoc_url=None)
    app.state.ctx = ctx

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception):  # never a stack trace on the wire
        return _error(500, "InternalFailure")

    @app.post("/captures")
    async def captures(request: Request):
        received = time.monotonic()  # startAfterMs and the task budget run from here
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
            if (why := settings.signer.refusal(req.get("signing"))) is not None:  # server signing policy
                raise ValidationError(why)
            if names.name_too_long(req.get("correlationId"), names.clean_labels(req.get("labels"))):
                raise ValidationError("labels/correlationId: the .result.json file name would exceed 255 UTF-8 bytes")
            if s3 is None and not req.get("artifactSink"):
                raise ValidationError("artifactSink is required: this server has no bucket of its own",
                                      [{"path": "/artifactSink", "message": "Member must not be null"}])
            key = seals.check_key(request.headers.get(seals.KEY_HEADER))
        except ValidationError as e:
            return _error(400, "ValidationException", e.body())
        except seals.SealRequestError as e:
            return _error(400, "ValidationException", {"message": str(e)})
        hold = None
        if req.get("holdAfter") is not None:  # extension holdAfter: the previous capture must be ours
            prev = await ctx.seals.find(req["holdAfter"]["key"], holds.FIND_S)
            if prev is None:
                return _error(409, "ConflictException", {"message": "holdAfter: no capture with key "
                              f"{req['holdAfter']['key']} was accepted by this server; submit without holdAfter"})
            hold = holds.Hold.of(prev, req["holdAfter"])
        if not (gate.may_hold(hold.sealed()) if hold is not None else not gate.busy()):
            log.info("busy at %.4f", received)  # monotonic: tests/bench/politeness.py lays it beside the site's log
            return _error(429, "Busy", {"message": "a capture is already running on this browser"})
        release = gate.enter()
        watch = abandon.Watch()
        try:
            seal = ctx.seals.accept(key) if key else None
            try:
                result = await abandon.unless_client_gone(request, watch, run_capture(
                    ctx, req, accepted=received, seal=seal, on_sealed=release, hold=hold,
                    on_run=watch.began))
            except holds.HeldDuplicate as e:
                if not e.url:  # HeldBehindChallenge (.challenge): nothing sent, no finalUrl
                    return _error(409, "ConflictException", {"message": str(e)})
                return _error(409, "ConflictException", {
                    "message": f"holdAfter: the previous capture ended at this URL ({e.url}); nothing was sent",
                    "finalUrl": e.url})
            except abandon.ClientGone:  # nobody reads this answer: the client closed its connection
                return _error(409, "ConflictException", {
                    "message": "the client went away while the capture waited for its turn; nothing was sent"})
            ctx.captures += 1
            # Already JSON types: FastAPI's jsonable_encoder walk of a dict return took 0.15 s for
            # the 14,000 inline links of a long page.
            return JSONResponse(result)
        finally:
            release()
            gate.leave()

    @app.get("/captures/seal")
    async def capture_seal(request: Request):
        """Extension ``sealWait``: wait ≤ ``timeoutMs`` for the capture with ``key`` to seal its
        page's network (or end); answered while that capture is still packaging."""
        try:
            key = seals.check_key(request.query_params.get("key"))
            if key is None:
                raise seals.SealRequestError("key is required: the Waggle-Capture-Key of the capture")
            timeout_ms = seals.check_timeout_ms(request.query_params.get("timeoutMs"))
        except seals.SealRequestError as e:
            return _error(400, "ValidationException", {"message": str(e)})
        return await ctx.seals.wait(key, timeout_ms / 1000)

    @app.get("/status")
    async def status():
        out = {
            "busy": gate.busy(),
            "browser": {"url": f"playwright:{settings.chromium}", "connected": holder.connected},
            "build": BUILD,
            "limits": {"maxResponseBytes": settings.max_response_bytes, "maxTaskBytes": settings.max_task_bytes,
                       "maxPendingRequests": settings.max_pending_requests},
            "defaultUrlPolicies": settings.default_url_policies,
            "defaultContentTypePolicies": settings.default_content_type_policies,
            # Not part of v12: waggle extensions a client may use (docs/capture-server.md).
            "extensions": list(EXTENSIONS),
        }
        if holder.connected and holder.version:
            out["browser"]["version"] = holder.version
        # Not part of the v12 contract: observability of this process (recycling, C13, phases).
        out["process"] = {"captures": ctx.captures, "sparesTaken": ctx.spare.taken,
                          "launches": holder.launches, "recycles": holder.recycles,
                          "capturesSinceLaunch": holder.captures_since_launch, "allowPrivate": settings.allow_private,
                          "lastPhasesMs": ctx.last_phases_ms}
        # The same object under its old name, for readers written before decision 251; to be removed.
        out["standin"] = out["process"]
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
