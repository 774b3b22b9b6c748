"""wacz-auth signing of a capture's WACZ (contracts.md §A.3 ``signing``, §B.5 datapackage-digest.json;
docs/capture-server.md "Extension signing").

The capture server holds no key: it POSTs ``{"hash": "sha256:<hex of datapackage.json>",
"created": <datapackage created>}`` to an authsign ``/sign`` URL (Webrecorder's signing server,
the one Browsertrix uses), then checks the answer before writing it as ``signedData``: the hash
and ``created`` are its own, and authsign's own verifier accepts it
(:func:`ledger.archive.signature.verify_signed_data`, the ledger's check at admission) against
the trusted roots file (signature with the domain certificate's key, both certificate
chains to a trusted root, RFC 3161 timestamp over the signature, dates in range). A signature
that cannot be obtained or does not verify is a :class:`SigningFailed`; the capture then fails
with type ``signing`` and no WACZ is written.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import httpx

from ledger.archive.signature import verify_signed_data

POLICIES = ("forbidden", "optional", "required")
FAILURE_PREFIX = "a signature was required and could not be obtained: "

log = logging.getLogger("capture.signing")


class SigningFailed(Exception):
    """No usable signature: ``str()`` is the report's message (begins with :data:`FAILURE_PREFIX`)."""

    def __init__(self, why: str):
        super().__init__(FAILURE_PREFIX + why)


@dataclass(frozen=True)
class SignerSettings:
    """``url``: authsign's ``/sign``; ``token``: its bearer token (None: none); ``policy``: one of
    :data:`POLICIES`; ``trusted_roots``: authsign roots YAML (SHA-256 fingerprints of trusted
    domain and timestamp roots); ``timeout_ms``: one signing request's budget."""

    url: str | None = None
    token: str | None = None
    policy: str = "forbidden"
    trusted_roots: str | None = None
    timeout_ms: int = 10_000

    def wants_signature(self, requested: bool | None) -> bool:
        """Whether a capture with request field ``signing`` = ``requested`` is signed (the
        request was validated by :func:`refusal` first)."""
        return bool(requested) if requested is not None else self.policy == "required"

    def refusal(self, requested: bool | None) -> str | None:
        """Why a request with ``signing`` = ``requested`` is refused (400), or None."""
        if requested and self.policy == "forbidden":
            return "signing: this server has no signer configured (signing policy 'forbidden')"
        if requested is False and self.policy == "required":
            return "signing: this server signs every WACZ (signing policy 'required'); send true or omit it"
        return None


def sign_digest(settings: SignerSettings, digest: str, created: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Sign ``digest`` (``sha256:<hex>`` of the datapackage.json bytes) dated ``created``
    (``%Y-%m-%dT%H:%M:%SZ``, the datapackage's own). Blocking (run it in a thread).

    Returns ``(signedData, report_signature)``: the authsign answer as written into
    datapackage-digest.json, and the report's ``signature`` object ``{signed, domain, checks}``.
    Raises :class:`SigningFailed`.
    """
    if not settings.url:
        raise SigningFailed("no signing URL is configured")
    headers = {"Authorization": f"bearer {settings.token}"} if settings.token else {}  # authsign wants lower-case
    try:
        resp = httpx.post(settings.url, json={"hash": digest, "created": created}, headers=headers,
                          timeout=settings.timeout_ms / 1000)
    except httpx.HTTPError as exc:
        raise SigningFailed(f"the signer at {settings.url} did not answer ({type(exc).__name__}: {exc})") from exc
    if resp.status_code != 200:
        raise SigningFailed(f"the signer answered HTTP {resp.status_code}: {resp.text[:300]}")
    try:
        signed = resp.json()
    except ValueError as exc:
        raise SigningFailed("the signer's answer is not JSON") from exc
    if not isinstance(signed, dict) or signed.get("hash") != digest:
        raise SigningFailed("the signer's answer signs another hash")
    if signed.get("created") != created:
        raise SigningFailed(f"the signer's answer is dated {signed.get('created')!r}, not {created!r}")
    checks = verify_signed_data(signed, settings.trusted_roots)
    if checks["problem"]:
        raise SigningFailed(f"the signer's answer does not verify: {checks['problem']}")
    return signed, {"signed": True, "domain": signed.get("domain"), "checks": checks["checks"]}
