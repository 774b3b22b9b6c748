"""``scripts/doctor``: would a crawl run to the end on this stack? Each check names its fix.

Checks run in dependency order (reference/scheduler.md §7.9, §8.3): a check whose parent
failed is skipped with "<parent> first"; a check that cannot be made from here (a name that
resolves only inside the compose network) is "not checked" and does not block its children.
Doctor never fixes anything. Every fetch has a 3 s timeout.

Windmill REST used: ``GET /api/version``; ``GET /api/w/{ws}/variables/get_value/{path}``
(JSON string, 404 = absent); ``GET /api/w/{ws}/flows/exists/{path}`` (JSON bool; falls back to
``GET …/flows/get/{path}`` when the answer is not a bool).
"""

from __future__ import annotations

import json
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx

from ledger.client import windmill_vars as wv

TIMEOUT_S = 3.0
FLOW_PATH = "f/waggle/crawl_level"
OK, FAIL, SKIP, NOT_CHECKED = "ok", "fail", "skip", "not checked"
MARKS = {OK: "✓", FAIL: "✗", SKIP: "–", NOT_CHECKED: "·"}


@dataclass
class Target:
    """The stack to check: host-side URLs (``None`` = that service is not checked)."""

    api_url: str
    windmill_url: str
    windmill_token: str | None
    workspace: str = "waggle"
    issuer_url: str | None = None
    fga_url: str | None = None
    s3_endpoint: str | None = None
    compose: bool = True  # fixes mention compose; False = the local stack (`waggle dev up`)


@dataclass
class Outcome:
    status: str
    detail: str = ""
    fix: str = ""


def _always(target: Target) -> bool:
    return True


@dataclass
class Check:
    """One row of the table: ``probe(ctx) -> Outcome`` runs after ``needs``; ``when(target)``
    says whether the row applies to this stack."""

    name: str
    description: str
    probe: Callable[[Context], Outcome]
    needs: tuple[str, ...] = ()
    when: Callable[[Target], bool] = _always


@dataclass
class Context:
    """What checks share: the target, an HTTP client, and values read by earlier checks."""

    target: Target
    http: httpx.Client
    variables: dict[str, str] = field(default_factory=dict)

    def start_hint(self, service: str) -> str:
        if self.target.compose:
            return f"start it: `docker compose up -d {service}` (then `docker compose ps` / `docker compose logs {service}`)"
        return "start the local stack: `waggle dev up` (and see `waggle dev status`)"


# -- probing helpers ---------------------------------------------------------------------
class Unreachable(Exception):
    """No HTTP answer; ``kind`` ∈ {"dns", "refused", "timeout", "tls", "other"}."""

    def __init__(self, url: str, kind: str, detail: str):
        self.url, self.kind, self.detail = url, kind, detail
        super().__init__(f"{url}: {detail}")


def _resolves(url: str) -> bool:
    parts = urlsplit(url)
    try:
        socket.getaddrinfo(parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80))
    except (socket.gaierror, UnicodeError):
        return False
    return True


def fetch(ctx: Context, method: str, url: str, **kwargs) -> httpx.Response:
    """One request with the doctor's timeout; raises Unreachable with the kind of failure."""
    if not _resolves(url):
        raise Unreachable(url, "dns", f"the name {urlsplit(url).hostname!r} does not resolve from here")
    client = kwargs.pop("client", None) or ctx.http
    try:
        return client.request(method, url, timeout=TIMEOUT_S, **kwargs)
    except httpx.ConnectTimeout as exc:
        raise Unreachable(url, "timeout", f"no answer within {TIMEOUT_S:g} s") from exc
    except httpx.TimeoutException as exc:
        raise Unreachable(url, "timeout", f"no answer within {TIMEOUT_S:g} s") from exc
    except httpx.ConnectError as exc:
        text = str(exc)
        if "SSL" in text or "certificate" in text.lower():
            raise Unreachable(url, "tls", f"TLS failed: {text}") from exc
        raise Unreachable(url, "refused", "connection refused (not listening: starting, stopped or crashed)") from exc
    except httpx.HTTPError as exc:
        raise Unreachable(url, "other", f"{exc.__class__.__name__}: {exc}") from exc


def _json(resp: httpx.Response) -> object:
    try:
        return resp.json()
    except ValueError:
        return None


def _join(base: str, path: str) -> str:
    return base.rstrip("/") + path


