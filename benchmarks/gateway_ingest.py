"""What one heartbeat costs the gateway's hub, in process: no sockets, no other load.

100,000 runs are indexed and have beaten once (their first beats bound them); then agent
frames of 100 beats each go through the gateway's own code, phase by phase, as at 20,000
beats/s: ``parse`` (``parse_agent_frame``), ``take`` (the agent channel's handling of a
heartbeats frame: the plain-beat hand path or the general one), ``flush`` (the run store
merging the beats into the index and logging their events) and ``encode`` (the compact
``events`` frame every client without a filter is sent). Printed in µs per beat, best of
``--repeat`` rounds (the machine is shared); written to ``results/gateway_ingest.json``
under the variant:

- ``default``: the gateway as it runs;
- ``--general``: every beat the general way (a model each: how the gateway took them
  before plain_beats.py);
- ``--set-order``: the flush takes the runs in hash order (as when the beaten runs were a
  set), not in the order their beats came;
- ``--helper``: beats as irq's own helper writes them (``heartbeat_frame``: every field,
  ``details: {}``, ``resources: []``), not the bare ones the scale benchmark's agents send;
- ``--gpu``: the helper's beats of runs that each hold a GPU for the whole run (every beat
  reports it: ``resources: [{"id": ..., "kind": "gpu"}]``); with ``--general``: each
  beat's resources built into models, as before the hand path took them.

Young garbage is collected and frozen every 200 frames, as the gateway's GC policy does
every second at 20,000 beats/s.

    .venv/bin/python benchmarks/gateway_ingest.py [--runs 100000 --frames 2000 --repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend_adapters.heartbeat_push import heartbeat_frame  # noqa: E402
from benchmarks.results_file import write_results  # noqa: E402
from console.gateway.agent_beats import Reporter  # noqa: E402
from console.gateway.agent_channel import AgentChannel  # noqa: E402
from console.gateway.auth import Principal  # noqa: E402
from console.gateway.hub import Hub  # noqa: E402
from console.gateway.policy_state import PolicyState  # noqa: E402
from console.gateway.protocol import AgentHeartbeats, parse_agent_frame  # noqa: E402
from console.gateway.refusals import RefusalLedger  # noqa: E402
from console.gateway.settings import GatewaySettings  # noqa: E402
from console.gateway.shared_frames import SharedFrames  # noqa: E402
from console.model import Role, Run  # noqa: E402

PER_FRAME = 100
SLICE = 20  # frames between two flushes (20,000 beats/s, flushed every 0.1 s)


class GeneralHub(Hub):
    """A hub whose agent channel takes every beat the general way."""

    takes_plain_beats = False  # type: ignore[assignment]


class Socket:
    async def send(self, frame: str) -> None:
        raise SystemExit(f"a beat was refused: {frame}")


def frames(runs: int, count: int, seq: int, *, helper: bool = False,
           gpu: bool = False) -> list[str]:
    """``count`` heartbeats frames as the benchmark agents send them (one time per frame);
    ``helper``: each beat as irq's helper writes it; ``gpu``: and holding a GPU."""
    out, n = [], 0
    for _ in range(count):
        now = datetime.now(UTC)
        at = now.isoformat()
        beats: list[dict[str, Any]] = []
        for _ in range(PER_FRAME):
            seq += 1
            beat = {"backend": "bench", "context": "local",
                    "native_id": f"run-{n % runs:06d}", "seq": seq, "at": at,
                    "progress": (n % 100) / 100, "interval_s": 5.0, "timeout_s": 12.0}
            if helper or gpu:
                held = [{"id": f"gpu-{n % runs}", "kind": "gpu"}] if gpu else []
                beat = {k: v for k, v in heartbeat_frame(
                    phase="running", at=now, resources=held,
                    **{k: v for k, v in beat.items() if k != "at"}).items() if k != "type"}
            beats.append(beat)
            n += 1
        out.append(orjson.dumps({"type": "heartbeats", "beats": beats}).decode())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--frames", type=int, default=2000, help="frames of 100 beats a round")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--general", action="store_true", help="every beat the general way")
    ap.add_argument("--set-order", action="store_true", help="flush in hash order")
    ap.add_argument("--helper", action="store_true", help="beats as irq's helper writes them")
    ap.add_argument("--gpu", action="store_true", help="the helper's beats, each run holding "
                    "a GPU")
    args = ap.parse_args()
    form = "gpu" if args.gpu else "helper" if args.helper else ""
    variant = "-".join(part for part in (
        "general" if args.general else "set-order" if args.set_order else "", form) if part
        ) or "default"

    hub = (GeneralHub if args.general else Hub)(event_log_size=100_000)
    now = datetime.now(UTC)
    hub.observe_runs([Run(id=f"bench:local/run-{i:06d}", backend="bench", context="local",
                          native_id=f"run-{i:06d}", name="synthetic", started_at=now)
                      for i in range(args.runs)])
    channel = AgentChannel(GatewaySettings(port=0, home=Path("/nonexistent")), hub,
                           {"bench:local": None},  # type: ignore[dict-item]
                           PolicyState(None), None,  # type: ignore[arg-type]
                           RefusalLedger(lambda _entry: None), Counter())
    shared = SharedFrames(hub)
    who = Principal("bench-agent", Role.AGENT, None, "tok")
    reporter = Reporter("tok", "bench-agent")
    ws: Any = Socket()

    async def feed(raws: list[str]) -> dict[str, float]:
        spent = dict.fromkeys(("parse", "take", "flush", "encode"), 0.0)
        for k in range(0, len(raws), SLICE):
            if k % 200 == 0:
                gc.collect(1)
                gc.freeze()
            a = time.perf_counter()
            msgs = [parse_agent_frame(raw, 16 << 20) for raw in raws[k:k + SLICE]]
            b = time.perf_counter()
            seq = hub.seq
            for msg in msgs:
                assert isinstance(msg, AgentHeartbeats)
                await channel._beats(ws, who, reporter, msg, 17_000)
            c = time.perf_counter()
            dirty = hub.beats.take_dirty()
            order = list(set(dirty)) if args.set_order else list(dirty)
            with hub.events.batch():
                hub.run_store.flush(hub.clock(), order)
            d = time.perf_counter()
            shared.events_frame(hub.events_since(seq) or [], None, True)
            e = time.perf_counter()
            spent["parse"] += b - a
            spent["take"] += c - b
            spent["flush"] += d - c
            spent["encode"] += e - d
        return spent

    asyncio.run(feed(frames(args.runs, args.runs // PER_FRAME, 1,
                            helper=args.helper, gpu=args.gpu)))  # first beats: every run bound
    best: dict[str, float] = {}
    seq = 10_000_000
    for _ in range(args.repeat):
        raws = frames(args.runs, args.frames, seq, helper=args.helper, gpu=args.gpu)
        seq += len(raws) * PER_FRAME
        spent = asyncio.run(feed(raws))
        beats = len(raws) * PER_FRAME
        for phase, seconds in spent.items():
            us = seconds / beats * 1e6
            best[phase] = min(best.get(phase, us), us)
    best["total"] = sum(best.values())
    taken = hub.plain_beats.taken
    print(f"hub cost per beat ({variant}; {args.runs:,} runs, best of {args.repeat} rounds of "
          f"{args.frames * PER_FRAME:,} beats; {taken:,} beats taken by hand):")
    for phase, us in best.items():
        print(f"  {phase:<7} {us:6.2f} µs")
    write_results("gateway_ingest", {
        "runs": args.runs, "beats_per_round": args.frames * PER_FRAME,
        "rounds": args.repeat, "taken_by_hand": taken,
        "us_per_beat": {phase: round(us, 2) for phase, us in best.items()},
    }, variant=variant)


if __name__ == "__main__":
    main()
