"""Stable exit codes of the ``irq`` command and how failures map onto them.

Scripts depend on these numbers (docs/json-contract.md, "Exit codes"): 0 ok, 1 failed,
2 usage, 3 not found, 4 conflict, 5 unauthorized or forbidden, 6 gateway or backend
unreachable, 7 timed out waiting for the outcome (``--wait``).
"""

from __future__ import annotations

import sys
from enum import IntEnum
from typing import TYPE_CHECKING, NoReturn

import typer

from console.terminal_text import terminal_safe

if TYPE_CHECKING:
    from console.client import GatewayError
    from console.model import CommandResult


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1
    USAGE = 2
    NOT_FOUND = 3
    CONFLICT = 4
    UNAUTHORIZED = 5
    UNREACHABLE = 6
    TIMED_OUT = 7  # --wait: the effect was not observed in time


#: gateway error codes (error frames, CommandResult.error) -> exit code
ERROR_CODES: dict[str, ExitCode] = {
    "not_found": ExitCode.NOT_FOUND,
    "conflict": ExitCode.CONFLICT,
    "interrupt_changed_elsewhere": ExitCode.CONFLICT,  # decided through a peer gateway
    "unauthorized": ExitCode.UNAUTHORIZED,
    "forbidden": ExitCode.UNAUTHORIZED,
    "unreachable": ExitCode.UNREACHABLE,
    "invalid": ExitCode.USAGE,
    "usage": ExitCode.USAGE,
    "unsupported": ExitCode.FAILED,
}

#: CommandResult.outcome -> exit code, when ``error`` says nothing more precise
OUTCOME_CODES: dict[str, ExitCode] = {
    "applied": ExitCode.OK,
    "planned": ExitCode.OK,
    "recorded": ExitCode.OK,  # a four-eyes approval, waiting for another approver
    "conflict": ExitCode.CONFLICT,
    "forbidden": ExitCode.UNAUTHORIZED,
    "failed": ExitCode.FAILED,
}


def diagnose(message: str) -> None:
    """One diagnostic line on stderr (never stdout: that is for data); messages may quote
    agent, backend or gateway text, so control characters are made visible."""
    print(f"irq: {terminal_safe(message, multiline=True)}", file=sys.stderr, flush=True)


def fail(code: ExitCode, message: str, *, hint: str | None = None) -> NoReturn:
    """Print a clear message (and an optional hint) on stderr and exit with ``code``."""
    diagnose(message)
    if hint:
        print(f"  hint: {terminal_safe(hint, multiline=True)}", file=sys.stderr, flush=True)
    raise typer.Exit(int(code))


def code_for_error(exc: GatewayError) -> ExitCode:
    return ERROR_CODES.get(exc.code, ExitCode.FAILED)


def hint_for_error(exc: GatewayError) -> str | None:
    if exc.code == "unauthorized":
        return (
            "pass --token or set IRQ_TOKEN; an admin creates one with "
            "`irq token create --role operator`"
        )
    if exc.code == "forbidden":
        return "this token's role may not do that; ask for an operator token"
    if exc.code == "unreachable":
        return "is the gateway running? start one with `irq serve` (or `irq demo`)"
    return None


def fail_from_error(exc: GatewayError) -> NoReturn:
    fail(code_for_error(exc), exc.message, hint=hint_for_error(exc))


def code_for_result(result: CommandResult) -> ExitCode:
    if result.outcome in ("applied", "planned", "recorded"):
        return ExitCode.OK
    if result.error and result.error in ERROR_CODES:
        return ERROR_CODES[result.error]
    return OUTCOME_CODES.get(result.outcome, ExitCode.FAILED)


def code_for_results(results: list[CommandResult]) -> ExitCode:
    """0 when every item applied; the shared code when all failures agree; else 1."""
    codes = {code_for_result(r) for r in results} - {ExitCode.OK}
    if not results:
        return ExitCode.FAILED
    if not codes:
        return ExitCode.OK
    if len(codes) == 1:
        return codes.pop()
    return ExitCode.FAILED