# -- single-request probes: data, and the one runner ---------------------------------------
def _status_200(resp: httpx.Response) -> bool:
    return resp.status_code == 200


@dataclass(frozen=True)
class HttpProbe:
    """A check that is one HTTP request: where it goes, which answer is fine, what to say otherwise.

    Texts are ``str.format`` templates over ``base`` (the service URL), ``url`` (requested),
    ``start`` (how to start ``service``), ``error`` (the whole unreachable message), ``reason``
    (its cause only), ``status``, ``text`` (the body, stripped) and ``host`` (of ``base``).
    ``unreachable``, ``bad`` and ``by_status`` values are ``(detail, fix)`` pairs.
    """

    base: Callable[[Context], str]
    path: str
    ok: str = "{base}"
    unreachable: tuple[str, str] = ("{error}", "")
    bad: tuple[str, str] = ("{url} → {status}", "")
    by_status: tuple[tuple[int, str, str], ...] = ()
    accept: Callable[[httpx.Response], bool] = _status_200
    service: str = ""
    method: str = "GET"
    json: object = None
    worker_side: bool = False  # the name may resolve only where the flow's workers run
    dns_fix: str = ""  # fix when the name does not resolve from here (else the unreachable fix)

    def __call__(self, ctx: Context) -> Outcome:
        base = self.base(ctx)
        url = _join(base, self.path)
        words = {"base": base, "url": url, "start": ctx.start_hint(self.service) if self.service else "",
                 "host": urlsplit(base).hostname or ""}
        try:
            resp = fetch(ctx, self.method, url, **({"json": self.json} if self.json is not None else {}))
        except Unreachable as exc:
            if exc.kind == "dns" and self.worker_side:
                return _not_resolvable(exc, "the worker")
            detail, fix = self.unreachable
            if exc.kind == "dns" and self.dns_fix:
                fix = self.dns_fix
            words.update(error=str(exc), reason=exc.detail)
            return Outcome(FAIL, detail.format(**words), fix.format(**words))
        words.update(status=resp.status_code, text=resp.text.strip())
        if self.accept(resp):
            return Outcome(OK, self.ok.format(**words))
        detail, fix = next(((d, f) for code, d, f in self.by_status if code == resp.status_code), self.bad)
        return Outcome(FAIL, detail.format(**words), fix.format(**words))


def _variable(path: str) -> Callable[[Context], str]:
    return lambda ctx: ctx.variables.get(path, "")


def _is_oidc_discovery(resp: httpx.Response) -> bool:
    body = _json(resp)
    return resp.status_code == 200 and isinstance(body, dict) and "jwks_uri" in body


LEDGER_GONE = "the ledger stopped answering; see the `ledger` check"

