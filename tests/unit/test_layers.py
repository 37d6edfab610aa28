"""Layers point one way (STYLE.md convention 1): checked on the source and at import time."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FORBIDDEN = {
    "backend_adapters": {"textual", "typer", "console.gateway", "console.tui", "console.cli"},
    "console/model.py": {"textual", "typer", "websockets", "console.gateway"},
    "console/semantics.py": {"textual", "typer", "websockets", "console.gateway"},
    "console/cli": {"textual", "console.tui"},
    "console/gateway": {"textual", "typer", "console.tui", "console.cli"},
    "console/client.py": {"textual", "typer"},
}


def _module_level(tree: ast.AST) -> list[ast.AST]:
    """Nodes outside function bodies: a lazy import inside a command (e.g. the CLI opening
    the TUI on request) is the sanctioned way across a layer."""
    out: list[ast.AST] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        out.append(node)
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                stack.append(child)
    return out


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in _module_level(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _violations(where: str, banned: set[str]) -> list[str]:
    target = ROOT / where
    files = [target] if target.suffix == ".py" else sorted(target.rglob("*.py"))
    out = []
    for f in files:
        for name in _imports(f):
            if any(name == b or name.startswith(b + ".") for b in banned):
                out.append(f"{f.relative_to(ROOT)} imports {name}")
    return out


def test_each_layer_imports_only_downwards():
    problems = [v for where, banned in FORBIDDEN.items() for v in _violations(where, banned)]
    assert problems == []


def test_cli_help_does_not_load_textual_or_backend_libraries():
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from console.cli.app import app\n"
        "r = CliRunner().invoke(app, ['--help'])\n"
        "assert r.exit_code == 0, r.output\n"
        "loaded = [m for m in ('textual', 'dbos', 'temporalio', 'httpx') if m in sys.modules]\n"
        "print(','.join(loaded))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
