"""``waggle verify FILE.wacz``: check a downloaded WACZ offline (issue 24 item 6).

The same check the ledger runs at admission (:func:`ledger.archive.wacz_check.check_zip` with
its signature, :mod:`ledger.archive.signature`): every file ``datapackage.json`` lists is hashed,
``datapackage-digest.json`` must hash ``datapackage.json``, and a ``signedData`` must verify
against the trusted roots. Nothing is fetched: the certificates are in the file.

Trusted roots, first found: ``--trusted-roots``, ``WAGGLE_SIGNING_TRUSTED_ROOTS``, the local
stack's (``signing_trusted_roots`` in ``$WAGGLE_STATE_DIR/stack.json``, else in the ``.waggle``
of the checkout the command runs in, else of the checkout ``waggle`` itself lives in), else
authsign's bundled public roots (Let's Encrypt, public timestamp authorities). A signature
refused at authsign's trusted-root step is said as such (the file's hashes still match).

A crawl's combined WACZ (decision 342) is not signed as a whole; its members' signatures, carried
inside, are checked instead (:mod:`ledger.archive.combined_verify`) and the verdict says how many
members are covered.
"""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ledger.archive.combined_verify import verify_members
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

    from ledger.settings import CHECKOUT

    if env.get("WAGGLE_STATE_DIR"):
        states = [Path(env["WAGGLE_STATE_DIR"])]
    else:  # run from outside the checkout: this program's own checkout's stack, if it has one
        states = list(dict.fromkeys([default_state_dir(), CHECKOUT / ".waggle"]))
    for state in states:
        try:
            roots = json.loads((state / "stack.json").read_text()).get("signing_trusted_roots")
        except (OSError, ValueError):
            continue
        if roots and Path(roots).exists():
            return roots
    return None


def _untrusted_root(refusal: str) -> bool:
    """Whether authsign refused the signature at a trusted-root step (the file may be intact)."""
    return "authsign: Trusted" in refusal and "Root Cert" in refusal


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
    if check.refusal is not None and _untrusted_root(check.refusal):
        return FileVerdict(EXIT_FAILED, [
            f"{path}: signature NOT verified: its signer does not chain to a trusted root"
            f" ({check.refusal.rsplit('authsign: ', 1)[-1]})",
            "every file datapackage.json lists matches its hash",
            f"trusted roots: {roots}",
            "a WACZ signed by a local stack (waggle dev) verifies against that stack's roots: run waggle verify"
            " inside its checkout, or give --trusted-roots (signing_trusted_roots in .waggle/stack.json)",
        ], check)
    if check.refusal is not None:
        return FileVerdict(EXIT_FAILED, [f"{path}: does NOT verify: {check.refusal}", f"trusted roots: {roots}"], check)
    if check.problem is not None:
        return FileVerdict(EXIT_FAILED, [f"{path}: does NOT verify: {check.problem}"], check)
    if not sig.signed:
        combined = _combined_verdict(path, trusted_roots, check)
        if combined is not None:
            return combined
        return FileVerdict(EXIT_UNSIGNED, [f"{path}: not signed (no datapackage-digest.json with signedData);"
                                           " every file datapackage.json lists matches its hash"], check)
    return FileVerdict(EXIT_VERIFIED, [
        f"{path}: signature verified",
        f"signed by: {sig.domain}",
        f"timestamp: {sig.timestamp} (RFC 3161)",
        "every file datapackage.json lists matches its hash; datapackage.json matches the signed hash",
        f"trusted roots: {roots}",
    ], check)


def _combined_verdict(path: Path, trusted_roots: str | None, check: WaczCheck) -> FileVerdict | None:
    """The verdict on a crawl's combined WACZ (decision 342), or None when ``path`` is not one:
    verified (0) when every member carries a signature that verifies over the WARC files here,
    does not verify (1) when one fails, else not signed (2, saying how many members are)."""
    try:
        with zipfile.ZipFile(path) as zf:
            package = json.loads(zf.read("datapackage.json"))
            if not isinstance(package, dict) or not isinstance(package.get("waggle"), dict) \
                    or not package["waggle"].get("crawlId"):
                return None
            got = verify_members(zf, package, trusted_roots)
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None
    roots = trusted_roots or "authsign's bundled public roots"
    crawl = package["waggle"]["crawlId"]
    lines = [f"{path}: combined WACZ of crawl {crawl} ({got.members} members): not signed as a whole"
             " (its index, pages.jsonl and datapackage.json were assembled by waggle for the download)",
             "every file datapackage.json lists matches its hash"]
    if got.verified:
        stamps = sorted(got.timestamps)
        lines.append(f"{got.verified} of {got.members} members carry their capture's signature, verified;"
                     " each of their WARC files here is the one the signature covers")
        lines.append(f"signed by: {', '.join(sorted(got.domains)) or 'unknown'}")
        if stamps:
            lines.append(f"timestamps: {stamps[0]} … {stamps[-1]} (RFC 3161)")
    unsigned = got.members - got.verified - len(got.failures)
    if unsigned > 0:
        lines.append(f"{unsigned} of {got.members} members are not signed")
    if got.failures:
        return FileVerdict(EXIT_FAILED, [f"{path}: does NOT verify: {len(got.failures)} member signature(s) fail",
                                         *got.failures, *lines[1:], f"trusted roots: {roots}"], check)
    lines.append(f"trusted roots: {roots}")
    if got.members and got.verified == got.members:
        return FileVerdict(EXIT_VERIFIED, lines, check)
    return FileVerdict(EXIT_UNSIGNED, lines, check)
