"""What ``WAGGLE_SEARCH_URL`` means (docs/decisions/162-search-postgres-fts.md).

* unset, empty or ``postgres`` — the embedded default: Postgres full-text search in the
  ledger's own database;
* ``off`` — no search on this deployment: ``/api/crawls/{id}/index`` and ``/api/search``
  answer 404 (the flow's ``index_level`` then reports ``skipped``);
* an ``http(s)://`` URL — an external backend (OpenSearch, on paper only): refused at start-up,
  so a deployment never believes it indexes while it does not.
"""

from __future__ import annotations


class UnsupportedSearchBackend(ValueError):
    """WAGGLE_SEARCH_URL names a backend this ledger does not have."""


def backend_of(value: str | None) -> str:
    """``"postgres"`` or ``"off"``; raises :class:`UnsupportedSearchBackend` otherwise."""
    v = (value or "").strip()
    if v in ("", "postgres"):
        return "postgres"
    if v.lower() == "off":
        return "off"
    raise UnsupportedSearchBackend(
        f"WAGGLE_SEARCH_URL={v[:100]!r}: only Postgres full-text search ('postgres' or unset) or 'off' exist;"
        " an external backend such as OpenSearch is described in docs/decisions/162-search-postgres-fts.md"
        " but not built")
