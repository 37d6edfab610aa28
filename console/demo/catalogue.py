"""What the demo's agents do, hold and ask, on every backend: services, regions, tables,
customers and the argument schemas of their tool calls (deploy, email, drop table, refund,
report).

The DBOS demo's plans are built from these in ``console/demo/dbos/plans.py``; the Temporal demo
agents use them in ``console/demo/temporal/agents.py``.
"""

from __future__ import annotations

from typing import Any

SERVICES = ["payments-api", "search-indexer", "checkout-web", "ledger-sync", "notify-gw"]
REGIONS = ["eu-west-1", "us-east-1", "ap-south-1"]
TABLES = ["events_2023_q1", "tmp_backfill_orders", "audit_old", "sessions_archive"]
CUSTOMERS = ["acme.example", "globex.example", "initech.example", "umbrella.example"]

DEPLOY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["service", "version", "environment", "strategy"],
    "properties": {
        "service": {"type": "string", "enum": SERVICES},
        "version": {"type": "string", "pattern": r"^v\d+\.\d+\.\d+$"},
        "environment": {"type": "string", "enum": ["staging", "prod"]},
        "strategy": {"type": "string", "enum": ["canary", "blue-green", "rolling"]},
        "canary_percent": {"type": "integer", "minimum": 1, "maximum": 50},
        "regions": {"type": "array", "items": {"type": "string", "enum": REGIONS}},
    },
    "additionalProperties": False,
}

EMAIL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["to", "subject", "body"],
    "properties": {
        "to": {
            "type": "array",
            "minItems": 1,
            "items": {"type": "string", "pattern": r"^[^@\s]+@[^@\s]+\.[^@\s]+$"},
        },
        "cc": {"type": "array", "items": {"type": "string"}},
        "subject": {"type": "string", "minLength": 1, "maxLength": 140},
        "body": {"type": "string", "minLength": 1},
    },
    "additionalProperties": False,
}

DROP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["database", "table"],
    "properties": {
        "database": {"type": "string"},
        "table": {"type": "string"},
        "rows": {"type": "integer"},
        "last_read": {"type": "string"},
        "backup": {"type": "string"},
    },
}

REFUND_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["customer", "amount", "currency"],
    "properties": {
        "customer": {"type": "string"},
        "amount": {"type": "number", "exclusiveMinimum": 0, "maximum": 5000},
        "currency": {"type": "string", "enum": ["EUR", "USD", "GBP"]},
        "reason": {"type": "string"},
    },
    "additionalProperties": False,
}

REPORT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["dataset", "format"],
    "properties": {
        "dataset": {"type": "string"},
        "month": {"type": "string", "pattern": r"^\d{4}-\d{2}$"},
        "format": {"type": "string", "enum": ["pdf", "csv"]},
    },
    "additionalProperties": False,
}
