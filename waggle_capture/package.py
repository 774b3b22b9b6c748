"""The WACZ step (contracts.md §B.1 "package WACZ" → "upload WACZ", §B.5): stop recording,
write the WARC and its CDXJ index, describe the capture in ``datapackage.json``, zip, upload."""

from __future__ import annotations

import asyncio
import json
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import anyio.to_thread

from waggle_capture.behaviors import RUNTIME_JS
from waggle_capture.load import Loaded
from waggle_capture.recorder import Recorder
from waggle_capture.revisits import RUNTIME_URI, Revisits, behavior_uri, look_up, source_digest
from waggle_capture.session import seal_network
from waggle_capture.settings import BUILD, SOFTWARE
from waggle_capture.signing import SigningFailed, sign_digest
from waggle_capture.state import CaptureFailure, Ctx, Run, iso
from waggle_capture.uploads import upload, uploads_done
from waggle_capture.warc import Resource, cdxj_index, write_warc
from waggle_capture.wacz import Member, build_wacz, pages_jsonl

CONFORMS_TO = "https://uraitakahito.github.io/browserhive-specs/wacz-profile/1.12.0/"


async def write_wacz(ctx: Ctx, run: Run, recorder: Recorder, loaded: Loaded, title: str | None,
                     document: dict, dprs: list[int], viewport: dict) -> dict[str, Any]:
    """Package and upload the WACZ after every page format was written; returns the report's
    ``{waczStats, completeness}``. Raises :class:`CaptureFailure` (``artifact_sink``)."""
    run.step = "package-wacz"
    if not run.network_sealed:  # sealed before the formats with sealBeforeFormats (extension 10)
        await seal_network(ctx, run, recorder, timeout_s=min(10.0, run.remaining_s()))
        run.mark("seal")
    if ctx.settings.faults.slow_package_ms:  # fault knob: packaging takes this long after the seal
        await asyncio.sleep(ctx.settings.faults.slow_package_ms / 1000)
    behaviors = (run.req.get("behaviors") or []) if loaded.ran_behaviors else None
    if run.conditional is not None:  # extension conditional: a 304 becomes a server-not-modified revisit
        run.conditional.mark(recorder.exchanges)
    revisits = await look_up(run.req.get("revisit"), recorder.exchanges,  # extensions revisit, recrawl
                             behaviors=behaviors)  # never raises
    wacz_bytes = await anyio.to_thread.run_sync(
        package, run, recorder, title, document, loaded, dprs, viewport, behaviors, revisits)
    run.mark("package-wacz")
    await uploads_done(run)  # the WACZ is written only after every page format was
    run.mark("uploads")
    run.step = "upload-wacz"
    await upload(ctx, run, "wacz", wacz_bytes)
    if ctx.settings.faults.slow_upload_ms:  # fault knob: the upload ends this long later (before the manifest)
        await asyncio.sleep(ctx.settings.faults.slow_upload_ms / 1000)
    run.mark("upload-wacz")
    out = {"waczStats": recorder.stats(), "completeness": recorder.completeness()}
    if run.signature is not None:
        out["signature"] = run.signature
    return out


def package(run: Run, recorder: Recorder, title: str | None, document: dict, loaded: Loaded, dprs: list[int],
            viewport: dict, behaviors: list[dict] | None, revisits: Revisits | None = None) -> bytes:
    """The WACZ bytes (blocking: run it in a thread); ``revisits``: the digest lookup's answer."""
    start_iso = iso(run.started)
    with tempfile.TemporaryDirectory(prefix="capture-") as tmp:
        warc = Path(tmp) / "data.warc.gz"
        shots = screenshot_records(run, document.get("url") or run.url)
        write_warc(warc, task_id=run.task_id, url=run.url, software=SOFTWARE, exchanges=recorder.exchanges,
                   denied=recorder.denied, created=run.started, resources=shots, revisits=revisits)
        cdxj = cdxj_index(warc)
        out = Path(tmp) / "out.wacz"
        package_fields = datapackage(run, recorder, title, document, loaded, dprs, viewport, shots, revisits)
        build_wacz(out, warc=warc, cdxj=cdxj, pages=pages_jsonl(run.task_id, run.url, start_iso, title,
                                                                 document.get("url") or run.url),
                   extra=extra_members(run, behaviors, revisits),
                   datapackage=package_fields, sign=signer_of(run))
        return out.read_bytes()


def signs(run: Run) -> bool:
    """Whether this capture's WACZ is signed (request ``signing``, else the server's policy)."""
    return run.signer.wants_signature(run.req.get("signing")) if run.signer is not None else False


