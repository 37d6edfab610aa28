"""Checking a decision before it is sent to a DBOS agent."""

from __future__ import annotations

from typing import Any

import jsonschema

from backend_adapters.base import InvalidInput


def validate_edit_args(args: dict[str, Any], schema: dict[str, Any] | None) -> None:
    """Edited args must satisfy the interrupt's JSON schema (any draft it declares)."""
    if not schema:
        return
    try:
        validator_cls = jsonschema.validators.validator_for(schema)
        validator_cls.check_schema(schema)
        error = jsonschema.exceptions.best_match(validator_cls(schema).iter_errors(args))
    except jsonschema.exceptions.SchemaError as exc:
        raise InvalidInput(f"the interrupt's args_schema is invalid: {exc.message}") from exc
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        raise InvalidInput(f"edited args fail the schema at {where}: {error.message}")
