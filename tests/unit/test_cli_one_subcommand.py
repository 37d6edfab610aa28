"""``irq SUBCOMMAND ...`` builds only that subcommand (console/cli/app.py ``app_for``): typer
makes the click command of every subcommand it holds on each run. What the operator sees must
not change: help pages, usage errors and exit codes are those of the full command."""

from __future__ import annotations

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from console.cli.app import app, app_for
from console.cli.completion import COMPLETE_VAR


def test_only_a_command_line_that_starts_with_a_subcommand_gets_the_small_app(
        monkeypatch: pytest.MonkeyPatch) -> None:
    one = app_for(["runs", "-o", "json"])
    assert one is not app
    group = get_command(one)
    assert list(group.commands) == ["runs"]  # type: ignore[attr-defined]
    assert app_for([]) is app  # the TUI, or the root's help
    assert app_for(["--context", "prod", "runs"]) is app  # a global option first
    assert app_for(["no-such-command"]) is app  # its error lists the commands
    monkeypatch.setenv(COMPLETE_VAR, "complete_bash")
    assert app_for(["runs"]) is app  # completion sees every command


@pytest.mark.parametrize("args", [
    ["runs", "--help"], ["retry", "--help"], ["jobs", "--help"], ["token", "list", "--help"],
    ["runs", "--bogus"], ["pause"], ["serve", "--shed-hold", "-1"],
])
def test_what_the_operator_sees_is_the_full_commands(args: list[str]) -> None:
    env = {"COLUMNS": "100", "NO_COLOR": "1", "IRQ_URL": "ws://127.0.0.1:9"}
    full = CliRunner().invoke(app, args, env=env)
    single = CliRunner().invoke(app_for(args), args, env=env)
    assert (single.exit_code, single.output) == (full.exit_code, full.output)
