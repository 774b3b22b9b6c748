"""BrowserHive v12 stand-in (contracts.md §A–§B, §D.3): ``python -m devstack.capture``.

Modules: :mod:`.app` (routes, busy lock), :mod:`.validation`, :mod:`.capture` (one capture),
:mod:`.browser` (Chromium lifecycle), :mod:`.proxy` (the guarded egress proxy), :mod:`.recorder`
(network traffic), :mod:`.warc` / :mod:`.wacz` (archive), :mod:`.sink` (S3 / artifactSink),
:mod:`.names` (artifact keys), :mod:`.policies`, :mod:`.settings` (flags, fault knobs).
"""
