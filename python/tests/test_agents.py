"""session_store.agents.Session under real Runner.run loops of the OpenAI Agents SDK, with a
scripted model (no network): what the SDK stores comes back deep-equal, the store's own check
and exports accept it, and limits never cut a call from its output."""

from __future__ import annotations

import asyncio
import copy
import json
import multiprocessing
import sqlite3

import pytest
from agents import Agent, Runner, function_tool
from agents.memory import SessionSettings

import poppers as poppers_module
from fake_model import ScriptedModel, call, text
from session_store import ClosedStore, InvalidInput, Refused, Store
from session_store.agents import Session

FORMATS = ("anthropic", "openai", "responses", "gemini")


class RecordingSession(Session):
    """Our Session, remembering every batch the SDK added (deep copies)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.added = []

    async def add_items(self, items):
        self.added.extend(json.loads(json.dumps(items, default=lambda o: o.model_dump(
            mode="json", exclude_unset=True))))
        await super().add_items(items)


@function_tool
def add(a: int, b: int) -> str:
    """Adds two numbers."""
    return str(a + b)


def agent_with(model, *tools):
    return Agent(name="calc", instructions="Use the tools.", model=model,
                 tools=list(tools) or [add])


def assert_valid_input(items):
    """Every output follows its call; every call is answered before the next user item."""
    called, answered = [], set()
    for item in items:
        kind = item.get("type", "message")
        if kind == "function_call":
            called.append(item["call_id"])
        elif kind == "function_call_output":
            assert item["call_id"] in called, f"output {item['call_id']} without its call"
            answered.add(item["call_id"])
        elif item.get("role") == "user":
            assert set(called) <= answered, f"calls {set(called) - answered} unanswered"


def assert_store_accepts(store: Store, session_id: str):
    assert store.check(session_id) == []
    for fmt in FORMATS:
        store.export(session_id, fmt)


def test_single_and_parallel_tool_calls_come_back_deep_equal(db):
    model = ScriptedModel(
        [call("add", a=1, b=2)],
        [call("add", a=2, b=3), call("add", a=4, b=5)],
        [text("3, 5 and 9")],
    )
    session = RecordingSession("calc-1", db)
    result = asyncio.run(Runner.run(agent_with(model), "add things", session=session))
    assert result.final_output == "3, 5 and 9"
    items = asyncio.run(session.get_items())
    assert items == session.added
    kinds = [i.get("type", "message") for i in items]
    assert kinds.count("function_call") == 3 and kinds.count("function_call_output") == 3
    for model_input in model.inputs:
        assert_valid_input(model_input)
    assert_store_accepts(session.store, "calc-1")
    body = session.store.export("calc-1", "responses")
    assert [i["call_id"] for i in body["input"] if i.get("type") == "function_call_output"] == [
        i["call_id"] for i in items if i.get("type") == "function_call_output"]
    row = next(r for r in session.store.sessions() if r["id"] == "calc-1")
    assert (row["turns"], row["pending"], row["health"]) == (1, 0, "ok")


def test_a_second_run_sees_the_first_runs_items(db):
    model = ScriptedModel([call("add", a=1, b=1)], [text("2")], [text("still 2")])
    session = RecordingSession("calc-2", db)
    asyncio.run(Runner.run(agent_with(model), "1+1?", session=session))
    asyncio.run(Runner.run(agent_with(model), "and again?", session=session))
    second_input = model.inputs[-1]
    assert [i.get("call_id") for i in second_input if i.get("type") == "function_call"] == [
        i["call_id"] for i in session.added if i.get("type") == "function_call"]
    assert asyncio.run(session.get_items()) == session.added
    assert_store_accepts(session.store, "calc-2")


def test_a_run_cancelled_while_its_tool_runs_then_resumed(db):
    started = asyncio.Event()

    @function_tool
    async def slow(seconds: int) -> str:
        """Waits."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    async def scenario():
        model = ScriptedModel([call("slow", seconds=60)])
        session = RecordingSession("slow-1", db)
        agent = agent_with(model, slow, add)
        running = asyncio.create_task(Runner.run(agent, "wait a minute", session=session))
        await started.wait()
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        assert_store_accepts(session.store, "slow-1")
        model.add([call("add", a=2, b=2)], [text("4")])
        result = await Runner.run(agent, "never mind, 2+2?", session=session)
        assert result.final_output == "4"
        for model_input in model.inputs:
            assert_valid_input(model_input)
        items = await session.get_items()
        assert_valid_input(items)
        assert [i for i in items if not is_tombstone(i)] == session.added
        assert_store_accepts(session.store, "slow-1")
        session.close()

    asyncio.run(scenario())


def is_tombstone(item):
    return item.get("type") == "function_call_output" and str(item.get("output", "")).startswith(
        "Tool call cancelled before it returned a result")


