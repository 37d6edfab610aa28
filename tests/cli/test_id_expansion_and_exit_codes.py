"""Short ids expand from the snapshot; results and gateway errors map to stable exit codes."""

from __future__ import annotations

import pytest
import typer

from console.cli.exits import ExitCode, code_for_error, code_for_results
from console.cli.output import fmt_age
from console.cli.session import expand_interrupt_id, expand_run_id, expand_run_ids
from console.client import FleetView, GatewayError, GatewayUnreachable, Unauthorized
from console.model import CommandResult, Interrupt, Run


def _view() -> FleetView:
    view = FleetView()
    for backend, context, native in [
        ("dbos", "local", "wf-1"),
        ("dbos", "local", "wf-11"),
        ("dbos", "local", "deploy-7"),
        ("temporal", "prod", "agent-42"),
    ]:
        run = Run(
            id=Run.make_id(backend, context, native),
            backend=backend,
            context=context,
            native_id=native,
        )
        view.runs[run.id] = run
    for run_id, native in [
        ("dbos:local/wf-1", "wf-1/1"),
        ("dbos:local/wf-11", "wf-11/1"),
        ("dbos:local/wf-11", "wf-11/2"),
    ]:
        intr = Interrupt(
            id=Interrupt.make_id(run_id, native), run_id=run_id, native_id=native, title="t"
        )
        view.interrupts[intr.id] = intr
    return view


def _exit_code(fn, *args) -> int:
    with pytest.raises(typer.Exit) as info:
        fn(*args)
    return info.value.exit_code


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("dbos:local/wf-1", "dbos:local/wf-1"),  # exact id
        ("wf-1", "dbos:local/wf-1"),  # exact native id beats the prefix wf-11
        ("deploy", "dbos:local/deploy-7"),  # unique prefix of the native id
        ("temporal:", "temporal:prod/agent-42"),  # unique prefix of the id
        ("dbos:local/gone", "dbos:local/gone"),  # complete id: the gateway decides
    ],
)
def test_run_ids_expand_from_exact_native_or_prefix(query: str, expected: str):
    assert expand_run_id(_view(), query) == expected


def test_an_ambiguous_run_id_exits_2_and_lists_the_candidates(capsys: pytest.CaptureFixture[str]):
    assert _exit_code(expand_run_id, _view(), "dbos:") == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "matches 3 runs" in err
    assert "dbos:local/wf-11" in err and "dbos:local/deploy-7" in err


def test_an_unknown_short_run_id_exits_3(capsys: pytest.CaptureFixture[str]):
    assert _exit_code(expand_run_id, _view(), "nothing-like-it") == ExitCode.NOT_FOUND
    assert "no run matches" in capsys.readouterr().err


def test_several_run_ids_expand_in_order_without_duplicates():
    assert expand_run_ids(_view(), ["deploy", "wf-1", "dbos:local/wf-1"]) == [
        "dbos:local/deploy-7",
        "dbos:local/wf-1",
    ]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("dbos:local/wf-1#wf-1/1", "dbos:local/wf-1#wf-1/1"),
        ("wf-1/1", "dbos:local/wf-1#wf-1/1"),  # the native interrupt id
        ("wf-11/2", "dbos:local/wf-11#wf-11/2"),
        ("wf-1#wf-1/1", "dbos:local/wf-1#wf-1/1"),  # RUN_NATIVE#INTERRUPT
        ("dbos:local/x#x/1", "dbos:local/x#x/1"),  # complete: passed to the gateway
    ],
)
def test_interrupt_ids_expand(query: str, expected: str):
    assert expand_interrupt_id(_view(), query) == expected


def test_an_ambiguous_interrupt_id_exits_2():
    assert _exit_code(expand_interrupt_id, _view(), "wf-11/") == ExitCode.USAGE


@pytest.mark.parametrize(
    ("outcomes", "expected"),
    [
        ([("applied", None)], ExitCode.OK),
        ([("applied", None), ("applied", None)], ExitCode.OK),
        ([("conflict", "conflict")], ExitCode.CONFLICT),
        ([("failed", "not_found")], ExitCode.NOT_FOUND),
        ([("forbidden", "forbidden")], ExitCode.UNAUTHORIZED),
        ([("failed", "unreachable")], ExitCode.UNREACHABLE),
        ([("failed", "invalid")], ExitCode.USAGE),
        ([("failed", "unsupported")], ExitCode.FAILED),
        ([("failed", None)], ExitCode.FAILED),
        ([("applied", None), ("conflict", "conflict")], ExitCode.CONFLICT),
        ([("failed", "not_found"), ("conflict", "conflict")], ExitCode.FAILED),  # mixed
        ([("planned", None)], ExitCode.OK),
    ],
)
def test_command_results_map_to_exit_codes(outcomes: list[tuple[str, str | None]], expected):
    results = [
        CommandResult(id="k", action="pause", target=f"dbos:local/r{i}", outcome=o, error=e)
        for i, (o, e) in enumerate(outcomes)
    ]
    assert code_for_results(results) is expected


def test_gateway_errors_map_to_exit_codes():
    assert code_for_error(GatewayUnreachable("down")) is ExitCode.UNREACHABLE
    assert code_for_error(Unauthorized("no")) is ExitCode.UNAUTHORIZED
    assert code_for_error(Unauthorized("no", "forbidden")) is ExitCode.UNAUTHORIZED
    assert code_for_error(GatewayError("x", "not_found")) is ExitCode.NOT_FOUND
    assert code_for_error(GatewayError("x", "internal")) is ExitCode.FAILED


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "-"),
        (0.25, "0.2s"),
        (42, "42s"),
        (250, "4m10s"),
        (7500, "2h05m"),
        (3 * 86400 + 4 * 3600, "3d04h"),
    ],
)
def test_ages_read_like_an_operator_would_say_them(seconds: float | None, text: str):
    assert fmt_age(seconds) == text
