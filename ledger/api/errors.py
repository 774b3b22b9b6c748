"""The error policy (reference/ledger.md §5): 4xx bodies ``{"error": "..."}`` that say what to
change; anything unexpected → bare ``500 {"error":"internal error"}`` (detail logged only).

* validation errors → 400 naming each field and the rule (never 422); ``fields`` maps each
  top-level body field at fault to its problems (the web page shows them next to the field);
* :class:`Unauthenticated` → 401 ``{"error":"unauthenticated"}`` (no reason given);
* ``CsrfRefused`` (a web-page session call without its ``X-CSRF-Token``) → 403;
* :class:`NotPermitted` → 404 ``{"error":"not found"}`` (never 403: no existence oracle);
* OpenFGA not answering (:class:`FgaUnavailable`) → 503 with ``Retry-After``: nothing changed,
  the same request may be sent again (the flow's report retries rely on this);
* an unknown route → 404 ``{"error":"Route <METHOD>:<path> not found"}``, distinguishable from
  the permission 404 (callers tell "crawl routes not configured" by it).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from ledger.api.identity import Unauthenticated
from ledger.authz.fga import FgaUnavailable
from ledger.crawl.errors import Refused

log = logging.getLogger("waggle.api")


class NotPermitted(Exception):
    """The caller may not do this; answered 404 ``{"error":"not found"}``."""


def describe_validation(exc: RequestValidationError) -> str:
    """One line per problem: ``<field path>: <what is wrong>``."""
    parts = []
    for err in exc.errors():
        loc = [str(p) for p in err.get("loc", ()) if p not in ("body", "path", "query")]
        where = ".".join(loc) or "body"
        kind = err.get("type", "")
        if kind == "extra_forbidden":
            parts.append(f"unknown field {where}")
        elif kind == "missing":
            parts.append(f"{where} is required")
        elif kind == "json_invalid":
            parts.append(f"the body is not JSON ({err.get('ctx', {}).get('error', 'unreadable')} at character"
                         f" {loc[0] if loc else 0}): send a JSON object")
        elif kind == "json_type" or (kind == "model_attributes_type" and not loc):
            parts.append(_not_an_object(err.get("input")))
        elif kind == "int_type":  # strict numeric settings: "500", 500.0 and true are not coerced
            parts.append(f"{where}: must be a JSON integer, {_not_an_integer(err.get('input'))}")
        elif kind in _PLAIN:
            parts.append(f"{where}: {_PLAIN[kind](err.get('ctx') or {}, err.get('input'))}")
        else:
            msg = err.get("msg", "is invalid")
            if msg.startswith("Value error, "):
                msg = msg[len("Value error, "):]
            parts.append(f"{where}: {msg}")
    return "; ".join(dict.fromkeys(parts)) or "invalid request"


def _count(n: object, one: str) -> str:
    return f"{n} {one}" + ("" if n == 1 else "s")


def _shown(given: object) -> str:
    """``given`` as the caller sent it, cut at 40 characters: a string quoted, JSON as JSON."""
    if isinstance(given, str):
        return json.dumps(given[:40] + ("…" if len(given) > 40 else ""), ensure_ascii=False)
    text = json.dumps(given, default=str, ensure_ascii=False)
    return text[:40] + ("…" if len(text) > 40 else "")


def _not_an_id(_ctx: dict, given: object) -> str:
    return f"must be an id (a UUID such as 3f2b8c1e-8d0a-4d59-9f5e-0c6a1b2d3e4f), not {_shown(given)}"


# pydantic's wording ("List should have at least 1 item after validation, not 0") as a sentence
# a person acts on; keyed by pydantic's error type, given its ctx and the input
_PLAIN: dict[str, Any] = {
    "too_short": lambda c, _i: "give at least " + _count(c.get("min_length"), "item"),
    "too_long": lambda c, _i: "give at most " + _count(c.get("max_length"), "item"),
    "string_too_short": lambda c, _i: ("must not be empty" if c.get("min_length") == 1
                                       else "must have at least " + _count(c.get("min_length"), "character")),
    "string_too_long": lambda c, _i: "must have at most " + _count(c.get("max_length"), "character"),
    "uuid_parsing": _not_an_id,
    "uuid_type": _not_an_id,
    "greater_than_equal": lambda c, _i: f"must be at least {c.get('ge')}",
    "greater_than": lambda c, _i: f"must be more than {c.get('gt')}",
    "less_than_equal": lambda c, _i: f"must be at most {c.get('le')}",
    "less_than": lambda c, _i: f"must be less than {c.get('lt')}",
    "string_type": lambda _c, i: f"must be a string, not {_shown(i)}",
    "bool_type": lambda _c, i: f"must be true or false, not {_shown(i)}",
    "list_type": lambda _c, i: f"must be a list, not {_shown(i)}",
}


def _not_an_object(given: object) -> str:
    """What to say of a body that is no JSON object: raw bytes (no JSON content type), or JSON
    of another kind."""
    if isinstance(given, (bytes, bytearray)):
        return "the body is not JSON: send a JSON object with Content-Type: application/json"
    kind = {type(None): "null", list: "an array", str: "a string", bool: "a boolean"}.get(type(given), "a number")
    return f"the body must be a JSON object, not {kind}"


def _not_an_integer(given: object) -> str:
    """What was sent instead of an integer, and what to send (``"500"`` → ``500``)."""
    if isinstance(given, bool):
        return f"not {json.dumps(given)}"
    if isinstance(given, str):
        text = json.dumps(given[:40] + ("…" if len(given) > 40 else ""), ensure_ascii=False)
        digits = given.strip()
        if digits.lstrip("-").isdigit() and len(digits) <= 18:
            return f"not the string {text}: send {int(digits)} without quotes"
        return f"not the string {text}"
    if isinstance(given, float):
        return f"not {given!r}" + (f": send {int(given)}" if given.is_integer() else "")
    kind = {type(None): "null", list: "an array", dict: "an object"}.get(type(given), type(given).__name__)
    return f"not {kind}"


def validation_fields(exc: RequestValidationError) -> dict[str, str]:
    """``{top-level field: "problem; problem"}`` of a body's validation errors (whole-body ones
    under ``"body"``)."""
    fields: dict[str, list[str]] = {}
    for err in exc.errors():
        loc = [str(p) for p in err.get("loc", ()) if p not in ("body", "path", "query")]
        if err.get("type") == "json_invalid":  # its loc holds the character position, no field
            loc = []
        fake = RequestValidationError([err])
        fields.setdefault(loc[0] if loc else "body", []).append(describe_validation(fake))
    return {k: "; ".join(dict.fromkeys(v)) for k, v in fields.items()}


def install(app: FastAPI) -> None:
    """Register the handlers and the last-resort 500 middleware on ``app``."""

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"error": describe_validation(exc), "fields": validation_fields(exc)}, status_code=400)

    @app.exception_handler(Unauthenticated)
    async def _unauth(request: Request, exc: Unauthenticated) -> JSONResponse:
        return JSONResponse({"error": "unauthenticated"}, status_code=401)

    from ledger.web.auth import CSRF_HEADER, CsrfRefused

    @app.exception_handler(CsrfRefused)
    async def _csrf(request: Request, exc: CsrfRefused) -> JSONResponse:
        return JSONResponse({"error": f"this call changes something: send the session's {CSRF_HEADER} header"
                                      " (GET /auth/session gives it)"}, status_code=403)

    @app.exception_handler(NotPermitted)
    async def _denied(request: Request, exc: NotPermitted) -> JSONResponse:
        log.info("Denied: %s %s", request.method, request.url.path)
        return JSONResponse({"error": "not found"}, status_code=404)

    @app.exception_handler(Refused)
    async def _refused(request: Request, exc: Refused) -> JSONResponse:
        if exc.status >= 500:
            log.error("Refused with %d: %s %s: %s", exc.status, request.method, request.url.path, exc.error)
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.exception_handler(FgaUnavailable)
    async def _fga_down(request: Request, exc: FgaUnavailable) -> JSONResponse:
        log.error("OpenFGA unreachable: %s %s: %s", request.method, request.url.path, exc)
        return JSONResponse(
            {"error": "the authorization service (OpenFGA) is not answering; nothing was changed, retry shortly"},
            status_code=503,
            headers={"Retry-After": "5"},
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404 and exc.detail == "Not Found":
            body: dict[str, Any] = {"error": f"Route {request.method}:{request.url.path} not found"}
        elif exc.status_code == 405:
            body = {"error": f"method {request.method} is not allowed on {request.url.path}"}
        else:
            body = {"error": exc.detail if isinstance(exc.detail, str) else "request refused"}
        return JSONResponse(body, status_code=exc.status_code, headers=getattr(exc, "headers", None))

    app.add_middleware(InternalErrorMiddleware)
    app.add_middleware(BodyLimitMiddleware)


class InternalErrorMiddleware:
    """Turns any unhandled exception into ``500 {"error":"internal error"}`` and logs it."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception:
            log.exception("Unhandled error: %s %s", scope.get("method"), scope.get("path"))
            if started:
                return
            body = json.dumps({"error": "internal error"}).encode()
            await send({"type": "http.response.start", "status": 500,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})