def signer_of(run: Run):
    """The ``sign(hash, created)`` of :func:`build_wacz` for a capture that signs, else None.
    Records the report's ``signature`` on ``run``; a signature that cannot be had is the
    capture's failure (type ``signing``, contracts.md §A.8) and no WACZ is written."""
    if not signs(run):
        return None

    def sign(digest: str, created: str) -> dict[str, Any]:
        try:
            signed, report = sign_digest(run.signer, digest, created)
        except SigningFailed as exc:
            raise CaptureFailure("failed", "signing", str(exc)) from exc
        run.signature = report
        return signed

    return sign


# Target-URI scheme of each screenshot record: Browsertrix's names for PNG (``view`` = the
# viewport, ``fullPage``), which ReplayWeb.page and pywb look up; WebP has no peer name.
SHOT_SCHEMES = {("png", False): "urn:view:", ("png", True): "urn:fullPage:",
                ("webp", False): "urn:view-webp:", ("webp", True): "urn:fullPage-webp:"}


def screenshot_records(run: Run, page_url: str) -> list[Resource]:
    """The screenshots kept with ``screenshotsInWacz`` (extension 15) as WARC ``resource``
    records ``urn:view:<page url>`` etc. (:data:`SHOT_SCHEMES`), dated at the capture start."""
    full = bool(run.req.get("fullPage"))
    return [Resource(SHOT_SCHEMES[(fmt, full)] + page_url, f"image/{fmt}", data, run.started)
            for fmt, data in sorted(run.shots.items())]


async def write_file_capture(ctx: Ctx, run: Run, recorder: Recorder, loaded: Loaded, dprs: list[int],
                             viewport: dict) -> dict[str, Any]:
    """The main document is a file (PDF, CSV, a download…) read by :mod:`.files`: the WACZ
    holds its response record (cut at ``maxResponseBytes`` with the reason recorded); there is
    no page format (``document.withheld: "file"``, ``document.file`` says what was read).
    Returns the report fields of a success. Without a WACZ nothing could hold the file: a
    :class:`CaptureFailure` naming its type and size."""
    taken = loaded.file
    ex = taken.exchange
    await seal_network(ctx, run, recorder, timeout_s=min(5.0, run.remaining_s()))
    recorder.record_file(ex)
    size = f"{taken.declared if taken.declared is not None else taken.bytes} bytes"
    if not run.formats["wacz"]:
        raise CaptureFailure("failed", "internal", f"net::ERR_ABORTED: {ex.url} is a file ({taken.mime or 'no type'}, "
                             f"{size}), archived only in a WACZ, and captureFormats.wacz is false")
    document: dict[str, Any] = {"url": ex.url, "withheld": "file", "file": taken.report()}
    run.step = "package-wacz"
    revisits = await look_up(run.req.get("revisit"), recorder.exchanges)
    wacz_bytes = await anyio.to_thread.run_sync(package, run, recorder, None, document, loaded, dprs, viewport, None,
                                                revisits)
    run.step = "upload-wacz"
    await upload(ctx, run, "wacz", wacz_bytes)
    out = {"status": "success", "httpStatusCode": ex.status, "finalUrl": ex.url, "waczStats": recorder.stats(),
           "completeness": recorder.completeness(), "settle": loaded.settle, "document": document}
    if run.signature is not None:
        out["signature"] = run.signature
    return out


def extra_members(run: Run, behaviors: list[dict] | None, revisits: Revisits | None = None) -> list[Member]:
    """``behaviors/*`` (when behaviors ran) and ``preload/scripts.jsonl`` (when preloads were given).
    The behaviors' reports are the datapackage's ``behaviorReports`` (decision 391), not a member.
    A behavior whose source an earlier capture of the same crawl stored (``revisits.written``,
    extension recrawl) is listed by ``sha256`` without its ``source``; ``custom.jsonl`` is left
    out when every source was, ``runtime.js`` when the crawl stored it (the datapackage's
    ``settings`` name them by sha256)."""
    preload = run.req.get("preload") or []
    extra: list[Member] = []
    if behaviors is not None:
        if runtime_stored(revisits):
            extra.append(Member("behaviors/runtime.js", RUNTIME_JS.encode("utf-8")))
        if any(source_stored(b, revisits) for b in behaviors):  # else the datapackage names them all
            extra.append(Member("behaviors/custom.jsonl", _jsonl(_behavior_line(b, revisits) for b in behaviors)))
    if preload:
        extra.append(Member("preload/scripts.jsonl", _jsonl(
            {"profile": "browserhive:preload/1", "id": p["id"], "source": p["source"]} for p in preload)))
    return extra


def source_stored(behavior: dict, revisits: Revisits | None) -> bool:
    """Whether this WACZ holds ``behavior``'s source (not when the crawl already stored it)."""
    pair = (behavior_uri(behavior["id"]), source_digest(behavior["source"]))
    return revisits is None or pair not in revisits.written


def runtime_stored(revisits: Revisits | None) -> bool:
    """Whether this WACZ holds ``behaviors/runtime.js`` (not when the crawl already stored it)."""
    return revisits is None or (RUNTIME_URI, source_digest(RUNTIME_JS)) not in revisits.written


