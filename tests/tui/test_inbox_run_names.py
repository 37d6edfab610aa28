"""The inbox names each waiting run as the fleet's RUN column does: LangGraph threads have
UUIDv7 ids whose first dozen characters are the same for threads created within a minute, so
the first 15 characters (what the column showed) could not tell them apart."""

from __future__ import annotations

import copy
import json

from test_snapshots import DATA, settle
from textual.widgets import DataTable
from tui_pilot import until

from console.tui.app import IrqApp
from console.tui.fleet_source import RecordedSource

THREADS = {"ask_user": "01a241e3-7fa6-7186-bdf1-6e9ddba43a74",
           "expenses": "01a241e3-7f8e-7a12-9c3e-e9be929736c1"}


def with_langgraph_threads(data: dict) -> dict:
    """The recorded fleet plus one waiting LangGraph thread per graph in THREADS."""
    data = copy.deepcopy(data)
    snap = data["snapshot"]
    template_intr = snap["interrupts"][0]
    template_run = next(r for r in snap["runs"] if r["id"] == template_intr["run_id"])
    for graph, thread in THREADS.items():
        run_id = f"langgraph:local/{thread}"
        intr = {**copy.deepcopy(template_intr), "id": f"{run_id}#i-{graph}", "run_id": run_id,
                "title": f"{graph} asks"}
        snap["interrupts"].append(intr)
        snap["runs"].append({**copy.deepcopy(template_run), "id": run_id, "name": graph,
                             "native_id": thread, "backend": "langgraph",
                             "interrupts": [intr["id"]], "resources": []})
    return data


async def test_threads_of_the_same_minute_are_told_apart_by_graph_and_id_tail() -> None:
    source = RecordedSource(with_langgraph_threads(json.loads(DATA.read_text())),
                            url="recorded")
    at = source.recorded_at
    app = IrqApp(source, context="demo", clock=lambda: at, ping_interval=0)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await until(pilot, lambda: app.screen.query("#interrupts"), "the inbox")
        await pilot.pause(0.2)
        table = app.screen.query_one("#interrupts", DataTable)
        cells = {str(table.get_row_at(i)[2]): str(table.get_row_at(i)[1])
                 for i in range(table.row_count)}
        ask, expenses = cells["ask_user asks"], cells["expenses asks"]
        # cut in the middle at 80 columns: the graph's name leads, the id's tail ends
        assert ask.startswith("ask_us") and ask.endswith("3a74")
        assert expenses.startswith("expens") and expenses.endswith("36c1")
        width = table.columns[next(k for k in table.columns if k.value == "run")].width
        assert len(ask) <= width and len(expenses) <= width
