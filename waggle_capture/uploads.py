"""Writing a capture's files to its sink: page formats in the background, the WACZ, the manifest.

Page-format uploads run concurrently with the next format and with WACZ packaging
(:func:`upload_soon`); :func:`uploads_done` collects them before the WACZ is written, so the
WACZ is always the last artifact and ``artifacts`` keeps the format order.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from typing import Any

from waggle_capture import names
from waggle_capture.sink import SinkError
from waggle_capture.state import CaptureFailure, Ctx, Run

log = logging.getLogger("waggle_capture")


async def upload(ctx: Ctx, run: Run, fmt: str, data: bytes) -> None:
    """Write one artifact ``fmt`` now; raises :class:`CaptureFailure` (``artifact_sink``)."""
    name = names.file_name(run.stem, fmt)
    try:
        loc = await run.sink.put(name, data, names.EXTENSIONS[fmt][1])
    except SinkError as e:
        raise CaptureFailure("failed", "artifact_sink", str(e)) from e
    run.artifacts[fmt] = loc
    if ctx.settings.faults.crash_during_upload:
        log.error("fault knob crash_during_upload: exiting after uploading %s", name)
        os._exit(137)


def upload_soon(ctx: Ctx, run: Run, fmt: str, data: bytes) -> None:
    """Start writing a page format while the capture goes on; :func:`uploads_done` collects it."""
    task = asyncio.ensure_future(upload(ctx, run, fmt, data))
    task.add_done_callback(lambda t: t.cancelled() or t.exception())  # retrieved; raised in uploads_done
    run.uploads.append(task)


async def uploads_done(run: Run) -> None:
    """Wait for every started page-format upload; raises the first failure (``artifact_sink``).
    ``run.artifacts`` keeps the format order (png → webp → html → links → mhtml)."""
    tasks, run.uploads = run.uploads, []
    if not tasks:
        return
    await asyncio.wait(tasks)
    for t in tasks:
        if t.exception() is not None:
            raise t.exception()  # type: ignore[misc]
    written = dict(run.artifacts)
    run.artifacts.clear()
    run.artifacts.update({f: written[f] for f in names.EXTENSIONS if f in written})


async def write_manifest(ctx: Ctx, run: Run, report: dict[str, Any]) -> dict[str, str]:
    """Write ``report`` as the ``.result.json`` manifest, bounded by ``manifest_ms``; returns the
    answer's ``manifest``: ``{location}`` or ``{error}`` (never raises)."""
    name = names.file_name(run.stem, "manifest")
    data = (json.dumps(report, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    if ctx.settings.faults.manifest_fail:
        return {"error": f"{run.sink.describe()}/{name}: forced manifest write failure (fault knob)"}
    try:
        loc = await asyncio.wait_for(run.sink.put(name, data, names.EXTENSIONS["manifest"][1]),
                                     ctx.settings.manifest_ms / 1000)
        return {"location": loc}
    except asyncio.TimeoutError:
        return {"error": f"{run.sink.describe()}/{name}: manifest write took longer than {ctx.settings.manifest_ms} ms"}
    except SinkError as e:
        return {"error": str(e)}
