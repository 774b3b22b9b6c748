"""Local Windmill runner: executes ``f/waggle/crawl_level.flow/flow.yaml`` as Windmill does.

``python -m devstack.windmill --host 127.0.0.1 --port 8000 --state DIR`` serves the REST
routes the ledger and the tools use (internals.md "Windmill runner REST"): run a flow or a
script, read and cancel jobs, read and write variables, ``GET /api/version``.
"""
