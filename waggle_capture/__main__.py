"""``waggle capture serve`` / ``python -m waggle_capture --host 127.0.0.1 --port 8201 [--allow-private] [--s3-endpoint URL …]``.

One process = one Chromium = one capture at a time; run several on several ports for a pool.
Fault knobs (off by default): ``--fault-slow-ms``, ``--fault-error-type``, ``--fault-manifest-fail``,
``--fault-refuse-500``, ``--fault-crash-during-upload``; ``--faults-endpoint`` adds ``PUT /faults``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os

from waggle_capture.app import create_app
from waggle_capture.settings import ERROR_TYPES, Faults, ServerSettings
from waggle_capture.signing import POLICIES, SignerSettings
from waggle_capture.serving import serve
from ledger.useragent import suffix as waggle_suffix


def parse_args(argv: list[str] | None = None, prog: str = "python -m waggle_capture"
               ) -> tuple[argparse.Namespace, ServerSettings]:
    """The server's flags (defaults from the ``BROWSERHIVE_*`` environment, as BrowserHive's own);
    exits 2 with argparse's message on a bad flag."""
    env = os.environ.get
    ap = argparse.ArgumentParser(prog=prog, description="Serve the BrowserHive v12 capture API with waggle's "
                                 "extensions (docs/capture-server.md); one Chromium, one capture at a time.")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8201)
    ap.add_argument("--ready-file", help="write {\"url\"} here once listening (for --port 0)")
    ap.add_argument("--allow-private", action="store_true",
                    help="allow loopback/private targets (local stack, tests); link-local stays refused")
    ap.add_argument("--s3-endpoint", default=env("BROWSERHIVE_S3_ENDPOINT"))
    ap.add_argument("--s3-bucket", "--bucket", dest="s3_bucket", default=env("BROWSERHIVE_S3_BUCKET", "browserhive"))
    ap.add_argument("--s3-access-key", default=env("BROWSERHIVE_S3_ACCESS_KEY_ID", "browserhive"))
    ap.add_argument("--s3-secret-key", default=env("BROWSERHIVE_S3_SECRET_ACCESS_KEY", "browserhive"))
    ap.add_argument("--s3-region", default=env("BROWSERHIVE_S3_REGION", "us-east-1"))
    ap.add_argument("--s3-key-prefix", default=env("BROWSERHIVE_S3_KEY_PREFIX", ""))
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--max-response-bytes", type=int, default=20 * 1024 * 1024,
                    help="per-response body cap in bytes (default 20 MiB); a larger body, a file or download "
                         "included, is dropped and recorded as truncated (WARC-Truncated: length) with its reason")
    ap.add_argument("--max-task-bytes", type=int, default=200 * 1024 * 1024)
    ap.add_argument("--task-total-ms", type=int, default=130_000)
    ap.add_argument("--page-load-ms", type=int, default=30_000)
    ap.add_argument("--recycle-every", type=int, default=100, help="relaunch Chromium after N captures")
    ap.add_argument("--max-rss-mb", type=float, default=1500.0, help="relaunch Chromium above this RSS (MiB)")
    ap.add_argument("--url-policy", action="append", default=[], metavar="PATTERN=ACTION",
                    help="server default URL policy (repeatable), e.g. '*://*.google-analytics.com/*=no-archive'")
    ap.add_argument("--settle", default=None, help='JSON, e.g. {"minMs":1000,"maxMs":3000,"quietMs":1000,"networkConcurrency":0}')
    ap.add_argument("--fault-slow-ms", type=int, default=0)
    ap.add_argument("--fault-error-type", choices=ERROR_TYPES, default=None)
    ap.add_argument("--fault-manifest-fail", action="store_true")
    ap.add_argument("--fault-refuse-500", action="store_true")
    ap.add_argument("--fault-crash-during-upload", action="store_true")
    ap.add_argument("--faults-endpoint", action="store_true", help="enable GET/PUT /faults (tests only)")
    ap.add_argument("--user-agent-suffix", default=env("WAGGLE_CAPTURE_USER_AGENT_SUFFIX", waggle_suffix()),
                    help="appended to Chromium's user agent on every page request (\"\": none); "
                         "default waggle/<version> (+<info URL>)")
    ap.add_argument("--signing-url", default=env("BROWSERHIVE_SIGNING_URL"),
                    help="authsign /sign URL for wacz-auth signatures (token: env BROWSERHIVE_SIGNING_TOKEN)")
    ap.add_argument("--signing-policy", choices=POLICIES, default=env("BROWSERHIVE_SIGNING_POLICY"),
                    help="forbidden|optional|required (default: optional with --signing-url, else forbidden)")
    ap.add_argument("--signing-trusted-roots", default=env("BROWSERHIVE_SIGNING_TRUST_ANCHOR"),
                    help="authsign roots YAML the signer's answer must chain to (default: authsign's own)")
    ap.add_argument("--signing-timeout-ms", type=int, default=int(env("BROWSERHIVE_SIGNING_TIMEOUT_MS", "10000")))
    a = ap.parse_args(argv)
    policy = a.signing_policy or ("optional" if a.signing_url else "forbidden")
    if policy == "required" and not a.signing_url:
        ap.error("--signing-policy required needs --signing-url")
    policies = []
    for spec in a.url_policy:
        pattern, _, action = spec.rpartition("=")
        if not pattern or action not in ("deny", "no-archive", "no-body"):
            ap.error(f"--url-policy {spec!r}: want PATTERN=deny|no-archive|no-body")
        policies.append({"pattern": pattern, "action": action})
    s = ServerSettings(
        allow_private=a.allow_private, s3_endpoint=a.s3_endpoint, s3_bucket=a.s3_bucket,
        s3_access_key=a.s3_access_key, s3_secret_key=a.s3_secret_key, s3_region=a.s3_region,
        s3_key_prefix=a.s3_key_prefix, chromium=a.chromium, max_response_bytes=a.max_response_bytes,
        max_task_bytes=a.max_task_bytes, task_total_ms=a.task_total_ms, page_load_ms=a.page_load_ms,
        recycle_every=a.recycle_every, max_rss_mb=a.max_rss_mb, default_url_policies=policies,
        faults=Faults(slow_ms=a.fault_slow_ms, error_type=a.fault_error_type, manifest_fail=a.fault_manifest_fail,
                      refuse_500=a.fault_refuse_500, crash_during_upload=a.fault_crash_during_upload),
        faults_endpoint=a.faults_endpoint, user_agent_suffix=a.user_agent_suffix,
        signer=SignerSettings(url=a.signing_url, token=env("BROWSERHIVE_SIGNING_TOKEN") or None, policy=policy,
                              trusted_roots=a.signing_trusted_roots, timeout_ms=a.signing_timeout_ms),
    )
    if a.settle:
        s.settle.update(json.loads(a.settle))
    return a, s


def main(argv: list[str] | None = None, prog: str = "python -m waggle_capture") -> None:
    """Parse ``argv`` and serve until SIGTERM/SIGINT (blocking)."""
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    a, settings = parse_args(argv, prog)
    serve(create_app(settings), a.host, a.port, a.ready_file)


if __name__ == "__main__":
    main()