LEDGER = HttpProbe(
    lambda ctx: ctx.target.api_url, "/healthz", service="ledger",
    unreachable=("{error}", "the ledger API does not answer at {base}: {start}; or set WAGGLE_API_URL"),
    bad=("{url} → {status}", "the ledger answers but is unhealthy: read its log ({start})"),
)
# Unauthenticated on purpose: 400/401 prove the route is mounted; FastAPI's 404 says it is not.
CRAWL_ROUTE = HttpProbe(
    lambda ctx: ctx.target.api_url, "/api/crawls", method="POST", json={},
    accept=lambda resp: resp.status_code in (400, 401, 422),
    ok="POST /api/crawls is served ({status} without a token)",
    unreachable=("{error}", LEDGER_GONE),
    by_status=((404, "POST /api/crawls is not served",
                "the ledger has no crawl webhook: set WAGGLE_CRAWL_WEBHOOK_URL (…/api/w/{{ws}}/jobs/run/f/f/waggle/crawl_level) "
                "and WAGGLE_CRAWL_WEBHOOK_TOKEN (a Windmill token) in .env, then restart the ledger"),),
    bad=("POST /api/crawls → {status} {text:.200}", "read the ledger's log"),
)
WINDMILL = HttpProbe(
    lambda ctx: ctx.target.windmill_url, "/api/version", service="windmill", ok="{base} ({text:.40})",
    unreachable=("{error}", "Windmill does not answer at {base}: {start}; or set WINDMILL_URL"),
    # a cold Windmill answers 500 for ~30 s
    bad=("{url} → {status}", "Windmill is starting or unhealthy: wait 30 s and run doctor again; else read its log"),
)
API_FROM_FLOW = HttpProbe(
    _variable(wv.API_URL), "/healthz", ok="{base} answers", worker_side=True,
    unreachable=(f"{wv.API_URL} = {{base}}: {{reason}}",
                 "the flow reports to this URL: the ledger must listen on 0.0.0.0 (WAGGLE_API_HOST) and the URL must be the one "
                 "the workers reach (compose: http://ledger:7070); fix it with `scripts/windmill-variables --api-url …`"),
    bad=("{base}/healthz → {status}", "it is not the ledger, or the ledger is unhealthy"),
)
TS_COMPILE = HttpProbe(
    _variable(wv.TS_COMPILE_URL), "/healthz", ok="{base} answers", worker_side=True, service="ts-compile",
    unreachable=("{base}: {reason}", "ts-compile does not answer: {start}"),
    bad=("{base}/healthz → http={status}", "read the ts-compile log"),
)
ISSUER = HttpProbe(
    lambda ctx: ctx.target.issuer_url or "", "/.well-known/openid-configuration", accept=_is_oidc_discovery,
    unreachable=("{error}", "the ledger verifies every token against this issuer's keys: start it or fix WAGGLE_OIDC_ISSUER"),
    bad=("{url} → {status}", "this is not an OIDC issuer: fix WAGGLE_OIDC_ISSUER"),
)
OPENFGA = HttpProbe(
    lambda ctx: ctx.target.fga_url or "", "/healthz", service="openfga",
    unreachable=("{error}", "OpenFGA holds who may submit and view: {start}"),
    bad=("{url} → {status}", "OpenFGA is unhealthy: read its log"),
)
S3 = HttpProbe(
    lambda ctx: ctx.target.s3_endpoint or "", "/", service="seaweedfs", accept=lambda resp: True,
    ok="{base} answers (HTTP {status})",
    unreachable=("{error}", "start it: {start}"),
    dns_fix=("signed download URLs name {host}: map it on this host (`echo '127.0.0.1 {host}' | sudo tee -a /etc/hosts`) "
             "— the port is published on 127.0.0.1"),
)


