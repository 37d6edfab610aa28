"""``:`` commands typed on a view screen (grammar: ``command_line.py``).

Commands on the selection (``:pause``, ``:approve`` without an id) act on the screen they
were typed on; with ids, on the runs or interrupts the ids name (``console.ids``: a full id,
a native id or a unique prefix, the rule every mutation uses). Navigation, ``:sort``,
``:ctx``, ``:help`` and ``:quit`` go to the app.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from console.ids import interrupt_candidates, match_id, run_candidates
from console.model import Action, DecisionKind
from console.terminal_text import terminal_safe
from console.tui.command_line import parse_command
from console.tui.run_rows import SORT_CYCLE

if TYPE_CHECKING:
    from console.tui.app import IrqApp
    from console.tui.screens.base import ViewScreen


def run_command(screen: ViewScreen, line: str) -> None:
    """Run the ``:`` command ``line`` typed on ``screen`` (errors are notified)."""
    app = screen.irq
    cmd = parse_command(line)
    if cmd.error:
        app.notify(cmd.error, title=":" + line.strip(), severity="error")
        return
    name = cmd.name
    if name in ("runs", "inbox", "audit", "obligations", "alerts", "jobs"):
        if name == "runs" and cmd.args:
            app.filter_fleet(cmd.rest)
        else:
            app.show_view("fleet" if name == "runs" else name)
    elif name == "run":
        run_id = resolve_run(app, cmd.args[0])
        if run_id:
            app.open_run(run_id)
    elif name in ("pause", "resume", "cancel", "terminate", "retry"):
        targets = [resolve_run(app, a) for a in cmd.args] if cmd.args \
            else screen.selected_run_ids()
        if all(targets) and targets:
            screen.request_action(Action(name), [t for t in targets if t])
        elif not targets:
            app.notify(f":{name}: no run selected (:{name} RUN)", severity="error")
    elif name == "release":
        release(screen, cmd.args)
    elif name in ("approve", "edit", "reject", "respond"):
        decide(screen, DecisionKind(name), cmd.args)
    elif name == "filter":
        screen.apply_filter(cmd.rest)
    elif name == "sort":
        sort(app, cmd.args)
    elif name == "ctx":
        app.switch_context(cmd.args[0])
    elif name == "help":
        app.show_help(screen)
    elif name == "quit":
        app.exit()


def decide(screen: ViewScreen, kind: DecisionKind, args: tuple[str, ...]) -> None:
    """``:approve [INTERRUPT]`` and the like: the named interrupt, or the selected one."""
    app = screen.irq
    intr_id: str | None
    if args:
        intr_id = resolve_interrupt(app, args[0])
    else:
        selected = screen.selected_interrupt()
        intr_id = selected.id if selected else None
        if intr_id is None:
            app.notify(f":{kind.value}: no interrupt selected (:{kind.value} INTERRUPT)",
                       severity="error")
    if intr_id:
        screen.request_decision(kind, intr_id)


def release(screen: ViewScreen, args: tuple[str, ...]) -> None:
    """``:release [RUN] RESOURCE``: force a resource of the named run (or of the selected
    one) free, as ``irq release RUN RESOURCE --force`` does."""
    app = screen.irq
    selected = screen.selected_run_ids()
    if len(args) == 1 and len(selected) == 1:
        run_id: str | None = selected[0]
    elif len(args) == 2:
        run_id = resolve_run(app, args[0])
    else:
        app.notify(":release [RUN] RESOURCE (the run: the one selected, or named)",
                   severity="error")
        return
    run = app.view.runs.get(run_id) if run_id else None
    if run is None:
        return
    resource = args[-1]
    if resource not in {r.id for r in run.resources}:
        held = ", ".join(r.id for r in run.resources) or "none"
        app.notify(terminal_safe(f"{run.id} holds no resource {resource!r} (it holds: {held})"),
                   severity="error")
        return
    screen.request_release(run.id, resource)


def sort(app: IrqApp, args: tuple[str, ...]) -> None:
    """``:sort KEY [desc]``: the fleet, sorted by ``KEY``."""
    keys = [k.value for k in SORT_CYCLE]
    if not args or args[0] not in keys:
        app.notify(f":sort KEY [desc] {app.glyphs.dash} KEY one of {', '.join(keys)}",
                   severity="error")
        return
    reverse = len(args) > 1 and args[1].lower() in ("desc", "reverse", "-")
    app.sort_fleet(args[0], reverse)


def resolve_run(app: IrqApp, token: str) -> str | None:
    """A run id from a full id, a native id, or a unique prefix (never a suffix or a
    substring); None, notified, when none or several match."""
    found = match_id(token, run_candidates(app.view.runs.values()))
    if len(found) == 1:
        return found[0]
    if not found:
        app.notify(f"no run matches {token!r}", severity="error")
    else:
        app.notify(f"{token!r} matches {len(found)} runs; give more of the id",
                   severity="error")
    return None


def resolve_interrupt(app: IrqApp, token: str) -> str | None:
    found = match_id(token, interrupt_candidates(app.view.interrupts.values()))
    if len(found) == 1:
        return found[0]
    app.notify(f"no single interrupt matches {token!r}", severity="error")
    return None
