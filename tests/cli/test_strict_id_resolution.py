"""Mutations resolve ids by exact id, native id or a unique prefix only -- never by a suffix.

Before, ``irq approve 03-0001/1`` approved whichever interrupt's id ended that way (a "drop
table" included). These tests pin the strict rule on the one resolver every command uses.
"""

from __future__ import annotations

import pytest
import typer

from console.cli.exits import ExitCode
from console.cli.session import expand_interrupt_id, expand_run_id
from console.client import FleetView
from console.model import Interrupt, Run


def _fleet() -> FleetView:
    view = FleetView()
    for native in ("deploy-03-0001", "deploy-04-0001", "migrate-03-0001"):
        run = Run(
            id=Run.make_id("dbos", "local", native),
            backend="dbos",
            context="local",
            native_id=native,
        )
        view.runs[run.id] = run
        intr = Interrupt(
            id=Interrupt.make_id(run.id, f"{native}/1"),
            run_id=run.id,
            native_id=f"{native}/1",
            title="drop table" if native.startswith("migrate") else "deploy",
        )
        view.interrupts[intr.id] = intr
    return view


def _exit(fn: object, *args: object) -> int:
    with pytest.raises(typer.Exit) as info:
        fn(*args)  # type: ignore[operator]
    return info.value.exit_code


@pytest.mark.parametrize("suffix", ["03-0001/1", "-0001/1", "e-03-0001#migrate-03-0001/1"])
def test_an_interrupt_id_suffix_never_resolves(suffix: str, capsys: pytest.CaptureFixture[str]):
    # each is the end of exactly one interrupt id ("03-0001/1": the "drop table" one)
    assert _exit(expand_interrupt_id, _fleet(), suffix) == ExitCode.NOT_FOUND
    assert f"no interrupt matches {suffix!r}" in capsys.readouterr().err


def test_a_run_id_suffix_never_resolves(capsys: pytest.CaptureFixture[str]):
    # "migrate-03-0001" is the only run ending in "ate-03-0001": a suffix match would pick it
    assert _exit(expand_run_id, _fleet(), "ate-03-0001") == ExitCode.NOT_FOUND
    assert "no run matches 'ate-03-0001'" in capsys.readouterr().err


def test_exact_ids_native_ids_and_unique_prefixes_resolve():
    view = _fleet()
    assert expand_interrupt_id(view, "migrate-03-0001/1") == (
        "dbos:local/migrate-03-0001#migrate-03-0001/1"
    )
    assert expand_interrupt_id(view, "migrate") == "dbos:local/migrate-03-0001#migrate-03-0001/1"
    assert expand_interrupt_id(view, "dbos:local/deploy-04") == (
        "dbos:local/deploy-04-0001#deploy-04-0001/1"
    )
    assert expand_run_id(view, "deploy-04") == "dbos:local/deploy-04-0001"


def test_an_ambiguous_interrupt_prefix_is_a_usage_error_listing_the_candidates(
    capsys: pytest.CaptureFixture[str],
):
    assert _exit(expand_interrupt_id, _fleet(), "deploy-0") == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "'deploy-0' matches 2 interrupts" in err
    assert "dbos:local/deploy-03-0001#deploy-03-0001/1" in err
    assert "dbos:local/deploy-04-0001#deploy-04-0001/1" in err
    assert "migrate" not in err


def test_the_shared_rule_the_tui_commands_use_refuses_suffixes_too():
    """``console.ids.match_id`` is what the TUI's ``:approve``/``:pause ID`` resolve with."""
    from console.ids import interrupt_candidates, match_id, run_candidates

    view = _fleet()
    assert match_id("03-0001/1", interrupt_candidates(view.interrupts.values())) == []
    assert match_id("ate-03-0001", run_candidates(view.runs.values())) == []
    assert match_id("-0001", run_candidates(view.runs.values())) == []  # not a substring
    assert match_id("deploy-0", run_candidates(view.runs.values())) == [
        "dbos:local/deploy-03-0001",
        "dbos:local/deploy-04-0001",
    ]
