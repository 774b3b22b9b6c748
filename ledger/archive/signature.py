"""The wacz-auth signature of a WACZ: does it verify? (WACZ Signing and Verification 0.1.0;
contracts.md §B.5; docs/decisions/131-signed-wacz.md.)

A signed WACZ carries ``datapackage-digest.json`` = ``{"path": "datapackage.json", "hash":
"sha256:<hex>", "signedData": {hash, created, software, signature, domain, domainCert,
timeSignature, timestampCert}}``. It verifies when

* ``hash`` is the SHA-256 of the ``datapackage.json`` bytes in the zip, and ``signedData.hash``
  is that same hash;
* ``signedData.created`` is the datapackage's ``created``;
* authsign's verifier (the one Browsertrix's signer ships) accepts ``signedData``: the ECDSA
  signature of the hash with the domain certificate's key, the domain certificate's chain up to
  a trusted root, the certificate's name = ``domain``, an RFC 3161 timestamp over the signature
  whose chain ends at a trusted timestamp root, and ``created`` within the stamp window.

The files the datapackage lists are checked against their hashes by
:mod:`ledger.archive.wacz_check` (always, whatever their size, for a signed WACZ).
Trusted roots: an authsign roots YAML (``domain_cert_roots`` / ``timestamp_cert_roots``, SHA-256
fingerprints); the local stack writes one for its pebble and timestamp authority
(``WAGGLE_SIGNING_TRUSTED_ROOTS``); None = authsign's bundled public roots.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import sys
import threading
import zipfile
from dataclasses import dataclass
from typing import Any

DIGEST_MAX_BYTES = 256 * 1024  # certificates and tokens: a few KB
# WACZ checks run in threads (up to 8 at once); authsign reports its failed step only through
# its logger, so one verification at a time reads it (each takes milliseconds)
_VERIFYING = threading.Lock()


@dataclass(frozen=True)
class SignatureCheck:
    """``signed``: the WACZ carries ``signedData``; ``verified``: it verifies (above);
    ``domain``: the signer's domain (``signedData.domain``); ``problem``: why it does not verify
    (None when it does); ``timestamp``: the RFC 3161 time, ISO-8601."""

    signed: bool
    verified: bool = False
    domain: str | None = None
    problem: str | None = None
    timestamp: str | None = None


UNSIGNED = SignatureCheck(signed=False)


class _Steps(logging.Handler):
    """Collects authsign's log lines during one verification: the last ✗ line names the failed step."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.failed: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = re.sub(r"\x1b\[[0-9;]*m", "", record.getMessage()).strip()
        if text.startswith("\u2717"):
            self.failed.append(text[1:].strip().splitlines()[0][:300])


def _verifier_class():
    """authsign's ``Verifier``. Its ``pem`` dependency imports pyOpenSSL only for optional Twisted
    helpers, and skips them on ImportError; the pyOpenSSL that pywb's pin leaves in this
    environment (22.x) fails to load against cryptography 50 with AttributeError instead, so a
    broken pyOpenSSL is marked absent first (the verifier itself uses ``cryptography`` only)."""
    if "authsign.verifier" not in sys.modules:
        try:
            import OpenSSL  # noqa: F401
        except AttributeError:
            sys.modules["OpenSSL"] = None  # type: ignore[assignment]
    from authsign.verifier import Verifier

    return Verifier


def verify_signed_data(signed: dict[str, Any], trusted_roots: str | None) -> dict[str, Any]:
    """authsign's verification of one ``signedData`` object against ``trusted_roots`` (a roots
    YAML path; None: authsign's bundled roots).

    Returns ``{"problem": None | str, "observer", "timestamp", "checks"}``; ``checks`` is the
    capture report's ``{signature, chain, domain, timestamp}`` (``ok`` or ``failed``);
    ``problem`` names the first step that failed, in authsign's words."""
    with _VERIFYING:
        return _verify_locked(signed, trusted_roots)


