"""The DBOS part of ``irq demo``: real DBOS agents on SQLite, with preemptions."""
