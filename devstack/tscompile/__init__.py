"""ts-compile-service stand-in (contracts.md §C): real TypeScript 6.0.3 in a long-lived Node child.

``python -m devstack.tscompile --host 127.0.0.1 --port 8085``. Modules: :mod:`.child` (the Node
compiler process), :mod:`.validate` (request checks, Smithy-style ``fieldList``), :mod:`.app`
(HTTP routes, cache).
"""
