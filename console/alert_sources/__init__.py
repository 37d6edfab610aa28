"""Condition sources: pure functions over the gateway's state, each returning the
:class:`~console.alert_model.Condition` objects that hold now (one module per kind). The
gateway's alert evaluator (console/gateway/alert_evaluator.py) calls them every tick and turns
a condition that holds for its grace period into a durable alert."""
