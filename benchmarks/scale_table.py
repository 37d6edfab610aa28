"""The scale table of issue 25, from the results files of one ``make bench`` run.

    .venv/bin/python benchmarks/scale_table.py [--since EPOCH] [--gateway PATH] [--tui PATH]
        [--cli PATH] [--out PATH] [--readme PATH | --no-readme]

``make bench`` runs this last. It reads what the run's scripts wrote,

- ``results/gateway_scale.json`` (``gateway_scale.py``: state change -> client p99 with 1, 10
  and 50 clients, memory, CPU against the plain-websockets broadcast, first snapshot),
- ``results/tui.json`` (``tui_render.py``: key -> screen p95 at 80x24 and 200x50 while the
  console takes 1,000 events/s),
- ``results/cli.json`` (``cli_startup.py``: ``irq runs -o json`` cold at 10,000 runs),

and refuses any of them written before ``--since`` (the second ``make bench`` started at): a
script that failed, or wrote elsewhere, must not lend the table an older run's figure. It then
writes ``results/gateway.json`` (gateway_scale.py's own figures, every key as that script
writes it, plus ``table``: each row's figures, goals and whether they are met, and
``previous_table``: the table of the ``make bench`` run before), prints the table, and
rewrites README.md's block between the ``scale-table`` marker comments, this run beside the
one before.

A figure counts as met only when it was measured at the table's scale (100,000 runs at
20,000 heartbeats/s; 10,000 runs at 1,000 events/s for the console and the command line):
a ``--quick`` run is printed, never claimed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
BEGIN = "<!-- scale-table: written by benchmarks/scale_table.py (make bench); do not edit -->"
END = "<!-- /scale-table -->"
#: the keys of gateway.json this script adds; gateway_scale.py's own figures are the rest
TABLE_KEYS = ("table", "previous_table")
GATEWAY_SCALE = {"runs": 100_000, "rate_offered": 20_000}
CONSOLE_SCALE = {"runs": 10_000, "rate_per_s": 1_000}
CLI_SCALE = {"runs": 10_000}


class StaleResults(Exception):
    """A results file is missing, unreadable or older than this ``make bench`` run."""


# ------------------------------------------------------------------------------ the rows


def _goal(label: str, value: float | None, unit: str, op: str, limit: float) -> dict[str, Any]:
    """One figure with its goal: ``value op limit`` (``op`` is ``<`` or ``<=``)."""
    met = value is not None and (value < limit if op == "<" else value <= limit)
    return {"label": label, "value": value, "unit": unit, "op": op, "limit": limit,
            "met": met}


def _info(label: str, value: float | None, unit: str) -> dict[str, Any]:
    """A figure shown beside the goal's for context (the baseline's CPU): no goal."""
    return {"label": label, "value": value, "unit": unit}


def _at_scale(document: dict[str, Any], scale: dict[str, int]) -> bool:
    return all(document.get(key) == value for key, value in scale.items())


def _scale_text(runs: Any, rate: Any, per: str) -> str:
    def number(n: Any) -> str:
        return f"{n:,}" if isinstance(n, int) else "?"

    return f"{number(runs)} runs, {number(rate)} {per}/s"


def _get(document: dict[str, Any], *path: str) -> Any:
    """``document[path[0]][path[1]]…``, None where a key is missing (a phase not run)."""
    value: Any = document
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def _round(value: Any, digits: int) -> float | None:
    return None if value is None else round(float(value), digits)


def gateway_rows(gw: dict[str, Any]) -> list[dict[str, Any]]:
    """The four rows gateway_scale.py measures."""
    scale = _scale_text(gw.get("runs"), gw.get("rate_offered"), "heartbeats")
    at_scale = _at_scale(gw, GATEWAY_SCALE)
    p99 = gw.get("state_change_p99_ms") or {}
    # gateway_scale.py takes the ratio at 10 clients, at its largest phase when 10 did not run
    phases = sorted((gw.get("cpu_pct") or {}), key=lambda c: int(c) if c.isdigit() else -1)
    ref = "10" if "10" in phases else (phases[-1] if phases else "10")
    rows = [
        ("state_change_p99", "state change → client p99", [
            _goal("1 client", _round(p99.get("1"), 1), "ms", "<", 50),
            _goal("10 clients", _round(p99.get("10"), 1), "ms", "<", 100),
            _goal("50 clients", _round(p99.get("50"), 1), "ms", "<", 250)]),
        ("memory", "gateway memory", [
            _goal("RSS", _round(gw.get("rss_mb"), 1), "MB", "<", 300),
            _goal("per run", _round(gw.get("kib_per_run"), 2), "KiB", "<", 3)]),
        ("cpu_vs_baseline", "gateway CPU / raw websockets broadcast of the same frames", [
            _goal(f"{ref} clients", _round(gw.get("baseline_ratio"), 2), "x", "<=", 2),
            _info("gateway", _round(_get(gw, "cpu_pct", ref), 1), "%"),
            _info("websockets", _round(gw.get("baseline_cpu_pct"), 1), "%")]),
        ("first_snapshot", "first snapshot to a new client", [
            _goal("", _round(gw.get("first_snapshot_s"), 2), "s", "<", 1)]),
    ]
    return [_row(key, what, "gateway_scale.py", scale, at_scale, figures)
            for key, what, figures in rows]


def tui_row(tui: dict[str, Any]) -> dict[str, Any]:
    """Key -> screen p95 over every key pressed while the console takes the feed (the
    script's under-load figure, ``key_p95_ms``), at each terminal size."""
    scale = _scale_text(tui.get("runs"), tui.get("rate_per_s"), "events")
    if tui.get("contend"):
        scale += f", beside {tui['contend']} busy loops"
    figures = [_goal(size, _round(_get(tui, "sizes", size, "key_p95_ms"), 1), "ms", "<", 100)
               for size in ("80x24", "200x50")]
    return _row("tui_key_p95", "TUI key → screen p95 under load", "tui_render.py", scale,
                _at_scale(tui, CONSOLE_SCALE), figures)


def cli_row(cli: dict[str, Any]) -> dict[str, Any]:
    """``irq runs -o json`` cold: the median of the script's fresh processes."""
    runs = cli.get("runs")
    scale = f"{runs:,} runs" if isinstance(runs, int) else "? runs"
    figures = [
        _goal("median", _round(_get(cli, "commands", "runs_json", "median_s"), 2), "s", "<",
              0.5),
        _info("p90", _round(_get(cli, "commands", "runs_json", "p90_s"), 2), "s")]
    return _row("cli_runs_json", "`irq runs -o json` cold", "cli_startup.py", scale,
                _at_scale(cli, CLI_SCALE), figures)


def _row(key: str, what: str, source: str, scale: str, at_scale: bool,
         figures: list[dict[str, Any]]) -> dict[str, Any]:
    goals = [f for f in figures if "met" in f]
    return {"key": key, "what": what, "source": source, "scale": scale,
            "at_table_scale": at_scale, "figures": figures,
            "met": at_scale and all(f["met"] for f in goals)}


def build_table(gw: dict[str, Any], tui: dict[str, Any], cli: dict[str, Any], *,
                since: int | None, now: datetime) -> dict[str, Any]:
    """The table of one run: its rows, when each source was written, how many goals met."""
    rows = [*gateway_rows(gw), tui_row(tui), cli_row(cli)]
    goals = [(row, f) for row in rows for f in row["figures"] if "met" in f]
    return {
        "make_bench_started_at": None if since is None else _iso(since),
        "at": now.isoformat(timespec="seconds"),
        "sources": {"gateway_scale.py": gw.get("at"), "tui_render.py": tui.get("at"),
                    "cli_startup.py": cli.get("at")},
        "goals_met": sum(1 for row, f in goals if f["met"] and row["at_table_scale"]),
        "goals": len(goals),
        "rows": rows,
    }


# ------------------------------------------------------------------- freshness, the file


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds")


def check_fresh(name: str, document: dict[str, Any], since: int) -> None:
    """Refuse ``document`` unless its ``at`` is at or after ``since`` (epoch seconds; ``at``
    is written to the second, so one taken in the same second as ``since`` passes)."""
    at = document.get("at")
    if not isinstance(at, str):
        raise StaleResults(f"{name} records no time it was written ('at'): it is not from "
                           f"this make bench run (started {_iso(since)})")
    written = datetime.fromisoformat(at)
    if written.tzinfo is None:
        written = written.replace(tzinfo=UTC)
    if written.timestamp() < since:
        raise StaleResults(f"{name} was written at {at}, before this make bench run started "
                           f"({_iso(since)}): its script failed or wrote elsewhere")


def compose(figures: dict[str, Any], table: dict[str, Any],
            existing: dict[str, Any] | None) -> dict[str, Any]:
    """gateway.json: gateway_scale.py's figures, this table, and the table of the previous
    ``make bench`` run. A table assembled outside ``make bench`` (no start time) is never kept
    as the previous run; running this twice over one run keeps the run before it."""
    previous = None
    if existing:
        kept = existing.get("table")
        if kept and kept.get("make_bench_started_at") and (
                kept["make_bench_started_at"] != table["make_bench_started_at"]):
            previous = kept
        else:
            previous = existing.get("previous_table")
    own = {k: v for k, v in figures.items() if k not in TABLE_KEYS}
    return {**own, "table": table, "previous_table": previous}


# ------------------------------------------------------------------------------ rendering


def _number(value: float, unit: str) -> str:
    text = f"{value:,.0f}" if abs(value) >= 100 else f"{value:g}"
    return f"{text}x" if unit == "x" else f"{text} {unit}"


def _value(figure: dict[str, Any]) -> str:
    return "—" if figure["value"] is None else _number(figure["value"], figure["unit"])


def _goal_text(figure: dict[str, Any]) -> str:
    op = "≤" if figure["op"] == "<=" else "<"
    return f"{op} {_number(figure['limit'], figure['unit'])}"


def _cell(row: dict[str, Any] | None, label: str) -> str:
    """The figure ``label`` of ``row`` with its verdict and the row's context figures."""
    if row is None:
        return "—"
    figures = {f["label"]: f for f in row["figures"]}
    if label not in figures:
        return "—"
    figure = figures[label]
    goals = [f for f in row["figures"] if "met" in f]
    if not row["at_table_scale"]:
        verdict = f"not at the table's scale ({row['scale']})"
    else:
        verdict = "**met**" if figure["met"] else "missed"
    text = f"{_value(figure)}, {verdict}"
    if goals and goals[0]["label"] == label:
        context = [f"{f['label']} {_value(f)}" for f in row["figures"] if "met" not in f]
        if context:
            text += f" ({', '.join(context)})"
    return text


def _short(iso: str | None) -> str:
    """``2026-12-03T13:20:59+00:00`` as ``2026-12-03 13:20 UTC``."""
    if not iso:
        return "time not recorded"
    return datetime.fromisoformat(iso).astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _when(table: dict[str, Any]) -> str:
    """A table's name: the start of its make bench run (else when it was assembled)."""
    started = table["make_bench_started_at"]
    return f"make bench {_short(started)}" if started else f"assembled {_short(table['at'])}"


def _named(what: str, label: str) -> str:
    return f"{what}, {label}" if label else what


def render_markdown(table: dict[str, Any], previous: dict[str, Any] | None) -> str:
    """The README block: one line per goal, this run and (when kept) the one before."""
    columns = [("latest", table)] + ([("previous", previous)] if previous else [])
    head = "| figure | goal | " + " | ".join(f"{name}: {_when(t)}" for name, t in columns)
    lines = [head + " |", "|---|---|" + "---|" * len(columns)]
    by_key = [{row["key"]: row for row in t["rows"]} for _, t in columns]
    for row in table["rows"]:
        for figure in row["figures"]:
            if "met" not in figure:
                continue
            cells = [_cell(rows.get(row["key"]), figure["label"]) for rows in by_key]
            lines.append(f"| {_named(row['what'], figure['label'])} | {_goal_text(figure)} | "
                         + " | ".join(cells) + " |")
    lines.append("")
    for name, t in columns:  # a blank line ends the table; the list says where it came from
        lines.append(f"- {name}: {_provenance(t)}; goals met {t['goals_met']} of {t['goals']}.")
    if previous is None:
        lines.append("- previous: no earlier `make bench` run is kept in the results file yet.")
    return "\n".join(lines)


def _provenance(table: dict[str, Any]) -> str:
    sources = ", ".join(f"`{script}` {_short(at)}" for script, at in table["sources"].items())
    if table["make_bench_started_at"] is None:
        return ("assembled from the results files as they stood, not one `make bench` run "
                f"({sources})")
    return f"one `make bench` run ({sources})"


def render_text(table: dict[str, Any], previous: dict[str, Any] | None) -> str:
    """The table as ``make bench`` prints it at the end."""
    prev = {row["key"]: row for row in previous["rows"]} if previous else {}
    out = [f"scale table ({_when(table)}; goals met {table['goals_met']} of {table['goals']})"
           + (f", previous run {_when(previous)}: {previous['goals_met']} of "
              f"{previous['goals']}" if previous else "")]
    for row in table["rows"]:
        out.append(f"  {row['what']} [{row['scale']}]"
                   + ("" if row["at_table_scale"] else "  (not at the table's scale)"))
        for figure in row["figures"]:
            goal = f"goal {_goal_text(figure)}" if "met" in figure else ""
            verdict = "" if "met" not in figure else (
                (" met" if figure["met"] else " MISSED") if row["at_table_scale"] else
                (" (met at this scale: not counted)" if figure["met"] else " (missed)"))
            before = next((f for f in prev.get(row["key"], {}).get("figures", ())
                           if f["label"] == figure["label"]), None)
            was = f"  (previous {_value(before)})" if before else ""
            out.append(f"    {figure['label'] or '-':<34} {_value(figure):>12}  {goal}{verdict}{was}")
    return "\n".join(out)


def replace_block(text: str, block: str) -> str:
    """``text`` with what lies between the marker comments replaced by ``block``."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"README has no {BEGIN} ... {END} block")
    return text[:start + len(BEGIN)] + "\n" + block.strip("\n") + "\n" + text[end:]


# ------------------------------------------------------------------------------ the script


def _load(path: Path, since: int | None) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise StaleResults(f"{path}: {exc}") from exc
    if not isinstance(document, dict):
        raise StaleResults(f"{path}: not a JSON object")
    if since is not None:
        check_fresh(str(path), document, since)
    return document


def main(argv: list[str] | None = None, now: Callable[[], datetime] = lambda: datetime.now(UTC),
         ) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--since", type=int, default=None, metavar="EPOCH",
                    help="when this make bench run started (seconds since the epoch): every "
                         "results file must be written after it; without it no file is "
                         "checked and the table is not kept as a make bench run")
    ap.add_argument("--gateway", type=Path, default=RESULTS / "gateway_scale.json")
    ap.add_argument("--tui", type=Path, default=RESULTS / "tui.json")
    ap.add_argument("--cli", type=Path, default=RESULTS / "cli.json")
    ap.add_argument("--out", type=Path, default=RESULTS / "gateway.json")
    ap.add_argument("--readme", type=Path, default=ROOT / "README.md")
    ap.add_argument("--no-readme", action="store_true", help="leave README.md as it is")
    args = ap.parse_args(argv)
    try:
        gw = _load(args.gateway, args.since)
        tui = _load(args.tui, args.since)
        cli = _load(args.cli, args.since)
    except StaleResults as exc:
        print(f"scale table not written: {exc}", file=sys.stderr)
        return 1
    table = build_table(gw, tui, cli, since=args.since, now=now())
    existing = json.loads(args.out.read_text()) if args.out.is_file() else None
    document = compose(gw, table, existing)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    print(render_text(table, document["previous_table"]))
    print(f"  wrote {args.out}")
    if not args.no_readme:
        block = render_markdown(table, document["previous_table"])
        args.readme.write_text(replace_block(args.readme.read_text(), block))
        print(f"  rewrote the scale table in {args.readme}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
