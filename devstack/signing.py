"""The signing part of the local stack (issue 24 item 6; docs/decisions/131-signed-wacz.md).

Three real services, in order:

1. **pebble** (Let's Encrypt's test ACME server, Go, built by ``scripts/bootstrap`` into
   ``.tools/go/bin``): ACME directory on ``https://127.0.0.1:<pebble>/dir``, its management
   interface (roots, intermediates) on ``<pebble-mgmt>``; validates HTTP-01 challenges on
   ``localhost:<acme-http>``. It makes a new CA at every start.
2. **tsa** (the sigstore timestamp authority, Go): RFC 3161 on
   ``http://127.0.0.1:<tsa>/api/v1/timestamp``, in-memory signer (a new chain at every start),
   the chain included in each token.
3. **authsign** (Webrecorder's signing server, PyPI): gets its domain certificate for
   ``localhost`` from pebble over ACME (HTTP-01 on ``<acme-http>``), timestamps each signature
   with the tsa, answers ``POST /sign`` (bearer token: the stack secret ``signing_token``).

:func:`refresh_trusted_roots` then adds the SHA-256 fingerprints of pebble's and the tsa's
chain tops to ``data/signing/trusted-roots.yaml`` (authsign's roots format). The file only
grows: archives signed under an earlier run's CA still verify. The capture servers check the
signer's answer against it, the ledger checks every signed WACZ against it
(``WAGGLE_SIGNING_TRUSTED_ROOTS``), and ``waggle verify`` reads it from stack.json.
"""

from __future__ import annotations

import datetime
import hashlib
import json
from pathlib import Path

import httpx
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from devstack.layout import HOST, REPO, StackConfig
from devstack.supervisor import Service, StackError

GO_BIN = REPO / ".tools" / "go" / "bin"
AUTHSIGN_PYTHON = REPO / ".tools" / "authsign" / "bin" / "python"  # scripts/bootstrap: authsign's own venv
DOMAIN = "localhost"  # the signer's identity: pebble validates it over HTTP-01 on loopback
SERVICES = ("pebble", "tsa", "authsign")


def port(config: StackConfig, name: str) -> int:
    return config.port(name)  # defaults in devstack.layout.DEFAULT_PORTS


def signing_dir(config: StackConfig) -> Path:
    return config.data / "signing"


def trusted_roots_path(config: StackConfig) -> Path:
    return signing_dir(config) / "trusted-roots.yaml"


def sign_url(config: StackConfig) -> str:
    return f"http://{HOST}:{port(config, 'authsign')}/sign"


def missing_tools() -> list[str]:
    """The Go tools of the signing services that are not built yet."""
    missing = [f"{GO_BIN / name} — run scripts/bootstrap (builds it from the Go module proxy)"
               for name in ("pebble", "timestamp-server") if not (GO_BIN / name).exists()]
    if not AUTHSIGN_PYTHON.exists():
        missing.append(f"{AUTHSIGN_PYTHON} — run scripts/bootstrap (authsign's own venv)")
    return missing


