"""The Textual private APIs the console relies on (console/tui/textual_internals.py) are still
there, with the shape relied on, and Textual is the pinned version.

A Textual upgrade that moves or reshapes any of them fails here, by name, before it shows up
as a garbled terminal, a silent bell or a snapshot diff. Also: no other module of console/
reaches into Textual's privates (they go through textual_internals)."""

from __future__ import annotations

import ast
import inspect
import re
import tomllib
from contextvars import ContextVar
from importlib.metadata import version
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.app import App, ComposeResult
from textual.message_pump import MessagePump
from textual.scrollbar import ScrollBar, ScrollBarRender
from textual.strip import Strip
from textual.widget import Widget

from console.tui import textual_internals as ti

ROOT = Path(__file__).resolve().parents[2]

#: underscored Textual names only textual_internals.py may use
PRIVATE_NAMES = ("_compositor", "_context", "_driver", "_display", "_render_content",
                 "_render_cache", "_RenderCache", "_dirty_regions", "_on_key")


def test_textual_is_the_pinned_version() -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = [d for d in deps if re.match(r"textual\s*[=<>~!]", d)]
    assert pins == [f"textual=={ti.PINNED_TEXTUAL}"], (
        "textual must stay pinned exactly to the version textual_internals.py was written "
        f"against; pyproject has {pins}")
    assert version("textual") == ti.PINNED_TEXTUAL, (
        f"textual {version('textual')} is installed, textual_internals.py was written for "
        f"{ti.PINNED_TEXTUAL}: re-check every item there, then move the pin")


# ----------------------------------------------------------------- 1. ChopsUpdate, _display


def test_chops_update_keeps_its_constructor_and_fields() -> None:
    from textual._compositor import ChopsUpdate, CompositorUpdate

    assert ti.ChopsUpdate is ChopsUpdate
    assert issubclass(ChopsUpdate, CompositorUpdate)
    params = list(inspect.signature(ChopsUpdate.__init__).parameters)
    assert params == ["self", "chops", "spans", "chop_ends"]
    strip = Strip([Segment("aaaa"), Segment("bbbb", Style(bold=True)), Segment("cc")], 10)
    update = ChopsUpdate([{0: strip}], [(0, 5, 7)], [[10]])
    assert (update.chops, update.spans, update.chop_ends) == ([{0: strip}], [(0, 5, 7)], [[10]])
    console = Console(color_system="truecolor", force_terminal=True, width=10)
    ours = ti.SpanChopsUpdate(update).render_segments(console)
    assert ours.startswith("\x1b[1;5H") and "aaaa" not in ours  # the span, not the line


def test_the_compositor_still_hands_partial_updates_to_app_display() -> None:
    from textual._compositor import ChopsUpdate, Compositor

    display = getattr(App, "_display", None)
    assert callable(display), "App._display is gone: SpanWritingApp overrides nothing"
    assert list(inspect.signature(display).parameters) == ["self", "screen", "renderable"]
    source = inspect.getsource(display)
    assert "render_segments(console)" in source  # how the update becomes terminal bytes
    assert "ChopsUpdate(" in inspect.getsource(Compositor)  # partial updates are this type
    assert ChopsUpdate.render_segments is not ti.SpanChopsUpdate.render_segments
    assert "_display" in vars(ti.SpanWritingApp)


# -------------------------------------------------------------- 2. active_app, renderer


async def test_active_app_is_the_running_app_and_scrollbars_take_a_renderer() -> None:
    from textual._context import active_app

    assert isinstance(active_app, ContextVar)
    assert ti.running_app() is None
    app: App[None] = App()
    async with app.run_test():
        assert ti.running_app() is app
    render_bar = inspect.getattr_static(ScrollBarRender, "render_bar")
    assert isinstance(render_bar, classmethod)  # called without a scrollbar or its app
    assert "self.renderer(" in inspect.getsource(ScrollBar.render)
    original = ScrollBar.renderer
    try:
        ti.use_scrollbar_renderer(ScrollBarRender)
        assert ScrollBar.renderer is ScrollBarRender
    finally:
        ScrollBar.renderer = original


# ------------------------------------------------------------------------ 3. App._driver


async def test_the_driver_writes_to_the_terminal() -> None:
    app: App[None] = App()
    written: list[str] = []
    async with app.run_test():
        driver: Any = app._driver
        assert driver is not None and callable(driver.write) and callable(driver.flush)
        original = driver.write

        def write(data: str) -> None:
            written.append(data)
            original(data)

        driver.write = write
        ti.write_to_terminal(app, "\x07")
        driver.write = original
    assert written == ["\x07"]
    ti.write_to_terminal(App(), "\x07")  # before the app runs: no driver, nothing written


# ------------------------------------------------------------------ 4. _render_content


class Kept(ti.StripCachedStatic):
    def __init__(self) -> None:
        super().__init__("kept text")
        self.keys: list[tuple[Any, ...]] = []

    def reuse_strips(self, key: tuple[Any, ...], make: Any) -> list[Strip]:
        self.keys.append(key)
        strips: list[Strip] = make()
        return strips


class KeptApp(App[None]):
    def compose(self) -> ComposeResult:
        yield Kept()


async def test_a_static_renders_through_render_content_and_its_render_cache() -> None:
    from textual.widget import _RenderCache

    assert list(inspect.signature(_RenderCache).parameters) == ["size", "lines"]
    assert "_render_content" in vars(Widget) and "_render" in vars(Widget)
    assert "self._render_content()" in inspect.getsource(Widget.render_line)
    app = KeptApp()
    async with app.run_test(size=(40, 5)) as pilot:
        await pilot.pause()
        kept = app.query_one(Kept)
        assert kept.keys, "Textual no longer renders a Static through _render_content"
        width, height, _style = kept.keys[-1]
        assert (width, height) == tuple(kept.size)
        assert isinstance(kept._render_cache, _RenderCache)
        assert "kept text" in kept.render_line(0).text
        assert hasattr(kept._dirty_regions, "clear")


# ------------------------------------------------------------------------ 5. _on_key


def test_keys_are_dispatched_to_underscore_on_key_handlers() -> None:
    assert inspect.iscoroutinefunction(vars(Widget)["_on_key"])
    params = list(inspect.signature(vars(Widget)["_on_key"]).parameters)
    assert params == ["self", "event"]
    assert 'f"_{method_name}"' in inspect.getsource(MessagePump._get_dispatch_methods)
    assert events.Key("a", "a").key == "a"
    assert "_on_key" in vars(ti.FollowFocus)


# ------------------------------------------------------------ nothing else reaches in


def test_no_other_console_module_uses_textual_privates() -> None:
    offenders: list[str] = []
    for path in sorted((ROOT / "console").rglob("*.py")):
        if path.name == "textual_internals.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and (
                    node.module.startswith("textual._")
                    or (node.module.startswith("textual")
                        and any(a.name.startswith("_") for a in node.names))):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} imports "
                                 f"{node.module}")
            named = (node.attr if isinstance(node, ast.Attribute)
                     else node.name if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                     else None)
            if named in PRIVATE_NAMES:
                line = getattr(node, "lineno", "?")
                offenders.append(f"{path.relative_to(ROOT)}:{line} uses {named}")
    assert not offenders, "go through console/tui/textual_internals.py:\n" + "\n".join(
        offenders)
