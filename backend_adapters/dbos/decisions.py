"""Checking a decision before it is sent to a DBOS agent: the one decision check
(console/decision_check.py), raised as the adapter's InvalidInput; shared with the other
adapters in backend_adapters/decision_refusal.py."""

from __future__ import annotations

from backend_adapters.decision_refusal import refuse_invalid_decision

__all__ = ["refuse_invalid_decision"]
