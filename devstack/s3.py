"""S3 stand-in for the local stack: ``python -m devstack.s3 --host H --port P --data DIR --bucket B``.

Runs s3rver 3.7.1 (npm, pinned in ``devstack/package.json``) through ``devstack/s3_server.js``:
an S3-compatible HTTP server on ``host:port`` (port 0 = OS-chosen), path-style addressing,
objects kept on disk under ``--data`` across restarts, bucket ``--bucket`` (default
``browserhive``) created at start, credentials ``--access-key``/``--secret-key`` (default
``browserhive``/``browserhive``, like the BrowserHive dev compose, contracts.md §D.1).

Why s3rver: the real store (SeaweedFS) cannot run here; s3rver is a maintained npm package that
speaks SigV4 (header and presigned query auth), PutObject/GetObject/HeadObject/ListObjectsV2 and
keeps objects as files. Clients must use path-style and boto3's
``request_checksum_calculation="when_required"`` (s3rver predates the default CRC trailers).

Limits of the stand-in (dev/test only): s3rver checks that the access key id exists but does not
verify SigV4 signatures, and does not enforce presigned-URL expiry.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from devstack.nodedeps import DEVSTACK, ensure_node_modules, node_binary

SCRIPT = DEVSTACK / "s3_server.js"
REGION = "us-east-1"


@dataclass
class S3Process:
    """A running S3 stand-in. ``endpoint`` is ``http://host:port``; ``stop()`` ends it."""

    endpoint: str
    bucket: str
    access_key_id: str
    secret_access_key: str
    data_dir: Path
    proc: subprocess.Popen = field(repr=False)
    region: str = REGION

    def client(self):
        """A boto3 S3 client for this server (path-style, SigV4, checksums only when required)."""
        return make_client(self.endpoint, self.access_key_id, self.secret_access_key, self.region)

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after ``timeout`` seconds)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def make_client(endpoint: str, access_key_id: str, secret_access_key: str, region: str = REGION,
                timeout_s: float = 60.0):
    """boto3 S3 client configured for the stand-in (and any path-style S3); timeouts in s."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=access_key_id,
        aws_secret_access_key=secret_access_key,
        region_name=region,
        config=Config(
            signature_version="s3v4",
            s3={"addressing_style": "path"},
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            retries={"max_attempts": 2, "mode": "standard"},
            connect_timeout=timeout_s,
            read_timeout=timeout_s,
        ),
    )


def start(
    data_dir: str | Path,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    bucket: str = "browserhive",
    access_key_id: str = "browserhive",
    secret_access_key: str = "browserhive",
    startup_timeout: float = 30.0,
    stdout=None,
) -> S3Process:
    """Start the stand-in as a child process and wait until it listens.

    Returns an :class:`S3Process`; raises ``RuntimeError`` when it exits or does not report
    its address within ``startup_timeout`` seconds.
    """
    ensure_node_modules("s3rver")
    data = Path(data_dir)
    data.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [
            node_binary(), str(SCRIPT), "--host", host, "--port", str(port), "--data", str(data),
            "--bucket", bucket, "--access-key", access_key_id, "--secret-key", secret_access_key,
        ],
        stdout=subprocess.PIPE,
        stderr=None,
        text=True,
    )
    deadline = time.monotonic() + startup_timeout
    line = ""
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line or proc.poll() is not None:
            break
    if not line:
        proc.kill()
        raise RuntimeError(f"S3 stand-in did not start (exit {proc.poll()})")
    addr = json.loads(line)
    url_host = addr["host"] if ":" not in addr["host"] else f"[{addr['host']}]"
    return S3Process(
        endpoint=f"http://{url_host}:{addr['port']}",
        bucket=bucket,
        access_key_id=access_key_id,
        secret_access_key=secret_access_key,
        data_dir=data,
        proc=proc,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m devstack.s3", description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8333)
    ap.add_argument("--data", required=True, help="directory that keeps the objects")
    ap.add_argument("--bucket", default="browserhive")
    ap.add_argument("--access-key", default="browserhive")
    ap.add_argument("--secret-key", default="browserhive")
    args = ap.parse_args(argv)
    server = start(
        args.data, host=args.host, port=args.port, bucket=args.bucket,
        access_key_id=args.access_key, secret_access_key=args.secret_key,
    )
    print(json.dumps({"endpoint": server.endpoint, "bucket": server.bucket}), flush=True)
    # Only forward the signal here: the main thread is inside proc.wait(), which returns once
    # node has exited (a blocking stop() inside the handler would contend for the wait lock).
    signal.signal(signal.SIGTERM, lambda *_: server.proc.terminate())
    signal.signal(signal.SIGINT, lambda *_: server.proc.terminate())
    return server.proc.wait()


if __name__ == "__main__":
    sys.exit(main())
