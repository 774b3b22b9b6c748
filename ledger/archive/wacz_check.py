"""Is a WACZ in S3 whole? The structural check both admission paths run before an archive may
be recorded as complete (issue 13 item 6; docs/internals.md "WACZ admission").

What is read (ranged GETs through a zip reader over HTTP ranges, never the whole object unless
it is small): the object's size (HEAD), the zip's tail (end of central directory and, in
practice, the central directory itself: one GET of the last :data:`TAIL_BYTES`),
``datapackage.json``, and every file it lists, hashed against its ``hash`` — as long as the
listed files total at most ``hash_max_bytes``; above that only the listed sizes are compared
with the central directory (``WaczCheck.hashed`` is False). A WACZ is *complete* when:

* it is a zip, with ``datapackage.json`` (JSON with a ``resources`` list);
* it has ``pages/pages.jsonl`` and a CDXJ index (``indexes/*.cdx``, ``*.cdxj``, or the
  compressed ``*.cdx.gz`` / ``*.idx`` pair);
* every resource of ``datapackage.json`` is a member of the zip, of the listed ``bytes``, with
  the listed ``hash`` (``sha256:…``; ``sha512``/``md5`` too), and reads without a zip CRC error.

:func:`check_wacz` returns a :class:`WaczCheck` whose ``problem`` is None or one line naming
the first fault; it raises ``S3Unavailable`` when the store does not answer (nothing decided).
A signed WACZ (``datapackage-digest.json`` with ``signedData``) also has its signature checked
(:mod:`ledger.archive.signature`) and every listed file hashed whatever the size limit; its
``refusal`` (a signature or a listed file that does not verify) keeps it out of the ledger.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
from botocore.exceptions import BotoCoreError, ClientError

from ledger.archive.cdxj import INDEX_MAX_BYTES, IndexedDigests, parse_cdxj
from ledger.archive.conditional import validators_of
from ledger.archive.facts import WaczFacts, facts_of_zip
from ledger.archive.range_file import TAIL_BYTES, _RangeFile  # noqa: F401 - TAIL_BYTES, _RangeFile: importers use them from here
from ledger.archive.signature import UNSIGNED, SignatureCheck, check_signature
from ledger.s3 import S3Unavailable, is_missing_object, parse_location

BLOCK_BYTES = 1024 * 1024  # one ranged GET while hashing members
DATAPACKAGE_MAX_BYTES = 1024 * 1024
HASH_MAX_BYTES_DEFAULT = 64 * 1024 * 1024
CHECK_CONCURRENCY = 8


@dataclass(frozen=True)
class WaczCheck:
    """Outcome of one check: ``problem`` (None = complete), ``hashed`` (every listed file's
    hash was compared), ``requests`` and ``bytes_read`` (its cost in S3 GETs/HEADs and bytes),
    ``signature`` (its wacz-auth signature, :data:`~ledger.archive.signature.UNSIGNED` without),
    ``refusal`` (a signed WACZ that does not verify: why it may not be admitted)."""

    problem: str | None
    hashed: bool = False
    requests: int = 0
    bytes_read: int = 0
    signature: SignatureCheck = UNSIGNED
    refusal: str | None = None
    digests: IndexedDigests = IndexedDigests()  # from the CDXJ index (decision 181); originals only when complete
    bytes_saved: int = 0  # datapackage ``browserhive:capture.revisits.bytesSaved`` (our capture server)
    validators: dict | None = None  # datapackage ``browserhive:capture.conditional.validators`` (decision 331)
    facts: WaczFacts | None = None  # size, title, main document's status and type (decision 341)


def _has_index(names: set[str]) -> bool:
    idx = [n for n in names if n.startswith("indexes/")]
    return any(n.endswith((".cdx", ".cdxj")) for n in idx) or (
        any(n.endswith(".cdx.gz") for n in idx) and any(n.endswith(".idx") for n in idx))


def _digest(zf: zipfile.ZipFile, name: str, algorithm: str) -> str:
    h = hashlib.new(algorithm)
    with zf.open(name) as member:
        for block in iter(lambda: member.read(BLOCK_BYTES), b""):
            h.update(block)
    return h.hexdigest()


def _resources(zf: zipfile.ZipFile) -> list[dict] | str:
    info = zf.getinfo("datapackage.json")
    if info.file_size > DATAPACKAGE_MAX_BYTES:
        return f"datapackage.json is larger than {DATAPACKAGE_MAX_BYTES} bytes"
    try:
        doc = json.loads(zf.read("datapackage.json").decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return "datapackage.json is not JSON"
    resources = doc.get("resources") if isinstance(doc, dict) else None
    if not isinstance(resources, list) or not all(isinstance(r, dict) for r in resources):
        return "datapackage.json has no resources list"
    return resources


def _index_digests(zf: zipfile.ZipFile, f: _RangeFile, names: set[str], complete: bool) -> tuple[IndexedDigests, str]:
    """The payload digests of the plain CDXJ indexes (decision 181): originals only from a
    complete WACZ (a broken one must not become a revisit's target), revisits always. An index
    outside the tail already read costs one ranged GET of just its bytes. → (digests, index text)."""
    text = ""
    for name in sorted(n for n in names if n.startswith("indexes/") and n.endswith((".cdx", ".cdxj"))):
        info = zf.getinfo(name)
        if info.file_size > INDEX_MAX_BYTES:
            continue
        if f._cached(info.header_offset, 1) is None or f._cached(info.header_offset + 30 + len(info.filename)
                                                                  + info.compress_size, 1) is None:
            f.prefetch(info.header_offset, 30 + len(info.filename) + 1024 + info.compress_size)
        text += zf.read(name).decode("utf-8", "replace") + "\n"
    found = parse_cdxj(text)
    if not complete:  # neither originals nor pairs a later capture could leave out
        return IndexedDigests((), found.revisits), text
    return IndexedDigests(found.responses, found.revisits, found.resources + _behavior_sources(zf)), text


def _behavior_sources(zf: zipfile.ZipFile) -> tuple[tuple[str, str], ...]:
    """``(urn:behavior:<id>, sha256:<hex>)`` of the behavior sources this WACZ's
    ``behaviors/custom.jsonl`` holds (datapackage ``settings.behaviors[].sourceStored``, our
    capture server; extension recrawl, decision 321), and ``(urn:behaviors:runtime.js, …)`` when it
    holds ``behaviors/runtime.js`` (``settings.behaviorRuntime.sourceStored``)."""
    try:
        doc = json.loads(zf.read("datapackage.json").decode("utf-8"))
        settings = doc["browserhive:capture"]["settings"]
        listed = [(f"urn:behavior:{b.get('id')}", b) for b in settings.get("behaviors") or []
                  if isinstance(b, dict) and isinstance(b.get("id"), str)]
        runtime = settings.get("behaviorRuntime")
        listed += [("urn:behaviors:runtime.js", runtime)] if isinstance(runtime, dict) else []
        return tuple((uri, b["sha256"]) for uri, b in listed
                     if b.get("sourceStored") is True and isinstance(b.get("sha256"), str))
    except (KeyError, TypeError, ValueError, UnicodeDecodeError):
        return ()


def _bytes_saved(zf: zipfile.ZipFile) -> int:
    try:
        doc = json.loads(zf.read("datapackage.json").decode("utf-8"))
        saved = doc["browserhive:capture"]["revisits"]["bytesSaved"]
    except (KeyError, TypeError, ValueError, UnicodeDecodeError):
        return 0
    return saved if isinstance(saved, int) and saved >= 0 else 0


def _check_resources(zf: zipfile.ZipFile, resources: list[dict], hash_max_bytes: int) -> tuple[str | None, bool]:
    """(problem, hashed) for the resources of datapackage.json."""
    members = {i.filename: i for i in zf.infolist()}
    total = 0
    for r in resources:
        path = r.get("path")
        if not isinstance(path, str) or path not in members:
            return f"datapackage.json lists {str(path)[:200]!r}, which the WACZ does not contain", False
        size = r.get("bytes")
        if size is not None and size != members[path].file_size:
            return f"{path}: {members[path].file_size} bytes, datapackage.json says {size}", False
        total += members[path].file_size
    hashed = total <= hash_max_bytes
    if not hashed:
        return None, False
    for r in resources:
        algorithm, _, expected = str(r.get("hash") or "").partition(":")
        if algorithm not in ("sha256", "sha512", "md5") or not expected:
            return f"{r['path']}: datapackage.json gives no usable hash ({str(r.get('hash'))[:80]!r})", False
        if _digest(zf, r["path"], algorithm) != expected.lower():
            return f"{r['path']}: {algorithm} does not match datapackage.json", False
    return None, True


def check_zip(size: int, fetch: Callable[[int, int], bytes], *, hash_max_bytes: int = HASH_MAX_BYTES_DEFAULT,
              trusted_roots: str | None = None) -> WaczCheck:
    """The check over any ranged source (``fetch(start, length) -> bytes``) of ``size`` bytes;
    ``trusted_roots``: the roots YAML a signature must chain to (:mod:`ledger.archive.signature`)."""
    f = _RangeFile(size, fetch)
    f.prefetch(max(0, size - TAIL_BYTES), TAIL_BYTES)
    problem, hashed = None, False
    signature, refusal = UNSIGNED, None
    digests, saved, validators, facts = IndexedDigests(), 0, None, None
    try:
        with zipfile.ZipFile(f) as zf:  # type: ignore[arg-type]
            names = set(zf.namelist())
            signature = check_signature(zf, trusted_roots)
            if signature.signed:  # the signature covers every listed file: all are hashed
                hash_max_bytes = 1 << 62
            if "datapackage.json" not in names:
                problem = "the WACZ lacks datapackage.json"
            elif "pages/pages.jsonl" not in names:
                problem = "the WACZ lacks pages/pages.jsonl"
            elif not _has_index(names):
                problem = "the WACZ lacks its CDXJ index (indexes/*.cdx or *.cdxj)"
            else:
                resources = _resources(zf)
                if isinstance(resources, str):
                    problem = resources
                else:
                    problem, hashed = _check_resources(zf, resources, hash_max_bytes)
                    if signature.signed and problem is not None:
                        refusal = f"signed, but {problem}"
                digests, index_text = _index_digests(zf, f, names, complete=problem is None)
                saved = _bytes_saved(zf)
                validators = validators_of(zf) if problem is None else None  # a complete WACZ only
                facts = facts_of_zip(zf, size, index_text)
            if signature.signed and signature.problem is not None:
                # a file that does not match its hash says more than a signature that fails
                # because of it (or whose root is not trusted here): said first
                refusal = refusal or signature.problem
                problem = problem or signature.problem
                digests = IndexedDigests((), digests.revisits)  # a broken signature holds no originals nor pairs
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, NotImplementedError, ValueError) as exc:
        problem = f"the WACZ is not a readable zip: {str(exc)[:200]}"
        digests = IndexedDigests()
    facts = facts or WaczFacts(size)  # a WACZ without its parts: only its size is known
    return WaczCheck(problem, hashed, f.requests, f.bytes_read, signature, refusal, digests, saved, validators, facts)


def _check_sync(s3: Any, bucket: str, key: str, hash_max_bytes: int, trusted_roots: str | None = None) -> WaczCheck:
    client = s3.client
    try:
        try:
            size = client.head_object(Bucket=bucket, Key=key)["ContentLength"]
        except ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if is_missing_object(exc):
                return WaczCheck(f"the WACZ object is missing: s3://{bucket}/{key}", requests=1)
            if status and status >= 500:
                raise S3Unavailable(f"s3 answered {status} for {key!r}") from exc
            raise

        def fetch(start: int, length: int) -> bytes:
            resp = client.get_object(Bucket=bucket, Key=key, Range=f"bytes={start}-{start + length - 1}")
            with resp["Body"] as body:
                return body.read()

        check = check_zip(size, fetch, hash_max_bytes=hash_max_bytes, trusted_roots=trusted_roots)
        return WaczCheck(check.problem, check.hashed, check.requests + 1, check.bytes_read,
                         check.signature, check.refusal, check.digests, check.bytes_saved, check.validators,
                         check.facts)
    except ClientError as exc:
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if status and status >= 500:
            raise S3Unavailable(f"s3 answered {status} while reading {key!r}") from exc
        raise
    except BotoCoreError as exc:
        raise S3Unavailable(f"s3 did not answer while reading {key!r}: {exc}") from exc


async def check_wacz(s3: Any, location: str, *, hash_max_bytes: int = HASH_MAX_BYTES_DEFAULT,
                     trusted_roots: str | None = None) -> WaczCheck:
    """Check the WACZ at ``location`` (``s3://bucket/key`` of the manifest's ``artifacts.wacz``)
    on ``s3``'s endpoint. Raises ``S3Unavailable`` (store down) and ``ValueError`` (location)."""
    bucket, key = parse_location(location)
    return await anyio.to_thread.run_sync(_check_sync, s3, bucket, key, hash_max_bytes, trusted_roots)


async def check_many(s3: Any, locations: Sequence[str | None], *, hash_max_bytes: int = HASH_MAX_BYTES_DEFAULT,
                     trusted_roots: str | None = None) -> list[WaczCheck | None | Exception]:
    """:func:`check_wacz` for each location (None → None), ≤ :data:`CHECK_CONCURRENCY` at once;
    one outcome per location, in order: the check, or the exception that stopped it."""
    gate = asyncio.Semaphore(CHECK_CONCURRENCY)

    async def one(location: str | None) -> WaczCheck | None | Exception:
        if location is None:
            return None
        async with gate:
            try:
                return await check_wacz(s3, location, hash_max_bytes=hash_max_bytes, trusted_roots=trusted_roots)
            except Exception as exc:  # noqa: BLE001 - counted per capture by the caller
                return exc

    return list(await asyncio.gather(*(one(loc) for loc in locations)))
