"""waggle benchmarks (issue 8): ``python -m tests.bench [name ...]`` or ``waggle bench [name]``.

Not part of the default test run (pytest's ``norecursedirs`` excludes this directory).
"""
