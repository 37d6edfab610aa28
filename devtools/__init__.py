"""Starting real servers for the tests and the benchmarks: neither product nor test.

Gateways, fleets, sample agents and their workers, a private PostgreSQL, and the chaos
scenarios that break them. ``tests/``, ``benchmarks/`` and ``tools/`` import this package;
it imports none of them, so a change to a test helper cannot break a benchmark. Not packaged
with the product (pyproject.toml packages only ``console`` and ``backend_adapters``); imported
with the repository root on ``sys.path`` (pytest's ``pythonpath = ["."]``, the benchmarks'
own ``sys.path`` line).
"""
