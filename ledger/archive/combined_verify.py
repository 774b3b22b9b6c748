"""``waggle verify`` of a crawl's combined WACZ (decision 342).

A combined WACZ (``ledger.archive.combined``) is not signed as a whole: its index, pages.jsonl
and datapackage.json are assembled by waggle at download time. What came from the capture — each
member's WARC files — is covered by that member's own wacz-auth signature, carried unchanged
as ``signatures/<archive id>-datapackage.signed`` / ``-datapackage-digest.signed`` and named in
``datapackage.json``'s ``waggle.signedMembers``
(``{archiveId, datapackage, digest, warcs: {member path: path here}}``). :func:`verify_members`
checks each carried signature (:func:`ledger.archive.signature.check_signed_package`) and that
every WARC file the signed datapackage lists is here under its mapped path with the signed hash
(the bytes here were already hashed against this file's datapackage by the WACZ check).
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass, field

from ledger.archive.signature import check_signed_package

CARRIED_MAX_BYTES = 1024 * 1024


@dataclass
class MembersVerdict:
    """``members`` (in the file), ``verified`` (signatures that verify, with their WARCs),
    ``domains`` and ``timestamps`` of those, ``failures`` (one line each)."""

    members: int
    verified: int = 0
    domains: set[str] = field(default_factory=set)
    timestamps: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def _read_small(zf: zipfile.ZipFile, name: object) -> bytes | None:
    if not isinstance(name, str) or name not in zf.namelist() or zf.getinfo(name).file_size > CARRIED_MAX_BYTES:
        return None
    return zf.read(name)


def verify_members(zf: zipfile.ZipFile, package: dict, trusted_roots: str | None) -> MembersVerdict:
    """The carried signatures of the combined WACZ ``zf`` whose datapackage is ``package``."""
    info = package.get("waggle") or {}
    verdict = MembersVerdict(int(info.get("members") or 0))
    here = {r.get("path"): r.get("hash") for r in package.get("resources") or [] if isinstance(r, dict)}
    for entry in info.get("signedMembers") or []:
        aid = entry.get("archiveId") if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or not aid:
            verdict.failures.append("waggle.signedMembers holds an entry without an archiveId")
            continue
        pkg_bytes, digest_bytes = _read_small(zf, entry.get("datapackage")), _read_small(zf, entry.get("digest"))
        if pkg_bytes is None or digest_bytes is None:
            verdict.failures.append(f"member {aid}: its signed datapackage is not in the file")
            continue
        try:
            digest, member = json.loads(digest_bytes), json.loads(pkg_bytes)
        except ValueError:
            verdict.failures.append(f"member {aid}: its signed datapackage is not JSON")
            continue
        sig = check_signed_package(pkg_bytes, digest, trusted_roots)
        if not sig.verified:
            verdict.failures.append(f"member {aid}: {sig.problem}")
            continue
        warcs = entry.get("warcs") or {}
        bad = None
        listed = [r for r in member.get("resources") or [] if isinstance(r, dict)
                  and str(r.get("path", "")).startswith("archive/")]
        if not listed:
            bad = "its signed datapackage lists no WARC file"
        for r in listed:
            mapped = warcs.get(r["path"])
            if mapped is None or mapped not in here:
                bad = f"{r['path']} (signed) is not in this file"
            elif here[mapped] != r.get("hash"):
                bad = f"{mapped} is not the {r['path']} its signature covers (hash differs)"
            if bad:
                break
        if bad:
            verdict.failures.append(f"member {aid}: {bad}")
            continue
        verdict.verified += 1
        if sig.domain:
            verdict.domains.add(sig.domain)
        if sig.timestamp:
            verdict.timestamps.append(sig.timestamp)
    return verdict
