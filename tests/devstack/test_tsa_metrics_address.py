"""Two timestamp authorities on one machine (devstack/patches/tsa_prometheus.go): each serves its
metrics on the loopback port its stack gives it, so a test run and a `waggle dev up` coexist."""

from __future__ import annotations

import os
import subprocess
import time

import httpx

from devstack import signing
from devstack.layout import StackConfig
from tests.fixtures.stack import stack_ports


def _start(config: StackConfig) -> subprocess.Popen:
    svc = signing.tsa_service(config)
    return subprocess.Popen(svc.argv, env={**os.environ, **svc.env},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _ready(url: str, proc: subprocess.Popen, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"timestamp-server exited with {proc.returncode}"
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"no answer from {url} within {timeout_s} s")


def test_two_timestamp_authorities_run_at_once(tmp_path):
    configs = [StackConfig(state_dir=tmp_path / str(i), ports=stack_ports(0)) for i in (1, 2)]
    procs = [_start(config) for config in configs]
    try:
        for config, proc in zip(configs, procs):
            _ready(f"{config.url('tsa')}/ping", proc)
            metrics = httpx.get(f"{config.url('tsa-metrics')}/metrics", timeout=5)
            assert metrics.status_code == 200 and "go_goroutines" in metrics.text
        chains = [httpx.get(f"{c.url('tsa')}/api/v1/timestamp/certchain", timeout=5).text for c in configs]
        assert all("BEGIN CERTIFICATE" in chain for chain in chains) and chains[0] != chains[1]
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)