MAX_BODY_BYTES = 32 * 1024 * 1024


class BodyLimitMiddleware:
    """413 ``{"error": ...}`` for a request whose body exceeds :data:`MAX_BODY_BYTES`
    (32 MiB): refused before reading when the declared Content-Length says so; otherwise
    (chunked bodies) the app is handed an ended body once the limit is passed and its answer
    is replaced by the 413 (the app's own body parser would turn any error into a 400)."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES):
        self.app, self.max_bytes = app, max_bytes

    async def _refuse(self, send: Send) -> None:
        body = json.dumps({"error": f"the body is larger than {self.max_bytes // (1024 * 1024)} MiB;"
                                    " send less per request"}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send)
            return
        received = 0
        too_large = False

        async def counting_receive() -> Any:
            nonlocal received, too_large
            if too_large:
                return {"type": "http.disconnect"}
            message = await receive()
            if message.get("type") == "http.request":
                received += len(message.get("body") or b"")
                if received > self.max_bytes:
                    too_large = True
                    return {"type": "http.request", "body": b"", "more_body": False}
            return message

        async def guarded_send(message: Any) -> None:
            if too_large:
                if message["type"] == "http.response.start":
                    await self._refuse(send)
                return  # the app's own answer to a cut-off body is dropped
            await send(message)

        await self.app(scope, counting_receive, guarded_send)
