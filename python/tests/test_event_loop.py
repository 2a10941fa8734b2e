"""The adapters' async methods never block the event loop: a ticker task keeps ticking while
they write and read thousands of items."""

from __future__ import annotations

import asyncio

import pytest

from session_store.agents import Session
from session_store.claude import SessionStore


async def with_ticker(work):
    """Runs ``work()`` beside a task that ticks on every turn of the loop; returns how many
    times it ticked during each awaited call of the work."""
    ticks = 0
    stop = False

    async def ticker():
        nonlocal ticks
        while not stop:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    during = []

    async def timed(awaitable):
        before = ticks
        result = await awaitable
        during.append(ticks - before)
        return result

    try:
        await work(timed)
    finally:
        stop = True
        await task
    return during


def items(batch, start):
    out = []
    for n in range(start, start + batch):
        out.append({"role": "user", "content": f"question {n}"})
        out.append({"type": "function_call", "call_id": f"call_{n}", "name": "lookup",
                    "arguments": '{"n": %d}' % n})
        out.append({"type": "function_call_output", "call_id": f"call_{n}", "output": "x" * 200})
        out.append({"role": "assistant", "content": [
            {"type": "output_text", "text": f"answer {n}", "annotations": []}]})
    return out


def test_the_agents_session_does_not_block_the_loop(db):
    session = Session("ticking", db)

    async def work(timed):
        for batch in range(10):
            await timed(session.add_items(items(100, batch * 100)))
            await timed(session.get_items())
            await timed(session.get_items(limit=50))

    during = asyncio.run(with_ticker(work))
    assert len(asyncio.run(session.get_items())) == 4000
    # A call that blocked the loop would see no tick while it ran.
    assert sum(1 for n in during if n > 0) >= len(during) * 3 // 4


def test_the_claude_store_does_not_block_the_loop(db):
    store = SessionStore(db)
    key = {"project_key": "p", "session_id": "ticking"}

    async def work(timed):
        for batch in range(10):
            entries = [{"type": "x", "uuid": f"{batch}-{n}", "n": n} for n in range(300)]
            await timed(store.append(key, entries))
            await timed(store.load(key))
        await timed(store.list_sessions("p"))

    during = asyncio.run(with_ticker(work))
    assert len(asyncio.run(store.load(key))) == 3000
    assert sum(1 for n in during if n > 0) >= len(during) * 3 // 4


def test_many_calls_at_once_and_a_cancelled_one_all_settle(db):
    """Concurrent calls each get their own answer, an error reaches its caller, and a caller
    that gave up leaves the store serving the next calls."""
    from session_store import InvalidInput

    async def work():
        sessions = [Session(f"many-{n}", db) for n in range(40)]
        await asyncio.gather(*(s.add_items(items(1, n)) for n, s in enumerate(sessions)))
        got = await asyncio.gather(*(s.get_items() for s in sessions))
        assert got == [items(1, n) for n in range(40)]
        try:
            await sessions[0].add_items([{"no": "type"}])
        except InvalidInput:
            pass
        else:
            raise AssertionError("a bad item was accepted")
        slow = asyncio.ensure_future(sessions[1].get_items())
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        return await asyncio.gather(*(s.get_items(limit=4) for s in sessions))

    assert asyncio.run(work()) == [items(1, n) for n in range(40)]


EXIT_WHILE_WRITING = """
import asyncio, sys
from session_store.agents import Session
from test_event_loop import items

async def main():
    session = Session("exiting", sys.argv[1])
    task = asyncio.ensure_future(session.add_items(items(2000, 0)))
    await asyncio.sleep(0)
    task.cancel()

asyncio.run(main())
"""


def test_an_interpreter_exiting_while_a_write_runs_waits_for_it(db, tmp_path):
    """A caller that gave up leaves its write running on a worker thread; the interpreter's
    exit waits for it (no crash at finalisation, nothing half-written)."""
    import os
    import subprocess
    import sys

    script = tmp_path / "exit_while_writing.py"
    script.write_text(EXIT_WHILE_WRITING)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(__file__))
    done = subprocess.run([sys.executable, str(script), db], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    # The job was queued before the cancel: it ran to its end before Python went away.
    assert asyncio.run(Session("exiting", db).get_items()) == items(2000, 0)
