"""Benchmark: what one append of session_store.claude.SessionStore costs as the transcript
grows, on a handle that mirrored the session so far (it reads only the last turn again) and
on a new handle (it reads the whole transcript once).

    python benches/claude_append.py [--sizes 100,1000,5000] [--appends N]

Each size: a session holding that many Claude Code lines (turns of a prompt, an assistant
message whose two calls interleave with their results, one line per block, and an answer),
then ``--appends`` appends of one line each (the next turn's lines, as the SDK mirrors them
line by line), timed one by one; prints the median.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from session_store.claude import SessionStore


def turn(n):
    m = f"msg_{n}"

    def user(uuid, content):
        return {"type": "user", "uuid": uuid, "isSidechain": False,
                "message": {"role": "user", "content": content}}

    def assistant(uuid, message_id, block):
        return {"type": "assistant", "uuid": uuid, "isSidechain": False,
                "message": {"role": "assistant", "id": message_id,
                            "model": "claude-sonnet-4-5", "content": [block]}}

    def call(call_id):
        return {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": "ls"}}

    def result(uuid, call_id):
        return user(uuid, [{"type": "tool_result", "tool_use_id": call_id,
                            "content": "a.txt\nb.txt\n" * 10}])

    return [
        user(f"u{n}", f"question {n}: what is in directory {n}?"),
        assistant(f"a{n}t", m, {"type": "text", "text": "Looking."}),
        assistant(f"a{n}c1", m, call(f"c{n}a")),
        result(f"r{n}a", f"c{n}a"),
        assistant(f"a{n}c2", m, call(f"c{n}b")),
        result(f"r{n}b", f"c{n}b"),
        assistant(f"a{n}x", f"answer_{n}", {"type": "text", "text": f"Directory {n}."}),
    ]


def lines(count, start=0):
    out = []
    n = start
    while len(out) < count:
        out.extend(turn(n))
        n += 1
    return out[:count]


def measure(tmp, size, appends):
    db = os.path.join(tmp, f"claude-{size}.db")
    key = {"project_key": "bench", "session_id": f"s{size}"}
    history = lines(size + appends)
    store = SessionStore(db)
    store.append_sync(key, history[:size])
    kept, fresh = [], []
    for n in range(appends):
        line = history[size + n]
        start = time.perf_counter()
        store.append_sync(key, [line])
        kept.append(time.perf_counter() - start)
    # A new handle for each append: no cursor, the whole transcript read (the old way).
    for n in range(min(appends, 20)):
        other = SessionStore(db)
        extra = lines(1, start=100_000 + n)
        start = time.perf_counter()
        other.append_sync(key, extra)
        fresh.append(time.perf_counter() - start)
        other.close()
    assert store.store.check(f"claude:bench:s{size}") == []
    store.close()
    return statistics.median(kept), statistics.median(fresh)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--appends", type=int, default=70)
    args = parser.parse_args()
    print(f"one-line appends, {args.appends} per size; medians")
    print(f"{'entries before':>15}{'kept handle':>14}{'new handle':>13}")
    with tempfile.TemporaryDirectory() as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            kept, fresh = measure(tmp, size, args.appends)
            print(f"{size:>15}{kept * 1e6:>12.0f}us{fresh * 1e6:>11.0f}us")


if __name__ == "__main__":
    main()
