"""Benchmark: session_store.agents.Session beside the SDK's own SQLiteSession, same run,
same machine, same items (a turn = user item, function call, its output, assistant text).

    python benches/agents_session.py [--turns N] [--rounds R]

Prints, per operation, the median time of each and the ratio ours / SQLiteSession (below
1.0x: ours is faster). Both are file-backed, in one temporary directory, both are called
through their async methods (each runs its blocking work on a worker thread), and they take
turns call by call.
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


async def timed(awaitable):
    start = time.perf_counter()
    result = await awaitable
    return time.perf_counter() - start, result


async def measure(sessions, turns, loads):
    """Per operation and session: the seconds of each call. The two sessions take turns call
    by call, so a change of load on the machine falls on both alike."""
    times = {name: {who: [] for who in sessions} for name in OPERATIONS}
    for n in range(turns):
        items = turn(n)
        for who, session in sessions.items():
            spent, _ = await timed(session.add_items(items))
            times[OPERATIONS[0]][who].append(spent)
    for _ in range(loads):
        for who, session in sessions.items():
            spent, got = await timed(session.get_items())
            assert len(got) == 4 * turns
            times[OPERATIONS[1]][who].append(spent)
            spent, got = await timed(session.get_items(limit=20))
            assert len(got) == 20
            times[OPERATIONS[2]][who].append(spent)
    return times


OPERATIONS = ["add_items (one turn)", "get_items()", "get_items(limit=20)"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--loads", type=int, default=50)
    args = parser.parse_args()
    all_times = {name: {"ours": [], "sqlite": []} for name in OPERATIONS}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            # Alternate who goes first in each pair.
            order = ("ours", "sqlite") if r % 2 == 0 else ("sqlite", "ours")
            sessions = {}
            for who in order:
                path = os.path.join(tmp, f"{who}-{r}.db")
                if who == "ours":
                    sessions[who] = Session(f"bench-{r}", path)
                else:
                    sessions[who] = SQLiteSession(f"bench-{r}", path)
            times = asyncio.run(measure(sessions, args.turns, args.loads))
            for name in OPERATIONS:
                for who in ("ours", "sqlite"):
                    all_times[name][who].extend(times[name][who])
            for session in sessions.values():
                session.close()
    print(f"{args.turns} turns (4 items each), {args.rounds} rounds, {args.loads} loads each;"
          " medians")
    print(f"{'operation':<28}{'ours':>12}{'SQLiteSession':>16}{'ratio':>9}")
    worst = 0.0
    for name in OPERATIONS:
        ours = statistics.median(all_times[name]["ours"])
        theirs = statistics.median(all_times[name]["sqlite"])
        ratio = ours / theirs
        worst = max(worst, ratio)
        print(f"{name:<28}{ours * 1e6:>10.0f}us{theirs * 1e6:>14.0f}us{ratio:>8.2f}x")
    print(f"worst ratio {worst:.2f}x")


if __name__ == "__main__":
    main()
