"""The capture proxy's own error answers, told apart from a site's (RFC 9209 ``Proxy-Status``).

When the proxy cannot reach a site it must still answer the browser something; it answers
``502`` with ``Proxy-Status: waggle-capture; error=<RFC 9209 type>; details="net::ERR_…"``.
The recorder and the navigation check read that header and report the request as the network
failure Chromium would have reported without a proxy (``net::ERR_CONNECTION_REFUSED`` …), so a
site that was down is never archived or reported as a site that answered 502. The proxy drops a
``Proxy-Status`` naming ``waggle-capture`` from a site's own answers, so a site cannot fake one.
"""

from __future__ import annotations

import asyncio
import errno
import re

NAME = "waggle-capture"
_DETAILS = re.compile(r"net::ERR_[A-Z0-9_]+")


def for_connect_error(e: BaseException | None) -> tuple[str, str]:
    """``(RFC 9209 error type, Chromium net error)`` of a failed connection attempt ``e``."""
    if isinstance(e, ConnectionRefusedError):
        return "connection_refused", "net::ERR_CONNECTION_REFUSED"
    if isinstance(e, TimeoutError):
        return "connection_timeout", "net::ERR_CONNECTION_TIMED_OUT"
    if isinstance(e, OSError) and e.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
        return "destination_unavailable", "net::ERR_ADDRESS_UNREACHABLE"
    return "destination_unavailable", "net::ERR_CONNECTION_FAILED"


def for_response_error(e: BaseException) -> tuple[str, str]:
    """``(RFC 9209 error type, Chromium net error)`` of a site that ended the connection before
    its response head: closed with nothing sent (``ERR_EMPTY_RESPONSE``), closed mid-head, reset,
    or silent until the proxy's idle timeout."""
    if isinstance(e, asyncio.IncompleteReadError):
        if not e.partial:
            return "connection_terminated", "net::ERR_EMPTY_RESPONSE"
        return "http_response_incomplete", "net::ERR_INVALID_HTTP_RESPONSE"
    if isinstance(e, asyncio.TimeoutError):
        return "http_response_timeout", "net::ERR_TIMED_OUT"
    return "connection_terminated", "net::ERR_CONNECTION_RESET"


def header(error: str, net_error: str) -> str:
    """The ``Proxy-Status`` value of one of the proxy's own error answers."""
    return f'{NAME}; error={error}; details="{net_error}"'


def is_ours(value: str) -> bool:
    """Whether a ``Proxy-Status`` value names this proxy (first member)."""
    return value.split(";", 1)[0].split(",", 1)[0].strip().lower() == NAME


def net_error(headers: list[tuple[str, str]]) -> str | None:
    """The Chromium net error (``"net::ERR_CONNECTION_REFUSED"``) when ``headers`` are those of
    the proxy's own error answer, else None (the site answered)."""
    for k, v in headers:
        if k.lower() == "proxy-status" and is_ours(v):
            found = _DETAILS.search(v)
            return found.group(0) if found else "net::ERR_CONNECTION_FAILED"
    return None
