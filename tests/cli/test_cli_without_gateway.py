"""CLI behaviour that needs no gateway: usage errors, unreachable gateway, tokens, config."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_harness import ROOT, irq, irq_process, start_gateway

from console.config import Config, Context, save_config
from console.processes import PortTaken, free_port
from tests.support.held_port import held_port

SUBCOMMANDS = [
    "runs",
    "show",
    "inbox",
    "watch",
    "audit",
    "pause",
    "resume",
    "cancel",
    "terminate",
    "approve",
    "edit",
    "reject",
    "respond",
    "tui",
    "demo",
    "serve",
    "token",
]


def test_help_and_every_subcommand_help_load_no_textual():
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from console.cli.app import app\n"
        f"for args in [['--help']] + [[c, '--help'] for c in {SUBCOMMANDS!r}]:\n"
        "    r = CliRunner().invoke(app, args)\n"
        "    assert r.exit_code == 0, (args, r.output)\n"
        "print(','.join(m for m in sys.modules if m == 'textual' or m.startswith('textual.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def test_console_script_help_exits_0_and_lists_the_commands():
    out = irq_process("--help")
    assert out.returncode == 0
    for command in SUBCOMMANDS:
        assert command in out.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["runs", "--no-such-option"],
        ["show"],  # missing RUN
        ["runs", "-o", "yaml"],
        ["runs", "--state", "sleepy"],
        ["no-such-command"],
        ["token", "create", "--role", "superuser"],
        ["approve"],
        ["reject", "dbos:local/wf-1#wf-1/1"],  # --feedback is required
    ],
)
def test_usage_errors_exit_2(irq_home: Path, args: list[str]):
    result = irq(*args, env={"IRQ_URL": f"ws://127.0.0.1:{free_port()}"})
    assert result.code == 2, result
    assert result.stdout == ""


def test_unreachable_gateway_exits_6_with_a_clear_message_and_no_traceback(irq_home: Path):
    url = f"ws://127.0.0.1:{free_port()}"
    out = irq_process("runs", "--url", url)
    assert out.returncode == 6
    assert out.stdout == ""
    assert f"cannot reach the gateway at {url}" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["inbox"],
        ["show", "wf-1"],
        ["audit"],
        ["approve", "wf-1/1", "--yes"],
        ["pause", "wf-1", "--yes"],
    ],
)
def test_every_gateway_command_exits_6_when_the_gateway_is_down(irq_home: Path, args: list[str]):
    result = irq(*args, env={"IRQ_URL": f"ws://127.0.0.1:{free_port()}"})
    assert result.code == 6
    assert "cannot reach the gateway" in result.stderr


def test_global_options_work_before_and_after_the_subcommand(irq_home: Path):
    url = f"ws://127.0.0.1:{free_port()}"
    before = irq("--url", url, "runs")
    after = irq("runs", "--url", url)
    assert before.code == after.code == 6
    assert url in before.stderr and url in after.stderr


def test_watch_exits_6_when_the_gateway_is_down_at_start(irq_home: Path):
    out = irq_process("watch", "--url", f"ws://127.0.0.1:{free_port()}", timeout=30)
    assert out.returncode == 6
    assert "cannot reach the gateway" in out.stderr


def test_mutation_without_yes_and_without_a_terminal_exits_2_before_connecting(irq_home: Path):
    result = irq("pause", "dbos:local/wf-1", env={"IRQ_URL": f"ws://127.0.0.1:{free_port()}"})
    assert result.code == 2
    assert "--yes" in result.stderr


def test_edit_with_invalid_json_exits_2(irq_home: Path):
    result = irq("edit", "dbos:local/wf-1#wf-1/1", "--args", "{not json")
    assert result.code == 2
    assert "not valid JSON" in result.stderr


def test_edit_args_must_be_an_object(irq_home: Path):
    result = irq("edit", "dbos:local/wf-1#wf-1/1", "--args", "[1, 2]")
    assert result.code == 2
    assert "JSON object" in result.stderr


@pytest.mark.parametrize("args", [[], ["--text", "yes", "--json", '"yes"']])
def test_respond_needs_exactly_one_of_text_and_json(irq_home: Path, args: list[str]):
    result = irq("respond", "dbos:local/wf-1#wf-1/1", *args)
    assert result.code == 2
    assert "exactly one of --text or --json" in result.stderr


def test_token_create_prints_the_token_and_stores_only_its_hash(irq_home: Path):
    result = irq("token", "create", "--role", "operator", "--name", "alice")
    assert result.code == 0
    token = result.stdout.strip()
    assert token.startswith("irq_")
    assert len(result.stdout.splitlines()) == 1  # the token alone on stdout: $(irq token …)
    store = irq_home / "tokens.json"
    text = store.read_text()
    assert token not in text
    entries = json.loads(text)
    assert entries[-1]["sha256"] == hashlib.sha256(token.encode()).hexdigest()
    assert entries[-1]["role"] == "operator"
    assert entries[-1]["identity"] == "alice"
    assert store.stat().st_mode & 0o077 == 0


def test_token_create_json_and_token_list_never_show_secrets(irq_home: Path):
    created = irq("token", "create", "--role", "viewer", "-o", "json")
    record = json.loads(created.stdout)
    assert record["role"] == "viewer" and record["token"].startswith("irq_")
    assert record["identity"]
    listed = irq("token", "list", "-o", "json")
    assert listed.code == 0
    entries = json.loads(listed.stdout)
    assert [e["role"] for e in entries] == ["viewer"]
    assert record["token"] not in listed.stdout


def test_serve_rejects_a_bad_backend_url_with_exit_2(irq_home: Path):
    result = irq("serve", "--port", str(free_port()), "--backend", "mysql://nope")
    assert result.code == 2
    assert "not a backend URL" in result.stderr


def test_serve_without_backend_flags_uses_the_context_backends(irq_home: Path):
    save_config(
        Config(
            current_context="lab",
            contexts={"lab": Context("lab", backends=["kafka+tcp://not-a-backend"])},
        )
    )
    result = irq("serve", "--port", str(free_port()))
    assert result.code == 2
    assert "kafka+tcp://not-a-backend" in result.stderr


def test_serve_needs_cert_and_key_together(irq_home: Path, tmp_path: Path):
    cert = tmp_path / "cert.pem"
    cert.write_text("x")
    result = irq("serve", "--tls-cert", str(cert))
    assert result.code == 2
    assert "--tls-cert and --tls-key go together" in result.stderr


def test_unknown_context_is_a_usage_error(irq_home: Path):
    save_config(Config(contexts={"prod": Context(name="prod")}))
    result = irq("--context", "staging", "runs")
    assert result.code == 2
    assert "unknown context 'staging'" in result.stderr


def test_read_only_context_refuses_mutations_with_exit_5(irq_home: Path):
    url = f"ws://127.0.0.1:{free_port()}"
    save_config(
        Config(current_context="prod", contexts={"prod": Context("prod", url, read_only=True)})
    )
    result = irq("cancel", "dbos:local/wf-1", "--yes")
    assert result.code == 5
    assert "read-only" in result.stderr
    approve = irq("approve", "dbos:local/wf-1#wf-1/1")
    assert approve.code == 5


def test_bare_irq_without_a_terminal_prints_help_instead_of_the_tui(irq_home: Path):
    out = irq_process()
    assert out.returncode == 0
    assert "Usage" in out.stdout


def test_tui_without_a_terminal_is_a_usage_error(irq_home: Path):
    out = irq_process("tui")
    assert out.returncode == 2
    assert "needs a terminal" in out.stderr


def test_the_harness_says_when_the_gateways_chosen_port_is_taken(tmp_path: Path) -> None:
    """A port the test chose stays its own; a taken one is reported, not silently moved."""
    with held_port() as port, pytest.raises(PortTaken, match="the port is in use"):
        start_gateway(tmp_path, port=port)