def test_calls_a_crashed_run_left_unanswered_get_tombstones_when_the_next_run_starts(db):
    crashed = Session("crash-1", db)
    left = [
        {"role": "user", "content": "list /tmp"},
        {"type": "function_call", "call_id": "call_a", "name": "add", "arguments": "{}"},
        {"type": "function_call", "call_id": "call_b", "name": "add", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_a", "output": "1"},
    ]
    asyncio.run(crashed.add_items(left))
    assert crashed.store.sessions()[0]["pending_tool_use_ids"] == ["call_b"]
    model = ScriptedModel([text("fresh start")])
    asyncio.run(Runner.run(agent_with(model), "start over", session=crashed))
    assert_valid_input(model.inputs[0])
    items = asyncio.run(crashed.get_items())
    assert items[:4] == left
    assert is_tombstone(items[4]) and items[4]["call_id"] == "call_b"
    assert items[5]["content"] == "start over"
    assert_store_accepts(crashed.store, "crash-1")


def conversation(db, session_id="limits"):
    model = ScriptedModel(
        [text("hello")],
        [call("add", a=1, b=2)], [call("add", a=3, b=4), call("add", a=5, b=6)], [text("done")],
        [call("add", a=7, b=8)], [text("15")],
    )
    session = RecordingSession(session_id, db)
    agent = agent_with(model)
    for prompt in ("hi", "sum some", "one more"):
        asyncio.run(Runner.run(agent, prompt, session=session))
    return session


def valid_windows(items):
    """Start indexes of the suffixes that cut no call from its output."""
    starts = []
    for start in range(len(items) + 1):
        window = items[start:]
        calls = {i["call_id"] for i in window if i.get("type") == "function_call"}
        outputs = {i["call_id"] for i in window if i.get("type") == "function_call_output"}
        all_outputs = {i["call_id"] for i in items if i.get("type") == "function_call_output"}
        if outputs <= calls and calls & all_outputs <= outputs:
            starts.append(start)
    return starts


def test_every_limit_returns_the_longest_window_that_cuts_no_call_from_its_output(db):
    session = conversation(db)
    items = asyncio.run(session.get_items())
    assert items == session.added
    valid = valid_windows(items)
    for k in range(len(items) + 3):
        expected = items[min(s for s in valid if len(items) - s <= k):]
        assert asyncio.run(session.get_items(limit=k)) == expected, k
        session.session_settings = SessionSettings(limit=k)
        assert asyncio.run(session.get_items()) == expected, k
        session.session_settings = SessionSettings()


def rewrite_metadata(db, session_id, change):
    """Rewrites every stored part's provider_metadata of the session as another writer
    might: ``change(text, ordinal_in_session)`` gives the new text (or the same)."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT p.id, p.provider_metadata FROM parts p JOIN messages m"
            " ON m.id = p.message_id WHERE m.session_id = ? ORDER BY m.seq, p.ordinal",
            (session_id,)).fetchall()
        for index, (part_id, text) in enumerate(rows):
            if text is not None:
                conn.execute("UPDATE parts SET provider_metadata = ? WHERE id = ?",
                             (change(text, index), part_id))


@pytest.mark.parametrize("shape", ["spaced", "item_first", "key_after_item", "nested_decoy"])
def test_items_in_metadata_another_writer_laid_out_come_back_the_same(db, shape):
    """The items are found by the shape the adapter writes; metadata that is still JSON in
    another layout (spaces, key order, a key after the item, a decoy of the adapter's keys
    nested before it) gives every window the same items."""
    session = conversation(db, "layout")
    items = asyncio.run(session.get_items())
    windows = {k: asyncio.run(session.get_items(limit=k)) for k in range(len(items) + 2)}

    def change(text, _index):
        value = json.loads(text)
        kept = value.pop("openai_agents")
        if shape == "spaced":
            return json.dumps({**value, "openai_agents": kept}, indent=1)
        if shape == "item_first":
            return json.dumps({"openai_agents": kept, **value}, separators=(",", ":"))
        if shape == "key_after_item":
            return json.dumps({**value, "openai_agents": {**kept, "note": {"x": []}}},
                              separators=(",", ":"))
        decoy = {"openai_agents": {"item": {"role": "user", "content": "decoy"}}}
        return json.dumps({"z": decoy, **value, "openai_agents": kept}, separators=(",", ":"))

    rewrite_metadata(db, "layout", change)
    assert asyncio.run(session.get_items()) == items
    for k, window in windows.items():
        assert asyncio.run(session.get_items(limit=k)) == window, k


@pytest.mark.parametrize("broken", ["cut", "not_json", "extra_value"])
def test_a_part_whose_metadata_another_writer_broke_is_left_out(db, broken):
    """A part whose metadata is no longer JSON keeps no item: the others come back, and the
    windows still cut no call from its output."""
    session = conversation(db, "broken")
    items = asyncio.run(session.get_items())
    victim = 0  # the first user item

    def change(text, index):
        if index != victim:
            return text
        if broken == "cut":
            return text[:-1]
        if broken == "not_json":
            return "{openai_agents: item}"
        return text[:-2] + ',{"role":"user","content":"smuggled"}}}'

    rewrite_metadata(db, "broken", change)
    rest = items[1:]
    assert asyncio.run(session.get_items()) == rest
    for k in range(len(rest) + 2):
        window = asyncio.run(session.get_items(limit=k))
        assert window == rest[len(rest) - len(window):], k
        assert len(window) <= k
        assert_valid_input(window)


@pytest.mark.parametrize("k", range(1, 12))
def test_runs_with_session_settings_limit_send_valid_input(db, k):
    model = ScriptedModel(
        [call("add", a=1, b=2), call("add", a=3, b=4)], [text("3 and 7")],
        [call("add", a=5, b=6)], [text("11")],
    )
    session = RecordingSession(f"limit-{k}", db, session_settings=SessionSettings(limit=k))
    agent = agent_with(model)
    asyncio.run(Runner.run(agent, "two sums", session=session))
    asyncio.run(Runner.run(agent, "one more", session=session))
    for model_input in model.inputs:
        assert_valid_input(model_input)
    assert asyncio.run(session.get_items(limit=10_000)) == session.added
    assert_store_accepts(session.store, f"limit-{k}")


def test_pop_item_and_clear_session(db):
    session = conversation(db, "pop")
    items = asyncio.run(session.get_items())
    popped = asyncio.run(session.pop_item())
    assert popped == items[-1]
    assert asyncio.run(session.get_items()) == items[:-1]
    for _ in range(3):
        asyncio.run(session.pop_item())
    assert asyncio.run(session.get_items()) == items[:-4]
    assert_store_accepts(session.store, "pop")
    asyncio.run(session.clear_session())
    assert asyncio.run(session.get_items()) == []
    assert asyncio.run(session.pop_item()) is None
    asyncio.run(session.add_items([{"role": "user", "content": "again"}]))
    assert asyncio.run(session.get_items()) == [{"role": "user", "content": "again"}]


def popper_turn(n):
    """A turn of four items; every third turn's call is left unanswered (a tombstone)."""
    call_item = {"type": "function_call", "call_id": f"call_{n}", "name": "ls",
                 "arguments": '{"n": %d}' % n}
    items = [{"role": "user", "content": f"question {n}"}, call_item]
    if n % 3:
        items.append({"type": "function_call_output", "call_id": f"call_{n}", "output": "x"})
    items.append({"role": "assistant", "content": [
        {"type": "output_text", "text": f"answer {n}", "annotations": []}]})
    return items


@pytest.mark.parametrize("poppers", [2, 3])
def test_concurrent_poppers_never_pop_an_item_twice_and_lose_none(db, poppers):
    """Processes popping one session at once: each item comes out exactly once."""
    session = Session("popped", db)
    for n in range(25):
        session.add_items_sync(popper_turn(n))
    stored = [json.dumps(i, sort_keys=True) for i in session.get_items_sync()]
    # 25 turns of 4 items, 9 calls unanswered, 8 of them tombstoned (the last is pending).
    assert len(stored) == 25 * 4 - 9 + 8
    context = multiprocessing.get_context("spawn")
    start, out = context.Event(), context.Queue()
    workers = [context.Process(target=poppers_module.pop_all, args=(db, "popped", start, out))
               for _ in range(poppers)]
    for worker in workers:
        worker.start()
    start.set()
    results = [out.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    popped = [item for result in results for item in result]
    assert sorted(popped) == sorted(stored)
    assert len(set(popped)) == len(popped)
    # Each popper saw the items newest first.
    order = {item: index for index, item in enumerate(stored)}
    for result in results:
        assert [order[i] for i in result] == sorted((order[i] for i in result), reverse=True)
    assert session.get_items_sync() == []
    assert session.store.check("popped") == []


@pytest.mark.parametrize("bad, error", [
    ([{"no": "type"}], InvalidInput),
    ([{"type": "function_call", "name": "f", "arguments": "{}"}], InvalidInput),
    ([{"type": "function_call", "call_id": "c", "name": "f", "arguments": "not json"}],
     InvalidInput),
    (["a string"], InvalidInput),
    ([{"type": "function_call_output", "call_id": "nobody", "output": "x"}], Refused),
    ([{"role": "user", "content": float("inf")}], InvalidInput),
])
def test_bad_items_raise_typed_errors_and_write_nothing(db, bad, error):
    session = Session("bad", db)
    asyncio.run(session.add_items([{"role": "user", "content": "hi"}]))
    with pytest.raises(error):
        asyncio.run(session.add_items([{"role": "user", "content": "more"}, *bad]))
    assert asyncio.run(session.get_items()) == [{"role": "user", "content": "hi"}]
    session.close()
    with pytest.raises(ClosedStore):
        asyncio.run(session.get_items())


def test_a_session_id_longer_than_every_engine_keeps_raises_invalid_input(db):
    store = Store(db)
    session = Session("s" * 1025, store)
    with pytest.raises(InvalidInput, match="1025 bytes"):
        asyncio.run(session.add_items([{"role": "user", "content": "hi"}]))
    assert store.sessions() == []


def test_sessions_share_one_store_and_the_cli_rows_see_them(db):
    store = Store(db)
    for name in ("a", "b"):
        asyncio.run(Session(name, store).add_items([{"role": "user", "content": name}]))
    assert sorted(r["id"] for r in store.sessions()) == ["a", "b"]
    assert copy.deepcopy(asyncio.run(Session("a", store).get_items())) == [
        {"role": "user", "content": "a"}]
