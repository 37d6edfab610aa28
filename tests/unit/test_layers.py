"""Layers point one way (none imports upwards), demo and test scaffolding stays out of the
product, and no two modules import each other: checked on the source (every import statement,
also those inside functions) and at import time.

Layers, top to bottom: ``console.demo`` (``irq demo``: starts the gateway, fleets and the TUI
as child processes) / ``console.cli`` / ``console.tui`` / ``console.gateway`` /
``console.client`` / ``console.model`` + ``console.semantics`` / ``backend_adapters``.
``tests/``, ``tools/``, ``benchmarks/`` and ``devtools/`` sit outside the product, and nothing in
the product imports them. ``devtools/`` (starting real servers) is shared by the tests and the
benchmarks and tools: they import it, it imports none of them, and nothing but ``tests/``
imports ``tests`` (a changed test helper must not break a benchmark).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("console", "backend_adapters")
#: scanned for import cycles too (not product, but a cycle there is as confusing)
OUTSIDE_PRODUCT = ("tests/support", "tools", "devtools")

_UPPER_CONSOLE = {"console.gateway", "console.tui", "console.cli", "console.demo"}
_NOT_PRODUCT = {"tests", "tools", "devtools"}

FORBIDDEN: dict[str, set[str]] = {
    # Adapters know nothing of the console's transport and UIs; they may use the pure core
    # (console.model, console.semantics) and console.processes.
    "backend_adapters": {"textual", "typer", "websockets", "console.client"}
    | _UPPER_CONSOLE | _NOT_PRODUCT,
    "console/model.py": {"textual", "typer", "websockets", "console.client", "backend_adapters"}
    | _UPPER_CONSOLE | _NOT_PRODUCT,
    "console/semantics.py": {"textual", "typer", "websockets", "console.client", "backend_adapters"}
    | _UPPER_CONSOLE | _NOT_PRODUCT,
    # the rest of the pure core: every layer calls these, so they import none of them
    "console/liveness.py": {"textual", "typer", "websockets", "console.client", "backend_adapters"}
    | _UPPER_CONSOLE | _NOT_PRODUCT,
    "console/decision_check.py": {"textual", "typer", "websockets", "console.client",
                                  "backend_adapters"} | _UPPER_CONSOLE | _NOT_PRODUCT,
    "console/terminal_text.py": {"textual", "typer", "websockets", "console.client",
                                 "backend_adapters"} | _UPPER_CONSOLE | _NOT_PRODUCT,
    "console/ids.py": {"textual", "typer", "websockets", "console.client", "backend_adapters"}
    | _UPPER_CONSOLE | _NOT_PRODUCT,
    "console/run_filter.py": {"textual", "typer", "websockets", "console.client",
                              "backend_adapters"} | _UPPER_CONSOLE | _NOT_PRODUCT,
    "console/policy": {"textual", "typer", "websockets", "console.client", "backend_adapters"}
    | _UPPER_CONSOLE | _NOT_PRODUCT,
    "console/client.py": {"textual", "typer"} | _UPPER_CONSOLE | _NOT_PRODUCT,
    "console/gateway": {"textual", "typer", "console.tui", "console.cli", "console.demo"}
    | _NOT_PRODUCT,
    "console/tui": {"typer", "console.cli", "console.demo"} | _NOT_PRODUCT,
    "console/cli": {"textual", "console.tui", "console.demo"} | _NOT_PRODUCT,
    # the demo starts `irq serve` and `irq tui` as child processes; it never imports them
    "console/demo": {"console.cli", "console.tui"} | _NOT_PRODUCT,
    "console/config.py": _UPPER_CONSOLE | _NOT_PRODUCT,
    "console/processes.py": _UPPER_CONSOLE | _NOT_PRODUCT,
}

#: The only sanctioned crossings, each (file, imported module) -> why. Each must be made
#: inside a function (a lazy import, so ``irq --help`` loads neither Textual nor the demo) and
#: each must still exist (a stale entry fails the test).
ALLOWED: dict[tuple[str, str], str] = {
    ("console/cli/launch.py", "console.tui.app"): (
        "`irq tui` (and bare `irq`) opens the terminal UI inside the command"
    ),
    ("console/cli/launch.py", "console.demo.launcher"): (
        "`irq demo` is the demo's one entry point: the command imports the launcher when it "
        "runs; every other product module stays free of demo code"
    ),
    # heartbeat_push.py is agent-side code, not adapter code: it runs inside the agent's own
    # process (imported by backend_adapters/dbos/{agent,runtime}.py, the helpers DBOS agents
    # use) and is by purpose a client of the gateway's agent channel, which speaks websockets
    # (console/gateway/PROTOCOL.md, `/agent`). The adapters the gateway runs never reach it
    # for transport, and no other module under backend_adapters/ may import websockets.
    ("backend_adapters/heartbeat_push.py", "websockets"): (
        "the agent-side heartbeat pusher is a websocket client of the gateway's agent channel"
    ),
}
#: crossings sanctioned at module level (the pusher's whole job is the websocket)
ALLOWED_AT_MODULE_LEVEL = {("backend_adapters/heartbeat_push.py", "websockets")}

#: words that mark demo, sample or screenshot scaffolding in a module's file name
SCAFFOLDING_WORDS = ("demo", "sample", "screenshot", "recording", "live_fleet")


@dataclass(frozen=True)
class Import:
    path: str  # relative to ROOT
    module: str  # the module the statement names (resolved for relative imports)
    names: tuple[str, ...]  # for `from module import a, b`: ("a", "b"); else ()
    line: int
    in_function: bool
    type_checking_only: bool


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(path: Path) -> list[Import]:
    """Every import statement of a module: at module level, inside functions, classes and
    ``if TYPE_CHECKING:`` blocks (each marked as such)."""
    tree = ast.parse(path.read_text(), str(path))
    rel = str(path.relative_to(ROOT))
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    out: list[Import] = []

    def visit(node: ast.AST, in_function: bool, type_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            child_in_function = in_function or isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
            )
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    visit_one(stmt, in_function, True)
                for stmt in child.orelse:
                    visit_one(stmt, in_function, type_only)
                continue
            visit_one(child, child_in_function, type_only)

    def visit_one(node: ast.AST, in_function: bool, type_only: bool) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                out.append(Import(rel, alias.name, (), node.lineno, in_function, type_only))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            names = tuple(a.name for a in node.names)
            out.append(Import(rel, module, names, node.lineno, in_function, type_only))
        visit(node, in_function, type_only)

    visit(tree, False, False)
    return out


def python_files(*roots: str) -> Iterator[Path]:
    for root in roots:
        target = ROOT / root
        if target.suffix == ".py":
            yield target
        else:
            yield from sorted(p for p in target.rglob("*.py") if "__pycache__" not in p.parts)


def _matches(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layer_violations() -> tuple[list[str], set[tuple[str, str]]]:
    """Forbidden imports (with file:line), and the ALLOWED entries that were used."""
    problems: list[str] = []
    used: set[tuple[str, str]] = set()
    for where, banned in FORBIDDEN.items():
        for path in python_files(where):
            for imp in imports_of(path):
                candidates = [imp.module] + [f"{imp.module}.{n}" for n in imp.names]
                hit = next((b for b in banned for c in candidates if _matches(c, b)), None)
                if hit is None:
                    continue
                key = next(
                    (k for k in ALLOWED if k[0] == imp.path and any(
                        _matches(c, k[1]) for c in candidates)),
                    None,
                )
                if key is not None and (imp.in_function or key in ALLOWED_AT_MODULE_LEVEL):
                    used.add(key)
                    continue
                where_in = "inside a function" if imp.in_function else "at module level"
                problems.append(
                    f"{imp.path}:{imp.line} imports {imp.module} {where_in} "
                    f"(not allowed in {where}: {hit})"
                )
    return problems, used


def test_each_layer_imports_only_downwards_also_inside_functions():
    problems, used = layer_violations()
    assert problems == []
    stale = sorted(set(ALLOWED) - used)
    assert stale == [], f"ALLOWED entries that no import uses any more: {stale}"


def test_the_demo_is_reached_only_through_irq_demo():
    """``git grep`` for it, as a user would: outside console/demo/ only the documented entry
    imports the demo, and nothing in the product imports tests/, tools/ or devtools/."""
    problems = []
    for path in python_files(*PRODUCT):
        rel = str(path.relative_to(ROOT))
        if rel.startswith("console/demo/"):
            continue
        for imp in imports_of(path):
            names = [imp.module] + [f"{imp.module}.{n}" for n in imp.names]
            if any(_matches(n, "console.demo") for n in names):
                if (rel, "console.demo.launcher") in ALLOWED and imp.in_function:
                    continue
                problems.append(f"{rel}:{imp.line} imports {imp.module}")
            if any(_matches(n, p) for n in names for p in _NOT_PRODUCT):
                problems.append(f"{rel}:{imp.line} imports {imp.module} (not product)")
    assert problems == []


def test_no_demo_or_sample_module_lives_in_the_adapter_cli_or_tui_packages():
    """Demo code lives under console/demo/ (a folder per backend), test support under
    tests/support/ and devtools/, the screenshot tooling under tools/."""
    found = [
        str(path.relative_to(ROOT))
        for path in python_files("backend_adapters", "console")
        if not str(path.relative_to(ROOT)).startswith("console/demo/")
        and any(word in path.stem for word in SCAFFOLDING_WORDS)
    ]
    assert found == []


# ------------------------------------------------------------- what may import the tests

#: code outside tests/ that tests must not reach into: what both share lives in devtools/
SHARES_WITH_TESTS = ("benchmarks", "tools", "devtools")


def imports_of_tests(*roots: str) -> list[str]:
    """Every import of ``tests`` (or a module under it) in the files under ``roots``, also
    inside functions, with file:line; and every ``python -m tests.…`` module name, which
    imports it in a child process."""
    problems = []
    for path in python_files(*roots):
        rel = str(path.relative_to(ROOT))
        for imp in imports_of(path):
            if _matches(imp.module, "tests"):
                problems.append(f"{rel}:{imp.line} imports {imp.module}")
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and node.value.startswith("tests.") and node.value.isascii()
                    and all(part.isidentifier() for part in node.value.split("."))):
                problems.append(f"{rel}:{node.lineno} names the module {node.value}")
    return problems


def test_the_tests_import_finder_finds_imports_of_tests():
    # tests may import tests: a helper importing another, a test starting a worker by module
    found = imports_of_tests("tests/support/hostile_fleet.py",
                             "tests/adapters/temporal/test_temporal_policy_gateway.py")
    assert any(f.startswith("tests/support/hostile_fleet.py:")
               and f.endswith(" imports tests.support.hostile_dbos_agent") for f in found)
    assert any(f.startswith("tests/adapters/temporal/test_temporal_policy_gateway.py:")
               and f.endswith(" names the module tests.support.temporal_policy_worker")
               for f in found)


def test_benchmarks_tools_and_devtools_do_not_import_tests():
    """Benchmarks and tools share server start-up with the tests through devtools/, which is
    neither: so a changed test helper or fixture cannot break a benchmark."""
    assert imports_of_tests(*SHARES_WITH_TESTS) == []


# --------------------------------------------------------------------------------- cycles


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports, from every import statement that runs
    (module level and inside functions; ``if TYPE_CHECKING:`` imports never run, so they are
    left out: they are how a type-only reference avoids a cycle)."""
    files = list(python_files(*PRODUCT, *OUTSIDE_PRODUCT))
    modules = {_module_name(p) for p in files}
    graph: dict[str, set[str]] = {m: set() for m in modules}

    def resolve(name: str) -> str | None:
        while name:
            if name in modules:
                return name
            name = name.rpartition(".")[0]
        return None

    for path in files:
        source = _module_name(path)
        for imp in imports_of(path):
            if imp.type_checking_only:
                continue
            # `from pkg import mod` imports the module pkg.mod; `from mod import name`: mod
            targets = [f"{imp.module}.{n}" for n in imp.names if f"{imp.module}.{n}" in modules]
            if not targets:
                targets = [imp.module]
            for target in targets:
                resolved = resolve(target)
                if resolved is not None and resolved != source:
                    graph[source].add(resolved)
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a -> b -> ... -> a) per strongly connected component (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            connect(node)

    cycles = []
    for component in components:
        start = min(component)
        # shortest path back to start within the component (breadth first)
        paths = {start: [start]}
        queue = [start]
        cycle: list[str] | None = None
        while queue and cycle is None:
            node = queue.pop(0)
            for nxt in sorted(graph[node] & component):
                if nxt == start:
                    cycle = paths[node] + [start]
                    break
                if nxt not in paths:
                    paths[nxt] = paths[node] + [nxt]
                    queue.append(nxt)
        cycles.append(cycle or sorted(component))
    return cycles


def test_the_cycle_finder_finds_a_cycle_made_by_a_function_level_import():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c", "a"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_modules():
    cycles = [" -> ".join(c) for c in import_cycles(import_graph())]
    assert cycles == []


# ------------------------------------------------------------------------- at import time


def test_cli_help_does_not_load_textual_backend_libraries_or_the_demo():
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from console.cli.app import app\n"
        "r = CliRunner().invoke(app, ['--help'])\n"
        "assert r.exit_code == 0, r.output\n"
        "loaded = [m for m in ('textual', 'dbos', 'temporalio', 'httpx', 'console.demo')\n"
        "          if m in sys.modules]\n"
        "print(','.join(loaded))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
