"""``irq demo``: a local gateway and fleets of real agents on every installed backend.

- ``launcher.py``: the launcher shared by every backend (tokens, the ``demo`` context, the
  gateway, extensions, the TUI, stopping every child by its pid);
- ``catalogue.py``: what the demo agents do, hold and ask (names and argument schemas);
- ``dbos/``: the DBOS fleet (agents, plans, reservations, worker processes, supervisor);
- ``temporal/``: the Temporal extension (dev server, demo agents, their worker).

Product code reaches this package only through ``irq demo`` (``console/cli/launch.py``);
test support lives in ``tests/support/`` and ``devtools/``, the screenshot tooling in ``tools/``.
"""
