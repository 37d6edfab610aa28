"""The CEL interpreter's compiled core, without its package's interactive shell.

``import cel`` runs the package's ``__init__``, which imports ``cel.cli``: prompt_toolkit,
pygments and rich's interactive parts, 24 MB of the gateway's memory and ~150 ms of every
process that evaluates a policy, for a shell irq never opens. This module loads the compiled
extension (``cel/cel*.so``: ``compile``, ``Program``, ``Context``) alone, under its own name
``cel.cel``; where that file is not found (another layout of the package) it falls back to
``import cel``. irq registers none of the package's pure-Python ``stdlib`` functions, so
nothing else is missed.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING


def _core() -> ModuleType:
    loaded = sys.modules.get("cel.cel")
    if loaded is not None:
        return loaded
    spec = importlib.util.find_spec("cel")  # finds the package without running its __init__
    for location in (spec.submodule_search_locations or []) if spec else []:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = Path(location) / f"cel{suffix}"
            if path.is_file():
                loader = importlib.machinery.ExtensionFileLoader("cel.cel", str(path))
                core_spec = importlib.util.spec_from_loader("cel.cel", loader)
                assert core_spec is not None
                module = importlib.util.module_from_spec(core_spec)
                loader.exec_module(module)
                sys.modules["cel.cel"] = module
                return module
    import cel

    return cel


if TYPE_CHECKING:
    from cel import Context, Program, compile
else:
    _module = _core()
    Context, Program, compile = _module.Context, _module.Program, _module.compile

__all__ = ["Context", "Program", "compile"]
