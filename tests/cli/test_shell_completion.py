"""Shell completion, called the way bash calls it (``_IRQ_COMPLETE=complete_bash`` with
``COMP_WORDS``/``COMP_CWORD`` against the installed ``irq`` script): commands and options,
and run / interrupt ids from the current context's gateway -- a real one with a real DBOS
agent, and none at all (then: nothing offered, nothing on stderr)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cli_harness import ROOT
from test_cli_with_dbos_agent import INTERRUPT_ID, RUN_ID, Fleet, eventually, fleet  # noqa: F401

from console.processes import free_port, stop_process

IRQ = Path(sys.executable).with_name("irq")


def complete(words: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """What bash's completion function runs for the command line ``words`` (the last word
    is the one being completed; a trailing space means a new, empty word)."""
    parts = words.split(" ")
    return subprocess.run(
        [str(IRQ)],
        env={
            **os.environ,
            **env,
            "_IRQ_COMPLETE": "complete_bash",
            "COMP_WORDS": words,
            "COMP_CWORD": str(len(parts) - 1),
        },
        capture_output=True,
        text=True,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )


def test_commands_and_options_complete_without_a_gateway(irq_home: Path):
    env = {"IRQ_URL": f"ws://127.0.0.1:{free_port()}"}
    commands = complete("irq appr", env)
    assert commands.returncode == 0 and commands.stdout.split() == ["approve"]
    options = complete("irq approve --dr", env)
    assert options.stdout.split() == ["--dry-run"]
    assert commands.stderr == options.stderr == ""


def test_ids_complete_from_nothing_when_the_gateway_is_down_and_say_nothing(irq_home: Path):
    env = {"IRQ_URL": f"ws://127.0.0.1:{free_port()}", "IRQ_TOKEN": "irq_x"}
    for words in ("irq approve ", "irq pause wf", "irq show ", "irq inbox --run "):
        result = complete(words, env)
        assert result.returncode == 0, (words, result)
        assert result.stdout.split() == [] and result.stderr == "", (words, result)


def test_a_bash_completion_call_without_the_shells_variables_says_so_without_a_traceback(
    irq_home: Path,
):
    """``_IRQ_COMPLETE=complete_bash irq`` typed by hand (no COMP_WORDS / COMP_CWORD) was an
    internal error (KeyError); now a usage message and exit 2, nothing on stdout."""
    base = {k: v for k, v in os.environ.items() if k not in ("COMP_WORDS", "COMP_CWORD")}
    for extra in ({}, {"COMP_WORDS": "irq appr"}, {"COMP_WORDS": "irq appr", "COMP_CWORD": "x"}):
        result = subprocess.run(
            [str(IRQ)],
            env={**base, **extra, "_IRQ_COMPLETE": "complete_bash"},
            capture_output=True,
            text=True,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            timeout=60,
        )
        assert result.returncode == 2, (extra, result)
        assert result.stdout == "", (extra, result)
        assert "COMP_CWORD" in result.stderr, (extra, result)
        assert "internal error" not in result.stderr and "Traceback" not in result.stderr


def test_a_broken_config_file_completes_nothing_and_says_nothing(irq_home: Path):
    (irq_home / "config.toml").write_text('[contexts.p]\nread_only = "false"\n')
    result = complete("irq approve ", {})
    assert result.returncode == 0
    assert result.stdout.split() == [] and result.stderr == ""


def test_run_and_interrupt_ids_complete_from_a_live_gateway(fleet: Fleet):  # noqa: F811
    env = fleet.env()
    eventually(
        lambda: "wf-cli-1/1" in complete("irq approve ", env).stdout.split(),
        "the pending interrupt to be offered",
    )
    # decisions offer pending interrupts by their (unique) native id; runs by native id
    approve = complete("irq approve wf-cli", env)
    assert approve.stdout.split() == ["wf-cli-1/1"], approve
    assert approve.stderr == ""
    assert complete("irq reject wf", env).stdout.split() == ["wf-cli-1/1"]
    assert complete("irq pause wf", env).stdout.split() == ["wf-cli-1"]
    assert complete("irq pause wf-cli-1 wf", env).stdout.split() == ["wf-cli-1"]
    assert complete("irq show ", env).stdout.split() == ["wf-cli-1"]
    assert complete("irq inbox --run w", env).stdout.split() == ["wf-cli-1"]
    # once a ':' is typed, the full ids
    assert complete("irq show dbos:", env).stdout.split() == [RUN_ID]
    assert complete("irq approve dbos:local/wf-cli-1#", env).stdout.split() == [INTERRUPT_ID]
    # nothing that does not start with what was typed (no suffix matches)
    assert complete("irq approve cli-1/1", env).stdout.split() == []
    # the flags typed before the id choose the gateway: a dead one offers nothing
    dead = f"ws://127.0.0.1:{free_port()}"
    assert complete(f"irq approve --url {dead} wf", env).stdout.split() == []
    # every offered word resolves to the id it stands for
    from console.cli.session import expand_interrupt_id, expand_run_id
    from console.client import GatewayClient

    async def view() -> object:
        async with GatewayClient(fleet.gateway.url, fleet.gateway.operator) as client:
            return client.view

    import asyncio

    snapshot = asyncio.run(view())
    assert expand_interrupt_id(snapshot, "wf-cli-1/1") == INTERRUPT_ID  # type: ignore[arg-type]
    assert expand_run_id(snapshot, "wf-cli-1") == RUN_ID  # type: ignore[arg-type]


def test_the_id_cache_answers_for_a_few_seconds_and_is_private(fleet: Fleet):  # noqa: F811
    from console.cli.completion import known_ids_of
    from console.config import Connection, cache_dir

    conn = Connection(fleet.gateway.url, fleet.gateway.operator, "test")
    ids = eventually(lambda: known_ids_of(conn).runs, "the run to be known")
    assert [c.id for c in ids] == [RUN_ID]
    (cache,) = cache_dir().glob("completion-ids-*.json")
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600
    assert fleet.gateway.operator not in cache.read_text()
    # with the gateway gone, a fresh cache still answers (no connection is attempted) ...
    stop_process(fleet.gateway.process)
    assert [c.id for c in known_ids_of(conn).runs] == [RUN_ID]
    # ... and without the cache the dead gateway gives nothing, quietly
    cache.unlink()
    assert known_ids_of(conn).runs == []


@pytest.mark.parametrize("shell", ["bash"])
def test_install_completion_writes_the_shell_hook(irq_home: Path, tmp_path: Path, shell: str):
    home = tmp_path / "user"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "SHELL": f"/bin/{shell}"}
    # typer finds the shell by walking up the process tree (shellingham): typed in a shell,
    # as a user does (the `; exit` keeps the shell from exec'ing irq in its place); a test
    # run detached from any shell found none ("Shell None is not supported")
    result = subprocess.run(
        [f"/bin/{shell}", "-c", f'"{IRQ}" --install-completion; exit $?'],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert result.returncode == 0, result
    scripts = list(home.rglob("irq*"))
    assert scripts, list(home.rglob("*"))
    assert any("_IRQ_COMPLETE=complete_bash" in p.read_text() for p in scripts if p.is_file())
