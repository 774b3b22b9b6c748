"""crawl_host against two real capture servers (real Chromium, default settle) and a logged
loopback site (issue 11; BRIEF contracts 1–4): with the extensions negotiated from ``GET /status``
a host's captures overlap (the next one is submitted at the previous one's seal, before its
answer) and the site still never feels a gap below the delay; without them (a plain v12) or
when the seal wait fails, each capture waits for the previous answer as before."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from devstack.serving import start_module
from f.waggle import pipeline
from f.waggle.crawl_host import HttpEndpoint, capture_host
from tests.fixtures.logged_site import LoggedSite

DELAY_MS = 500
FORMATS = {"png": False, "webp": False, "html": False, "links": True, "mhtml": False, "wacz": True}
PAGES = ("/a", "/b", "/c")


@pytest.fixture(scope="module")
def servers(s3_server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """Two ``python -m waggle_capture`` processes with the server's default settle (started
    side by side: each start-up mostly waits for its Chromium)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(i: int):
        return start_module("waggle_capture", "--allow-private", "--s3-endpoint", s3_server.endpoint,
                            tmp_dir=tmp_path_factory.mktemp(f"capture-{i}"))

    with ThreadPoolExecutor(2) as pool:
        starts = [pool.submit(one, i) for i in range(2)]
    procs = [f.result() for f in starts if f.exception() is None]
    try:
        for f in starts:
            f.result()  # a failed start fails the fixture, after the other one is stopped below
        yield [url for _, url in procs]
    finally:
        for proc, _ in procs:
            proc.terminate()
        for proc, _ in procs:
            proc.wait(30)


class SealOnNothing(HttpEndpoint):
    """Advertises sealWait but its seal wait goes to a path the server does not have (404)."""

    def seal(self, key: str, timeout_ms: int):
        return pipeline.poll_seal(self._client, f"{self.target}/nowhere", key, timeout_ms, lambda: 0.0)


def crawl(endpoints) -> tuple[list[dict], list[float]]:
    site = LoggedSite(PAGES)
    try:
        urls = [f"{site.url}/"] + [f"{site.url}{p}" for p in PAGES]
        results = capture_host(endpoints, "h", urls, "c1", formats=FORMATS, signing=False, scripts=[],
                               delay_ms=DELAY_MS, log=lambda _m: None)
    finally:
        site.stop()
    assert [r["status"] for r in results] == ["captured"] * 4, results
    assert [r["url"] for r in results] == urls
    return results, site.felt_gaps()


def overlaps(results: list[dict]) -> int:
    return sum(b["submittedAt"] < a["finishedAt"] for a, b in zip(results, results[1:]))


def held(results: list[dict]) -> int:
    """Captures submitted before the previous one's page sealed (extension holdAfter)."""
    return sum(b["submittedAt"] < a["gapFrom"] for a, b in zip(results, results[1:]))


def test_the_servers_advertise_the_extensions(servers):
    with httpx.Client() as client:
        assert pipeline.read_extensions(client, servers[0]) >= {"sealWait", "startAfterMs", "sinceLastRequestMs"}
        assert pipeline.read_extensions(client, servers[0] + "/nowhere") == frozenset()  # 404: a plain v12


def test_negotiated_endpoints_pipeline_and_keep_the_delay(servers):
    with httpx.Client() as client:
        endpoints = [HttpEndpoint(t, client, extensions=pipeline.read_extensions(client, t)) for t in servers]
        results, felt = crawl(endpoints)
    print("felt gaps (ms):", [round(f * 1000) for f in felt])
    assert len(felt) == 3 and all(f >= DELAY_MS / 1000 for f in felt), felt
    assert overlaps(results) >= 1, results
    assert held(results) >= 1, results  # holdAfter: submitted while the previous page still loaded
    assert all(r["submittedAt"] <= r["gapFrom"] < r["finishedAt"] for r in results)
    # a 500 ms gap with sealBeforeFormats advertised: the seal came before the formats
    assert all(seal_first(t) for t in servers)


def seal_first(server: str) -> bool:
    """Whether the server's last capture sealed its page's network before taking the formats."""
    phases = list(httpx.get(f"{server}/status").json()["process"]["lastPhasesMs"])
    if not phases:  # no capture here yet: held captures stay on the server of the previous one
        return True
    return phases.index("seal") < phases.index("title-links")


def test_endpoints_without_hold_after_submit_at_the_seal(servers):
    """A server that does not advertise holdAfter (as before it): the next capture goes out at
    the previous seal (startAfterMs), never before it."""
    with httpx.Client() as client:
        endpoints = [HttpEndpoint(t, client, extensions=pipeline.read_extensions(client, t) - {"holdAfter"})
                     for t in servers]
        results, felt = crawl(endpoints)
    assert all(f >= DELAY_MS / 1000 for f in felt), felt
    assert overlaps(results) >= 1 and held(results) == 0, results


def test_plain_v12_endpoints_stay_sequential(servers):
    with httpx.Client() as client:
        results, felt = crawl([HttpEndpoint(t, client) for t in servers])
    assert all(f >= DELAY_MS / 1000 for f in felt), felt
    assert overlaps(results) == 0
    assert not any(seal_first(t) for t in servers)  # today's order: formats, then the seal


def test_a_failing_seal_wait_falls_back_to_the_answer(servers):
    with httpx.Client() as client:
        endpoints = [SealOnNothing(t, client, extensions=frozenset({"sealWait", "startAfterMs"})) for t in servers]
        results, felt = crawl(endpoints)
    assert all(f >= DELAY_MS / 1000 for f in felt), felt
    assert overlaps(results) == 0


def test_a_redirect_target_listed_next_is_not_captured_twice(servers, test_site):
    """``/start`` 302 → ``/page``, both listed, ``/page`` next: the held ``/page`` is ended by the
    server before it sends anything (the previous page landed there, 409 with ``finalUrl``), the
    seal answer's ``finalUrl`` makes the flow wait for ``/start``'s answer, and ``/page`` is
    recorded as its redirect target — fetched by the site once, by ``/start``'s capture."""
    import time

    from f.waggle.crawl_host import REDIRECT_DUPLICATE

    t0 = time.monotonic()
    urls = [test_site.url("/start"), test_site.url("/page"), test_site.url("/other")]
    logs: list[str] = []
    with httpx.Client() as client:
        endpoints = [HttpEndpoint(t, client, extensions=pipeline.read_extensions(client, t)) for t in servers]
        results = capture_host(endpoints, "h", urls, "c1", formats=FORMATS, signing=False, scripts=[],
                               delay_ms=DELAY_MS, log=logs.append)
    assert [r["status"] for r in results] == ["captured", "skipped", "captured"], (results, logs)
    assert results[1]["skipReason"] == REDIRECT_DUPLICATE + urls[0]
    assert [p for p, t in list(test_site.arrivals) if t > t0 and p in ("/start", "/page")] == ["/start", "/page"]
