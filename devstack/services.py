"""The processes of the local stack: each service's command line, environment and health check.

Only descriptions (:class:`~devstack.supervisor.Service`); :mod:`devstack.stack` starts them.
"""

from __future__ import annotations

import os
import subprocess
import sys

from devstack import openfga_server
from devstack.layout import (
    FLOW_PATH, HOST, REPO, S3_ACCESS_KEY, S3_REGION, S3_SECRET_KEY, WORKSPACE, StackConfig,
)
from devstack import signing
from devstack.supervisor import Service, StackError


def _py(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def waggle_argv(*args: str) -> list[str]:
    """Command line of the ledger's ``waggle`` commands in this interpreter (works without the console script)."""
    return [sys.executable, "-c", "import sys; sys.argv[0] = 'waggle'; from ledger.cli import main; main()", *args]


def run_waggle(*args: str, env: dict[str, str], timeout_s: float = 120.0) -> str:
    """Run ``waggle ARGS`` with ``env``; returns stdout. Raises StackError with its output on failure."""
    try:
        done = subprocess.run(waggle_argv(*args), env={**os.environ, **env}, capture_output=True, text=True,
                              timeout=timeout_s, cwd=REPO)
    except subprocess.TimeoutExpired as exc:
        raise StackError(f"`waggle {' '.join(args)}` did not finish within {timeout_s:.0f} s") from exc
    if done.returncode != 0:
        raise StackError(f"`waggle {' '.join(args)}` failed (exit {done.returncode}):\n"
                         f"{(done.stderr or done.stdout)[-3000:]}")
    return done.stdout


def ledger_env(config: StackConfig, database_url: str) -> dict[str, str]:
    """``WAGGLE_*`` settings of the ledger (and its CLIs) in this stack."""
    url = config.url
    env = {
        "WAGGLE_STATE_DIR": str(config.state_dir),
        "WAGGLE_DATABASE_URL": database_url,
        "WAGGLE_API_HOST": HOST,
        "WAGGLE_API_PORT": str(config.port("ledger")),
        "WAGGLE_PUBLIC_URL": url("ledger"),
        "WAGGLE_OIDC_ISSUER": url("issuer"),
        "WAGGLE_DEV_ISSUER_PORT": str(config.port("issuer")),
        "WAGGLE_FGA_API_URL": url("openfga"),
        "WAGGLE_FGA_API_TOKEN": config.secret("fga_key"),
        "WAGGLE_S3_ENDPOINT": url("s3"),
        "WAGGLE_S3_BUCKET": config.bucket,
        "WAGGLE_S3_REGION": S3_REGION,
        "WAGGLE_S3_ACCESS_KEY_ID": S3_ACCESS_KEY,
        "WAGGLE_S3_SECRET_ACCESS_KEY": S3_SECRET_KEY,
        "WAGGLE_CRAWL_WEBHOOK_URL": f"{url('windmill')}/api/w/{WORKSPACE}/jobs/run/f/{FLOW_PATH}",
        "WAGGLE_CRAWL_WEBHOOK_TOKEN": config.secret("windmill_token"),
        "WAGGLE_ALLOW_PRIVATE_HOSTS": "1",  # the local stack crawls local sites
        "WAGGLE_DRAIN_INTERVAL_S": "1",  # archives become visible within a second
        "WAGGLE_SIGNING_TRUSTED_ROOTS": str(signing.trusted_roots_path(config)),  # pebble's and the tsa's roots
    }
    fga = config.fga_ids()
    if fga.get("store_id"):
        env["WAGGLE_FGA_STORE_ID"] = fga["store_id"]
    if fga.get("model_id"):
        env["WAGGLE_FGA_MODEL_ID"] = fga["model_id"]
    return env


def standins(config: StackConfig) -> list[Service]:
    """The services that need only their port (started side by side with the database chain): the
    S3, issuer and ts-compile stand-ins and the capture servers (``python -m waggle_capture``)."""
    d, port, url = config.data, config.port, config.url
    svcs = [
        Service("s3", _py("devstack.s3", "--host", HOST, "--port", str(port("s3")),
                          "--data", str(d / "s3"), "--bucket", config.bucket,
                          "--access-key", S3_ACCESS_KEY, "--secret-key", S3_SECRET_KEY),
                port("s3"), "/" + config.bucket, ok_any_status=True),
        Service("issuer", _py("devstack.issuer", "--host", HOST, "--port", str(port("issuer")),
                              "--issuer", url("issuer"), "--audience", "waggle",
                              # the ledger's web page signs the local user in with one click
                              "--user", config.subject, "--organizations", config.organization),
                port("issuer"), "/.well-known/openid-configuration"),
        Service("tscompile", _py("devstack.tscompile", "--host", HOST, "--port", str(port("tscompile"))),
                port("tscompile"), "/healthz"),
    ]
    for name in config.capture_names():
        svcs.append(Service(
            name,
            _py("waggle_capture", "--host", HOST, "--port", str(port(name)), "--allow-private",
                "--s3-endpoint", url("s3"), "--s3-bucket", config.bucket,
                "--s3-access-key", S3_ACCESS_KEY, "--s3-secret-key", S3_SECRET_KEY,
                # signs when a capture asks (`signing: true`); policy optional (docs/capture-server.md)
                "--signing-url", signing.sign_url(config), "--signing-policy", "optional",
                "--signing-trusted-roots", str(signing.trusted_roots_path(config)),
                *(["--faults-endpoint"] if config.capture_faults else [])),
            port(name), "/status", ready_timeout_s=90.0,
            keep=True,  # a capture server that dies is started again (issue 24 item 9)
            env={"BROWSERHIVE_SIGNING_TOKEN": config.secret("signing_token")},  # not in argv: ps shows argv
        ))
    return svcs


def openfga_service(config: StackConfig, datastore: str) -> Service:
    """The real OpenFGA server on its own database of the stack's Postgres (``datastore``: its URI,
    :func:`devstack.seed_postgres.openfga_database`), HTTP on the stack's ``openfga`` port, gRPC on
    ``openfga-grpc``, both on loopback; the preshared key is the stack's ``fga_key``."""
    return Service(
        "openfga", openfga_server.run_argv(config.port("openfga"), config.port("openfga-grpc")),
        config.port("openfga"), "/healthz",
        env=openfga_server.run_env(config.secret("fga_key"), datastore),
    )


def windmill_service(config: StackConfig) -> Service:
    port = config.port("windmill")
    return Service(
        "windmill",
        _py("devstack.windmill", "--host", HOST, "--port", str(port), "--state", str(config.data / "windmill"),
            "--workspace", WORKSPACE, "--root", str(config.flow_root or REPO)),
        port, "/api/version",
        env={"WAGGLE_WINDMILL_TOKEN": config.secret("windmill_token")},  # not in argv: ps shows argv
    )


def ledger_service(config: StackConfig, database_url: str) -> Service:
    return Service("ledger", waggle_argv("serve"), config.port("ledger"), "/api/health",
                   env=ledger_env(config, database_url), ready_timeout_s=90.0)
