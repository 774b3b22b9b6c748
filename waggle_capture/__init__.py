"""waggle's capture server: the BrowserHive v12 capture API (contracts.md §A–§B, §D.3) with
waggle's extensions (docs/capture-server.md), on Playwright and Debian's Chromium.

Run: ``waggle capture serve`` (:mod:`.cli`; the image Dockerfile.capture) or ``python -m
waggle_capture`` (:mod:`.__main__`; the local stack). One process = one Chromium = one capture at
a time. Modules: :mod:`.app` (routes, busy lock), :mod:`.validation`, :mod:`.capture` (one
capture), :mod:`.browser` (Chromium lifecycle), :mod:`.proxy` (the guarded egress proxy),
:mod:`.recorder` (network traffic), :mod:`.warc` / :mod:`.wacz` (archive), :mod:`.sink` (S3 /
artifactSink), :mod:`.names` (artifact keys), :mod:`.policies`, :mod:`.settings` (flags, fault
knobs), :mod:`.serving` (the bound socket, ``--port 0``), :mod:`.restjson` (restJson1 errors).
It imports the product (``ledger``, and the flow's ``f.waggle.robots``), never the local stack
(``devstack``: tests/skeleton/test_imports.py).
"""
