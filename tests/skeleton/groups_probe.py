"""Run only by tests/skeleton/test_xdist_groups.py (the name keeps it out of the suite): six tests
of one module (xdist's verbose lines name the worker each ran on)."""

import pytest


@pytest.mark.parametrize("n", range(6))
def test_probe(n):
    assert n in range(6)
