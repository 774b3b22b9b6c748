# /// script
# requires-python = ">=3.11"
# dependencies = ["httpx==0.28.1", "wmill==1.850.0"]
# ///
"""Helpers shared by the waggle step scripts (a Windmill library script: no ``main``).

Windmill deploys this file as ``f/waggle/common`` and the steps import it with
``from f.waggle.common import …`` (windmill.md §7.4); locally the repository root on
``sys.path`` gives the same import.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone

import httpx

# Ledger calls ride out a ledger restart: connection failures and 5xx answers are retried
# with back-off for this long (issue 7 item 4; level reports are idempotent at the ledger).
LEDGER_RETRY_BUDGET_S = 120.0
LEDGER_BACKOFF_FIRST_S = 0.5
LEDGER_BACKOFF_MAX_S = 10.0

HINT_401 = " — the token may be stale (did you restart the issuer?)"
HINT_404 = (
    " — does the token's subject (sub) have crawl permission for that organization?"
    " Grant it in the ledger: fga:grant submitter <sub> <org>"
)

VAR_TOKEN = "u/admin/waggle_token"
VAR_API_URL = "u/admin/waggle_api_url"
VAR_ENDPOINTS = "u/admin/browserhive_endpoints"
VAR_TLS_CA = "u/admin/browserhive_tls_ca"
VAR_TS_COMPILE = "u/admin/ts_compile_url"
VAR_ALLOW_PRIVATE = "u/admin/waggle_allow_private_hosts"


class VariableError(RuntimeError):
    """A Windmill variable is missing, unreadable or malformed; the message names it."""


def read_variable(path: str, getter: Callable[[str], str] | None = None) -> str:
    """Value of Windmill variable ``path`` (``wmill.get_variable``).

    Raises :class:`VariableError` naming the path when the variable is missing or the
    Windmill API does not answer — a missing variable fails the step, never defaults.
    """
    if getter is None:
        import wmill

        getter = wmill.get_variable
    try:
        value = getter(path)
    except Exception as exc:  # wmill raises a bare Exception("<url>: 404, <body>")
        raise VariableError(f"Windmill variable {path} could not be read: {exc}") from exc
    if value is None:
        raise VariableError(f"Windmill variable {path} has no value")
    return str(value)


@contextlib.contextmanager
def _windmill_client_silenced() -> Iterator[None]:
    """Mute the ``windmill_client`` logger (wmill logs every 404 at ERROR before raising)."""
    logger = logging.getLogger("windmill_client")
    was = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = was


def read_optional_variable(path: str, getter: Callable[[str], str] | None = None) -> str | None:
    """Like :func:`read_variable` but ``None`` when the variable does not exist (404).

    An absent optional variable is expected on every level, so nothing is logged for it
    (issue 17 item 5): wmill's own ERROR line for the 404 is muted; other failures still raise.
    """
    try:
        with _windmill_client_silenced():
            return read_variable(path, getter)
    except VariableError as exc:
        if ": 404," in str(exc) or "has no value" in str(exc):
            return None
        raise


def iso_now(now: float | None = None) -> str:
    """ISO 8601 UTC with milliseconds and ``Z`` (JavaScript ``toISOString``), from epoch seconds."""
    moment = datetime.fromtimestamp(time.time() if now is None else now, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_iso(text: object) -> float | None:
    """Epoch seconds of an ISO 8601 string (``Z`` or offset), or ``None`` when it does not parse."""
    if not isinstance(text, str) or not text.strip():
        return None
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def excerpt(text: str | None, limit: int) -> str:
    """First ``limit`` characters of ``text`` ("" for None)."""
    return (text or "")[:limit]


def body_text(response: httpx.Response) -> str:
    """The response body as text; never raises (undecodable bytes are replaced)."""
    try:
        return response.text
    except Exception:  # noqa: BLE001 - a broken body must not hide the status
        return response.content.decode("utf-8", "replace")


def one_line(text: str) -> str:
    """``text`` with line breaks folded to spaces (reasons are stored on one line)."""
    return " ".join(str(text).split())


def http_client(url: str, timeout_s: float) -> httpx.Client:
    """An httpx client for calls to ``url``: TLS verification with the system roots for
    ``https://`` (redirects are not followed), no CA bundle loaded for plain ``http://``."""
    return httpx.Client(timeout=timeout_s, verify=url.lower().startswith("https://"))


def call_with_retry(
    send: Callable[[], httpx.Response],
    *,
    what: str,
    budget_s: float = LEDGER_RETRY_BUDGET_S,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    log: Callable[[str], None] = print,
) -> httpx.Response:
    """Call ``send()`` until it answers below 500, retrying connection failures and 5xx.

    Back-off doubles from 0.5 s up to 10 s with ±20 % jitter, for at most ``budget_s``
    seconds in total. Returns the last response (possibly a 5xx once the budget is spent);
    re-raises the last :class:`httpx.TransportError` when no answer came at all.
    """
    deadline = clock() + max(0.0, budget_s)
    wait = LEDGER_BACKOFF_FIRST_S
    attempt = 0
    while True:
        attempt += 1
        try:
            response = send()
        except httpx.TransportError as exc:
            if clock() + wait > deadline:
                raise
            log(f"{what}: no answer ({type(exc).__name__}: {exc}); retry {attempt} in {wait:.1f}s")
        else:
            if response.status_code < 500 or clock() + wait > deadline:
                return response
            log(f"{what}: {response.status_code}; retry {attempt} in {wait:.1f}s")
        sleep(wait * random.uniform(0.8, 1.2))
        wait = min(wait * 2, LEDGER_BACKOFF_MAX_S)


def ledger_failure(what: str, response: httpx.Response, limit: int = 300) -> str:
    """``"{what} → {status} {body excerpt}{hint}"`` with the 401 (issuer) / 404 (grant) hints."""
    text = body_text(response)
    hint = ""
    if response.status_code == 401:
        hint = HINT_401
    elif response.status_code == 404:
        hint = HINT_404
    return f"{what} → {response.status_code} {excerpt(text, limit)}{hint}"


def json_or_text(response: httpx.Response) -> object:
    """The body parsed as JSON when possible, else the text."""
    text = body_text(response)
    try:
        return json.loads(text)
    except ValueError:
        return text
