"""Load typer's help renderer (``typer.rich_utils``) without two rich modules irq never uses.

``typer.rich_utils`` renders every help page and usage error. At the top it imports
``rich.markdown`` (markdown-it) and ``rich.traceback`` (pygments, rich.pretty, attrs), ~40 % of
its import time and ~15 % of a cold ``irq --help``, for ``rich_markup_mode="markdown"`` and
pretty tracebacks -- irq uses neither (rich markup; ``pretty_exceptions_enable=False``).

While ``typer.rich_utils`` executes, ``rich.markdown`` and ``rich.traceback`` are stand-ins
whose names load the real module on first use (``Markdown(...)``, ``Traceback.from_exception``,
any other attribute); right after, the stand-ins leave ``sys.modules``, so every later
``import rich.markdown`` (Textual's, anyone's) gets the real module. Nothing changes in what
typer renders: ``tests/cli/test_cli_startup.py`` compares the help text with and without
this, and checks that the stand-ins hand over the real classes.

Why the finder stays (measured 2026-12, typer 0.29.2 / rich 15, the 2-core dev machine under
other load, min of 10 cold runs each, interleaved): ``irq --help`` took 0.19-0.21 s user+sys
CPU with it and 0.23 s without (wall min 0.20-0.23 s vs 0.25-0.27 s); ``-X importtime`` puts
``typer.rich_utils`` at 30-99 ms cumulative with it and 80-122 ms without. No public setting
skips these imports: typer imports both at the top of ``rich_utils`` whatever
``rich_markup_mode`` or ``pretty_exceptions_enable`` say.
"""

from __future__ import annotations

import importlib
import importlib._abc
import importlib.machinery
import sys
import types
from collections.abc import Sequence
from typing import Any

TARGET = "typer.rich_utils"
#: module -> the names typer.rich_utils imports from it
DEFERRED: dict[str, tuple[str, ...]] = {
    "rich.markdown": ("Markdown",),
    "rich.traceback": ("Traceback",),
}


def _real(module: str) -> types.ModuleType:
    """The real module, importing it now (a stand-in in sys.modules steps aside for good)."""
    present = sys.modules.get(module)
    if isinstance(present, _StandIn):
        del sys.modules[module]
    return importlib.import_module(module)


class _Deferred:
    """``Markdown`` / ``Traceback`` until first use: calling it, or any attribute of it
    (``Traceback.from_exception``), is the real class's."""

    def __init__(self, module: str, name: str) -> None:
        self._module = module
        self._name = name

    def _target(self) -> Any:
        return getattr(_real(self._module), self._name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._target()(*args, **kwargs)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(self._target(), attr)

    def __or__(self, other: Any) -> Any:  # ``-> Markdown | Text`` annotations, evaluated
        return Any

    def __ror__(self, other: Any) -> Any:
        return Any


class _StandIn(types.ModuleType):
    """A module whose known names are ``_Deferred``; any other name loads the real one."""

    def __init__(self, module: str, names: Sequence[str]) -> None:
        super().__init__(module)
        self._real_name = module
        for name in names:
            setattr(self, name, _Deferred(module, name))

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):  # the import system asks for __path__ & co.: a plain module
            raise AttributeError(attr)
        return getattr(_real(self._real_name), attr)


class _LeanLoader(importlib._abc.Loader):
    """typer.rich_utils' own loader, with the stand-ins in place while it executes.
    (``importlib._abc``: the light subset of ``importlib.abc``, which costs ~5 ms to import.)"""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        created: types.ModuleType | None = self.inner.create_module(spec)
        return created

    def __getattr__(self, attr: str) -> Any:  # get_source, get_code, is_package...
        return getattr(self.inner, attr)

    def exec_module(self, module: types.ModuleType) -> None:
        placed = [m for m in DEFERRED if m not in sys.modules]
        for name in placed:
            sys.modules[name] = _StandIn(name, DEFERRED[name])
        try:
            self.inner.exec_module(module)
        finally:
            for name in placed:
                if isinstance(sys.modules.get(name), _StandIn):
                    del sys.modules[name]


class _LeanFinder:
    """Finds ``typer.rich_utils`` the usual way and wraps its loader (once)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _LeanLoader(spec.loader)
        return spec


def lean_help_renderer() -> None:
    """From now on, the first import of ``typer.rich_utils`` skips the two modules (a no-op
    once it is imported)."""
    if TARGET in sys.modules or any(isinstance(f, _LeanFinder) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _LeanFinder())
