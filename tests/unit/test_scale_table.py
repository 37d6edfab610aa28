"""benchmarks/scale_table.py: the scale table make bench writes into gateway.json and README.md
(pure logic over results documents; the benchmarks themselves are not run here)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from benchmarks.scale_table import (
    BEGIN,
    END,
    StaleResults,
    build_table,
    check_fresh,
    compose,
    main,
    render_markdown,
    replace_block,
)

NOW = datetime(2026, 12, 5, 10, 0, 30, tzinfo=UTC)
START = int(datetime(2026, 12, 5, 9, 50, tzinfo=UTC).timestamp())


def gateway(**over: Any) -> dict[str, Any]:
    figures: dict[str, Any] = {
        "runs": 100_000, "rate_offered": 20_000, "ingest_per_s": 19_856,
        "state_change_p99_ms": {"1": 41.0, "10": 320.0, "50": 6496.5},
        "cpu_pct": {"1": 80.0, "10": 93.9, "50": 93.3},
        "rss_mb": 250.0, "kib_per_run": 2.56, "baseline_cpu_pct": 15.1, "baseline_ratio": 6.22,
        "first_snapshot_s": 0.8, "reconnect_storm": {"gaps": 0},
        "at": "2026-12-05T09:53:00+00:00"}
    return {**figures, **over}


def tui(**over: Any) -> dict[str, Any]:
    return {"runs": 10_000, "rate_per_s": 1_000, "contend": 0,
            "sizes": {"80x24": {"key_p95_ms": 76.3}, "200x50": {"key_p95_ms": 120.0}},
            "at": "2026-12-05T09:57:00+00:00", **over}


def cli(**over: Any) -> dict[str, Any]:
    return {"runs": 10_000, "commands": {"runs_json": {"median_s": 0.45, "p90_s": 0.6}},
            "at": "2026-12-05T09:59:00+00:00", **over}


def figure(table: dict[str, Any], key: str, label: str) -> dict[str, Any]:
    row = next(r for r in table["rows"] if r["key"] == key)
    return next(f for f in row["figures"] if f["label"] == label)


def test_each_goal_is_met_or_missed_by_its_own_figure():
    table = build_table(gateway(), tui(), cli(), since=START, now=NOW)
    assert figure(table, "state_change_p99", "1 client")["met"] is True
    assert figure(table, "state_change_p99", "10 clients")["met"] is False
    assert figure(table, "memory", "RSS")["met"] is True
    assert figure(table, "memory", "per run")["met"] is True
    assert figure(table, "cpu_vs_baseline", "10 clients")["met"] is False
    assert figure(table, "cpu_vs_baseline", "websockets")["value"] == 15.1
    assert figure(table, "first_snapshot", "")["met"] is True
    assert figure(table, "tui_key_p95", "80x24")["met"] is True
    assert figure(table, "tui_key_p95", "200x50")["met"] is False
    assert figure(table, "cli_runs_json", "median")["met"] is True
    rows = {r["key"]: r["met"] for r in table["rows"]}
    assert rows == {"state_change_p99": False, "memory": True, "cpu_vs_baseline": False,
                    "first_snapshot": True, "tui_key_p95": False, "cli_runs_json": True}
    # ten goals (the context figures, the two CPUs and the p90, are not goals)
    assert (table["goals_met"], table["goals"]) == (6, 10)
    assert table["make_bench_started_at"] == "2026-12-05T09:50:00+00:00"


def test_a_ratio_at_its_limit_meets_a_goal_of_at_most_and_a_missing_phase_misses():
    table = build_table(gateway(baseline_ratio=2.0), tui(), cli(), since=None, now=NOW)
    assert figure(table, "cpu_vs_baseline", "10 clients")["met"] is True
    lone = build_table(gateway(state_change_p99_ms={"1": 10.0}, cpu_pct={"1": 50.0}), tui(),
                       cli(), since=None, now=NOW)
    assert figure(lone, "state_change_p99", "50 clients") == {
        "label": "50 clients", "value": None, "unit": "ms", "op": "<", "limit": 250,
        "met": False}
    # gateway_scale.py took the ratio at its largest phase when 10 clients did not run
    assert figure(lone, "cpu_vs_baseline", "1 clients")["met"] is False
    assert figure(lone, "cpu_vs_baseline", "gateway")["value"] == 50.0


def test_a_quick_run_is_shown_but_never_counted_as_met():
    table = build_table(gateway(runs=10_000, rate_offered=2_000), tui(runs=1_000), cli(),
                        since=START, now=NOW)
    snapshot = next(r for r in table["rows"] if r["key"] == "first_snapshot")
    assert snapshot["at_table_scale"] is False and snapshot["met"] is False
    assert snapshot["scale"] == "10,000 runs, 2,000 heartbeats/s"
    assert table["goals_met"] == 1  # the command line's median and nothing else
    block = render_markdown(table, None)
    assert "not at the table's scale (10,000 runs, 2,000 heartbeats/s)" in block
    assert "**met**" in block  # the command line, at 10,000 runs


def test_a_results_file_from_before_the_run_is_refused():
    check_fresh("tui.json", tui(at="2026-12-05T09:50:00+00:00"), START)  # the same second
    with pytest.raises(StaleResults, match="before this make bench run started"):
        check_fresh("tui.json", tui(at="2026-12-05T09:49:59+00:00"), START)
    with pytest.raises(StaleResults, match="records no time"):
        check_fresh("cli.json", {"runs": 10_000}, START)


def test_gateway_json_keeps_every_figure_and_the_previous_make_bench_table():
    first = build_table(gateway(), tui(), cli(), since=START, now=NOW)
    doc1 = compose(gateway(), first, None)
    assert {k: doc1[k] for k in gateway()} == gateway()
    assert doc1["previous_table"] is None
    second = build_table(gateway(rss_mb=400.0), tui(), cli(), since=START + 600, now=NOW)
    doc2 = compose(gateway(rss_mb=400.0), second, doc1)
    assert doc2["table"] is second and doc2["previous_table"] == first
    assert doc2["rss_mb"] == 400.0
    # this script run again over the same make bench run keeps the run before, not itself
    again = compose(gateway(rss_mb=400.0), second, doc2)
    assert again["previous_table"] == first
    # a table assembled outside make bench is never kept as a previous run
    assembled = compose(gateway(), build_table(gateway(), tui(), cli(), since=None, now=NOW),
                        None)
    assert compose(gateway(), first, assembled)["previous_table"] is None


def test_the_readme_block_shows_both_runs_and_only_its_block_changes():
    first = build_table(gateway(), tui(), cli(), since=START, now=NOW)
    second = build_table(gateway(rss_mb=400.0), tui(), cli(), since=START + 600, now=NOW)
    block = render_markdown(second, first)
    lines = block.splitlines()
    assert lines[0] == ("| figure | goal | latest: make bench 2026-12-05 10:00 UTC | "
                        "previous: make bench 2026-12-05 09:50 UTC |")
    assert "| gateway memory, RSS | < 300 MB | 400 MB, missed | 250 MB, **met** |" in lines
    assert ("| gateway CPU / raw websockets broadcast of the same frames, 10 clients | ≤ 2x | "
            "6.22x, missed (gateway 93.9 %, websockets 15.1 %) | "
            "6.22x, missed (gateway 93.9 %, websockets 15.1 %) |") in lines
    assert sum(1 for line in lines if line.startswith("| ")) == 1 + 10  # the head, a line a goal
    text = f"# irq\n\nbefore\n\n{BEGIN}\nold table\n{END}\n\nafter\n"
    rewritten = replace_block(text, block)
    assert "old table" not in rewritten
    assert rewritten.startswith(f"# irq\n\nbefore\n\n{BEGIN}\n| figure")
    assert "\n- latest: one `make bench` run (" in rewritten
    assert "09:59 UTC); goals met 5 of 10.\n- previous: one `make bench` run (" in rewritten
    assert rewritten.endswith(f"goals met 6 of 10.\n{END}\n\nafter\n")
    assert replace_block(rewritten, block) == rewritten
    with pytest.raises(ValueError, match="no"):
        replace_block("# irq\n", block)


def test_the_script_refuses_a_stale_file_and_writes_nothing(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]):
    paths = {name: tmp_path / f"{name}_in.json" for name in ("gateway", "tui", "cli")}
    paths["gateway"].write_text(json.dumps(gateway()))
    paths["tui"].write_text(json.dumps(tui(at="2026-12-05T09:40:00+00:00")))
    paths["cli"].write_text(json.dumps(cli()))
    readme = tmp_path / "README.md"
    readme.write_text(f"x\n{BEGIN}\n{END}\n")
    out = tmp_path / "gateway.json"
    args = [f"--{name}={path}" for name, path in paths.items()]
    args += [f"--since={START}", f"--out={out}", f"--readme={readme}"]
    assert main(args, now=lambda: NOW) == 1
    assert "tui_in.json was written at 2026-12-05T09:40:00+00:00" in capsys.readouterr().err
    assert not out.exists() and readme.read_text() == f"x\n{BEGIN}\n{END}\n"
    paths["tui"].write_text(json.dumps(tui()))
    assert main(args, now=lambda: NOW) == 0
    written = json.loads(out.read_text())
    assert written["table"]["goals"] == 10 and written["rss_mb"] == 250.0
    assert "| gateway memory, per run | < 3 KiB | 2.56 KiB, **met** |" in readme.read_text()