# -- multi-request probes --------------------------------------------------------------------
def _windmill_get(ctx: Context, path: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {ctx.target.windmill_token}"} if ctx.target.windmill_token else {}
    return fetch(ctx, "GET", _join(ctx.target.windmill_url, f"/api/w/{ctx.target.workspace}{path}"), headers=headers)


def _token_refused(ctx: Context, status: int) -> Outcome:
    return Outcome(
        FAIL,
        f"Windmill refuses WINDMILL_TOKEN ({status})",
        "set WINDMILL_TOKEN to a token of a member of workspace "
        f"{ctx.target.workspace!r} (Windmill → account settings → tokens)",
    )


def _bad_value(path: str, value: str) -> str | None:
    """Why the flow could not use this value (None = fine)."""
    if path == wv.TOKEN:
        return "empty" if not value.strip() else None
    if path == wv.ENDPOINTS:
        try:
            items = json.loads(value)
        except ValueError:
            return f"not a JSON array: {value[:80]!r}"
        if not isinstance(items, list) or not items:
            return "not a non-empty JSON array of URLs"
        bad = [e for e in items if not (isinstance(e, str) and e.startswith(("http://", "https://")))]
        return f"not http(s) URLs: {bad}" if bad else None
    if path == wv.TLS_CA:
        return None if not value.strip() or "BEGIN CERTIFICATE" in value else "neither empty nor a PEM certificate"
    return None if value.startswith(("http://", "https://")) else f"not an http(s) URL: {value[:80]!r}"


def probe_variables(ctx: Context) -> Outcome:
    if not ctx.target.windmill_token:
        return Outcome(FAIL, "WINDMILL_TOKEN is not set", "set WINDMILL_TOKEN (a Windmill API token) in the environment or .env")
    missing, bad = [], []
    for path in wv.VARIABLES:
        try:
            resp = _windmill_get(ctx, f"/variables/get_value/{path}")
        except Unreachable as exc:
            return Outcome(FAIL, str(exc), "Windmill stopped answering; see the `windmill` check")
        if resp.status_code in (401, 403):
            return _token_refused(ctx, resp.status_code)
        if resp.status_code in (400, 404):
            missing.append(path)
            continue
        value = _json(resp)
        if resp.status_code != 200 or not isinstance(value, str):
            return Outcome(FAIL, f"variables/get_value/{path} → {resp.status_code} {resp.text[:120]!r}", "read Windmill's log")
        ctx.variables[path] = value
        why = _bad_value(path, value)
        if why:
            bad.append(f"{path}: {why}")
    if missing or bad:
        detail = "; ".join(([f"missing: {', '.join(missing)}"] if missing else []) + bad)
        fix = ("write them: `scripts/windmill-variables` (see docs/deploy.md)" if ctx.target.compose
               else "restart the local stack: `waggle dev down && waggle dev up` (it writes them)")
        return Outcome(FAIL, detail, fix)
    return Outcome(OK, f"all {len(wv.VARIABLES)} present in workspace {ctx.target.workspace}")


def probe_flow(ctx: Context) -> Outcome:
    if not ctx.target.windmill_token:
        return Outcome(FAIL, "WINDMILL_TOKEN is not set", "set WINDMILL_TOKEN (a Windmill API token)")
    try:
        resp = _windmill_get(ctx, f"/flows/exists/{FLOW_PATH}")
        present = _json(resp) if resp.status_code == 200 else None
        if resp.status_code in (401, 403):
            return _token_refused(ctx, resp.status_code)
        if not isinstance(present, bool):
            got = _windmill_get(ctx, f"/flows/get/{FLOW_PATH}")
            present = got.status_code == 200
    except Unreachable as exc:
        return Outcome(FAIL, str(exc), "Windmill stopped answering; see the `windmill` check")
    if present:
        return Outcome(OK, f"{FLOW_PATH} deployed")
    return Outcome(FAIL, f"{FLOW_PATH} is not in workspace {ctx.target.workspace}",
                   "deploy the flow from the repository root: `wmill sync push` (see docs/deploy.md)")


def probe_flow_token(ctx: Context) -> Outcome:
    token = ctx.variables.get(wv.TOKEN, "")
    try:
        resp = fetch(ctx, "GET", _join(ctx.target.api_url, "/api/me"), headers={"Authorization": f"Bearer {token}"})
    except Unreachable as exc:
        return Outcome(FAIL, str(exc), LEDGER_GONE)
    rewrite = ("re-run `scripts/windmill-variables` with a fresh token" if ctx.target.compose
               else "re-run `waggle dev up` (it mints a new flow token)")
    if resp.status_code == 401:
        return Outcome(
            FAIL,
            "the ledger refuses the flow's token (401: expired, another issuer's, or the issuer restarted with a new key)",
            f"{rewrite}; check that the ledger's WAGGLE_OIDC_ISSUER and WAGGLE_OIDC_AUDIENCE match the token's iss/aud "
            "(right after an issuer restart, new tokens can be refused for ~30 s)",
        )
    body = _json(resp)
    if resp.status_code == 404 and isinstance(body, dict) and body.get("detail") == "Not Found":
        return Outcome(FAIL, "GET /api/me is not served", "the ledger is too old or not waggle's: rebuild it (`docker compose build ledger`)")
    if resp.status_code != 200 or not isinstance(body, dict) or "canSubmit" not in body:
        return Outcome(FAIL, f"GET /api/me → {resp.status_code} {resp.text[:200]}", "read the ledger's log")
    subject, orgs = body.get("subject"), body.get("organizations") or []
    if not orgs:
        return Outcome(FAIL, f"the flow's token ({subject}) carries no organizations",
                       f"{rewrite}, minted with the organization the crawls belong to")
    if not body.get("canSubmit"):
        return Outcome(FAIL, f"{subject} may not submit for {', '.join(orgs)}",
                       f"grant it: `waggle grant submitter {subject} {orgs[0]}`")
    return Outcome(OK, f"{subject} may submit for {', '.join(orgs)}")


def _not_resolvable(exc: Unreachable, who: str) -> Outcome:
    return Outcome(
        NOT_CHECKED,
        f"{exc.detail} — {who} resolves it inside the compose network; "
        "check from there: `docker compose exec ledger scripts/doctor`",
    )


def _ca_client(pem: str) -> httpx.Client:
    return httpx.Client(verify=ssl.create_default_context(cadata=pem))


def probe_browserhive(ctx: Context) -> Outcome:
    endpoints = json.loads(ctx.variables.get(wv.ENDPOINTS, "[]"))
    pem = ctx.variables.get(wv.TLS_CA, "")
    client = _ca_client(pem) if pem.strip() else None
    problems, unresolved, ok, notes = [], [], [], []
    try:
        for ep in endpoints:
            try:
                resp = fetch(ctx, "GET", _join(ep, "/status"), client=client)
            except Unreachable as exc:
                if exc.kind == "dns":
                    unresolved.append(ep)
                else:
                    problems.append(f"{ep}: {exc.detail}")
                continue
            body = _json(resp)
            if resp.status_code != 200 or not isinstance(body, dict):
                problems.append(f"{ep}/status → http={resp.status_code}")
            else:
                ok.append(ep)
                if not (body.get("browser") or {}).get("connected", False):
                    # v12 reconnects on the next capture (contracts.md §A.10): worth saying, not a failure
                    notes.append(f"{ep}: browser disconnected until its next capture")
    finally:
        if client is not None:
            client.close()
    if problems:
        fix = ("check the capture containers: `docker compose ps`, `docker compose logs capture-1`"
               " (with the browserhive profile: `docker compose logs browserhive-1 chromium-1`)"
               if ctx.target.compose else "restart the local stack: `waggle dev down && waggle dev up`")
        return Outcome(FAIL, "; ".join(problems), fix)
    if unresolved and not ok:
        return Outcome(NOT_CHECKED, f"{', '.join(unresolved)} resolve only inside the compose network; "
                       "check from there: `docker compose exec ledger scripts/doctor`")
    note = f" ({len(unresolved)} not checked from here)" if unresolved else ""
    extra = f"; {'; '.join(notes)}" if notes else ""
    return Outcome(OK, f"{len(ok)} endpoint(s) answer /status{note}{extra}")


# -- the table: parents before children --------------------------------------------------------
PROBES: list[Check] = [
    Check("ledger", "ledger API /healthz", LEDGER),
    Check("issuer", "OIDC discovery document", ISSUER, when=lambda t: bool(t.issuer_url)),
    Check("crawl route", "the ledger serves POST /api/crawls", CRAWL_ROUTE, ("ledger",)),
    Check("windmill", "Windmill /api/version", WINDMILL),
    Check("variables", "the five u/admin/* variables", probe_variables, ("windmill",)),
    Check("flow", f"{FLOW_PATH} deployed", probe_flow, ("windmill",)),
    Check("flow token", "the ledger accepts the flow's token (GET /api/me)", probe_flow_token, ("ledger", "variables")),
    Check("flow → ledger", "waggle_api_url answers", API_FROM_FLOW, ("variables",)),
    Check("browserhive", "each endpoint's /status", probe_browserhive, ("variables",)),
    Check("ts-compile", "ts_compile_url /healthz", TS_COMPILE, ("variables",)),
    Check("openfga", "OpenFGA /healthz", OPENFGA, when=lambda t: bool(t.fga_url)),
    Check("s3", "S3 endpoint answers", S3, when=lambda t: bool(t.s3_endpoint)),
]


def checks_for(target: Target) -> list[Check]:
    """The rows of :data:`PROBES` that apply to ``target``, parents before children."""
    return [check for check in PROBES if check.when(target)]


def run_checks(target: Target, checks: list[Check] | None = None, http: httpx.Client | None = None) -> list[tuple[Check, Outcome]]:
    """Run ``checks`` in order; a check whose parents failed (or were skipped) is skipped naming them."""
    checks = checks if checks is not None else checks_for(target)
    own = http is None
    http = http or httpx.Client(timeout=TIMEOUT_S)
    ctx = Context(target, http)
    status: dict[str, str] = {}
    causes: dict[str, list[str]] = {}  # failed ancestors of each skipped/failed check
    results = []
    try:
        for check in checks:
            unknown = [n for n in check.needs if n not in status]
            if unknown:
                raise ValueError(f"check {check.name!r} needs {unknown}, which do not run before it")
            blocked = [n for n in check.needs if status[n] in (FAIL, SKIP)]
            if blocked:
                # name the failed ancestors, not the skipped checks in between
                roots = list(dict.fromkeys(r for n in blocked for r in causes[n]))
                causes[check.name] = roots
                outcome = Outcome(SKIP, f"{' and '.join(roots)} first")
            else:
                causes[check.name] = [check.name]
                try:
                    outcome = check.probe(ctx)
                except Exception as exc:  # a broken probe must not hide the other checks
                    outcome = Outcome(FAIL, f"the check itself crashed: {exc!r}", "report this as a doctor bug")
            status[check.name] = outcome.status
            results.append((check, outcome))
    finally:
        if own:
            http.close()
    return results


def report(results: list[tuple[Check, Outcome]]) -> str:
    """The printed table, then "things to fix (N):" with one line per failed check."""
    width = max((len(c.name) for c, _ in results), default=0)
    lines = []
    for check, outcome in results:
        lines.append(f"  {MARKS[outcome.status]} {check.name.ljust(width)}  {outcome.detail or check.description}")
    failed = [(c, o) for c, o in results if o.status == FAIL]
    if failed:
        lines.append("")
        lines.append(f"things to fix ({len(failed)}):")
        for check, outcome in failed:
            lines.append(f"  {check.name} — {outcome.fix or outcome.detail}")
    else:
        lines.append("")
        lines.append("nothing to fix: a crawl should run to the end.")
    return "\n".join(lines)


def target_from_env(env: dict[str, str], local: bool | None = None) -> Target:
    """The stack to check, from ``env`` (``.env`` merged in by the caller).

    Local stack (``--local``, or no ``WINDMILL_URL`` while ``state_dir/stack.json`` exists):
    URLs from stack.json, the Windmill token from ``state_dir/secrets.json``. Otherwise:
    ``WAGGLE_API_URL`` (default http://127.0.0.1:7070), ``WINDMILL_URL`` (http://127.0.0.1:8000),
    ``WINDMILL_TOKEN``, ``WINDMILL_WORKSPACE`` (waggle), ``WAGGLE_OIDC_ISSUER``,
    ``WAGGLE_FGA_API_URL`` (http://127.0.0.1:8090), ``WAGGLE_S3_ENDPOINT`` (http://seaweedfs:8333).
    """
    from pathlib import Path

    from ledger.settings import default_state_dir

    get = lambda name: (env.get(name) or "").strip() or None  # noqa: E731 — empty means absent
    state_dir = Path(get("WAGGLE_STATE_DIR")).resolve() if get("WAGGLE_STATE_DIR") else default_state_dir()
    stack_file = state_dir / "stack.json"
    if local is None:
        local = not get("WINDMILL_URL") and stack_file.is_file()
    if local:
        if not stack_file.is_file():
            raise FileNotFoundError(f"no local stack: {stack_file} is missing (run `waggle dev up`)")
        stack = json.loads(stack_file.read_text())
        services = stack.get("services", {})
        token = get("WINDMILL_TOKEN")
        secrets_file = state_dir / "secrets.json"
        if token is None and secrets_file.is_file():
            token = json.loads(secrets_file.read_text()).get("windmill_token")
        return Target(
            api_url=services.get("ledger", "http://127.0.0.1:7070"),
            windmill_url=services.get("windmill", "http://127.0.0.1:8000"),
            windmill_token=token,
            workspace=stack.get("workspace", "waggle"),
            issuer_url=services.get("issuer"),
            fga_url=services.get("openfga"),
            s3_endpoint=services.get("s3"),
            compose=False,
        )
    return Target(
        api_url=get("WAGGLE_API_URL") or "http://127.0.0.1:7070",
        windmill_url=get("WINDMILL_URL") or "http://127.0.0.1:8000",
        windmill_token=get("WINDMILL_TOKEN"),
        workspace=get("WINDMILL_WORKSPACE") or "waggle",
        issuer_url=get("WAGGLE_OIDC_ISSUER"),
        fga_url=get("WAGGLE_FGA_API_URL") or "http://127.0.0.1:8090",
        s3_endpoint=get("WAGGLE_S3_ENDPOINT") or "http://seaweedfs:8333",
        compose=True,
    )


def read_env_files(*paths: str) -> dict[str, str]:
    """``NAME=value`` lines of the given files (later files win; missing files are skipped)."""
    from pathlib import Path

    values: dict[str, str] = {}
    for path in paths:
        p = Path(path)
        if not p.is_file():
            continue
        for line in p.read_text().splitlines():
            line = line.strip()
            if not line or line.startswith("#") or "=" not in line:
                continue
            name, _, value = line.partition("=")
            values[name.strip().removeprefix("export ").strip()] = value.strip().strip("'\"")
    return values
