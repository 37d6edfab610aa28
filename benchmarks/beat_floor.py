"""What a heartbeat costs at the least, in CPython: the bound under issue 25's CPU goal.

The goal compares the gateway's CPU with a plain websockets server broadcasting the same
frames (``gateway_scale.py``'s baseline). Both are timed here in process, on the frames the
scale benchmark's agents send (100 bare beats each, 100,000 runs), in µs per beat, best of
``--repeat`` rounds:

- ``baseline``: the baseline server's own work per frame (``gateway_scale.baseline_events``:
  decode, one dict and one ``orjson.dumps`` per beat) and its join every 100 ms;
- ``floor``: the least any hub can do with a beat and still know its runs: decode the
  frame, find the run, drop a beat older than its last, set its time and progress, log one
  event; no validation, no token or binding, no liveness, no alerts, nothing encoded;
- ``floor_encoded``: the floor, and the compact ``beat`` events written into one frame every
  100 ms, as the gateway sends them (a template per beat).

``benchmarks/gateway_ingest.py`` times the gateway's hub on the same frames. Written to
``results/beat_floor.json``.

    .venv/bin/python benchmarks/beat_floor.py [--runs 100000 --frames 2000 --repeat 5]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.gateway_ingest import PER_FRAME, SLICE, frames  # noqa: E402
from benchmarks.gateway_scale import baseline_events  # noqa: E402
from benchmarks.results_file import write_results  # noqa: E402


class Beaten:
    """A run as the floor keeps it: its last beat's seq, time and progress."""

    __slots__ = ("at", "progress", "seq")

    def __init__(self) -> None:
        self.seq, self.at, self.progress = -1, "", 0.0


def baseline(raws: list[str]) -> None:
    seq, pending = 0, []
    for k in range(0, len(raws), SLICE):
        for raw in raws[k:k + SLICE]:
            seq = baseline_events(raw, seq, pending)
        b'{"type":"events","events":[' + b",".join(pending) + b"]}"
        pending.clear()


def floor(runs: dict[str, Beaten], encode: bool) -> Callable[[list[str]], None]:
    log: deque[tuple[int, str, Beaten]] = deque(maxlen=100_000)

    def feed(raws: list[str]) -> None:
        seq = 0
        for k in range(0, len(raws), SLICE):
            fresh: list[tuple[int, str, Beaten]] = []
            append = fresh.append
            for raw in raws[k:k + SLICE]:
                for beat in orjson.loads(raw)["beats"]:
                    run_id = f"{beat['backend']}:{beat['context']}/{beat['native_id']}"
                    run = runs[run_id]
                    if beat["seq"] < run.seq:
                        continue
                    run.seq, run.at, run.progress = beat["seq"], beat["at"], beat["progress"]
                    seq += 1
                    append((seq, run_id, run))
            log.extend(fresh)
            if encode:
                events = [b'{"seq":%d,"kind":"beat","data":{"id":"%s","heartbeat_at":"%s",'
                          b'"progress":%r}}' % (s, i.encode(), r.at.encode(), r.progress)
                          for s, i, r in fresh]
                b'{"type":"events","events":[' + b",".join(events) + b"]}"

    return feed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--frames", type=int, default=2000, help="frames of 100 beats a round")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    raws = frames(args.runs, args.frames, 0)
    beats = args.frames * PER_FRAME
    runs = {f"bench:local/run-{i:06d}": Beaten() for i in range(args.runs)}
    ways: dict[str, Callable[[list[str]], None]] = {
        "baseline": baseline, "floor": floor(runs, False),
        "floor_encoded": floor(runs, True)}
    best = dict.fromkeys(ways, float("inf"))
    for _ in range(args.repeat):  # interleaved: a noisy moment costs every way alike
        for name, feed in ways.items():
            for run in runs.values():  # every round's beats are news to the floor
                run.seq = -1
            start = time.perf_counter()
            feed(raws)
            best[name] = min(best[name], (time.perf_counter() - start) / beats * 1e6)
    figures = {name: round(us, 2) for name, us in best.items()}
    print(f"µs per beat, best of {args.repeat} rounds of {beats:,} beats at {args.runs:,} "
          "runs (frames of 100, joined every 20 frames):")
    for name, us in figures.items():
        print(f"  {name:<14} {us:5.2f}")
    write_results("beat_floor", {"runs": args.runs, "beats_per_round": beats,
                                 "rounds": args.repeat, "us_per_beat": figures})


if __name__ == "__main__":
    main()
