"""``waggle dev up/down/status``: the whole waggle stack on loopback, state under one directory.

Steps (each service waits for health with a deadline; when a piece is not installed yet, ``up``
stops before starting anything and names it):

1. side by side: Postgres (pgserver, ``state_dir/pg``) → ``waggle db migrate`` →
   ``waggle scripts load-defaults``; and the S3 stand-in (bucket ``browserhive``,
   ``state_dir/data/s3``), the OpenFGA stand-in (``--data state_dir/data/openfga.json``, preshared
   key), the dev OIDC issuer, the ts-compile stand-in, N capture servers (``--allow-private``:
   local sites are the point of the local stack)
2. ``waggle fga deploy`` (ids kept in ``state_dir/fga.json``; a new model only when model.json
   changed) and ``waggle grant submitter`` on the default organization to the local user and to
   the flow's subject (remembered per store); ts-compile warmed with the default page scripts
3. the Windmill runner (``--state state_dir/data/windmill``) and the ledger (``waggle serve``)
   with the webhook URL/token and ``WAGGLE_ALLOW_PRIVATE_HOSTS=1``
4. the flow's JWT minted from the issuer; the five ``u/admin/*`` Windmill variables (and
   ``u/admin/waggle_allow_private_hosts=1``) set
5. ``state_dir/stack.json`` written (``{"services": {name: url}, "subject", "organization",
   "bucket", ...}``), read by the client CLI and by ``status``/``down``.

Secrets (webhook token, OpenFGA key) live in ``state_dir/secrets.json`` (mode 600). Running ``up``
again reuses every service that still runs with the same command line and settings; data
survives ``down``/``up`` (Postgres data dir, S3 data dir, OpenFGA data file, runner state dir).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import secrets
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from devstack import postgres
from devstack.supervisor import Service, StackError, Supervisor, healthy

REPO = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
WORKSPACE = "waggle"
FLOW_PATH = "f/waggle/crawl_level"
FLOW_SUBJECT = "waggle-flow"
ALLOW_PRIVATE_VARIABLE = "u/admin/waggle_allow_private_hosts"  # optional 6th variable of the flow
FLOW_TOKEN_LIFETIME = "30d"  # re-minted on every `up`: the issuer's key changes at each start
DEFAULT_PORTS = {
    "s3": 8333,
    "openfga": 8090,
    "issuer": 9099,
    "tscompile": 8085,
    "windmill": 8000,
    "ledger": 7070,
}
CAPTURE_BASE_PORT = 8201
S3_ACCESS_KEY = "browserhive"
S3_SECRET_KEY = "browserhive"
S3_REGION = "us-east-1"
STOP_ORDER = ["ledger", "windmill", "tscompile", "issuer", "openfga", "s3"]  # captures first, pg last

# Python module of each service, and the issue that delivers it (for "missing piece" errors).
MODULES = {
    "s3": ("devstack.s3", "issue 5 (S3 stand-in)"),
    "openfga": ("devstack.openfga", "issue 3 (OpenFGA stand-in)"),
    "issuer": ("devstack.issuer", "issue 2 (dev OIDC issuer)"),
    "tscompile": ("devstack.tscompile", "issue 5 (ts-compile stand-in)"),
    "capture": ("devstack.capture", "issue 5 (BrowserHive capture stand-in)"),
    "windmill": ("devstack.windmill", "issue 4 (local Windmill runner)"),
    "ledger": ("ledger.api.app", "issue 2 (ledger API, `waggle serve`)"),
}


@dataclass
class StackConfig:
    """What ``up`` starts. ``ports`` maps service name → port (captures: ``capture-1``…)."""

    state_dir: Path
    captures: int = 2
    ports: dict[str, int] = field(default_factory=dict)
    subject: str = "local"
    organization: str = "default"
    bucket: str = "browserhive"

    def port(self, name: str) -> int:
        if name in self.ports:
            return self.ports[name]
        if name.startswith("capture-"):
            return CAPTURE_BASE_PORT + int(name.split("-", 1)[1]) - 1
        return DEFAULT_PORTS[name]


def stack_file(state_dir: Path) -> Path:
    return state_dir / "stack.json"


def read_stack(state_dir: Path) -> dict:
    """The stack.json of ``state_dir`` ({} when ``up`` never ran there)."""
    try:
        return json.loads(stack_file(state_dir).read_text())
    except (OSError, ValueError):
        return {}


def _py(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def _waggle_argv(*args: str) -> list[str]:
    """Command line of the ``waggle`` CLI in this interpreter (works without the console script)."""
    return [sys.executable, "-c", "import sys; sys.argv[0] = 'waggle'; from ledger.cli import main; main()", *args]


def missing_pieces(captures: int) -> list[str]:
    """Human-readable list of stack pieces that are not installed yet (empty when complete)."""
    missing = []
    for key, (module, issue) in MODULES.items():
        if key == "capture" and captures == 0:
            continue
        try:
            spec = importlib.util.find_spec(module)
            if spec is not None and spec.submodule_search_locations is not None and module.startswith("devstack."):
                spec = importlib.util.find_spec(module + ".__main__")  # a package runs through its __main__
            found = spec is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            missing.append(f"{module} — {issue}")
    missing += [f"`waggle {cmd}` — {issue}" for cmd, issue in _missing_commands()]
    if not (REPO / "f" / "waggle" / "crawl_level.flow").is_dir():
        missing.append(f"{REPO / 'f/waggle/crawl_level.flow'} — issue 4 (the crawl flow)")
    return missing


REQUIRED_COMMANDS = {
    ("db", "migrate"): "issue 2 (ledger database)",
    ("scripts", "load-defaults"): "issue 2 (script catalogue)",
    ("serve",): "issue 2 (ledger API)",
    ("fga", "deploy"): "issue 3 (OpenFGA store and model)",
    ("grant",): "issue 3 (OpenFGA grants)",
}


def _missing_commands() -> list[tuple[str, str]]:
    """``waggle`` sub-commands ``up`` needs that the CLI does not offer yet."""
    import typer

    from ledger.cli import app

    root = typer.main.get_command(app)
    missing = []
    for path, issue in REQUIRED_COMMANDS.items():
        cmd = root
        for part in path:
            cmd = (getattr(cmd, "commands", None) or {}).get(part)
            if cmd is None:
                missing.append((" ".join(path), issue))
                break
    return missing


class Stack:
    """One local stack, identified by its state directory."""

    def __init__(self, config: StackConfig, echo=lambda msg: None):
        self.config = config
        self.state_dir = config.state_dir.resolve()
        self.sup = Supervisor(self.state_dir)
        self.echo = echo
        self.data = self.state_dir / "data"

    # -- helpers ---------------------------------------------------------------
    def url(self, name: str) -> str:
        return f"http://{HOST}:{self.config.port(name)}"

    def capture_names(self) -> list[str]:
        return [f"capture-{i}" for i in range(1, self.config.captures + 1)]

    def run_waggle(self, *args: str, env: dict[str, str], timeout_s: float = 120.0) -> str:
        """Run ``waggle ARGS`` with ``env``; returns stdout. Raises StackError with its output on failure."""
        try:
            done = subprocess.run(
                _waggle_argv(*args), env={**os.environ, **env}, capture_output=True, text=True,
                timeout=timeout_s, cwd=REPO,
            )
        except subprocess.TimeoutExpired as exc:
            raise StackError(f"`waggle {' '.join(args)}` did not finish within {timeout_s:.0f} s") from exc
        if done.returncode != 0:
            raise StackError(
                f"`waggle {' '.join(args)}` failed (exit {done.returncode}):\n"
                f"{(done.stderr or done.stdout)[-3000:]}"
            )
        return done.stdout

    def secret(self, key: str) -> str:
        """A random secret kept in ``state_dir/secrets.json`` (mode 600) across ups, e.g. the webhook token."""
        path = self.state_dir / "secrets.json"
        try:
            kept = json.loads(path.read_text())
        except (OSError, ValueError):
            kept = {}
        if not kept.get(key):
            kept[key] = secrets.token_urlsafe(24)
            self.state_dir.mkdir(parents=True, exist_ok=True)
            path.touch(mode=0o600)
            path.write_text(json.dumps(kept))
        return kept[key]

    def ledger_env(self, database_url: str) -> dict[str, str]:
        """``WAGGLE_*`` settings of the ledger (and its CLIs) in this stack."""
        fga = self.fga_ids()
        env = {
            "WAGGLE_STATE_DIR": str(self.state_dir),
            "WAGGLE_DATABASE_URL": database_url,
            "WAGGLE_API_HOST": HOST,
            "WAGGLE_API_PORT": str(self.config.port("ledger")),
            "WAGGLE_PUBLIC_URL": self.url("ledger"),
            "WAGGLE_OIDC_ISSUER": self.url("issuer"),
            "WAGGLE_DEV_ISSUER_PORT": str(self.config.port("issuer")),
            "WAGGLE_FGA_API_URL": self.url("openfga"),
            "WAGGLE_FGA_API_TOKEN": self.secret("fga_key"),
            "WAGGLE_S3_ENDPOINT": self.url("s3"),
            "WAGGLE_S3_BUCKET": self.config.bucket,
            "WAGGLE_S3_REGION": S3_REGION,
            "WAGGLE_S3_ACCESS_KEY_ID": S3_ACCESS_KEY,
            "WAGGLE_S3_SECRET_ACCESS_KEY": S3_SECRET_KEY,
            "WAGGLE_CRAWL_WEBHOOK_URL": f"{self.url('windmill')}/api/w/{WORKSPACE}/jobs/run/f/{FLOW_PATH}",
            "WAGGLE_CRAWL_WEBHOOK_TOKEN": self.secret("windmill_token"),
            "WAGGLE_ALLOW_PRIVATE_HOSTS": "1",  # the local stack crawls local sites
            "WAGGLE_DRAIN_INTERVAL_S": "1",  # archives become visible within a second
        }
        if fga.get("store_id"):
            env["WAGGLE_FGA_STORE_ID"] = fga["store_id"]
        if fga.get("model_id"):
            env["WAGGLE_FGA_MODEL_ID"] = fga["model_id"]
        return env

    # -- services ----------------------------------------------------------------
    def services(self) -> list[Service]:
        """The stand-ins that do not depend on the FGA ids (started before the deploy)."""
        d = self.data
        svcs = [
            Service("s3", _py("devstack.s3", "--host", HOST, "--port", str(self.config.port("s3")),
                              "--data", str(d / "s3"), "--bucket", self.config.bucket,
                              "--access-key", S3_ACCESS_KEY, "--secret-key", S3_SECRET_KEY),
                    self.config.port("s3"), "/" + self.config.bucket, ok_any_status=True),
            Service("openfga", _py("devstack.openfga", "--host", HOST, "--port", str(self.config.port("openfga")),
                                   "--data", str(d / "openfga.json"), f"--preshared-key={self.secret('fga_key')}"),
                    self.config.port("openfga"), "/healthz"),
            Service("issuer", _py("devstack.issuer", "--host", HOST, "--port", str(self.config.port("issuer")),
                                  "--issuer", self.url("issuer"), "--audience", "waggle",
                                  # the ledger's web page signs the local user in with one click
                                  "--user", self.config.subject, "--organizations", self.config.organization),
                    self.config.port("issuer"), "/.well-known/openid-configuration"),
            Service("tscompile", _py("devstack.tscompile", "--host", HOST, "--port", str(self.config.port("tscompile"))),
                    self.config.port("tscompile"), "/healthz"),
        ]
        for name in self.capture_names():
            port = self.config.port(name)
            svcs.append(Service(
                name,
                _py("devstack.capture", "--host", HOST, "--port", str(port), "--allow-private",
                    "--s3-endpoint", self.url("s3"), "--s3-bucket", self.config.bucket,
                    "--s3-access-key", S3_ACCESS_KEY, "--s3-secret-key", S3_SECRET_KEY),
                port, "/status", ready_timeout_s=90.0,
            ))
        return svcs

    def windmill_service(self) -> Service:
        port = self.config.port("windmill")
        return Service(
            "windmill",
            _py("devstack.windmill", "--host", HOST, "--port", str(port), "--state", str(self.data / "windmill"),
                "--workspace", WORKSPACE, "--root", str(REPO)),
            port, "/api/version",
            env={"WAGGLE_WINDMILL_TOKEN": self.secret("windmill_token")},  # not in argv: ps shows argv
        )

    def ledger_service(self, database_url: str) -> Service:
        port = self.config.port("ledger")
        return Service("ledger", _waggle_argv("serve"), port, "/api/health", env=self.ledger_env(database_url),
                       ready_timeout_s=90.0)

    # -- wiring steps ------------------------------------------------------------
    def deploy_fga(self, env: dict[str, str]) -> None:
        """Deploy the store and model once; later ups reuse them, and write a new model only when
        ``model.json`` changed (into the same store, so tuples survive)."""
        from ledger.authz import cli as authz_cli

        model_sha = hashlib.sha256(authz_cli.MODEL_JSON.read_bytes()).hexdigest()
        fga = self.fga_ids()
        args = ["fga", "deploy"]
        if fga.get("store_id"):
            resp = httpx.get(f"{self.url('openfga')}/stores/{fga['store_id']}", timeout=5.0,
                             headers={"Authorization": f"Bearer {self.secret('fga_key')}"})
            if resp.is_success and fga.get("model_sha") == model_sha:
                return
            if resp.is_success:
                args += ["--store-id", fga["store_id"]]
        out = self.run_waggle(*args, env=env)
        ids = dict(line.split("=", 1) for line in out.splitlines() if line.startswith("WAGGLE_FGA_"))
        if not ids.get("WAGGLE_FGA_STORE_ID") or not ids.get("WAGGLE_FGA_MODEL_ID"):
            raise StackError(f"`waggle fga deploy` printed no store/model ids: {out[-500:]!r}")
        fga = {"store_id": ids["WAGGLE_FGA_STORE_ID"].strip(), "model_id": ids["WAGGLE_FGA_MODEL_ID"].strip(),
               "model_sha": model_sha}
        (self.state_dir / "fga.json").write_text(json.dumps(fga))

    def fga_ids(self) -> dict:
        """``{"store_id", "model_id"}`` deployed by an earlier ``up`` ({} before the first deploy)."""
        try:
            return json.loads((self.state_dir / "fga.json").read_text())
        except (OSError, ValueError):
            return {}

    def grant(self, env: dict[str, str], subject: str) -> None:
        self.run_waggle("grant", "submitter", subject, self.config.organization, env=env)

    def mint(self, subject: str, organizations: list[str], expires_in: str) -> str:
        resp = httpx.post(
            f"{self.url('issuer')}/token",
            json={"subject": subject, "organizations": organizations, "expiresIn": expires_in},
            timeout=10.0,
        )
        if not resp.is_success:
            raise StackError(f"the dev issuer refused a token: {resp.status_code} {resp.text[:200]}")
        return resp.json()["access_token"]

    def set_variables(self, flow_token: str) -> None:
        """Upsert the five ``u/admin/*`` variables in the runner (scheduler.md §3), as scripts/windmill-variables does."""
        from ledger.client import windmill_vars as wv

        try:
            values = wv.build_values(
                flow_token=flow_token,
                api_url=self.url("ledger"),
                endpoints=[self.url(n) for n in self.capture_names()],
                tls_ca="",  # plain HTTP on loopback; written on purpose
                ts_compile_url=self.url("tscompile"),
            )
            # the flow's robots.txt fetch goes through the private-host guard; local sites need it open
            values[ALLOW_PRIVATE_VARIABLE] = "1"
            wv.write_variables(self.url("windmill"), self.secret("windmill_token"), WORKSPACE, values)
        except (wv.VariableError, wv.WindmillError) as exc:
            raise StackError(f"setting the Windmill variables failed: {exc}") from exc

    def _timed(self, what: str, fn):
        t0 = time.monotonic()
        result = fn()
        self.echo(f"{what}: done ({time.monotonic() - t0:.1f} s)")
        return result

    def _start(self, svc: Service) -> bool:
        t0 = time.monotonic()
        started = self.sup.start(svc)
        took = f" ({time.monotonic() - t0:.1f} s)" if started else ""
        self.echo(f"{svc.name}: {'started' if started else 'running'} {svc.url}{took}")
        return started

    def _warm_compiler(self, database_url: str) -> None:
        """Compile the default page scripts once, so the first crawl level finds them cached.

        A cold TypeScript compile takes seconds (tens on a busy machine) and the flow gives
        ts-compile 30 s. A failure here is only reported: the flow reports its own errors.
        """
        import asyncio

        import psycopg
        from psycopg.rows import dict_row

        from ledger.crawl.scripts import default_set, webhook_item

        async def defaults() -> list[dict]:
            async with await psycopg.AsyncConnection.connect(database_url, row_factory=dict_row) as conn:
                return await default_set(conn)

        t0 = time.monotonic()
        try:
            items = [{k: v for k, v in webhook_item(s).items() if v is not None} for s in asyncio.run(defaults())]
            resp = httpx.post(f"{self.url('tscompile')}/compile", json={"scripts": items}, timeout=300.0)
            note = f"{len(items)} default script(s), HTTP {resp.status_code}"
        except Exception as exc:  # noqa: BLE001 - a warning, never fatal
            note = f"skipped ({exc.__class__.__name__}: {exc})"
        self.echo(f"ts-compile warm-up: {note} ({time.monotonic() - t0:.1f} s)")

    def _database(self) -> str:
        """Start Postgres, migrate, load the default page scripts; returns the database URL."""
        database_url = self._timed("postgres", lambda: postgres.start(self.state_dir / "pg"))
        env = self.ledger_env(database_url)
        self._timed("migrations", lambda: self.run_waggle("db", "migrate", env=env))
        self._timed("default page scripts", lambda: self.run_waggle("scripts", "load-defaults", env=env))
        return database_url

    # -- up / down / status --------------------------------------------------------
    def up(self) -> dict:
        """Start everything (idempotent) and write stack.json; returns its content."""
        missing = missing_pieces(self.config.captures)
        if missing:
            raise StackError("the local stack cannot start, these pieces are missing:\n  " + "\n  ".join(missing))
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.data.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()

        # Independent work runs side by side (2 cores, several slow starts): the database chain,
        # and every stand-in that needs nothing but its port.
        for name in self.sup.names():  # captures left over from an earlier, larger --captures
            if name.startswith("capture-") and name not in self.capture_names():
                self.sup.stop(name)
        with ThreadPoolExecutor(max_workers=8) as pool:
            db = pool.submit(self._database)
            list(pool.map(self._start, self.services()))
            database_url = db.result()

        env = self.ledger_env(database_url)
        self._timed("openfga store and model", lambda: self.deploy_fga(env))
        env = self.ledger_env(database_url)
        fga = self.fga_ids()
        org = self.config.organization
        todo = [s for s in dict.fromkeys([self.config.subject, FLOW_SUBJECT]) if f"{s}@{org}" not in fga.get("granted", [])]
        with ThreadPoolExecutor(max_workers=3) as pool:  # tuples persist in the OpenFGA data file
            warm = pool.submit(self._warm_compiler, database_url)
            list(pool.map(lambda subject: self._timed(f"grant submitter to {subject}", lambda: self.grant(env, subject)), todo))
            warm.result()
        fga["granted"] = sorted({*fga.get("granted", []), *(f"{s}@{org}" for s in todo)})
        (self.state_dir / "fga.json").write_text(json.dumps(fga))
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(self._start, [self.windmill_service(), self.ledger_service(database_url)]))

        flow_token = self.mint(FLOW_SUBJECT, [self.config.organization], FLOW_TOKEN_LIFETIME)
        self.set_variables(flow_token)

        info = {
            "services": {  # in start order
                "s3": self.url("s3"),
                "openfga": self.url("openfga"),
                "issuer": self.url("issuer"),
                "tscompile": self.url("tscompile"),
                **{n: self.url(n) for n in self.capture_names()},
                "windmill": self.url("windmill"),
                "ledger": self.url("ledger"),
            },
            "captures": self.config.captures,
            "ports": {**DEFAULT_PORTS, **{n: self.config.port(n) for n in [*DEFAULT_PORTS, *self.capture_names()]}},
            "subject": self.config.subject,
            "organization": self.config.organization,
            "bucket": self.config.bucket,
            "workspace": WORKSPACE,
            "flow_subject": FLOW_SUBJECT,
            "database_url": database_url,
            "state_dir": str(self.state_dir),
            "fga": self.fga_ids(),
            "s3": {"endpoint": self.url("s3"), "region": S3_REGION,
                   "access_key_id": S3_ACCESS_KEY, "secret_access_key": S3_SECRET_KEY},
        }
        stack_file(self.state_dir).write_text(json.dumps(info, indent=2) + "\n")
        self.echo(f"stack ready in {time.monotonic() - t0:.1f} s; state in {self.state_dir}")
        return info


def config_from_state(state_dir: Path, captures: int | None = None) -> StackConfig:
    """The config of an existing stack (ports and sizes from its stack.json), else defaults."""
    saved = read_stack(state_dir)
    return StackConfig(
        state_dir=state_dir,
        captures=captures if captures is not None else int(saved.get("captures", 2)),
        ports=dict(saved.get("ports", {})),
        subject=saved.get("subject", "local"),
        organization=saved.get("organization", "default"),
        bucket=saved.get("bucket", "browserhive"),
    )


def up(config: StackConfig, echo=lambda msg: None) -> dict:
    """Start the stack described by ``config``; see :meth:`Stack.up`."""
    return Stack(config, echo).up()


def down(state_dir: Path, echo=lambda msg: None) -> list[str]:
    """Stop every service of ``state_dir`` (data kept); returns the names that were running."""
    state_dir = state_dir.resolve()
    sup = Supervisor(state_dir)
    names = sup.names()
    order = [n for n in names if n.startswith("capture-")] + [n for n in STOP_ORDER if n in names]
    order += [n for n in names if n not in order]
    stopped = []
    for name in order:
        if sup.stop(name):
            stopped.append(name)
            echo(f"{name}: stopped")
    if postgres.stop(state_dir / "pg"):
        stopped.append("postgres")
        echo("postgres: stopped")
    return stopped


def status(state_dir: Path) -> list[dict]:
    """One row per service: ``{"name", "url", "pid", "running", "healthy"}``."""
    state_dir = state_dir.resolve()
    sup = Supervisor(state_dir)
    rows = []
    uri = postgres.running_uri(state_dir / "pg")
    rows.append({"name": "postgres", "url": uri or "", "pid": None, "running": uri is not None, "healthy": uri is not None})
    saved = read_stack(state_dir)
    names = list(dict.fromkeys([*saved.get("services", {}), *sup.names()]))
    for name in names:
        rec = sup.record(name)
        url = (rec or {}).get("url") or saved.get("services", {}).get(name, "")
        ok = False
        if rec is not None:
            ok = healthy(url + rec.get("health", "/"), any_status=rec.get("ok_any_status", False))
        rows.append({"name": name, "url": url, "pid": (rec or {}).get("pid"), "running": rec is not None, "healthy": ok})
    return rows

