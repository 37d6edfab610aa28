"""Where a benchmark's figures go: ``benchmarks/results/NAME.json``, the file the docs cite.

Every figure in README.md and docs/ comes from a results file that a make target rewrites;
a script that only printed its numbers left the docs quoting a terminal nobody kept. The
scripts that predate that rule call ``write_results`` with the numbers they print.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict[str, Any]:
    """What the figures depend on besides the code: when, where, and how loaded."""
    return {
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "loadavg_1m_5m_15m": [round(x, 2) for x in os.getloadavg()],
        "argv": sys.argv[1:],
    }


def write_results(name: str, figures: dict[str, Any], *, variant: str | None = None) -> Path:
    """Write ``figures`` (with the machine) to ``results/NAME.json``. A script run several
    ways by one make target (``temporal_dead_worker.py --poll 0.5``) passes ``variant``: the
    file then keeps one entry per variant and this run replaces only its own."""
    path = RESULTS / f"{name}.json"
    record = {**figures, "machine": machine()}
    if variant is not None:
        previous = json.loads(path.read_text()) if path.exists() else {}
        variants = previous.get("variants", {}) if isinstance(previous, dict) else {}
        variants[variant] = record
        record = {"benchmark": name, "variants": dict(sorted(variants.items()))}
    else:
        record = {"benchmark": name, **record}
    path.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {path.relative_to(RESULTS.parent.parent)}", file=sys.stderr)
    return path


def spread(seconds: list[float], unit: float = 1000.0, digits: int = 1) -> dict[str, float]:
    """median, p95 (the sample at 95 %), min, max and n of ``seconds``, times ``unit``
    (1000: milliseconds, the default; 1: seconds)."""
    ordered = sorted(seconds)
    if not ordered:
        return {"n": 0}
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    median = ordered[len(ordered) // 2] if len(ordered) % 2 else (
        (ordered[len(ordered) // 2 - 1] + ordered[len(ordered) // 2]) / 2)
    return {"median": round(median * unit, digits), "p95": round(p95 * unit, digits),
            "min": round(ordered[0] * unit, digits), "max": round(ordered[-1] * unit, digits),
            "n": len(ordered)}
