"""Warm state of the step forkserver: TLS trust stores loaded before the fork.

Imported only in the forkserver (``set_forkserver_preload``), never in the runner itself.
Every Windmill step builds TLS contexts — ``wmill``'s client (httpx with ``verify=True``) and
any httpx client or transport of the step — and each one parses a whole CA bundle (~150–230 KB
PEM): 20–40 ms on a quiet machine, 200–400 ms on a busy one, several times per step.

This module builds a few such contexts once, in the forkserver, for each bundle httpx's
``verify=True`` loads (``httpx._config.create_ssl_context``: ``$SSL_CERT_FILE`` with
``trust_env``, else ``certifi.where()``), and makes ``ssl.create_default_context(cafile=<that
bundle>)`` hand out one of them while any are left, else build a new one as before.
Semantics are unchanged: every call still gets its own, untouched ``SSLContext`` built by the
real ``ssl.create_default_context`` with the same arguments from the same file (size and
mtime are checked); each step is a separate forked process, so its pool is a private copy
(per-job isolation, as on a Windmill worker). Any other argument, a changed bundle file, or
``SSLKEYLOGFILE`` in the step's environment takes the normal path.
"""

from __future__ import annotations

import os
import ssl

import certifi
import httpx

# Contexts per bundle. A crawl_level step builds at most 3: wmill's client, and plan_level's
# robots transport (f/waggle/hostguard.py) builds two — one with trust_env=False (certifi).
POOL_SIZE = 3

_real_create_default_context = ssl.create_default_context
_pools: dict[str, tuple[tuple[int, int], list[ssl.SSLContext]]] = {}  # cafile → (stamp, contexts)


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def _create_default_context(purpose: ssl.Purpose = ssl.Purpose.SERVER_AUTH, *, cafile=None, capath=None,
                            cadata=None) -> ssl.SSLContext:
    """``ssl.create_default_context`` that serves httpx's default bundles from the preloaded pools."""
    entry = _pools.get(cafile) if isinstance(cafile, str) else None
    if (entry and entry[1] and purpose == ssl.Purpose.SERVER_AUTH and capath is None and cadata is None
            and not os.environ.get("SSLKEYLOGFILE") and _stamp(cafile) == entry[0]):
        try:
            return entry[1].pop()
        except IndexError:  # another thread of the step took the last one
            pass
    return _real_create_default_context(purpose, cafile=cafile, capath=capath, cadata=cadata)


def bundles() -> list[str]:
    """The CA files httpx's ``verify=True`` loads in this environment (``trust_env`` on and off)."""
    found = [os.environ["SSL_CERT_FILE"]] if os.environ.get("SSL_CERT_FILE") else []
    return found + [p for p in [certifi.where()] if p not in found]


def preload(size: int = POOL_SIZE) -> None:
    """Build ``size`` default contexts per bundle and install the pooled ``ssl.create_default_context``."""
    if os.environ.get("SSLKEYLOGFILE"):  # the real function would set keylog_filename: stay exact
        return
    for path in bundles():
        stamp = _stamp(path)
        if stamp is not None:
            _pools[path] = (stamp, [_real_create_default_context(cafile=path) for _ in range(size)])
    ssl.create_default_context = _create_default_context


def pooled() -> dict[str, int]:
    """Preloaded contexts left in this process, per CA file."""
    return {path: len(contexts) for path, (_, contexts) in _pools.items()}


preload()
httpx.Client(verify=False).close()  # the first client imports httpcore's connection modules lazily
