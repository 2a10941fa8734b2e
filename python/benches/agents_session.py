"""Benchmark: session_store.agents.Session beside the SDK's own SQLiteSession, same run,
same machine, same items (a turn = user item, function call, its output, assistant text).

    python benches/agents_session.py [--turns N] [--rounds R] [--loads L]

Both are file-backed, in one temporary directory, and called through their async methods
(each runs its blocking work on a worker thread). The calls are paired: each of ours is
followed (or, every other pair, preceded) by the same call of SQLiteSession, so a change of
load on the machine falls on both alike. Each round starts from two new files, adds ``--turns`` turns and then loads ``--loads`` times
of each kind.

Prints, per operation, the median time of each over every call, and the ratio ours /
SQLiteSession (below 1.0x: ours is faster): each round's over its paired calls
(``paired_ratio``), and their median and range over the rounds. On a shared machine a round
now and then has one side's worker thread scheduled late for most of its calls (either
side's); the median over the rounds leaves such a round out, the range shows it.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
import os
import statistics
import tempfile
import time

from agents.memory import SQLiteSession

from session_store.agents import Session

OPERATIONS = ["add_items (one turn)", "get_items()", "get_items(limit=20)"]
#: Paired get_items(limit=20) calls after each paired get_items() (they are 15x quicker).
WINDOWS_PER_LOAD = 4


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


async def paired(sessions, call, check, ours_first):
    """One call of each session, ours first or second: the seconds of each."""
    order = ("ours", "sqlite") if ours_first else ("sqlite", "ours")
    spent = {"ours_first": ours_first}
    for who in order:
        spent[who], result = await timed(call(sessions[who]))
        check(result)
        del result
    return spent


def paired_ratio(pairs):
    """Ours / SQLiteSession over paired calls: the geometric mean of the median ratio of the
    pairs where ours went first and of those where it went second, so that what going first
    costs (a worker thread to wake, caches to fill) cancels out."""
    halves = [[p["ours"] / p["sqlite"] for p in pairs if p["ours_first"] == first]
              for first in (True, False)]
    medians = [statistics.median(half) for half in halves if half]
    return math.prod(medians) ** (1 / len(medians))


async def measure(sessions, turns, loads):
    """Per operation, the paired seconds of each call: a list of {"ours": s, "sqlite": s}."""
    times = {name: [] for name in OPERATIONS}
    for n in range(turns):
        items = turn(n)
        times[OPERATIONS[0]].append(await paired(
            sessions, lambda s: s.add_items(items), lambda _: None, n % 2 == 0))
    for n in range(loads):
        times[OPERATIONS[1]].append(await paired(
            sessions, lambda s: s.get_items(), lambda got: len(got) == 4 * turns or fail(got),
            n % 2 == 0))
        for k in range(WINDOWS_PER_LOAD):
            times[OPERATIONS[2]].append(await paired(
                sessions, lambda s: s.get_items(limit=20),
                lambda got: len(got) == 20 or fail(got), (n + k) % 2 == 1))
    return times


def fail(got):
    raise AssertionError(f"got {len(got)} items")


def one_round(tmp, r, turns, loads):
    sessions = {
        "ours": Session(f"bench-{r}", os.path.join(tmp, f"ours-{r}.db")),
        "sqlite": SQLiteSession(f"bench-{r}", os.path.join(tmp, f"sqlite-{r}.db")),
    }
    # What is alive now (the SDK's modules and classes) is left out of the collector's full
    # passes, which would otherwise walk it all on whichever call happens to set one off.
    gc.freeze()
    try:
        return asyncio.run(measure(sessions, turns, loads))
    finally:
        for session in sessions.values():
            session.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--loads", type=int, default=50)
    args = parser.parse_args()
    rounds = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            rounds.append(one_round(tmp, r, args.turns, args.loads))
    print(f"{args.turns} turns (4 items each), {args.rounds} rounds of {args.loads} whole loads"
          f" and {args.loads * WINDOWS_PER_LOAD} windows; paired calls")
    print(f"{'operation':<24}{'ours':>10}{'SQLiteSession':>15}{'ratio':>8}"
          f"{'rounds (lowest-highest)':>26}")
    worst = 0.0
    for name in OPERATIONS:
        pairs = [pair for times in rounds for pair in times[name]]
        ours = statistics.median(p["ours"] for p in pairs)
        theirs = statistics.median(p["sqlite"] for p in pairs)
        per_round = [paired_ratio(times[name]) for times in rounds]
        ratio = statistics.median(per_round)
        worst = max(worst, ratio)
        spread = f"{min(per_round):.2f}x-{max(per_round):.2f}x"
        print(f"{name:<24}{ours * 1e6:>8.0f}us{theirs * 1e6:>13.0f}us{ratio:>7.2f}x"
              f"{spread:>26}")
    print(f"worst ratio {worst:.2f}x")


if __name__ == "__main__":
    main()
