"""Smithy restJson1 conventions of the capture server (and the local stack's ts-compile stand-in).

Errors carry their type in ``x-amzn-errortype`` (reference/contracts.md §A.2, §C.4), and a
request whose ``Accept`` excludes JSON is answered 406 by the generated servers.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse


def error_response(status: int, kind: str, body: dict[str, Any] | None = None) -> JSONResponse:
    """A restJson1 error: ``body`` (default ``{}``) with ``x-amzn-errortype: kind``."""
    return JSONResponse(body if body is not None else {}, status_code=status, headers={"x-amzn-errortype": kind})


def accepts_json(request: Request) -> bool:
    """True when the request's ``Accept`` (absent = anything) admits ``application/json``."""
    accept = request.headers.get("accept")
    if not accept:
        return True
    kinds = {part.split(";")[0].strip().lower() for part in accept.split(",")}
    return bool(kinds & {"application/json", "application/*", "*/*"})
