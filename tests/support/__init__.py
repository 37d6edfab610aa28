"""Test support that is not product and not a test: harnesses and sample agents only the tests
import (what the benchmarks and tools share with the tests lives in ``devtools/``). Imported as
``tests.support.<module>`` with the repository root on ``sys.path`` (``python -m pytest`` from
the root puts it there)."""
