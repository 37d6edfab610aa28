"""Test support that is not product and not a test: harnesses and sample agents the tests (and
some tools and benchmarks) import, e.g. the live fleet the TUI tests drive (also used by
``tools/screenshots.py``) and the Temporal sample agents and their worker (also used by
``benchmarks/temporal_observe.py``). Imported as ``tests.support.<module>`` with the repository
root on ``sys.path`` (``python -m pytest`` from the root puts it there)."""
