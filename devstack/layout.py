"""Where the local stack's parts live: ports, URLs, state files and kept secrets of one state directory.

No process is started here; every other stack module reads its addresses and secrets from a
:class:`StackConfig`.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
WORKSPACE = "waggle"
FLOW_PATH = "f/waggle/crawl_level"
FLOW_SUBJECT = "waggle-flow"
DEFAULT_PORTS = {
    "s3": 8333,
    "openfga": 8090,
    "openfga-grpc": 8091,  # loopback only: OpenFGA's HTTP API calls its own gRPC server
    "issuer": 9099,
    "tscompile": 8085,
    "windmill": 8000,
    "ledger": 7070,
    # signing (devstack/signing.py): pebble's ACME directory and management interface, the port
    # pebble validates HTTP-01 challenges on (authsign answers there), the timestamp authority, authsign
    "pebble": 14000,
    "pebble-mgmt": 15000,
    "acme-http": 5002,
    "tsa": 3004,
    "tsa-metrics": 3005,  # its Prometheus metrics, loopback (devstack/patches/tsa_prometheus.go)
    "authsign": 8099,
}
CAPTURE_BASE_PORT = 8201
S3_ACCESS_KEY = "browserhive"
S3_SECRET_KEY = "browserhive"
S3_REGION = "us-east-1"


@dataclass
class StackConfig:
    """What ``up`` starts. ``ports`` maps service name → port (captures: ``capture-1``…)."""

    state_dir: Path
    captures: int = 2
    ports: dict[str, int] = field(default_factory=dict)
    subject: str = "local"
    organization: str = "default"
    bucket: str = "browserhive"
    flow_root: Path | None = None  # where the runner reads f/ (default: this checkout); a benchmark's patched copy
    capture_faults: bool = False  # the capture servers' test-only GET/PUT /faults (tests' stacks only)

    def port(self, name: str) -> int:
        if name in self.ports:
            return self.ports[name]
        if name.startswith("capture-"):
            return CAPTURE_BASE_PORT + int(name.split("-", 1)[1]) - 1
        return DEFAULT_PORTS[name]

    def url(self, name: str) -> str:
        return f"http://{HOST}:{self.port(name)}"

    def capture_names(self) -> list[str]:
        return [f"capture-{i}" for i in range(1, self.captures + 1)]

    @property
    def data(self) -> Path:
        return self.state_dir / "data"

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

    def fga_ids(self) -> dict:
        """``{"store_id", "model_id", "model_sha", "granted"}`` kept by an earlier ``up`` ({} before the first)."""
        try:
            return json.loads((self.state_dir / "fga.json").read_text())
        except (OSError, ValueError):
            return {}

    def save_fga_ids(self, fga: dict) -> None:
        (self.state_dir / "fga.json").write_text(json.dumps(fga))


def stack_file(state_dir: Path) -> Path:
    return state_dir / "stack.json"


def read_stack(state_dir: Path) -> dict:
    """The stack.json of ``state_dir`` ({} when ``up`` never ran there)."""
    try:
        return json.loads(stack_file(state_dir).read_text())
    except (OSError, ValueError):
        return {}


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
        capture_faults=bool(saved.get("captureFaults", False)),
    )


def stack_info(config: StackConfig, database_url: str) -> dict:
    """The content of stack.json: service URLs (in start order), identity, bucket, S3 keys, FGA ids."""
    return {
        "services": {
            "s3": config.url("s3"),
            "openfga": config.url("openfga"),
            "issuer": config.url("issuer"),
            "tscompile": config.url("tscompile"),
            "pebble": f"https://{HOST}:{config.port('pebble')}",
            "tsa": config.url("tsa"),
            "authsign": config.url("authsign"),
            **{n: config.url(n) for n in config.capture_names()},
            "windmill": config.url("windmill"),
            "ledger": config.url("ledger"),
        },
        "captures": config.captures,
        "captureFaults": config.capture_faults,
        "ports": {**DEFAULT_PORTS, **{n: config.port(n) for n in [*DEFAULT_PORTS, *config.capture_names()]}},
        "subject": config.subject,
        "organization": config.organization,
        "bucket": config.bucket,
        "workspace": WORKSPACE,
        "flow_subject": FLOW_SUBJECT,
        "database_url": database_url,
        # authsign roots YAML of this stack's pebble and tsa (`waggle verify` reads it from here)
        "signing_trusted_roots": str(config.data / "signing" / "trusted-roots.yaml"),
        "state_dir": str(config.state_dir),
        "fga": config.fga_ids(),
        "s3": {"endpoint": config.url("s3"), "region": S3_REGION,
               "access_key_id": S3_ACCESS_KEY, "secret_access_key": S3_SECRET_KEY},
    }
