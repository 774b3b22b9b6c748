"""A main document's same-host redirect chain is ended after :data:`MAX_SAME_HOST_HOPS` hops,
and a redirect to a URL with credentials is not followed.

Chromium follows a redirect chain inside one navigation, up to 20 hops, with no gap between
them: a redirect loop sends the site 21 requests in a burst before ``net::ERR_TOO_MANY_REDIRECTS``.
Neither the proxy (HTTPS hops travel inside one CONNECT tunnel) nor Playwright's routing (it does
not intercept redirected requests) can hold a hop, so the capture server watches the requests
and, when the main frame's chain takes one hop more than :data:`MAX_SAME_HOST_HOPS` to the host
it came from, stops the page's loading (CDP ``Page.stopLoading``). The capture then fails
with the very message Chromium gives a loop (``Page.goto: net::ERR_TOO_MANY_REDIRECTS at <url>``,
what a real BrowserHive v12 answers after 20 hops): a few requests instead of 21, the same
answer. Five is RFC 2068's old advice for a client's redirect limit (RFC 9110 §15.4 leaves the
number to the client); hops to other hosts (sign-in chains) are left to Chromium's limit, since
each host feels only its own. docs/internals.md "Redirect loops" (round 22).

A redirect of the main document to ``http://user:pw@host/…`` (the site's choice) is stopped the
same way, and the capture fails as the ledger refuses such a seed: ``url is not allowed: the page
redirected to a URL with credentials (<the URL without them>) …`` (the flow classes it ``policy``:
no retry). Chromium would report and the WACZ would record the URL with the password; the
message never holds it. If the page committed before the stop landed, the check after the
navigation fails the capture all the same, before anything is written.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

from playwright.async_api import Request

MAX_SAME_HOST_HOPS = 5


def same_host_hops(request: Request) -> int:
    """How many hops of ``request``'s redirect chain went to the host they came from."""
    hops, current = 0, request
    while (previous := current.redirected_from) is not None:
        hops += urlsplit(previous.url).hostname == urlsplit(current.url).hostname
        current = previous
    return hops


class RedirectLoopGuard:
    """Calls ``stop()`` once, when a main-frame navigation's same-host chain exceeds ``limit``
    (:attr:`ended_at`: the URL of the hop that did) or a hop goes to a URL with userinfo
    (:attr:`credentials`: that URL without it); both None until then."""

    def __init__(self, stop: Callable[[], object], limit: int = MAX_SAME_HOST_HOPS):
        self.stop, self.limit = stop, limit
        self.ended_at: str | None = None
        self.credentials: str | None = None

    def on_request(self, request: Request) -> None:
        if self.ended_at or self.credentials or request.redirected_from is None or not _main_navigation(request):
            return
        if has_userinfo(request.url):
            self.credentials = without_userinfo(request.url)
        elif same_host_hops(request) > self.limit:
            self.ended_at = request.url
        else:
            return
        self.stop()


def has_userinfo(url: str) -> bool:
    """Whether ``url`` carries ``user[:password]@``."""
    parts = urlsplit(url)
    return parts.username is not None or parts.password is not None


def without_userinfo(url: str) -> str:
    """``url`` without its ``user[:password]@``."""
    parts = urlsplit(url)
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


def credentials_refused(url: str) -> str:
    """The capture's failure message for a redirect to ``url`` (already without userinfo)."""
    return (f"url is not allowed: the page redirected to a URL with credentials ({url}, user:password@ removed);"
            " credentials in a URL are not crawled or archived")


def _main_navigation(request: Request) -> bool:
    try:
        return request.is_navigation_request() and request.frame.parent_frame is None
    except Exception:  # a service worker's request has no frame
        return False
