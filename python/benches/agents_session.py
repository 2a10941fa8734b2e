"""Benchmark: session_store.agents.Session beside the SDK's own SQLiteSession, same run,
same machine, same items (a turn = user item, function call, its output, assistant text).

    python benches/agents_session.py [--turns N] [--rounds R]

Prints, per operation, the median time of each and the ratio ours / SQLiteSession (below
1.0x: ours is faster). Both are file-backed, in one temporary directory, and both are called
through their async methods (each runs its blocking work on a worker thread).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time

from agents.memory import SQLiteSession

from session_store.agents import Session


def turn(n):
    return [
        {"role": "user", "content": f"question {n}: what is in directory {n}?"},
        {"type": "function_call", "call_id": f"call_{n}", "name": "ls",
         "arguments": '{"path": "/tmp/%d"}' % n, "id": f"fc_{n}", "status": "completed"},
        {"type": "function_call_output", "call_id": f"call_{n}", "output": "a.txt\nb.txt\n" * 20},
        {"id": f"msg_{n}", "type": "message", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": f"Directory {n} holds a and b.",
                      "annotations": []}]},
    ]


async def measure(session, turns):
    """Seconds per append of one turn, per full load, per load of the latest 20 items."""
    appends = []
    for n in range(turns):
        items = turn(n)
        start = time.perf_counter()
        await session.add_items(items)
        appends.append(time.perf_counter() - start)
    loads, windows = [], []
    for _ in range(20):
        start = time.perf_counter()
        got = await session.get_items()
        loads.append(time.perf_counter() - start)
        assert len(got) == 4 * turns
        start = time.perf_counter()
        await session.get_items(limit=20)
        windows.append(time.perf_counter() - start)
    return statistics.median(appends), statistics.median(loads), statistics.median(windows)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results = {"ours": [], "sqlite": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            # Alternate who goes first, so neither always meets a cold cache.
            order = ("ours", "sqlite") if r % 2 == 0 else ("sqlite", "ours")
            for who in order:
                path = os.path.join(tmp, f"{who}-{r}.db")
                if who == "ours":
                    session = Session(f"bench-{r}", path)
                else:
                    session = SQLiteSession(f"bench-{r}", path)
                results[who].append(asyncio.run(measure(session, args.turns)))
                session.close()
    print(f"{args.turns} turns (4 items each), median of {args.rounds} rounds")
    print(f"{'operation':<28}{'ours':>12}{'SQLiteSession':>16}{'ratio':>9}")
    worst = 0.0
    for index, name in enumerate(["add_items (one turn)", "get_items()",
                                  "get_items(limit=20)"]):
        ours = statistics.median(x[index] for x in results["ours"])
        theirs = statistics.median(x[index] for x in results["sqlite"])
        ratio = ours / theirs
        worst = max(worst, ratio)
        print(f"{name:<28}{ours * 1e6:>10.0f}us{theirs * 1e6:>14.0f}us{ratio:>8.2f}x")
    print(f"worst ratio {worst:.2f}x")


if __name__ == "__main__":
    main()
