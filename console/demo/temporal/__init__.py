"""The Temporal part of ``irq demo``: a dev server and a worker for the demo agents."""
