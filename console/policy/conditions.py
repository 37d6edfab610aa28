"""Rule conditions: CEL expressions compiled once, with the variables a condition may read.

CEL (the Common Expression Language) is evaluated by the Rust ``cel-interpreter`` through the
``cel`` module of ``common-expression-language``: side-effect free, not Turing complete.
"""

from __future__ import annotations

import re

from console.policy import cel_core as cel

#: the variables every condition may read (DESIGN §1 Policy; console/policy/engine.py builds them)
VARIABLES: tuple[str, ...] = (
    "tool", "args", "agent", "run", "data", "datasets", "cmd", "resources", "interrupt", "now",
)

# names bound by the comprehension macros: `args.items.all(i, i.price < 10)` binds `i`
_MACRO_BINDING = re.compile(r"\.\s*(?:all|exists|exists_one|map|filter)\s*\(\s*([A-Za-z_]\w*)\s*,")


def compile_condition(expression: str) -> cel.Program:
    """Compile ``expression``; ``ValueError`` names a syntax error or an unknown variable (a
    typo such as ``arg.amount`` would otherwise make the rule silently never match)."""
    try:
        program = cel.compile(expression)
    except ValueError as exc:
        raise ValueError(_syntax_message(str(exc))) from None
    except Exception as exc:  # the extension raises other types for some malformed input
        raise ValueError(f"{type(exc).__name__}: {_first_lines(str(exc))}") from None
    bound = set(_MACRO_BINDING.findall(expression))
    unknown = sorted(set(program.variables()) - set(VARIABLES) - bound)
    if unknown:
        raise ValueError(
            f"unknown variable {', '.join(repr(u) for u in unknown)} "
            f"(a condition may read: {', '.join(VARIABLES)})"
        )
    return program


_CEL_ERROR = re.compile(r"<input>:(\d+):(\d+):\s*(.*)")


def _syntax_message(text: str) -> str:
    """cel's "Failed to parse expression 'x': ERROR: <input>:1:4: Syntax error: ..." -> "Syntax
    error: ... (line 1, column 4)"."""
    found = _CEL_ERROR.search(text)
    if found is None:
        return _first_lines(text)
    line, column, message = found.groups()
    return f"{message.strip()} (line {line}, column {column})"


def _first_lines(text: str, limit: int = 4) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return " | ".join(lines[:limit])
