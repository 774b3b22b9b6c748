"""A crawl whose only seed host cannot be reached, through the whole local stack
(ledger.crawl.outcome): plan_level's robots.txt fetch is refused (a loopback port nobody listens
on), every page is skipped ``robots-unreachable``, and the crawl ends ``failed`` with the reason
— not ``succeeded`` with nothing captured."""

from __future__ import annotations

import socket

import pytest

from ledger.crawl.outcome import NO_HOST_REACHED
from tests.e2e.test_felt_gaps import crawl

pytestmark = pytest.mark.e2e


def test_a_crawl_that_reaches_no_seed_host_fails_with_the_reason(local_stack):
    with socket.socket() as holder:  # keeps the port taken (and closed) for the crawl's life
        holder.bind(("127.0.0.1", 0))
        host = f"127.0.0.1:{holder.getsockname()[1]}"
        crawl_id, view = crawl(local_stack, f"http://{host}/")
    assert (view["state"], view["stopReason"], view["pagesCaptured"]) == ("failed", "failed", 0), view
    assert view["error"].startswith(f"{NO_HOST_REACHED}: robots.txt of {host} could not be fetched"), view
