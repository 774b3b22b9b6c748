"""The user agent of every page request (navigation, subresources, workers): Chromium's own
with ``HeadlessChrome`` written ``Chrome`` (sites treat headless browsers specially) and the
server's ``user_agent_suffix`` appended, by default ``waggle/<version> (+<info URL>)`` — the
product token robots.txt is fetched with (ledger/useragent.py). docs/capture-server.md.
"""

from __future__ import annotations


def page_user_agent(browser_user_agent: str | None, suffix: str) -> str | None:
    """The context-level user agent for ``browser_user_agent`` (``Browser.getVersion``) and
    ``suffix`` (empty: none appended); None when the browser's is not known (Chromium's own then)."""
    if not browser_user_agent:
        return None
    ua = browser_user_agent.replace("HeadlessChrome/", "Chrome/")
    return f"{ua} {suffix}" if suffix.strip() else ua
