# /// script
# requires-python = ">=3.11"
# dependencies = ["httpx==0.28.1", "wmill==1.850.0", "protego==0.7.0", "google-re2==1.1.20251105"]
# ///
"""The capture servers a host's job talks to: one endpoint per BrowserHive-contract server, the
shared HTTP client, and submitting one capture to the first endpoint that takes it.

Split out of f/waggle/crawl_host.py (issue 30 item 5), no change of behaviour.
"""

from __future__ import annotations

import json
import random
import ssl
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from f.waggle import pipeline
from f.waggle.common import VAR_ENDPOINTS, VAR_TLS_CA
from f.waggle.host_gap import clock
from f.waggle.capture_request import extension_members


CAPTURE_DEADLINE_S = 145.0  # 130 s task budget + 10 s manifest write + 5 s slack


class ServerUnavailable(RuntimeError):
    """Every BrowserHive endpoint was unreachable for one page: the level fails."""


class CaptureDeadline(TimeoutError):
    """A capture call passed its deadline; the page fails, the endpoint is not marked down."""


class ConnectionLost(CaptureDeadline):
    """The connection broke after the submission went out (a crashed or restarted capture
    server, a dropped proxy): treated like a deadline (the capture may still be running, so the
    page is not retried), but named for what happened."""


class EndpointUnreachable(ConnectionError):
    """An endpoint refused the connection, did not resolve, or failed TLS."""


@dataclass
class Answer:
    """One HTTP answer of ``POST /captures``: status, ``x-amzn-errortype`` (or None), body (JSON or text)."""

    status: int
    error_type: str | None
    body: Any


class Endpoint(Protocol):
    target: str

    def capture(self, request: dict) -> Answer: ...


class HttpEndpoint:
    """A BrowserHive endpoint spoken to over HTTP (``POST {target}/captures``).

    ``capture`` returns an :class:`Answer` for any HTTP status, raises
    :class:`CaptureDeadline` once ``deadline_s`` has passed after the request was sent,
    and :class:`EndpointUnreachable` when no connection could be made.
    """

    def __init__(self, target: str, client: httpx.Client, deadline_s: float = CAPTURE_DEADLINE_S,
                 extensions: frozenset[str] = frozenset(), revisit: dict | None = None) -> None:
        self.target = target
        self._client = client
        self._deadline_s = deadline_s
        self.extensions = extensions  # what GET /status advertised (f.waggle.pipeline); none = plain v12
        self.revisit = revisit  # the ledger's digest lookup (:func:`revisit_member`), sent where advertised

    def seal(self, key: str, timeout_ms: int) -> tuple[dict, float] | None:
        """Extension ``sealWait``: one long-poll (:func:`f.waggle.pipeline.poll_seal`)."""
        return pipeline.poll_seal(self._client, self.target, key, timeout_ms, clock)

    def capture(self, request: dict, headers: dict | None = None) -> Answer:
        started = time.monotonic()
        timeout = httpx.Timeout(self._deadline_s, connect=min(10.0, self._deadline_s))
        try:
            with self._client.stream(
                "POST",
                f"{self.target}/captures",
                content=json.dumps(extension_members(request, self.extensions, self.revisit)).encode(),
                headers={"content-type": "application/json", **(headers or {})},
                timeout=timeout,
            ) as response:
                chunks = []
                for chunk in response.iter_bytes():
                    chunks.append(chunk)
                    if time.monotonic() - started > self._deadline_s:
                        raise CaptureDeadline(f"deadline {int(self._deadline_s * 1000)}ms passed")
                text = b"".join(chunks).decode("utf-8", "replace")
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol, ssl.SSLError) as exc:
            raise EndpointUnreachable(f"{self.target}: {type(exc).__name__}: {exc}") from exc
        except httpx.TimeoutException as exc:
            raise CaptureDeadline(f"deadline {int(self._deadline_s * 1000)}ms passed") from exc
        except httpx.TransportError as exc:
            # The connection broke after the request went out: like a deadline, the
            # submission may have reached BrowserHive, so do not move to another endpoint.
            raise ConnectionLost(f"connection lost before the answer ({type(exc).__name__}: {exc})") from exc
        try:
            body: Any = json.loads(text)
        except ValueError:
            body = text
        return Answer(response.status_code, response.headers.get("x-amzn-errortype"), body)


