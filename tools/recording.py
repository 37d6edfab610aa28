"""Record what a gateway serves (snapshot, run details, audit, dry-run plans) into one JSON
file that :class:`console.tui.fleet_source.RecordedSource` replays: real data, frozen, so
screens render the same every time (snapshot tests).

    python -m tools.recording --url ws://127.0.0.1:7433 --token T --out fleet.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from console.client import GatewayClient, GatewayError
from console.model import Action, utcnow


async def record(url: str, token: str | None, *, details: int = 12) -> dict[str, Any]:
    """Everything the TUI reads, as the gateway serves it now."""
    client = GatewayClient(url, token, client="irq-recorder", subscribe=False)
    await client.connect()
    try:
        view = client.view
        snapshot = {
            "type": "snapshot",
            "epoch": view.epoch,
            "seq": view.seq,
            "runs": [r.contract() for r in view.runs.values()],
            "interrupts": [i.contract() for i in view.interrupts.values()],
            "backends": [b.contract() for b in view.backends.values()],
        }
        runs: dict[str, Any] = {}
        dry_runs: dict[str, dict[str, Any]] = {"pause": {}}
        live = [r for r in view.runs.values() if not r.state.terminal]
        for run in (live + [r for r in view.runs.values() if r.state.terminal])[:details]:
            try:
                runs[run.id] = await client.query("run", run_id=run.id)
            except GatewayError:
                continue
        for run in live[:details]:
            try:
                results = await client.command(Action.PAUSE, [run.id], dry_run=True)
            except GatewayError:
                continue
            dry_runs["pause"][run.id] = [r.contract() for r in results]
        audit = await client.query("audit", limit=200)
        return {
            "recorded_at": utcnow().isoformat(),
            "url": url,
            "role": client.role,
            "identity": client.identity,
            "snapshot": snapshot,
            "runs": runs,
            "dry_runs": dry_runs,
            "audit": audit or [],
        }
    finally:
        await client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.recording",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("IRQ_URL", "ws://127.0.0.1:7433"))
    parser.add_argument("--token", default=os.environ.get("IRQ_TOKEN"))
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        data = asyncio.run(record(args.url, args.token))
    except GatewayError as exc:
        print(f"irq recording: {exc.message}", file=sys.stderr)
        return 6
    args.out.write_text(json.dumps(data, indent=1, default=str) + "\n")
    print(f"recorded {len(data['snapshot']['runs'])} runs to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
