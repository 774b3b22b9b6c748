"""The real OpenFGA server (Go, built by ``scripts/bootstrap`` into ``.tools/go/bin``): how waggle runs it.

One place for its command lines, shared by ``waggle dev up``, the test fixtures and the benchmarks:

* :func:`run_argv` — ``openfga run`` with the HTTP API on ``127.0.0.1:http_port`` and gRPC on
  ``127.0.0.1:grpc_port`` (OpenFGA's HTTP API is a gateway that calls its own gRPC server, so
  gRPC cannot be turned off; it only listens on loopback); no playground, no metrics or
  profiler listener; datastore ``postgres`` or ``memory``.
* :func:`run_env` — the secrets, kept out of argv (``ps`` shows argv): the preshared key
  (``OPENFGA_AUTHN_*``) and the datastore URI (``OPENFGA_DATASTORE_URI``).
* :func:`migrate` — ``openfga migrate`` of a Postgres database (idempotent; the schema of the
  pinned version).
* :func:`datastore_uri` — a psycopg/pgserver URL in the form OpenFGA's driver (pgx) reads.

Settings every run shares (also in compose.yaml): ``LIST_OBJECTS_SETTINGS``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from devstack.layout import HOST, REPO
from devstack.supervisor import StackError

BIN = REPO / ".tools" / "go" / "bin" / "openfga"
PIN = BIN.with_name("openfga.pin")  # written by scripts/bootstrap: the module@version it built

# ListObjects answers at most this many objects (0: no cap) within its deadline; past either
# the answer is silently partial: waggle lifts the cap and pins the deadline that
# ledger.authz.fga.LIST_OBJECTS_DEADLINE_S relies on (decision 142; a longer one would also
# need --request-timeout, which bounds every request).
LIST_OBJECTS_SETTINGS = {"--listObjects-max-results": "0", "--listObjects-deadline": "3s"}


def binary() -> Path:
    """The built server; :class:`StackError` naming the fix when bootstrap has not built it."""
    if not os.access(BIN, os.X_OK):
        raise StackError(f"the OpenFGA server is not built ({BIN} is missing): run scripts/bootstrap")
    return BIN


def version() -> str:
    """``module@version`` bootstrap built (``""`` when unknown)."""
    try:
        return PIN.read_text().strip()
    except OSError:
        return ""


def datastore_uri(database_url: str) -> str:
    """``database_url`` (``postgresql://user:pw@host/db?host=/socket/dir``, pgserver's form) as
    pgx reads it: scheme ``postgres://``, a socket directory kept in ``host=``, ``sslmode=disable``
    for TCP on loopback unless given."""
    parts = urlsplit(database_url)
    query = dict(parse_qsl(parts.query))
    if not query.get("host", "").startswith("/"):
        query.setdefault("sslmode", "disable")
    return urlunsplit(("postgres", parts.netloc, parts.path, urlencode(query, safe="/"), ""))


def run_argv(http_port: int, grpc_port: int, engine: str = "postgres") -> list[str]:
    """``openfga run`` on loopback with datastore ``engine`` (``postgres``: URI from :func:`run_env`)."""
    argv = [str(binary()), "run",
            f"--http-addr={HOST}:{http_port}", f"--grpc-addr={HOST}:{grpc_port}",
            "--playground-enabled=false", "--metrics-enabled=false", "--profiler-enabled=false",
            f"--datastore-engine={engine}", "--log-format=text", "--log-level=warn"]
    argv += [f"{k}={v}" for k, v in LIST_OBJECTS_SETTINGS.items()]
    return argv


def run_env(preshared_key: str | None, datastore: str | None = None) -> dict[str, str]:
    """Environment of ``openfga run``: preshared-key authentication when ``preshared_key`` is
    set, and the Postgres ``datastore`` URI (:func:`datastore_uri` form) when given."""
    env = {"OPENFGA_AUTHN_METHOD": "preshared" if preshared_key else "none"}
    if preshared_key:
        env["OPENFGA_AUTHN_PRESHARED_KEYS"] = preshared_key
    if datastore:
        env["OPENFGA_DATASTORE_URI"] = datastore
    return env


def migrate(datastore: str, timeout_s: float = 120.0) -> None:
    """``openfga migrate`` of the Postgres database at ``datastore`` (pgx form); a no-op when its
    schema is current. :class:`StackError` with the server's own words on failure."""
    try:
        done = subprocess.run(
            [str(binary()), "migrate", "--datastore-engine=postgres", "--log-level=warn"],
            env={**os.environ, "OPENFGA_DATASTORE_URI": datastore}, capture_output=True, text=True,
            timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        raise StackError(f"`openfga migrate` did not finish within {timeout_s:.0f} s") from exc
    if done.returncode != 0:
        raise StackError(f"`openfga migrate` failed (exit {done.returncode}):\n{(done.stderr or done.stdout)[-2000:]}")
