# /// script
# requires-python = ">=3.11"
# dependencies = []
# ///
"""waggle's product token and user agent: one source for robots.txt fetches and page captures.

One module, two byte-identical copies: ``ledger/useragent.py`` (canonical; edit this one) and
``f/waggle/useragent.py`` (Windmill scripts may import only workspace scripts), written by
``scripts/sync-flow-copies``. robots.txt is fetched with :data:`USER_AGENT` (f/waggle/robots.py);
the capture server appends :func:`suffix` to Chromium's own user agent (waggle_capture), so a
site sees the same ``waggle/<version>`` token on both.
"""

from __future__ import annotations

PRODUCT_TOKEN = "waggle"  # what robots.txt groups name (RFC 9309 §2.2.1: letters, "_" and "-" only)
VERSION = "0.1.0"  # the package's version (pyproject.toml; a test keeps the two equal)
# A page for site operators (who crawls, why, how to opt out). A placeholder until the project
# has a public page: a deployment sets its own (capture server --user-agent-suffix).
INFO_URL = "https://waggle.example/crawler"


def product(version: str = VERSION) -> str:
    """``waggle/<version>``: the product token and its version (RFC 9110 §10.1.5)."""
    return f"{PRODUCT_TOKEN}/{version}"


def suffix(info_url: str = INFO_URL, version: str = VERSION) -> str:
    """``waggle/<version> (+<info_url>)``: what waggle appends to a browser's user agent (the
    ``+URL`` comment of Heritrix and Browsertrix user agents)."""
    return f"{product(version)} (+{info_url})"


USER_AGENT = suffix()  # robots.txt fetches: the suffix alone
