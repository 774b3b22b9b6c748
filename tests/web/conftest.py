"""Fixtures of the web page tests: the archive ledger of tests/archive (four archives)."""

from __future__ import annotations

from tests.archive.conftest import archive_ledger  # noqa: F401  (session fixture, re-used)
