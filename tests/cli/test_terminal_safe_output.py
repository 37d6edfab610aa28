"""Escape sequences from an agent or a client reach the operator's terminal inert.

A real DBOS agent (tests/support/hostile_dbos_agent.py) puts OSC 0 (window title), OSC 52
(clipboard write), CSI 2J (clear screen), the C1 controls CSI/OSC/ST and a bidi override in
its workflow id, run name, resource ids and kinds, step name, heartbeat details and the
interrupt's title, description, action and arguments; the operator's reason carries them
too. ``irq runs|inbox|show|audit``, a dry-run plan and a result table run under a
pseudo-terminal (so rich knows it writes to a terminal and styles its output), and the bytes
written are read back: none of the payload's sequences is there, its visible form is.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_harness import ROOT, irq_process

from console.processes import stop_process
from tests.support.hostile_dbos_agent import PAYLOAD, RUN_ID
from tests.support.hostile_fleet import HostileFleet

pytestmark = [pytest.mark.slow]

#: what must never reach the terminal (decoded output): OSC introducers (ESC ] and C1 OSC),
#: the clear-screen sequence, C1 CSI and ST, BEL, and the bidi override
FORBIDDEN = {
    "ESC ] (OSC)": "\x1b]",
    "ESC [ 2 J": "\x1b[2J",
    "U+009B (C1 CSI)": "\x9b",
    "U+009D (C1 OSC)": "\x9d",
    "U+009C (C1 ST)": "\x9c",
    "BEL": "\x07",
    "U+202E (bidi override)": "\u202e",
}
#: how the payload shows instead (backslash escapes, in full: the pty is wide enough)
VISIBLE = "A\\x1b]0;PWNED-TITLE\\x07B[/x]\\x1b]52;c;cHduZWQ=\\x07C\\x1b[2JD\\x9b2JE\\x9d0;C1-TITLE"
REASON = "reason-" + PAYLOAD


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostileFleet]:
    with HostileFleet(tmp_path_factory.mktemp("hostile-home")) as fleet:
        yield fleet


def run_in_pty(fleet: HostileFleet, *args: str, timeout: float = 90) -> tuple[int, bytes]:
    """``irq ARGS`` with stdout and stderr on a pseudo-terminal 1000 columns wide."""
    import fcntl
    import struct

    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 60, 1000, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS", "LINES")}
    env.update(TERM="xterm-256color", IRQ_HOME=str(fleet.home), IRQ_URL=fleet.url,
               IRQ_TOKEN=fleet.tokens["operator"], PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "console.cli.app", *args], cwd=ROOT,
                            stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env,
                            start_new_session=True)
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        else:
            raise AssertionError(f"irq {args[0]} did not finish in {timeout:g}s: {bytes(out)!r}")
    finally:
        os.close(master)
        stop_process(proc)
    return proc.returncode, bytes(out)


def assert_inert(output: bytes, what: str) -> str:
    text = output.decode("utf-8")  # strict: a lone surrogate or a stray byte fails here too
    found = [name for name, seq in FORBIDDEN.items() if seq in text]
    assert not found, f"{what}: {found} reached the terminal:\n{text!r}"
    return text


def test_runs_inbox_show_print_agent_text_inert_on_a_terminal(hostile: HostileFleet) -> None:
    code, out = run_in_pty(hostile, "runs")
    text = assert_inert(out, "irq runs")
    assert code == 0, text
    assert "\x1b[" in text, "rich did not style its output: not a terminal?"
    assert "wf-hostile-" + VISIBLE in text and "name-" + VISIBLE in text, text

    code, out = run_in_pty(hostile, "inbox")
    text = assert_inert(out, "irq inbox")
    assert code == 0, text
    assert "title-" + VISIBLE in text and "action-" + VISIBLE in text, text

    code, out = run_in_pty(hostile, "show", RUN_ID)
    text = assert_inert(out, "irq show")
    assert code == 0, text
    for field in ("name-", "gpu-", "gpu", "lock-", "step-", "title-"):
        assert field + VISIBLE in text, f"{field} not shown:\n{text}"
    assert "detail-A" in text and "PWNED-TITLE" in text.split("Recent heartbeats", 1)[1]


def test_plan_results_and_audit_print_agent_and_reason_text_inert(
    hostile: HostileFleet,
) -> None:
    code, out = run_in_pty(hostile, "pause", RUN_ID, "--dry-run")
    text = assert_inert(out, "irq pause --dry-run")
    assert code == 0, text
    assert "gpu-" + VISIBLE in text and "lock-" + VISIBLE in text, text

    code, out = run_in_pty(hostile, "pause", RUN_ID, "--yes", "--reason", REASON)
    text = assert_inert(out, "irq pause (results)")
    assert "wf-hostile-" + VISIBLE in text, text

    code, out = run_in_pty(hostile, "audit")
    text = assert_inert(out, "irq audit")
    assert code == 0, text
    assert "reason-" + VISIBLE in text, text


def test_json_output_escapes_controls_and_keeps_the_values(hostile: HostileFleet) -> None:
    env = {"IRQ_HOME": str(hostile.home), "IRQ_URL": hostile.url,
           "IRQ_TOKEN": hostile.tokens["operator"]}
    outputs = {}
    for args in (("runs", "-o", "json"), ("inbox", "-o", "json"), ("show", RUN_ID, "-o", "json")):
        result = irq_process(*args, env=env)
        assert result.returncode == 0, result.stderr
        assert_inert(result.stdout.encode(), f"irq {' '.join(args)}")
        assert "\\u009b" in result.stdout  # the C1 CSI, escaped by the encoder
        outputs[args[0]] = json.loads(result.stdout)  # valid JSON
    # the values decode to exactly what the agent wrote
    runs = {r["id"]: r for r in outputs["runs"]}
    assert runs[RUN_ID]["name"] == "name-" + PAYLOAD
    assert [i["title"] for i in outputs["inbox"]] == ["title-" + PAYLOAD]
    assert outputs["show"]["journal"][0]["name"] == "step-" + PAYLOAD


def test_the_gateway_log_shows_a_refused_clients_text_inert(hostile: HostileFleet) -> None:
    """``irq serve`` logs refusals with the client's target: its terminal gets it inert."""
    import asyncio

    from console.client import GatewayClient
    from console.model import Action

    target = "dbos:local/refused-" + PAYLOAD

    async def refused_cancel() -> None:
        async with GatewayClient(hostile.url, hostile.tokens["viewer"], subscribe=False) as c:
            await c.command(Action.CANCEL, [target], reason=REASON)

    try:
        asyncio.run(refused_cancel())
    except Exception:  # noqa: BLE001 - a refusal may come back as an error frame
        pass
    log = hostile.home / "gateway.log"
    deadline = time.monotonic() + 30
    while "refused-A" not in log.read_text(errors="replace") and time.monotonic() < deadline:
        time.sleep(0.2)
    text = assert_inert(log.read_bytes(), "irq serve's log")
    assert "refused-" + VISIBLE in text, text[-2000:]


def test_shell_completion_never_offers_an_id_holding_escape_sequences(
    hostile: HostileFleet, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """bash prints completion candidates raw: the hostile run's id is looked up (it is in the
    completion cache) but never offered."""
    home = tmp_path_factory.mktemp("completion-home")
    env = {**os.environ, "IRQ_HOME": str(home), "IRQ_URL": hostile.url,
           "IRQ_TOKEN": hostile.tokens["operator"], "_IRQ_COMPLETE": "complete_bash",
           "COMP_WORDS": "irq show wf-", "COMP_CWORD": "2"}
    result = subprocess.run([str(Path(sys.executable).with_name("irq"))], env=env, cwd=ROOT,
                            capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    assert result.returncode == 0, result.stderr
    cached = "".join(p.read_text() for p in (home / "cache").glob("completion-ids-*.json"))
    assert "wf-hostile-" in cached  # the gateway's answer held the id
    assert_inert(result.stdout.encode(), "completion")
    assert "wf-hostile" not in result.stdout
