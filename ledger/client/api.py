"""A small synchronous client of the ledger's HTTP API (reference/ledger.md §6, issue 2/3 routes).

Every non-success answer becomes :class:`ApiError` whose ``str()`` says what happened and what
to do; a 409 on submit becomes :class:`CrawlInProgress` carrying the running crawl's id.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from ledger.client.config import ClientConfig

DEFAULT_TIMEOUT_S = 15.0
REASON_MAX_CHARS = 2000  # of a failed crawl's reason (ledger.api.crawls.REASON_MAX_CHARS)


class ApiError(RuntimeError):
    """The API answered with an error (``status``; 0 = no answer at all); ``str()`` is for people."""

    def __init__(self, status: int, message: str, body: object = None):
        self.status = status
        self.body = body  # the parsed JSON error body, when there was one
        super().__init__(message)


class CrawlInProgress(ApiError):
    """``POST /api/crawls`` → 409: another crawl is running (``crawl_id``, ``started_at`` when given)."""

    def __init__(self, crawl_id: str | None, started_at: str | None):
        self.crawl_id = crawl_id
        self.started_at = started_at
        which = f"crawl {crawl_id}" if crawl_id else "another crawl"
        since = f" (started {started_at})" if started_at else ""
        ref = crawl_id or "ID"
        super().__init__(
            409,
            f"{which} is already running{since}; only one crawl runs at a time. "
            f"Follow it with `waggle crawls {ref} --follow`, or fail it with `waggle crawls {ref} --fail`.",
        )


def _json_or_none(resp: httpx.Response) -> object:
    try:
        return resp.json()
    except ValueError:
        return None


def _error_text(resp: httpx.Response, body: object) -> str:
    if isinstance(body, dict):
        for key in ("error", "message", "detail"):
            if body.get(key):
                return str(body[key])
    if body is not None:
        return str(body)[:300]
    return resp.text[:300] or resp.reason_phrase


class LedgerClient:
    """The ledger API at ``config.api_url`` with ``config.token`` as Bearer (context manager)."""

    def __init__(self, config: ClientConfig, timeout_s: float = DEFAULT_TIMEOUT_S):
        headers = {"Authorization": f"Bearer {config.token}"} if config.token else {}
        self.config = config
        self._http = httpx.Client(base_url=config.api_url, headers=headers, timeout=timeout_s)

    def __enter__(self) -> LedgerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # -- plumbing -------------------------------------------------------------
    def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            resp = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ApiError(
                0,
                f"the ledger API at {self.config.api_url} does not answer ({exc.__class__.__name__}: {exc}); "
                "is it running? (`waggle dev status`, or check WAGGLE_API_URL)",
            ) from exc
        if resp.status_code // 100 == 2:
            return resp
        body = _json_or_none(resp)
        text = _error_text(resp, body)
        status = resp.status_code
        if status == 401:
            message = (
                f"the ledger refused the token ({method} {path} → 401). Get a fresh one: unset WAGGLE_TOKEN "
                "to mint one from the local stack, or set a valid WAGGLE_TOKEN."
            )
        elif status == 404 and (text in ("Not Found", "Not found") or "route" in text.lower()):
            # FastAPI's own 404 for an unmounted route, not the ledger's {"error":"not found"}
            message = f"the ledger does not serve {method} {path} (crawl routes need WAGGLE_CRAWL_WEBHOOK_URL and _TOKEN)"
        elif status == 404 and isinstance(body, dict) and body.get("error") not in (None, "not found"):
            message = str(body["error"])  # a 404 with the ledger's reason (e.g. no such grant): say it
        elif status == 404:
            message = f"not found: {method} {path} — no such item, or this identity may not see it"
        elif status >= 500:
            message = f"the ledger failed: {method} {path} → {status} {text}"
        else:
            message = f"{method} {path} → {status}: {text}"
        raise ApiError(status, message, body)

    # -- routes -----------------------------------------------------------------
    def me(self) -> dict:
        """``GET /api/me`` → ``{subject, organizations, canSubmit}``."""
        return self._call("GET", "/api/me").json()

    def submit_crawl(self, body: dict) -> str:
        """``POST /api/crawls`` (body: ledger.md §6.7) → the new crawl id; raises CrawlInProgress on 409."""
        try:
            resp = self._call("POST", "/api/crawls", json=body)
        except ApiError as exc:
            if exc.status == 409:
                data = exc.body if isinstance(exc.body, dict) else {}
                raise CrawlInProgress(data.get("crawlId"), data.get("startedAt")) from None
            if exc.status == 404 and isinstance(exc.body, dict) and exc.body.get("error") == "not found":
                raise self._not_a_submitter() from None
            raise
        return resp.json()["crawlId"]

    def _not_a_submitter(self) -> ApiError:
        """A 404 on submit is a permission denial (ledger.md §5): say who is refused and the grant."""
        try:
            me = self.me()
        except ApiError:
            me = {}
        subject = me.get("subject") or "this token's subject"
        orgs = me.get("organizations") or []
        if not orgs:
            return ApiError(404, f"{subject} may not start crawls: the token carries no organizations")
        return ApiError(
            404,
            f"{subject} may not start crawls for {', '.join(orgs)}. An admin grants it with "
            f"`waggle grant submitter {subject} {orgs[0]}`.",
        )

    def get_crawl(self, crawl_id: str) -> dict:
        """``GET /api/crawls/{id}`` → the crawl status (ledger.md §6.8 plus issue 2's counters)."""
        return self._call("GET", f"/api/crawls/{crawl_id}").json()

    def iter_pages(self, crawl_id: str, state: str | None = None, limit: int = 500,
                   max_calls: int = 200) -> Iterator[dict]:
        """``GET /api/crawls/{id}/pages`` rows, oldest first, following ``nextCursor`` (at most
        ``max_calls`` calls of ``limit`` rows)."""
        cursor = None
        for _ in range(max_calls):
            params: dict = {"limit": limit}
            if state:
                params["state"] = state
            if cursor:
                params["cursor"] = cursor
            body = self._call("GET", f"/api/crawls/{crawl_id}/pages", params=params).json()
            yield from body.get("pages", [])
            cursor = body.get("nextCursor")
            if not cursor:
                return

    def list_crawls(self, id_prefix: str | None = None) -> list[dict]:
        """``GET /api/crawls`` → recent crawls, newest first; with ``id_prefix`` (4+ hex digits or
        dashes) the crawls you may see whose id starts with it, however old (up to 100)."""
        params = {"idPrefix": id_prefix, "limit": 100} if id_prefix else None
        body = self._call("GET", "/api/crawls", params=params).json()
        return body.get("crawls", []) if isinstance(body, dict) else body

    def fail_crawl(self, crawl_id: str, reason: str) -> bool:
        """``POST /api/crawls/{id}/failed {reason}`` → True when this call closed it; a reason over
        :data:`REASON_MAX_CHARS` is the ledger's 400 (ApiError), never cut."""
        return bool(self._call("POST", f"/api/crawls/{crawl_id}/failed", json={"reason": reason}).json().get("closed"))

    def control_crawl(self, crawl_id: str, action: str) -> dict:
        """``POST /api/crawls/{id}/stop|pause|resume`` → the ledger's answer ``{state, …}``; a
        crawl in the wrong state is the ledger's 409 (ApiError, with its reason)."""
        if action not in ("stop", "pause", "resume"):
            raise ValueError(f"unknown crawl action {action!r}")
        return self._call("POST", f"/api/crawls/{crawl_id}/{action}").json()

    def archives_page(self, before: str | None = None, crawl: str | None = None) -> dict:
        """``GET /api/archives[?before=][&crawl=]`` → the raw page body ``{"archives": [...], ...}``."""
        params = {k: v for k, v in (("before", before), ("crawl", crawl)) if v}
        return self._call("GET", "/api/archives", params=params or None).json()

    def iter_archives(self, since: str | None = None, max_pages: int = 200,
                      crawl: str | None = None) -> Iterator[dict]:
        """Archives newest first, following the ledger's ``nextBefore`` cursor until it is null
        (an older ledger without it: the last row's ``capturedAt``, up to an empty page — pages
        are filtered by permission after paging, ledger.md §6.5).

        Stops at the first row captured before ``since`` (ISO 8601), or after ``max_pages``
        pages of 50. ``crawl``: only that crawl's archives.
        """
        from ledger.client.render import parse_time

        floor = parse_time(since)
        before = None
        for _ in range(max_pages):
            body = self.archives_page(before, crawl)
            rows = body.get("archives", [])
            for row in rows:
                captured = parse_time(row.get("capturedAt"))
                if floor is not None and captured is not None and captured < floor:
                    return
                yield row
            cursor = body["nextBefore"] if "nextBefore" in body else (rows[-1].get("capturedAt") if rows else None)
            if not cursor or cursor == before:
                return
            before = cursor

    def search(self, q: str, *, crawl: str | None = None, host: str | None = None, captured_from: str | None = None,
               captured_to: str | None = None, page: int = 1, size: int = 10) -> dict:
        """``GET /api/search`` → ``{hits, page, size, more, checked, incomplete}`` (ledger.api.search);
        a query the ledger cannot run is its 400 (ApiError) saying why."""
        params = {"q": q, "crawl": crawl, "host": host, "from": captured_from, "to": captured_to,
                  "page": str(page), "size": str(size)}
        return self._call("GET", "/api/search", params={k: v for k, v in params.items() if v}).json()

    def collection(self, crawl_id: str) -> dict:
        """``GET /api/crawls/{id}/collection`` → the crawl's viewable archives as one multi-WACZ
        collection (each member's ``path`` a ledger path that redirects to a freshly signed S3 URL
        — :func:`download` with ``via``; the missing pages with why; ledger.crawl.collection)."""
        return self._call("GET", f"/api/crawls/{crawl_id}/collection").json()

    def changes(self, crawl_id: str, since: str | None = None) -> dict:
        """``GET /api/crawls/{id}/changes[?since=]`` → pages new, changed, unchanged and gone
        since ``since`` (default: the previous crawl of its workflow or seeds; ledger.crawl.changes)."""
        return self._call("GET", f"/api/crawls/{crawl_id}/changes", params={"since": since} if since else {}).json()

    def crawl_download(self, crawl_id: str, wait_s: float = 600.0, poll_s: float = 1.0) -> dict:
        """``POST /api/crawls/{id}/download`` until the combined WACZ is built (202 → ask again)
        → ``{"url", "expiresIn", "name", "bytes", "members", "missingCount"}``. Raises ApiError
        (408) when it is not built within ``wait_s``."""
        import time

        deadline = time.monotonic() + wait_s
        while True:
            resp = self._call("POST", f"/api/crawls/{crawl_id}/download")
            if resp.status_code != 202:
                return resp.json()
            if time.monotonic() > deadline:
                raise ApiError(408, f"the ledger is still building crawl {crawl_id}'s file after {wait_s:.0f} s;"
                                    " run the command again later (the build goes on)")
            time.sleep(min(poll_s, float(resp.json().get("retryAfterS") or poll_s)))

    def sign_url(self, archive_id: str) -> dict:
        """``POST /api/archives/{id}/url`` → ``{"url", "expiresIn"}`` (seconds)."""
        return self._call("POST", f"/api/archives/{archive_id}/url").json()


def download(url: str, dest: Path, timeout_s: float = 120.0, *, via: LedgerClient | None = None) -> int:
    """Stream ``url`` (a signed S3 URL; with ``via``, a ledger path such as a collection member's,
    asked with the client's token and followed to the signed URL it redirects to — httpx drops
    the token on a redirect to another origin) to ``dest``; returns the byte count; raises
    ApiError on non-200 or when ``dest`` cannot be written. An absolute ``url`` (an older ledger's
    member, already signed) is fetched without the token whatever ``via`` is: the token is the
    ledger's alone, and an object store refuses a request carrying two authorizations."""
    if via is not None and not url.startswith("/"):
        via = None
    part = dest.with_name(dest.name + ".part")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        opened = (via._http.stream("GET", url, timeout=timeout_s, follow_redirects=True) if via is not None
                  else httpx.stream("GET", url, timeout=timeout_s))
        with opened as resp:
            if resp.status_code != 200:
                raise ApiError(resp.status_code, f"download failed: GET {url.split('?')[0]} → {resp.status_code}")
            size = 0
            with part.open("wb") as fh:
                for chunk in resp.iter_bytes():
                    fh.write(chunk)
                    size += len(chunk)
    except httpx.HTTPError as exc:
        part.unlink(missing_ok=True)
        raise ApiError(0, f"download failed: {url.split('?')[0]}: {exc}") from exc
    except OSError as exc:  # the directory went away or filled up since --download was checked
        with contextlib.suppress(OSError):
            part.unlink(missing_ok=True)
        raise ApiError(0, f"cannot save {dest}: {exc.strerror or exc}") from None
    part.replace(dest)  # never leave a half file under the final name
    return size