def _tls_pair(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for pebble's own HTTPS listeners (127.0.0.1, localhost), kept."""
    cert, key = directory / "pebble-tls.pem", directory / "pebble-tls.key"
    if cert.exists() and key.exists():
        return cert, key
    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "waggle pebble listener")])
    now = datetime.datetime.now(datetime.timezone.utc)
    import ipaddress

    crt = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(private.public_key())
           .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
           .not_valid_after(now + datetime.timedelta(days=3650))
           .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                       x509.IPAddress(ipaddress.ip_address(HOST))]), critical=False)
           .sign(private, hashes.SHA256()))
    key.write_bytes(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    key.chmod(0o600)
    cert.write_bytes(crt.public_bytes(serialization.Encoding.PEM))
    return cert, key


def pebble_service(config: StackConfig) -> Service:
    d = signing_dir(config)
    d.mkdir(parents=True, exist_ok=True)
    cert, key = _tls_pair(d)
    conf = {"pebble": {
        "listenAddress": f"{HOST}:{port(config, 'pebble')}",
        "managementListenAddress": f"{HOST}:{port(config, 'pebble-mgmt')}",
        "certificate": str(cert), "privateKey": str(key),
        "httpPort": port(config, "acme-http"), "tlsPort": port(config, "acme-http") + 1,
        "ocspResponderURL": "", "externalAccountBindingRequired": False,
        "retryAfter": {"authz": 1, "order": 1}, "keyAlgorithm": "ecdsa",
        "profiles": {"default": {"description": "waggle local stack", "validityPeriod": 7776000}},
    }}
    path = d / "pebble.json"
    path.write_text(json.dumps(conf, indent=2) + "\n")
    return Service("pebble", [str(GO_BIN / "pebble"), "-config", str(path)], port(config, "pebble"), "/dir",
                   scheme="https",
                   # no random 0-15 s sleep before validating, no random nonce rejection: both are
                   # pebble's ways of testing client retries, not part of issuing a certificate
                   env={"PEBBLE_VA_NOSLEEP": "1", "PEBBLE_WFE_NONCEREJECT": "0"})


def tsa_service(config: StackConfig) -> Service:
    return Service("tsa", [str(GO_BIN / "timestamp-server"), "serve", "--host", HOST,
                           "--port", str(port(config, "tsa")), "--timestamp-signer", "memory",
                           "--include-chain-in-response", "--disable-ntp-monitoring", "--log-type", "prod"],
                   port(config, "tsa"), "/ping",
                   # our build's metrics address (devstack/patches/tsa_prometheus.go); upstream's is
                   # :2112 of every interface, which allowed one stack per machine
                   env={"TSA_METRICS_ADDR": f"{HOST}:{port(config, 'tsa-metrics')}"})


def authsign_service(config: StackConfig) -> Service:
    d = signing_dir(config)
    conf = {
        "signing": {
            "domain": DOMAIN, "email": "signer@waggle.invalid", "port": port(config, "acme-http"),
            "output": str(d / "authsign"),
            "staging": f"https://{HOST}:{port(config, 'pebble')}/dir",  # a URL: this ACME directory
            "timestamping": [{"url": f"http://{HOST}:{port(config, 'tsa')}/api/v1/timestamp"}],
        },
        "cert_duration": {"days": 7},
        "stamp_duration": {"minutes": 10},
        "trusted_roots": str(trusted_roots_path(config)),
    }
    path = d / "authsign.yaml"
    path.write_text(yaml.safe_dump(conf, sort_keys=False))
    (d / "authsign").mkdir(parents=True, exist_ok=True)
    return Service("authsign", [str(AUTHSIGN_PYTHON), "-m", "uvicorn", "authsign.main:app", "--host", HOST,
                                "--port", str(port(config, "authsign")), "--workers", "1"],
                   port(config, "authsign"), "/openapi.json", ready_timeout_s=120.0,
                   env={"CONFIG": str(path), "AUTH_TOKEN": config.secret("signing_token"),
                        # its ACME client talks to pebble's self-signed listener on loopback on purpose
                        "PYTHONWARNINGS": "ignore:Unverified HTTPS request"})


def _fingerprint_of_top(pem_chain: str) -> str:
    """SHA-256 fingerprint (hex) of the last certificate of a PEM chain."""
    certs = x509.load_pem_x509_certificates(pem_chain.encode())
    if not certs:
        raise StackError("an empty certificate chain")
    return hashlib.sha256(certs[-1].public_bytes(serialization.Encoding.DER)).hexdigest()


def refresh_trusted_roots(config: StackConfig) -> Path:
    """Add the running pebble's issuing chain top (what ends the chain authsign is given: its
    intermediate, and its root) and the tsa chain's root to the trusted roots file; returns its path."""
    mgmt = f"https://{HOST}:{port(config, 'pebble-mgmt')}"
    try:
        domain = {_fingerprint_of_top(httpx.get(f"{mgmt}/{kind}/0", verify=False, timeout=10).text)
                  for kind in ("intermediates", "roots")}
        chain = httpx.get(f"http://{HOST}:{port(config, 'tsa')}/api/v1/timestamp/certchain", timeout=10).text
        stamp = {_fingerprint_of_top(chain)}
    except (httpx.HTTPError, ValueError) as exc:
        raise StackError(f"could not read the signing roots from pebble and the tsa: {exc}") from exc
    path = trusted_roots_path(config)
    try:
        kept = yaml.safe_load(path.read_text()) or {}
    except OSError:
        kept = {}
    doc = {"domain_cert_roots": sorted(set(kept.get("domain_cert_roots") or []) | domain),
           "timestamp_cert_roots": sorted(set(kept.get("timestamp_cert_roots") or []) | stamp)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# SHA-256 fingerprints of the local stack's pebble and tsa roots (devstack/signing.py);\n"
                    "# every run's are kept, so earlier signatures still verify.\n" + yaml.safe_dump(doc))
    return path
