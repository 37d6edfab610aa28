"""Latency distributions as the native-wait benchmarks report them (nearest-rank percentiles,
seconds rounded to the millisecond)."""

from __future__ import annotations


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def dist(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50_s": round(pct(values, 0.5), 3),
        "p95_s": round(pct(values, 0.95), 3),
        "max_s": round(max(values, default=float("nan")), 3),
    }
