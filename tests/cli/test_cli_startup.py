"""A cold ``irq`` loads only what the command needs (benchmarks/cli_startup.py has the times).

Checked on what a fresh interpreter has in ``sys.modules`` after the console-script entry point
ran -- robust where a timed test would be flaky -- plus the pieces that made it fast keeping
the output byte for byte: typer's help renderer loaded without ``rich.markdown`` and
``rich.traceback`` (console/cli/help_import.py), the JSON document encoder
(console/cli/output.py), and ``run_async`` never formatting a command's result.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from datetime import UTC, datetime
from enum import Enum, IntEnum, StrEnum
from typing import Any

import pytest
from cli_harness import ROOT

from console.cli.output import dumps
from console.cli.session import run_async

#: loaded by ``irq --help`` never: the gateway, the TUI, the network, the policy engine, the
#: pydantic models, and the parts of rich typer's help renderer imports but irq never uses
NOT_FOR_HELP = (
    "pydantic", "asyncio", "ssl", "websockets", "httpx", "textual", "jsonschema", "cel",
    "backend_adapters", "console.gateway", "console.policy", "console.model", "console.client",
    "console.config", "console.notify_config", "console.tui", "console.demo",
    "rich.markdown", "rich.traceback", "rich.pretty", "markdown_it", "pygments",
)
#: a subcommand's --help goes through typer's parameter conversion, which loads pydantic
#: (typer._adapters); the rest stays out
NOT_FOR_SUBCOMMAND_HELP = tuple(m for m in NOT_FOR_HELP if m != "pydantic")

_ENTRY = """
import io, json, sys
sys.argv = ["irq", *json.loads(sys.argv[1])]
out = io.StringIO()
sys.stdout = out
code = 0
try:
    from console.cli.app import main
    main()
except SystemExit as exc:
    code = exc.code or 0
sys.stdout = sys.__stdout__
print(json.dumps({"code": code, "stdout": out.getvalue(), "modules": sorted(sys.modules)}))
"""


def _entry_point(*args: str, preload: str = "") -> dict[str, Any]:
    """Run the console script's ``main()`` in a fresh interpreter: exit code, stdout and the
    modules loaded by then."""
    done = subprocess.run(
        [sys.executable, "-c", preload + _ENTRY, json.dumps(args)],
        capture_output=True, text=True, cwd=ROOT, timeout=60, stdin=subprocess.DEVNULL,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "100", "NO_COLOR": "1", "IRQ_HOME": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    result["stderr"] = done.stderr
    return result


def _loaded(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return sorted({n for n in names for m in modules if m == n or m.startswith(n + ".")})


def test_irq_help_loads_no_pydantic_network_gateway_policy_tui_or_unused_rich_modules():
    result = _entry_point("--help")
    assert result["code"] == 0
    assert "Usage: irq" in result["stdout"]
    assert _loaded(result["modules"], NOT_FOR_HELP) == []


def test_irq_version_loads_no_pydantic_or_gateway_protocol():
    result = _entry_point("--version")
    assert result["code"] == 0
    assert result["stdout"].startswith("irq ")
    assert _loaded(result["modules"], NOT_FOR_HELP) == []


@pytest.mark.parametrize("command", ["runs", "approve", "policy", "serve", "notify"])
def test_subcommand_help_loads_no_network_gateway_policy_engine_or_tui(command: str):
    result = _entry_point(command, "--help")
    assert result["code"] == 0
    assert _loaded(result["modules"], NOT_FOR_SUBCOMMAND_HELP) == []


@pytest.mark.parametrize(
    "args", [("--help",), ("runs", "--help"), ("policy", "--help"), ("runs", "--bogus")],
    ids=" ".join,
)
def test_help_and_usage_errors_read_the_same_with_the_lean_help_renderer(args: tuple[str, ...]):
    lean = _entry_point(*args)
    full = _entry_point(*args, preload="import typer.rich_utils\n")  # the real rich modules
    assert "rich.markdown" not in lean["modules"] and "rich.markdown" in full["modules"]
    assert (lean["code"], lean["stdout"], lean["stderr"]) == (
        full["code"], full["stdout"], full["stderr"])


def test_lean_help_renderer_hands_over_the_real_markdown_and_traceback_on_first_use():
    code = """
import sys
from console.cli.help_import import lean_help_renderer
lean_help_renderer()
import typer.rich_utils as ru
assert "rich.markdown" not in sys.modules and "rich.traceback" not in sys.modules
import rich.markdown, rich.traceback
assert type(ru.Markdown("# x")) is rich.markdown.Markdown
from typer.models import DeveloperExceptionConfig
try:
    raise ValueError("boom")
except ValueError as exc:
    assert type(ru.get_traceback(exc, DeveloperExceptionConfig(), [])) is rich.traceback.Traceback
assert sys.modules["rich.markdown"] is rich.markdown and hasattr(rich.markdown, "Heading")
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.stdout.strip() == "ok", done.stderr


class Colour(Enum):
    RED = 1


class Level(IntEnum):
    HIGH = 3


class Kind(StrEnum):
    GPU = "gpu"


@pytest.mark.parametrize(
    "value",
    [
        [{"id": "bench:local/run-1", "progress": 0.25, "resources": [], "notes": {},
          "warnings": ["é ✓ \u2028 \x7f"], "age": None, "ok": True, "n": -3}],
        {"tiny": 1e-05, "tinier": 1.5e-07, "big": 1e16, "neg_zero": -0.0},
        {"nan": math.nan, "inf": math.inf},
        {"enum": Colour.RED, "int_enum": Level.HIGH, "str_enum": Kind.GPU},
        {"at": datetime(2026, 12, 2, 13, 0, tzinfo=UTC)},
        {"huge": 2**70, 1: "int key", None: "none key"},
        {"surrogate": "\ud800", "controls": "\x1b[2J\x07\u202e"},
        {"bytes": b"x", "tuple": (1, 2), "nested": [[[]], [{}]]},
    ],
    ids=["run-like", "small-floats", "nan", "enums", "datetime", "non-str-keys", "controls",
         "odd-types"],
)
def test_json_documents_are_byte_for_byte_what_the_standard_library_writes(value: Any):
    from console.cli.output import _json_escape
    from console.terminal_text import UNSAFE_IN_BLOCK

    expected = UNSAFE_IN_BLOCK.sub(
        _json_escape, json.dumps(value, indent=2, default=str, ensure_ascii=False))
    assert dumps(value, indent=2) == expected


def test_run_async_returns_the_result_without_ever_formatting_it():
    """asyncio.run on 3.11 formats repr(main task) -- with its result -- when it restores the
    SIGINT handler; a fleet of 10,000 runs made that 0.4 s."""
    formatted: list[int] = []

    class Fleet:
        def __repr__(self) -> str:
            formatted.append(1)
            return "Fleet()"

    fleet = Fleet()

    async def work() -> Fleet:
        return fleet

    assert run_async(work()) is fleet
    assert formatted == []
