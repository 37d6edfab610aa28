"""The console's pure parts: filter language, rows (state, sort, incremental updates),
columns at 80 and 200 cells, the ':' language, and argument / response validation."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from console.client import FleetView
from console.model import Resource, Run, RunState, utcnow
from console.tui.command_line import parse_command
from console.tui.run_columns import layout
from console.tui.run_filter import FilterQuery
from console.tui.run_rows import RunRowIndex, SortKey
from console.tui.state_display import ASCII, UNICODE, format_age
from console.tui.widgets.value_editors import parse_response, validate_args

NOW = utcnow()


def run(i: int, state: RunState = RunState.RUNNING, age: float = 1.0, backend: str = "dbos",
        **kw: object) -> Run:
    return Run(id=f"{backend}:local/wf-{i}", backend=backend, context="local",
               native_id=f"wf-{i}", name=f"agent-{i}", state=state,
               heartbeat_at=NOW - timedelta(seconds=age), heartbeat_interval_s=2.0,
               heartbeat_timeout_s=10.0, **kw)


def view(*runs: Run) -> FleetView:
    v = FleetView()
    v.runs = {r.id: r for r in runs}
    return v


def test_filter_terms_state_backend_text_and_negation():
    rows = RunRowIndex()
    rows.sync(view(run(1), run(2, age=5), run(3, age=60), run(4, backend="temporal"),
                   run(5, state=RunState.COMPLETED)), NOW)
    rows.set_query("state:late")
    assert rows.visible == ["dbos:local/wf-2"]
    rows.set_query("state:late,lost")
    assert set(rows.visible) == {"dbos:local/wf-2", "dbos:local/wf-3"}
    rows.set_query("backend:temp")
    assert rows.visible == ["temporal:local/wf-4"]
    rows.set_query("-state:completed agent-")
    assert "dbos:local/wf-5" not in rows.visible and len(rows.visible) == 4
    rows.set_query("state:active")
    assert "dbos:local/wf-5" not in rows.visible
    rows.set_query("bogus:thing")
    assert rows.visible == []  # unknown keys are text: a typo filters to nothing


def test_filter_has_terms():
    r = run(1, resources=[Resource(id="gpu", state="suspected_leak")])
    q = FilterQuery.parse("has:leak")
    assert q.matches(r, RunState.RUNNING) and not q.matches(run(2), RunState.RUNNING)


def test_attention_sort_puts_lost_late_waiting_first():
    rows = RunRowIndex()
    rows.sync(view(run(1), run(2, age=60), run(3, age=5), run(4, interrupts=["x"]),
                   run(5, state=RunState.COMPLETED)), NOW)
    states = [rows.rows[r].state for r in rows.visible]
    assert states == [RunState.LOST, RunState.LATE, RunState.WAITING, RunState.RUNNING,
                      RunState.COMPLETED]
    rows.set_sort(SortKey.ID, reverse=True)
    assert rows.visible[0] == "dbos:local/wf-5"


def test_incremental_sync_reorders_only_when_the_order_changes():
    v = view(*(run(i) for i in range(5)))
    rows = RunRowIndex()
    rows.sync(v, NOW)
    generation = rows.generation
    v.runs["dbos:local/wf-2"] = run(2, age=0.5, progress=0.5)
    assert rows.sync(v, NOW, ["dbos:local/wf-2"]) is False
    assert rows.generation == generation
    v.runs["dbos:local/wf-3"] = run(3, age=30)
    assert rows.sync(v, NOW, ["dbos:local/wf-3"]) is True
    assert rows.visible[0] == "dbos:local/wf-3"
    assert rows.counts[RunState.LOST] == 1 and rows.counts[RunState.RUNNING] == 4


def test_retime_moves_silent_runs_to_late_then_lost_without_events():
    rows = RunRowIndex()
    rows.sync(view(run(1, age=0)), NOW)
    assert rows.rows["dbos:local/wf-1"].state is RunState.RUNNING
    assert rows.retime(NOW + timedelta(seconds=4)) is True
    assert rows.rows["dbos:local/wf-1"].state is RunState.LATE
    assert rows.retime(NOW + timedelta(seconds=11)) is True
    assert rows.rows["dbos:local/wf-1"].state is RunState.LOST
    assert [s for _, s in rows.drain_transitions()] == [RunState.RUNNING, RunState.LATE,
                                                          RunState.LOST]


def test_columns_fit_80_and_add_detail_at_200():
    narrow = [c.key for c, _ in layout(79).columns]
    assert narrow[:3] == ["state", "run", "beat"] and "intr" in narrow
    assert sum(w for _, w in layout(79).columns) + len(narrow) <= 79
    wide = layout(199)
    assert {"name", "step", "updated"} <= {c.key for c, _ in wide.columns}
    assert wide.progress_bar > 0


def test_every_state_has_a_symbol_in_both_glyph_sets():
    for glyphs in (UNICODE, ASCII):
        assert set(glyphs.states) == set(RunState)
        assert len(set(glyphs.states.values())) == len(RunState)
    assert all(ord(ch) < 128 for s in ASCII.states.values() for ch in s)


def test_format_age():
    assert [format_age(v) for v in (None, 3, 119, 600, 7200 * 3, 86400 * 4)] == [
        "—", "3s", "119s", "10m", "6h", "4d"]


def test_command_line_parses_commands_aliases_and_errors():
    assert parse_command(":pause dbos:local/wf-1 wf-2").args == ("dbos:local/wf-1", "wf-2")
    assert parse_command("kill x").name == "terminate"
    assert parse_command("q").name == "quit"
    assert parse_command(":ctx").error == "usage: :ctx NAME"
    assert "unknown command" in (parse_command(":frobnicate").error or "")


SCHEMA = {"type": "object", "required": ["amount"],
          "properties": {"amount": {"type": "number", "maximum": 5000}},
          "additionalProperties": False}


def test_args_validation_reports_json_and_schema_errors_with_paths():
    assert validate_args('{"amount": 10}', SCHEMA) == ({"amount": 10}, None)
    _, error = validate_args('{"amount": 9999}', SCHEMA)
    assert error == "args.amount: 9999 is greater than the maximum of 5000"
    _, error = validate_args('{"amount": 1,}', SCHEMA)
    assert error and error.startswith("not JSON")
    _, error = validate_args("[1]", None)
    assert error == "args: edited arguments must be a JSON object"
    # a broken schema blocks the edit here exactly as the gateway would refuse it
    _, error = validate_args('{"x": 1}', {"type": "nonsense-type"})
    assert error and error.startswith("args_schema.type: the interrupt's argument schema is")


def test_response_is_text_unless_it_starts_like_json():
    assert parse_response("go ahead") == ("go ahead", "text", None)
    assert parse_response('{"market": "DACH"}') == ({"market": "DACH"}, "JSON", None)
    assert parse_response("   ")[2] == "a response cannot be empty"
    assert (parse_response("[1,")[2] or "").startswith("looks like JSON")


@given(st.text(max_size=60))
def test_filter_parse_never_raises(text):
    query = FilterQuery.parse(text)
    query.matches(run(1), RunState.RUNNING)
