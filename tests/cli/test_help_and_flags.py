"""Help that reads well and flags that mean one thing everywhere; ``irq --version``."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

import pytest
import typer
from cli_harness import irq

from console.cli.app import app


def _commands(group: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    found: list[tuple[tuple[str, ...], Any]] = []
    for name, command in sorted(getattr(group, "commands", {}).items()):
        found.append(((*path, name), command))
        found += _commands(command, (*path, name))
    return found


ALL_COMMANDS = _commands(typer.main.get_command(app))


@pytest.mark.parametrize("path", [(), *[p for p, _ in ALL_COMMANDS]], ids=" ".join)
def test_help_has_no_type_placeholders_and_a_readable_usage_line(path: tuple[str, ...]):
    result = irq(*path, "--help", env={"COLUMNS": "120"})
    assert result.code == 0, result.stdout + result.stderr
    text = result.stdout
    for placeholder in ("<bool>", "<str>", "<int>", "<list", "<Path>"):
        assert placeholder not in text, (placeholder, text)
    (usage,) = re.findall(r"Usage: (.*)", text)
    assert "{" not in usage and "}" not in usage, usage  # not typer's {INTERRUPT}
    assert "......" not in usage and "...]..." not in usage, usage
    assert usage.split()[: len(path) + 1] == ["irq", *path]


def test_decision_and_action_usage_lines_name_their_arguments():
    approve = irq("approve", "--help").stdout
    # optional: the ids, or --filter EXPR instead
    assert re.search(r"Usage: irq approve \[OPTIONS\] \[INTERRUPT\]\s*$", approve, re.MULTILINE)
    assert "--filter" in approve
    pause = irq("pause", "--help").stdout
    assert re.search(r"Usage: irq pause \[OPTIONS\] \[RUN\.\.\.\]\s*$", pause, re.MULTILINE)
    assert "--filter" in pause


def test_every_short_flag_means_one_thing_across_all_commands():
    meanings: dict[str, set[str]] = defaultdict(set)
    for _, command in [((), typer.main.get_command(app)), *ALL_COMMANDS]:
        for param in command.params:
            shorts = [o for o in param.opts if not o.startswith("--")]
            longs = [o for o in param.opts if o.startswith("--")]
            for short in shorts:
                meanings[short].update(longs)
    ambiguous = {short: longs for short, longs in meanings.items() if len(longs) > 1}
    assert not ambiguous
    assert meanings["-r"] == {"--reason"}


def test_key_is_the_idempotency_key_and_tls_options_say_tls():
    by_command = {" ".join(path): command for path, command in ALL_COMMANDS}
    serve_opts = {o for p in by_command["serve"].params for o in p.opts}
    assert {"--tls-cert", "--tls-key"} <= serve_opts and "--key" not in serve_opts
    for name, command in by_command.items():
        for param in command.params:
            if "--key" in param.opts:
                assert "Idempotency" in (param.help or ""), name


def test_reject_keeps_feedback_for_the_agent_and_reason_for_the_audit():
    reject = {o: p for p in dict(ALL_COMMANDS)[("reject",)].params for o in p.opts}
    assert "agent" in reject["--feedback"].help
    assert "audit" in reject["--reason"].help


def test_version_names_the_product_its_version_and_the_protocol():
    from importlib.metadata import version

    from console.gateway.protocol import PROTOCOL_VERSION

    result = irq("--version")
    assert result.code == 0
    assert result.stdout.strip() == (f"irq {version('irq')} (gateway protocol {PROTOCOL_VERSION})")


def test_every_command_and_group_asks_for_the_plain_layout_through_cls():
    """typer builds them with the classes given to ``cls=`` (console/cli/help_layout.py);
    nothing changes a command's class after it is built."""
    from console.cli.help_layout import IrqCommand, IrqGroup

    assert type(typer.main.get_command(app)) is IrqGroup
    for path, command in ALL_COMMANDS:
        expected = IrqGroup if getattr(command, "commands", None) is not None else IrqCommand
        assert type(command) is expected, path
