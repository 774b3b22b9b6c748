"""robots.txt read once per crawl per host, through the whole local stack (docs/internals.md
"robots.txt cache"): a depth-2 crawl of a logged loopback site requests robots.txt once, and
every gap the site feels — robots.txt included as a request like any other — is at least the
delay."""

from __future__ import annotations

import psycopg
import pytest

from tests.e2e.test_felt_gaps import DELAY_MS, Logged, LoggedSite, crawl

pytestmark = pytest.mark.e2e


class DeepSite(LoggedSite):
    """``/`` → ``/a``, ``/b``; ``/a`` → ``/c`` (depth 2); robots.txt allows all."""

    def page(self, path: str) -> tuple[int, str, bytes]:
        if path == "/c":
            path = "/b"  # same page body, another URL
        status, ctype, body = super().page(path)
        if path == "/a":
            body = body.replace(b"</body>", b'<a href="/c">c</a></body>')
        return status, ctype, body

    def visits(self) -> list[list[Logged]]:
        """The log split into robots.txt requests and captures (each from its document request)."""
        out: list[list[Logged]] = []
        for hit in sorted(self.log, key=lambda h: h.start):
            if hit.path == "/robots.txt" or hit.document or not out or out[-1][0].path == "/robots.txt":
                out.append([hit])
            else:
                out[-1].append(hit)
        return out


def test_depth_two_crawl_reads_robots_once_and_every_felt_gap_is_the_delay(local_stack):
    site = DeepSite()
    try:
        crawl_id, view = crawl(local_stack, f"{site.url}/", max_depth=2)
    finally:
        site.stop()
    assert (view["state"], view["pagesCaptured"]) == ("succeeded", 4), view
    visits = site.visits()
    assert [v[0].path for v in visits].count("/robots.txt") == 1, [v[0].path for v in visits]
    assert visits[0][0].path == "/robots.txt" and sorted(v[0].path for v in visits[1:]) == ["/", "/a", "/b", "/c"]
    felt = [nxt[0].start - max(h.end for h in prev) for prev, nxt in zip(visits, visits[1:])]
    print("felt gaps (ms), robots.txt first:", [round(f * 1000) for f in felt])
    assert all(f >= DELAY_MS / 1000 for f in felt), felt
    with psycopg.connect(local_stack.info["database_url"]) as conn:
        cached = conn.execute("SELECT state, depth FROM crawl_robots WHERE crawl_id = %s", (crawl_id,)).fetchall()
    assert cached == [("allowed", 0)]  # fetched by level 0, used by levels 1 and 2
