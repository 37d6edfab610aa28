"""The Restate part of ``irq demo``: a restate-server from npm, a restate-sdk service under
hypercorn and a feeder that keeps one invocation per lane going (``fleet.py``)."""
