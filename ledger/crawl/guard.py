"""The ledger's call site of the private-host guard (``ledger.hostguard``, issue #7).

Seeds and discovered links are checked unless ``WAGGLE_ALLOW_PRIVATE_HOSTS=1`` (the opt-out
wins). The check is on the URL itself (scheme, names, literal address spellings; no DNS): the
flow and the capture server check resolved addresses again at fetch time.
"""

from __future__ import annotations

from ledger.hostguard import HostRefused, check_url


def refusal(url: str, allow_private: bool) -> str | None:
    """Why ``url`` must not be crawled (the guard's reason), or None when it may be."""
    if allow_private:
        return None
    try:
        check_url(url)
    except HostRefused as exc:
        return exc.reason
    return None