def _behavior_line(b: dict, revisits: Revisits | None) -> dict[str, Any]:
    line = {"profile": "browserhive:behaviors/1", "id": b["id"], "sha256": source_digest(b["source"])}
    if source_stored(b, revisits):
        line["source"] = b["source"]
    else:  # extension recrawl: an earlier WACZ of this crawl holds it (same sha256)
        line["sourceIn"] = "crawl"
    return line


def _jsonl(rows) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in rows).encode("utf-8")


def datapackage(run: Run, recorder: Recorder, title: str | None, document: dict, loaded: Loaded,
                dprs: list[int], viewport: dict, shots: list[Resource] = (),
                revisits: Revisits | None = None) -> dict[str, Any]:
    """The datapackage fields besides ``resources`` (``browserhive:capture``, contracts.md §B.5);
    ``shots``: the screenshot records in the WARC (``screenshots``: uri, mime, bytes);
    ``revisits`` (extension revisit, when asked): ``{lookup, count, bytesSaved}``."""
    req = run.req
    preload = req.get("preload") or []
    settings: dict[str, Any] = {
        "signature": "required" if signs(run) else "none", "viewport": viewport, "devicePixelRatios": dprs,
        "session": req.get("session") or "isolated",
        # sha256/sourceStored (extension recrawl): whether behaviors/custom.jsonl holds the source
        "behaviors": [{"id": b["id"], "origin": "custom", "sha256": source_digest(b["source"]),
                       "sourceStored": bool(loaded.ran_behaviors) and source_stored(b, revisits)}
                      for b in (req.get("behaviors") or [])],
        **({"behaviorRuntime": {"sha256": source_digest(RUNTIME_JS), "sourceStored": runtime_stored(revisits)}}
           if loaded.ran_behaviors else {}),
        "preload": [{"id": p["id"]} for p in preload],
        "limits": limits_of(recorder),
        "urlPolicies": run.policies.url_policies, "contentTypePolicies": run.policies.content_type_policies,
    }
    if (req.get("acceptLanguage") or "").strip():
        settings["acceptLanguage"] = req["acceptLanguage"]
    now = datetime.now(timezone.utc)
    # a signed datapackage is dated to the second: authsign echoes `created` in that form, and
    # verifiers compare it with signedData.created as a string
    created = now.strftime("%Y-%m-%dT%H:%M:%SZ") if signs(run) else iso(now)
    package = {
        "name": f"browserhive-{run.task_id}", "software": SOFTWARE, "created": created,
        "mainPageURL": run.url, "mainPageDate": iso(run.started), "title": title or run.url,
        "browserhive:capture": {
            "conformsTo": CONFORMS_TO, "build": BUILD, "browser": {"product": "Chromium (Debian /usr/bin/chromium)"},
            "settings": settings, "completeness": recorder.completeness(), "settle": archive_settle(loaded.settle),
            "document": document,
        },
    }
    if loaded.ran_behaviors:  # each behavior's report (until decision 391 behaviors/reports.jsonl)
        package["browserhive:capture"]["behaviorReports"] = [
            json.loads(json.dumps({"profile": "browserhive:behavior-reports/1", **r}, default=str))
            for r in loaded.behavior_records]
    if loaded.dismissal is not None:
        package["browserhive:capture"]["dismissal"] = loaded.dismissal
    if run.screenshot is not None:  # extension: docs/capture-server.md
        package["browserhive:capture"]["screenshot"] = run.screenshot
    if shots:  # extension 15: where the screenshots are in the WARC
        package["browserhive:capture"]["screenshots"] = [
            {"uri": r.uri, "mime": r.mime, "bytes": len(r.data)} for r in shots]
    if revisits is not None and run.req.get("revisit"):  # extension revisit: what the WARC saved
        package["browserhive:capture"]["revisits"] = revisits.report()
    if run.conditional is not None:  # extension conditional: what was asked and kept for the next crawl
        package["browserhive:capture"]["conditional"] = run.conditional.report()
    if loaded.incomplete:  # extension 14: loading ended by the page-load deadline
        package["browserhive:capture"]["incomplete"] = loaded.incomplete
    if run.after_seal is not None:  # extension 10: requests of the sealed page, not archived
        package["browserhive:capture"]["afterSeal"] = run.after_seal.report()
    return package


def limits_of(recorder: Recorder) -> dict[str, int]:
    """The byte caps the recorder applied."""
    return {"maxResponseBytes": recorder.max_response_bytes, "maxTaskBytes": recorder.max_task_bytes}


def archive_settle(settle: dict[str, Any]) -> dict[str, Any]:
    """Archive form of ``settle``: signals not reached are ``null`` (the report omits them)."""
    out = json.loads(json.dumps(settle))
    for sig in ("network", "cpu", "dom"):
        out.setdefault(sig, {}).setdefault("quietAtMs", None)
    return out
