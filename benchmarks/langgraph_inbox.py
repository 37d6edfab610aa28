"""LangGraph inbox: irq's adapter vs the SDK's own way, over N interrupted threads.

Starts a real ``langgraph dev`` (in-memory runtime) on a free port with a plain graph that
stops at ``interrupt()`` (Agent Inbox shape), puts ``--threads`` threads there, then times
(median of ``--repeats``, warm clients):

- irq: ``LangGraphBackend.observe()`` (every interrupted and busy thread, all pages, with
  their pending interrupts; plus the latest idle and failed threads) -> the inbox items;
- the SDK (``langgraph_sdk``): ``threads.search(status="interrupted")`` and one
  ``threads.get_state`` per thread (what a client does to show each pending interrupt),
  sequential and with 16 concurrent requests; and, for reference, the SDK's search alone
  with ``select=[..., "interrupts"]`` (the one call irq's inbox is built on).

Usage: ``python benchmarks/langgraph_inbox.py [--threads 1000] [--repeats 5]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backend_adapters.base import MemoryPauseLedger  # noqa: E402
from backend_adapters.langgraph.adapter import LangGraphBackend  # noqa: E402
from backend_adapters.langgraph.dev_server import AgentServer, write_config  # noqa: E402
from backend_adapters.registry import open_backend  # noqa: E402
from benchmarks.results_file import write_results  # noqa: E402

GRAPH = '''
from typing import Any, TypedDict
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


class State(TypedDict, total=False):
    n: int
    response: Any


def review(state: State) -> State:
    request = {
        "action_request": {"action": "send_email", "args": {"to": "a@example.com", "n": state.get("n")}},
        "config": {"allow_accept": True, "allow_edit": True, "allow_respond": True, "allow_ignore": True},
        "description": "Send it?",
    }
    return {"response": interrupt(request)[0]}


builder = StateGraph(State)
builder.add_node("review", review)
builder.add_edge(START, "review")
builder.add_edge("review", END)
graph = builder.compile()
'''


async def fill(url: str, n: int) -> float:
    """Start ``n`` runs that stop at their interrupt; seconds until all are interrupted."""
    t0 = time.monotonic()
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        gate = asyncio.Semaphore(32)

        async def one(i: int) -> None:
            async with gate:
                tid = (await http.post("/threads", json={"metadata": {"bench": "inbox"}})).json()
                await http.post(
                    f"/threads/{tid['thread_id']}/runs",
                    json={"assistant_id": "inbox", "input": {"n": i}},
                )

        await asyncio.gather(*(one(i) for i in range(n)))
        while True:
            count = (await http.post("/threads/count", json={"status": "interrupted"})).json()
            if count >= n:
                return time.monotonic() - t0
            await asyncio.sleep(1.0)


async def irq_inbox(adapter: LangGraphBackend) -> int:
    return len((await adapter.observe()).interrupts)


async def sdk_inbox(client: Any, concurrency: int) -> int:
    threads: list[Any] = []
    while True:  # the server caps limit at 1000
        page = await client.threads.search(status="interrupted", limit=1000, offset=len(threads))
        threads.extend(page)
        if len(page) < 1000:
            break
    gate = asyncio.Semaphore(concurrency)

    async def state(tid: str) -> int:
        async with gate:
            return len((await client.threads.get_state(tid)).get("interrupts") or [])

    counts = await asyncio.gather(*(state(t["thread_id"]) for t in threads))
    return sum(counts)


async def sdk_search_only(client: Any) -> int:
    """The SDK's search alone, selecting the interrupts (what irq's adapter relies on)."""
    total, offset = 0, 0
    while True:
        page = await client.threads.search(
            status="interrupted", limit=1000, offset=offset,
            select=["thread_id", "status", "interrupts", "metadata"],
        )
        total += sum(len(v) for t in page for v in (t.get("interrupts") or {}).values())
        offset += len(page)
        if len(page) < 1000:
            return total


async def timed(fn: Any, repeats: int) -> tuple[float, int]:
    times, found = [], 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        found = await fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), found


async def main(args: argparse.Namespace) -> None:
    from langgraph_sdk import get_client

    with tempfile.TemporaryDirectory(prefix="irq-lg-bench-") as tmp:
        workdir = Path(tmp)
        (workdir / "inbox_graph.py").write_text(GRAPH)
        write_config(workdir, {"inbox": "./inbox_graph.py:graph"})
        server = AgentServer(workdir, jobs_per_worker=args.jobs)
        server.start()
        try:
            filled = await fill(server.url, args.threads)
            print(f"{args.threads} interrupted threads in {filled:.1f} s", flush=True)
            adapter = open_backend(server.backend_url(timeout=60), MemoryPauseLedger())
            assert isinstance(adapter, LangGraphBackend)
            await adapter.start()
            client = get_client(url=server.url, timeout=60)
            rows = [
                ("irq adapter observe()", await timed(lambda: irq_inbox(adapter), args.repeats)),
                (
                    "SDK search + get_state per thread, sequential",
                    await timed(lambda: sdk_inbox(client, 1), args.repeats),
                ),
                (
                    "SDK search + get_state per thread, 16 concurrent",
                    await timed(lambda: sdk_inbox(client, 16), args.repeats),
                ),
                (
                    "SDK search selecting interrupts, no state reads",
                    await timed(lambda: sdk_search_only(client), args.repeats),
                ),
            ]
            await adapter.close()
        finally:
            server.stop()
    base = rows[0][1][0]
    print(f"\ninbox over {args.threads} interrupted threads (median of {args.repeats})")
    print(f"{'':52} {'time':>9} {'items':>6} {'ratio':>7}")
    for name, (seconds, found) in rows:
        print(f"{name:52} {seconds:8.3f}s {found:6d} {seconds / base:6.1f}x")
    write_results("langgraph_inbox", {
        "threads": args.threads, "repeats": args.repeats, "jobs_per_worker": args.jobs,
        "fill_s": round(filled, 1),
        "median_s": {name: {"seconds": round(seconds, 3), "items": found,
                            "ratio": round(seconds / base, 1)}
                     for name, (seconds, found) in rows},
    })


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=16, help="--n-jobs-per-worker")
    asyncio.run(main(parser.parse_args()))
