"""The policy engine's CEL comes from the package's compiled core (console/policy/cel_core.py):
the gateway and the CLI never load the package's interactive shell (prompt_toolkit), and
conditions still compile and run."""

from __future__ import annotations

import subprocess
import sys

from console.policy import cel_core


def test_the_gateway_does_not_load_the_cel_shell() -> None:
    code = ("import sys; import console.gateway.server, console.policy.engine; "
            "print(sorted(m for m in ('prompt_toolkit', 'cel.cli') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_conditions_compile_and_run_on_the_core() -> None:
    context = cel_core.Context()
    context.add_variable("args", {"amount": 1200, "to": ["a@x", "b@y"]})
    program = cel_core.compile('args.amount > 1000 && args.to.exists(t, t.endsWith("@y"))')
    assert program.execute(context) is True
    assert cel_core.compile("size(args.to) == 3").execute(context) is False