def _verify_locked(signed: dict[str, Any], trusted_roots: str | None) -> dict[str, Any]:
    Verifier = _verifier_class()  # late: the import loads rfc3161ng and its patches
    steps = _Steps()
    logger = logging.getLogger("authsign")
    logger.addHandler(steps)
    level, propagate = logger.level, logger.propagate
    logger.setLevel(logging.INFO)
    logger.propagate = False  # its step-by-step lines (colour codes) are read here, not logged per WACZ
    try:
        result = Verifier(trusted_roots)(dict(signed))
        return {"problem": None, "observer": result.observer, "timestamp": result.timestamp,
                "checks": {"signature": "ok", "chain": "ok", "domain": "ok", "timestamp": "ok"}}
    except Exception as exc:  # noqa: BLE001 - authsign raises AssertionError (step logged) or a parse error
        why = steps.failed[-1] if steps.failed else (f"{type(exc).__name__}: {exc}"[:300])
        return {"problem": f"authsign: {why}", "observer": None, "timestamp": None,
                "checks": {"signature": "failed", "chain": "failed", "domain": "failed", "timestamp": "failed"}}
    finally:
        logger.removeHandler(steps)
        logger.setLevel(level)
        logger.propagate = propagate


def check_signature(zf: zipfile.ZipFile, trusted_roots: str | None) -> SignatureCheck:
    """The signature of the open WACZ ``zf``: :data:`UNSIGNED` without ``signedData``, else a
    :class:`SignatureCheck` (``verified`` or its ``problem``). Never raises for a bad WACZ."""
    names = set(zf.namelist())
    if "datapackage-digest.json" not in names:
        return UNSIGNED
    try:
        info = zf.getinfo("datapackage-digest.json")
        if info.file_size > DIGEST_MAX_BYTES:
            return SignatureCheck(True, problem=f"datapackage-digest.json is larger than {DIGEST_MAX_BYTES} bytes")
        digest = json.loads(zf.read("datapackage-digest.json").decode("utf-8"))
    except (ValueError, UnicodeDecodeError, zipfile.BadZipFile) as exc:
        return SignatureCheck(True, problem=f"datapackage-digest.json is not readable JSON ({exc})"[:300])
    signed = digest.get("signedData") if isinstance(digest, dict) else None
    if not signed:
        return UNSIGNED
    if not isinstance(signed, dict):
        return SignatureCheck(True, problem="datapackage-digest.json: signedData is not an object")
    domain = signed.get("domain") if isinstance(signed.get("domain"), str) else None
    if "datapackage.json" not in names:
        return SignatureCheck(True, domain=domain, problem="the WACZ lacks datapackage.json")
    return check_signed_package(zf.read("datapackage.json"), digest, trusted_roots)


def check_signed_package(package_bytes: bytes, digest: dict, trusted_roots: str | None) -> SignatureCheck:
    """The signature ``digest`` (a parsed ``datapackage-digest.json`` with ``signedData``) over
    ``package_bytes`` (a ``datapackage.json``): as :func:`check_signature`, for a datapackage
    carried elsewhere (a combined WACZ's members, decision 342)."""
    signed = digest.get("signedData") if isinstance(digest, dict) else None
    if not isinstance(signed, dict):
        return SignatureCheck(True, problem="datapackage-digest.json: signedData is not an object")
    domain = signed.get("domain") if isinstance(signed.get("domain"), str) else None
    actual = "sha256:" + hashlib.sha256(package_bytes).hexdigest()
    if digest.get("hash") != actual:
        return SignatureCheck(True, domain=domain,
                              problem="datapackage.json does not match the hash in datapackage-digest.json")
    if signed.get("hash") != actual:
        return SignatureCheck(True, domain=domain, problem="the signature is over another datapackage.json hash")
    try:
        created = json.loads(package_bytes.decode("utf-8")).get("created")
    except (ValueError, UnicodeDecodeError, AttributeError):
        return SignatureCheck(True, domain=domain, problem="datapackage.json is not JSON")
    if signed.get("created") != created:
        return SignatureCheck(True, domain=domain, problem=f"the signature is dated {signed.get('created')!r},"
                                                           f" the datapackage was created {created!r}")
    result = verify_signed_data(signed, trusted_roots)
    if result["problem"]:
        return SignatureCheck(True, domain=domain, problem=f"the signature does not verify: {result['problem']}")
    return SignatureCheck(True, verified=True, domain=result["observer"] or domain, timestamp=result["timestamp"])
