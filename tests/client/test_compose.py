"""compose.yaml and the Dockerfile, checked by reading them (Docker does not run here).

What is asserted is what an operator relies on: nothing published beyond loopback, every
long-running service health-checked, the Windmill deadlock avoided with two workers, two of our
capture servers built from this repository (BrowserHive, each with its own Chromium, the profile
``browserhive``), the ledger built from this repository and configured
only with settings it actually has, and the Windmill variables' defaults naming real services.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from ledger.client import windmill_vars as wv
from ledger.settings import Settings
from tests.skeleton.test_imports import import_graph
from waggle_capture.settings import BUILD

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((REPO / "compose.yaml").read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


def _expand(value: str) -> str:
    """Compose interpolation with defaults only (``${X:-d}`` → d, ``${X}``/``${X:?e}`` → X)."""
    value = re.sub(r"\$\{(\w+):-([^}]*)\}", r"\2", value)
    return re.sub(r"\$\{(\w+)(:\?[^}]*)?\}", r"<\1>", value)


def _env(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: _expand(str(v)) for k, v in env.items()}


def _one_shot(name: str, services: dict) -> bool:
    """A job that runs once and that others wait on to *complete* (no health to check)."""
    if services[name].get("restart") != "no":
        return False
    return any(
        isinstance(s.get("depends_on"), dict) and s["depends_on"].get(name, {}).get("condition") == "service_completed_successfully"
        for s in services.values()
    )


def test_every_published_port_is_loopback_only(services):
    published = 0
    for name, svc in services.items():
        for port in svc.get("ports", []):
            published += 1
            if isinstance(port, dict):
                assert port.get("host_ip") == "127.0.0.1", (name, port)
            else:
                assert re.fullmatch(r"127\.0\.0\.1:\d+:\d+(/tcp)?", str(port)), (name, port)
    assert published >= 6  # windmill, ts-compile, s3, 2× capture, openfga, ledger
    assert all("network_mode" not in s for s in services.values())  # host networking would bypass it


def test_every_service_has_a_healthcheck_except_one_shot_jobs(services):
    one_shots = [n for n in services if _one_shot(n, services)]
    assert one_shots == ["openfga-migrate"]
    for name, svc in services.items():
        if name in one_shots:
            continue
        check = svc.get("healthcheck") or {}
        assert check.get("test") and not check.get("disable"), f"{name} has no health check"
        test = check["test"]
        assert test[0] in ("CMD", "CMD-SHELL") and len(test) > 1, (name, test)


def test_dependencies_exist_and_wait_for_health(services):
    for name, svc in services.items():
        deps = svc.get("depends_on") or {}
        assert isinstance(deps, dict), f"{name}: depends_on must state conditions"
        for dep, cond in deps.items():
            assert dep in services, (name, dep)
            if cond["condition"] == "service_healthy":
                assert services[dep].get("healthcheck"), (name, dep)
            else:
                assert cond["condition"] == "service_completed_successfully" and _one_shot(dep, services)


def test_windmill_server_and_exactly_two_workers(services):
    windmill = {n: s for n, s in services.items() if "windmill-labs/windmill" in s.get("image", "")}
    modes = sorted(_env(s)["MODE"] for s in windmill.values())
    assert modes == ["server", "worker", "worker"]  # not standalone: one worker deadlocks trigger_crawl
    tags = {_expand(s["image"]).rsplit(":", 1)[1] for s in windmill.values()}
    assert len(tags) == 1 and re.fullmatch(r"\d+\.\d+\.\d+", tags.pop())  # one pinned version, no `v`
    for name, svc in windmill.items():
        assert _env(svc)["DATABASE_URL"].startswith("postgres://"), name
        assert urlsplit(_env(svc)["DATABASE_URL"]).hostname in services
    server = next(s for s in windmill.values() if _env(s)["MODE"] == "server")
    assert server["ports"] == ["127.0.0.1:8000:8000"]


def _default(services: dict) -> dict:
    """The services ``docker compose up`` starts: those in no profile."""
    return {n: s for n, s in services.items() if not s.get("profiles")}


def test_two_capture_servers_built_from_this_repository_by_default(services):
    captures = {n: s for n, s in _default(services).items() if n.startswith("capture")}
    assert sorted(captures) == ["capture-1", "capture-2"]
    serves = re.search(r'^CMD \["waggle", "capture", "serve", "--host", "0\.0\.0\.0", "--port", "(\d+)"\]$',
                       (REPO / "Dockerfile.capture").read_text(), re.M)
    assert serves, "Dockerfile.capture must run `waggle capture serve` on all interfaces"
    for name, svc in captures.items():
        assert svc["build"] == {"context": ".", "dockerfile": "Dockerfile.capture"}, name
        env = _env(svc)
        assert urlsplit(env["BROWSERHIVE_S3_ENDPOINT"]).hostname == "seaweedfs"
        assert env["BROWSERHIVE_S3_BUCKET"] == "browserhive"
        assert svc["depends_on"]["seaweedfs"]["condition"] == "service_healthy"
        assert str(svc["ports"][0]).endswith(f":{serves[1]}"), name  # published: the port it serves
        assert f"127.0.0.1:{serves[1]}/status" in " ".join(svc["healthcheck"]["test"]), name
        assert svc.get("shm_size") and svc.get("mem_limit"), name  # one Chromium inside each
    # the flow's default endpoints are these two (scripts/windmill-variables)
    assert [urlsplit(u).hostname for u in wv.DEFAULT_ENDPOINTS] == ["capture-1", "capture-2"]
    assert not any("browserhive" in s.get("image", "") or "chromium" in n for n, s in _default(services).items())


def test_browserhive_is_the_profile_alternative_each_with_its_own_chromium(services):
    hives = {n: s for n, s in services.items() if n.startswith("browserhive")}
    assert len(hives) == 2
    browsers = set()
    for name, svc in hives.items():
        assert svc["profiles"] == ["browserhive"], name
        env = _env(svc)
        chromium = urlsplit(env["BROWSERHIVE_BROWSER_URL"]).hostname
        assert chromium in services and "chromium" in chromium
        assert services[chromium]["profiles"] == ["browserhive"]
        assert svc["depends_on"][chromium]["condition"] == "service_healthy"
        browsers.add(chromium)
        s3 = urlsplit(env["BROWSERHIVE_S3_ENDPOINT"]).hostname
        assert s3 == "seaweedfs" and env["BROWSERHIVE_S3_FORCE_PATH_STYLE"] == "true"
        assert env["BROWSERHIVE_S3_BUCKET"] == "browserhive"
        # the BrowserHive release whose contract our capture server implements
        assert _expand(svc["image"]).endswith(f"/browserhive:{BUILD['version']}"), svc["image"]
    assert len(browsers) == 2


def test_host_ports_are_unique_across_profiles(services):
    """``--profile browserhive`` starts beside the default services: no published port twice."""
    host_ports = [str(p).rsplit(":", 1)[0] for s in services.values() for p in s.get("ports", [])]
    assert len(host_ports) == len(set(host_ports)), host_ports


def test_the_ledger_is_built_from_this_repository(services):
    ledger = services["ledger"]
    assert ledger["build"] == {"context": ".", "dockerfile": "Dockerfile"}
    assert (REPO / "Dockerfile").is_file()
    command = " ".join(ledger["command"])
    assert command.index("waggle db migrate") < command.index("waggle scripts load-defaults") < command.index("exec waggle serve")


def test_ledger_env_names_are_settings_fields(services):
    env = _env(services["ledger"])
    fields = {f"WAGGLE_{name.upper()}" for name in Settings.model_fields}
    unknown = sorted(set(env) - fields)
    assert unknown == [], f"compose sets names the ledger does not read: {unknown}"
    needed = {"WAGGLE_DATABASE_URL", "WAGGLE_S3_ENDPOINT", "WAGGLE_S3_BUCKET", "WAGGLE_S3_ACCESS_KEY_ID",
              "WAGGLE_S3_SECRET_ACCESS_KEY", "WAGGLE_FGA_API_URL", "WAGGLE_FGA_STORE_ID", "WAGGLE_FGA_MODEL_ID",
              "WAGGLE_OIDC_ISSUER", "WAGGLE_CRAWL_WEBHOOK_URL", "WAGGLE_CRAWL_WEBHOOK_TOKEN", "WAGGLE_API_HOST"}
    assert needed <= set(env)
    assert env["WAGGLE_API_HOST"] == "0.0.0.0"  # level reports come from the workers' containers
    # Settings accepts every value compose gives (types, ranges, the formats list)
    values = {k.removeprefix("WAGGLE_").lower(): v for k, v in env.items() if v and not v.startswith("<")}
    Settings(_env_file=None, **values)
    # internal URLs name services of this file
    for key in ("WAGGLE_DATABASE_URL", "WAGGLE_FGA_API_URL", "WAGGLE_S3_ENDPOINT", "WAGGLE_CRAWL_WEBHOOK_URL"):
        assert urlsplit(env[key]).hostname in services, key
    assert env["WAGGLE_CRAWL_WEBHOOK_URL"].endswith("/jobs/run/f/f/waggle/crawl_level")
    assert urlsplit(env["WAGGLE_DATABASE_URL"]).path == "/waggle"


def test_windmill_variable_defaults_name_compose_services(services):
    def container_port(name: str) -> set[int]:
        ports = {int(str(p).rsplit(":", 1)[1].split("/")[0]) for p in services[name].get("ports", [])}
        env = _env(services[name])
        for key in ("PORT", "BROWSERHIVE_PORT", "WAGGLE_API_PORT"):
            if key in env:
                ports.add(int(env[key]))
        return ports

    for url in (wv.DEFAULT_API_URL, *wv.DEFAULT_ENDPOINTS, wv.DEFAULT_TS_COMPILE_URL):
        parts = urlsplit(url)
        assert parts.hostname in services, url
        assert parts.port in container_port(parts.hostname), url


def test_openfga_has_its_own_postgres_and_migrates_first(services):
    env = _env(services["openfga"])
    assert env["OPENFGA_DATASTORE_ENGINE"] == "postgres"
    assert urlsplit(env["OPENFGA_DATASTORE_URI"]).hostname == "openfga-db"
    assert services["openfga-migrate"]["command"] == ["migrate"]
    assert services["openfga"]["depends_on"]["openfga-migrate"]["condition"] == "service_completed_successfully"
    assert env["OPENFGA_AUTHN_METHOD"] == "preshared"


def test_openfga_runs_as_the_local_stack_runs_it(services):
    """The image's version is scripts/bootstrap's pin; ListObjects' settings are devstack's."""
    from devstack.openfga_server import LIST_OBJECTS_SETTINGS
    from ledger.authz import fga

    pin = re.search(r"github\.com/openfga/openfga/cmd/openfga@(v[0-9.]+)", (REPO / "scripts" / "bootstrap").read_text())
    assert pin is not None
    for name in ("openfga", "openfga-migrate"):
        assert services[name]["image"].endswith(f":${{OPENFGA_VERSION:-{pin[1]}}}"), services[name]["image"]
    env = _env(services["openfga"])
    assert env["OPENFGA_LIST_OBJECTS_MAX_RESULTS"] == LIST_OBJECTS_SETTINGS["--listObjects-max-results"]
    assert env["OPENFGA_LIST_OBJECTS_DEADLINE"] == LIST_OBJECTS_SETTINGS["--listObjects-deadline"]
    assert float(LIST_OBJECTS_SETTINGS["--listObjects-deadline"].rstrip("s")) == fga.LIST_OBJECTS_DEADLINE_S
    assert env["OPENFGA_PLAYGROUND_ENABLED"] == env["OPENFGA_METRICS_ENABLED"] == "false"


def test_images_are_pinned(services):
    for name, svc in services.items():
        if "image" not in svc or "build" in svc:
            continue
        image = _expand(svc["image"])
        assert ":" in image.rsplit("/", 1)[-1] and not image.endswith(":latest"), (name, image)


def test_dockerfile_and_dockerignore():
    text = (REPO / "Dockerfile").read_text()
    froms = re.findall(r"^FROM (\S+)", text, re.M)
    assert froms and all(f.startswith(("docker.io/library/python:3.11-", "docker.io/library/node:")) for f in froms)
    # the one other stage: ReplayWeb.page's pinned npm package for the web page (no build step)
    assert re.search(r"^FROM docker\.io/library/node:\d+-bookworm-slim AS replay$", text, re.M)
    assert "npm ci --ignore-scripts" in text and re.search(r"^ENV .*WAGGLE_REPLAY_DIR=/app/replay", text, re.M | re.S)
    assert re.search(r'^CMD \["waggle", "serve"\]', text, re.M)
    assert re.search(r"^EXPOSE 7070$", text, re.M)
    assert re.search(r"^USER waggle$", text, re.M)  # not root
    assert "[dev" not in text  # the stand-ins and browsers stay out of the image
    for src in re.findall(r"^COPY (?!--from)(.+) \S+$", text, re.M):
        for path in src.split():
            assert (REPO / path).exists() or path == "README.md", f"Dockerfile copies missing {path}"
    ignored = (REPO / ".dockerignore").read_text().split()
    assert {".git", ".venv", ".env", "**/node_modules"} <= set(ignored)


def _dockerignored(path: str) -> bool:
    """Whether .dockerignore keeps ``path`` out of the build context (last matching line wins;
    a line matches the path or one of its parent directories)."""
    import fnmatch

    parts = path.split("/")
    excluded = False
    for line in (REPO / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate, pattern = line.startswith("!"), line.lstrip("!").removeprefix("**/")
        if any(fnmatch.fnmatch("/".join(parts[i:j]), pattern) for j in range(1, len(parts) + 1)
               for i in range(0, j if line.lstrip("!").startswith("**/") else 1)):
            excluded = not negate
    return excluded


def test_capture_dockerfile_runs_debians_chromium_and_copies_what_it_imports():
    text = (REPO / "Dockerfile.capture").read_text()
    froms = re.findall(r"^FROM (\S+)", text, re.M)
    assert froms and all(f.startswith("docker.io/library/python:3.11-slim-bookworm") for f in froms)
    assert re.search(r"apt-get install -y --no-install-recommends chromium\b", text)  # Debian's Chromium
    assert re.search(r"^ENV .*PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1", text, re.M | re.S)
    assert "playwright install" not in text and "[dev" not in text
    assert '[capture]"' in text  # the wheel with its capture extra (pyproject.toml)
    user = re.findall(r"^USER (\S+)$", text, re.M)
    assert user and user[-1] not in ("root", "0")
    assert re.search(r"^EXPOSE 50051$", text, re.M)
    copied = []
    for src in re.findall(r"^COPY (?!--from)(.+) \S+$", text, re.M):
        for path in src.split():
            assert (REPO / path).exists(), f"Dockerfile.capture copies missing {path}"
            assert not _dockerignored(path), f".dockerignore keeps {path} out of the build context"
            copied.append(path)
    # the flow modules waggle_capture imports, directly or through one another, are all copied
    graph, todo, needed = import_graph(), [m for m in import_graph() if m.startswith("waggle_capture")], set()
    while todo:
        for dst in graph.get(todo.pop(), ()):
            if dst.startswith("f.") and dst not in needed:
                needed.add(dst)
                todo.append(dst)
    assert needed, "waggle_capture imports no flow module any more: drop the COPY of f/ files"
    assert sorted(m.replace(".", "/") + ".py" for m in needed) == sorted(p for p in copied if p.startswith("f/"))


def test_dockerignore_reading_can_fail():
    assert _dockerignored("tests/x.py") and _dockerignored("f/waggle/plan_level.py")
    assert _dockerignored("ledger/__pycache__/x.pyc") and not _dockerignored("ledger/cli.py")
    assert not _dockerignored("f/waggle/robots.py")


# The image installs the project without [dev]: these modules are absent there. One process
# runs several `waggle` command lines in turn (each one's exit code printed after it).
BLOCKER = (
    "import json, sys, importlib.abc\n"
    "BLOCK = {'pgserver', 'playwright', 'py_mini_racer', 'wacz', 'pywb', 'cdxj_indexer', 'openfga_cli'}\n"
    "class Block(importlib.abc.MetaPathFinder):\n"
    "    def find_spec(self, name, path, target=None):\n"
    "        if name.split('.')[0] in BLOCK: raise ImportError('dev extra not in the image: ' + name)\n"
    "sys.meta_path.insert(0, Block())\n"
    "from waggle.cli import app\n"
    "from ledger.api.app import create_app\n"
    "for argv in json.loads(sys.argv[1]):\n"
    "    try:\n"
    "        app(argv, prog_name='waggle')\n"
    "        code = 0\n"
    "    except SystemExit as exc:\n"
    "        code = exc.code or 0\n"
    "    print(f'=== exit {code}', flush=True)\n"
)


def test_the_image_cli_runs_without_the_dev_extras(create_database):
    import json

    clean = {k: v for k, v in os.environ.items() if not k.startswith("WAGGLE_")}
    env = {**clean, "COLUMNS": "200", "WAGGLE_DATABASE_URL": create_database()}
    # --help, then the compose command's steps on a real database, then migrate again (idempotent)
    runs = [["--help"], ["db", "migrate"], ["scripts", "load-defaults"], ["db", "migrate"]]
    out = subprocess.run([sys.executable, "-c", BLOCKER, json.dumps(runs)], cwd=REPO, capture_output=True,
                         text=True, timeout=180, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    parts = out.stdout.split("=== exit ")
    assert [p.split("\n", 1)[0] for p in parts[1:]] == ["0", "0", "0", "0"], out.stdout[-3000:] + out.stderr[-2000:]
    for command in ("serve", "db", "crawl", "grant", "fga"):
        assert re.search(rf"│ {command}\s", parts[0]), command
    assert "applied 001_initial.sql" in parts[1]
    assert "up to date" in parts[3]
