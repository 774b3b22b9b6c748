"""``waggle verify FILE.wacz``: check a downloaded WACZ offline (issue 24 item 6).

The same check the ledger runs at admission (:func:`ledger.archive.wacz_check.check_zip` with
its signature, :mod:`ledger.archive.signature`): every file ``datapackage.json`` lists is hashed,
``datapackage-digest.json`` must hash ``datapackage.json``, and a ``signedData`` must verify
against the trusted roots. Nothing is fetched: the certificates are in the file.

Trusted roots, first found: ``--trusted-roots``, ``WAGGLE_SIGNING_TRUSTED_ROOTS``, the local
stack's (``signing_trusted_roots`` in ``$WAGGLE_STATE_DIR/stack.json``), else authsign's bundled
public roots (Let's Encrypt, public timestamp authorities).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ledger.archive.wacz_check import WaczCheck, check_zip

EXIT_VERIFIED, EXIT_FAILED, EXIT_UNSIGNED = 0, 1, 2


@dataclass(frozen=True)
class FileVerdict:
    """``code``: :data:`EXIT_VERIFIED` (signed, signature and every hash verify),
    :data:`EXIT_FAILED` (something does not verify: ``lines`` say what) or :data:`EXIT_UNSIGNED`
    (no signature; the hashes were checked); ``lines``: what a person reads."""

    code: int
    lines: list[str]
    check: WaczCheck | None = None


def default_trusted_roots(env: dict[str, str] | None = None) -> str | None:
    """The roots YAML ``waggle verify`` uses without ``--trusted-roots`` (see the module doc)."""
    env = dict(os.environ) if env is None else env
    if env.get("WAGGLE_SIGNING_TRUSTED_ROOTS"):
        return env["WAGGLE_SIGNING_TRUSTED_ROOTS"]
    from ledger.settings import default_state_dir

    state = Path(env["WAGGLE_STATE_DIR"]) if env.get("WAGGLE_STATE_DIR") else default_state_dir()
    try:
        roots = json.loads((state / "stack.json").read_text()).get("signing_trusted_roots")
    except (OSError, ValueError):
        return None
    return roots if roots and Path(roots).exists() else None


def verify_file(path: Path, trusted_roots: str | None) -> FileVerdict:
    """Check the WACZ at ``path`` (see the module doc). Never raises for a bad file."""
    try:
        size = path.stat().st_size
        fh = path.open("rb")
    except OSError as exc:
        return FileVerdict(EXIT_FAILED, [f"cannot read {path}: {exc.strerror or exc}"])
    with fh:
        def fetch(start: int, length: int) -> bytes:
            fh.seek(start)
            return fh.read(length)

        check = check_zip(size, fetch, hash_max_bytes=1 << 62, trusted_roots=trusted_roots)
    sig = check.signature
    roots = trusted_roots or "authsign's bundled public roots"
    if check.refusal is not None:
        return FileVerdict(EXIT_FAILED, [f"{path}: does NOT verify: {check.refusal}", f"trusted roots: {roots}"], check)
    if check.problem is not None:
        return FileVerdict(EXIT_FAILED, [f"{path}: does NOT verify: {check.problem}"], check)
    if not sig.signed:
        return FileVerdict(EXIT_UNSIGNED, [f"{path}: not signed (no signedData in datapackage-digest.json);"
                                           " every file datapackage.json lists matches its hash"], check)
    return FileVerdict(EXIT_VERIFIED, [
        f"{path}: signature verified",
        f"signed by: {sig.domain}",
        f"timestamp: {sig.timestamp} (RFC 3161)",
        "every file datapackage.json lists matches its hash; datapackage.json matches the signed hash",
        f"trusted roots: {roots}",
    ], check)
