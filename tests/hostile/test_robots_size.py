"""Hostile robots.txt files: 5 MB and 20,000 repeated User-agent lines parse within 200 ms.

The bound (issue #7) is on the flow's whole robots path for a fetched body: the 512 KiB cap
(``decode_robots``), protego parsing and group choice (``RobotsRules``), and one match.
CPU time of this thread (``time.thread_time``), best of three, so other processes on a busy
machine do not count; the fetch itself runs against a loopback server and is checked for
the cap (it must not read the whole 5 MB).
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler

import pytest

from f.waggle import robots
from ledger.hostguard import guarded_transport
from tests.fixtures.loopback import LoopbackSite

BOUND_S = 0.200
FIVE_MB = 5 * 1024 * 1024


def _five_mb_of_rules() -> bytes:
    out, i, size = ["User-agent: *\n"], 0, 14
    while size < FIVE_MB:
        line = f"Disallow: /archive/{i}/*.pdf$\nAllow: /archive/{i}/index.html\n"
        out.append(line)
        size += len(line)
        i += 1
    return "".join(out).encode()


BODIES = {
    "5MB-rules": _five_mb_of_rules(),
    "5MB-one-line": b"Disallow: /" + b"a" * FIVE_MB + b"\n",
    "5MB-comments": b"# filler comment line\n" * (FIVE_MB // 22),
    "20k-same-user-agent": b"User-agent: otherbot\n" * 20_000 + b"Disallow: /private/\n",
    "20k-distinct-user-agents": b"".join(b"User-agent: bot%d\n" % i for i in range(20_000)) + b"Disallow: /\n",
    # our group first: 20,000 groups are ~760 KB, past the 512 KiB cap
    "20k-user-agent-groups": b"User-agent: *\nDisallow: /private/\n"
    + b"".join(b"User-agent: bot%d\nDisallow: /p%d/\n" % (i, i) for i in range(20_000)),
}


def _parse_cpu_s(body: bytes) -> tuple[float, robots.RobotsRules]:
    best, rules = float("inf"), None
    for _ in range(3):
        started = time.thread_time()
        capped = body[: robots.ROBOTS_MAX_BYTES]
        rules = robots.RobotsRules(robots.decode_robots(capped, len(body) > len(capped)))
        rules.allowed("https://example.org/private/x")
        best = min(best, time.thread_time() - started)
    return best, rules


@pytest.mark.parametrize("name", list(BODIES))
def test_hostile_robots_parse_within_200_ms(name):
    elapsed, rules = _parse_cpu_s(BODIES[name])
    assert elapsed < BOUND_S, f"{name}: parsing took {elapsed * 1000:.0f} ms CPU (bound {BOUND_S * 1000:.0f} ms)"
    if name == "5MB-rules":
        # ~16,000 distinct rules survive the 512 KiB cap: over MAX_RULES, so nothing is guessed
        assert rules.too_large and rules.rule_count > robots.MAX_RULES
        assert rules.allowed("https://example.org/elsewhere") is False
    if name == "20k-user-agent-groups":
        assert rules.allowed("https://example.org/private/x") is False  # the * group still applies
        assert rules.allowed("https://example.org/p5/") is True  # bot5's rule is not ours


def test_the_fetch_reads_only_the_cap_of_an_endless_robots_txt():
    """A body that never ends (HTTP/1.0, no length): the fetch stops at 512 KiB and parses."""
    chunk = _five_mb_of_rules()[:65536]
    stop = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            try:
                while not stop.is_set():
                    self.wfile.write(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, *a):
            pass

    with LoopbackSite(Handler) as served:
        try:
            started = time.monotonic()
            outcome = robots.fetch_robots(f"{served.url}/robots.txt", transport=guarded_transport(allow_private=True),
                                          log=lambda m: None)
            elapsed = time.monotonic() - started
        finally:
            stop.set()
    assert outcome.state == robots.ALLOWED, outcome.detail
    assert outcome.allowed("https://example.org/archive/3/x.pdf") is False
    assert outcome.allowed("https://example.org/archive/3/index.html") is True
    assert elapsed < robots.ROBOTS_TIMEOUT_S  # it stopped reading; it did not wait for the end