def parse_endpoints(raw: str) -> list[str]:
    """The endpoint variable's JSON array → trimmed ``http(s)://`` URLs without trailing ``/``.

    Raises ValueError naming the variable: not JSON; not a non-empty array of non-blank
    strings; an element without ``http://``/``https://`` (the old gRPC ``host:port`` form).
    """
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"{VAR_ENDPOINTS} is not JSON: {raw[:80]}") from exc
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValueError(f"{VAR_ENDPOINTS} must be a non-empty array of strings: {raw[:80]}")
    targets = [v.strip().rstrip("/") for v in value]
    bad = [t for t in targets if not (t.startswith("http://") or t.startswith("https://"))]
    if bad:
        raise ValueError(
            f"{VAR_ENDPOINTS}: every endpoint must be an http(s):// URL"
            f" (the old host:port form is gone), got {bad[0][:80]}"
        )
    return targets


def build_client(targets: Sequence[str], ca_pem: str) -> httpx.Client:
    """An httpx client for the endpoints: https verified against ``ca_pem`` only (never system roots).

    Raises ValueError when an ``https://`` endpoint is configured but the CA is empty.
    """
    if any(t.startswith("https://") for t in targets):
        if not ca_pem.strip():
            raise ValueError(
                f"{VAR_TLS_CA} is empty but {VAR_ENDPOINTS} has https:// endpoints;"
                " set the CA PEM (system roots are never used)"
            )
        context = ssl.create_default_context(cadata=ca_pem)  # cadata given → no default roots
        return httpx.Client(verify=context)
    return httpx.Client(verify=False)  # plaintext endpoints only: no CA bundle to load


def describe_refusal(answer: Answer) -> str:
    """``"{status}[ {errorType}][: {message}]"`` for a non-200 answer."""
    text = f"{answer.status}"
    if answer.error_type:
        text += f" {answer.error_type}"
    message = None
    if isinstance(answer.body, dict) and isinstance(answer.body.get("message"), str):
        message = answer.body["message"]
    elif isinstance(answer.body, str) and answer.body:
        message = answer.body[:200]
    if message:
        text += f": {message}"
    return text


def capture_on_any(
    endpoints: Sequence[Endpoint],
    request: dict,
    index: int,
    *,
    sleep: Callable[[float], None],
    busy_jitter_ms: tuple[float, float],
    log: Callable[[str], None],
    sent: list[float] | None = None,
    now: Callable[[], float] = clock,
    down: set[str] | None = None,
) -> Answer:
    """Submit ``request`` to a free endpoint, starting at ``index mod n`` (see module doc).

    ``sent`` (optional) receives ``now()`` (epoch s) just before each call, so its last
    element is when the answered (or deadline-hit) submission went out, after any busy rounds.
    ``down`` (optional): the targets found unreachable earlier in this host's level; they are
    not tried, and an endpoint found unreachable now is added (the caller keeps the set for the
    rest of the level). Without it the marks last this page only.
    """
    n = len(endpoints)
    start = index % n
    down = set() if down is None else down
    rounds = 0
    while True:
        for k in range(n):
            j = (start + k) % n
            endpoint = endpoints[j]
            if endpoint.target in down:
                continue
            if sent is not None:
                sent.append(now())
            try:
                answer = endpoint.capture(request)
            except TimeoutError:
                raise
            except Exception as exc:  # noqa: BLE001 - any other failure means "not reachable"
                log(f"{endpoint.target} unreachable, not tried again in this host's level ({exc})")
                down.add(endpoint.target)
                continue
            if answer.status == 429:
                continue
            return answer
        if all(e.target in down for e in endpoints):
            raise ServerUnavailable("BrowserHive unreachable: " + ", ".join(e.target for e in endpoints))
        rounds += 1
        if rounds == 1:  # once per page: waiting hosts are normal when hosts outnumber browsers
            lo, hi = busy_jitter_ms
            log(f"all endpoints busy; going round again every {lo / 1000:g}–{hi / 1000:g} s until one is free")
        sleep(random.uniform(*busy_jitter_ms) / 1000.0)
