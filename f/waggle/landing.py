# /// script
# requires-python = ">=3.11"
# dependencies = ["protego==0.7.0", "google-re2==1.1.20251105"]
# ///
"""Where a capture landed, judged by the crawl's rules (decision 105; library script, no main).

The capture server that advertises ``navigationRules`` never requests a main-frame redirect hop
or script navigation that the host's robots.txt disallows or an exclude pattern matches. A real
BrowserHive v12 follows them all: the flow then refuses to report such a capture as the page —
``failed``/``permanent``, nothing of it admitted — but the forbidden URL **was** requested. Only
the page's own origin is judged by robots.txt (another host's file is not known here; the
ledger's scope and robots cache judge that host next level); exclude patterns are RE2-searched
in the URL without its fragment, as the ledger's scope searches its dedup key.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import re2

from f.waggle.robots import RobotsRules

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False


def _origin(url: str) -> tuple[str, str, int | None]:
    p = urlsplit(url)
    port = p.port or (443 if p.scheme == "https" else 80 if p.scheme == "http" else None)
    return p.scheme.lower(), (p.hostname or "").lower(), port


def landing_refusal(url: str, final_url: str | None, rules: dict | None) -> str | None:
    """The skip reason when capture ``url`` ended at ``final_url`` that ``rules``
    (``{"robotsTxt"?: normal form, "exclude"?: [RE2]}``, the request's ``navigationRules``)
    forbid, else None (no rules, no final URL, the same URL, or allowed). An unusable pattern
    is ignored here (the ledger refused it when the crawl was made)."""
    if not rules or not final_url or final_url == url:
        return None
    try:
        same_origin = _origin(final_url) == _origin(url)
    except ValueError:
        return None
    text = rules.get("robotsTxt")
    if isinstance(text, str) and text and same_origin and not RobotsRules(text).allowed(final_url):
        return f"redirected to a URL robots.txt disallows ({final_url}); the request was already made (capture server without navigationRules)"
    key = final_url.partition("#")[0]
    for pattern in rules.get("exclude") or []:
        try:
            if re2.compile(pattern, _OPTIONS).search(key):
                return (f"redirected to a URL the crawl excludes ({final_url}, pattern {pattern!r}); the request was"
                        " already made (capture server without navigationRules)")
        except (re2.error, TypeError, UnicodeEncodeError):
            continue
    return None
