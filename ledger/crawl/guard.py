"""The ledger's call site of the private-host guard (``ledger.hostguard``, issue #7).

Seeds and discovered links are checked unless ``WAGGLE_ALLOW_PRIVATE_HOSTS=1``. Until the
guard module exists every URL passes.
"""

from __future__ import annotations

import importlib.util


def refusal(url: str, allow_private: bool) -> str | None:
    """Why ``url`` must not be crawled (the guard's reason), or None when it may be."""
    if allow_private or importlib.util.find_spec("ledger.hostguard") is None:
        return None
    from ledger.hostguard import HostRefused, check_url

    try:
        check_url(url)
    except HostRefused as exc:
        return str(getattr(exc, "reason", None) or exc)
    return None
