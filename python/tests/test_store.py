"""session_store.Store: the library's write path, export, check and listing from Python, and
bad input raising typed exceptions with nothing written."""

from __future__ import annotations

import sys
import threading

import pytest

import session_store
from session_store import ClosedStore, Error, InvalidInput, Refused, Store, UnknownSession

CALL = {"role": "assistant", "content": [
    {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"path": "/tmp"}},
]}
RESULT = {"role": "user", "content": [
    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a b"},
]}


def deep(levels):
    """A value nested `levels` lists deep."""
    value = []
    for _ in range(levels):
        value = [value]
    return value


def rows_of(store: Store, session: str) -> int:
    return next(r["messages"] for r in store.sessions() if r["id"] == session)


def test_a_tool_turn_round_trips_through_every_export_format(store):
    session = store.create_session()
    store.append(session, {"role": "user", "content": "What is in /tmp?"})
    store.append(session, CALL)
    store.append(session, RESULT)
    store.append(session, {"role": "assistant", "content": "a and b"})
    assert store.check(session) == []
    body = store.export(session, "anthropic")
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user", "assistant"]
    assert body["messages"][2]["content"][0]["tool_use_id"] == "toolu_1"
    assert [m["role"] for m in store.export(session, "openai")["messages"]] == [
        "user", "assistant", "tool", "assistant"]
    kinds = [i.get("type") for i in store.export(session, "responses")["input"]]
    assert "function_call" in kinds and "function_call_output" in kinds
    assert len(store.export(session, "gemini")["contents"]) == 4


def test_tool_results_in_a_user_message_become_a_tool_message_then_the_text(store):
    session = store.create_session()
    store.append(session, {"role": "user", "content": "go"})
    store.append(session, CALL)
    store.append(session, {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a b"},
        {"type": "text", "text": "and now?"},
    ]})
    row = next(r for r in store.sessions() if r["id"] == session)
    assert (row["messages"], row["turns"], row["health"]) == (4, 2, "ok")


@pytest.mark.parametrize("refused, rule, ids", [
    ({"role": "user", "content": "never mind"}, "dangling_tool_use", ["toolu_1"]),
    ({"role": "assistant", "content": "another"}, "dangling_tool_use", ["toolu_1"]),
    ({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "nope", "content": "x"}]},
     "orphan_tool_result", ["nope"]),
    ({"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}}]},
     "dangling_tool_use", ["toolu_1"]),
    # An id longer than every engine keeps (MAX_ID_BYTES, 1,024 bytes), before any pairing.
    ({"role": "assistant", "content": [
        {"type": "tool_use", "id": "t" * 1025, "name": "ls", "input": {}}]},
     "id_too_long", []),
])
def test_a_refused_write_names_the_rule_and_ids_and_writes_nothing(store, refused, rule, ids):
    session = store.create_session()
    store.append(session, {"role": "user", "content": "go"})
    store.append(session, CALL)
    before = store.export(session, "anthropic")
    with pytest.raises(Refused) as raised:
        store.append(session, refused)
    assert isinstance(raised.value, Error)
    assert (raised.value.rule, raised.value.ids) == (rule, ids)
    assert rule in str(raised.value)
    assert store.export(session, "anthropic") == before
    assert rows_of(store, session) == 2


def test_a_reused_call_id_is_refused_as_a_duplicate(store):
    session = store.create_session()
    store.append(session, {"role": "user", "content": "go"})
    store.append(session, CALL)
    store.append(session, RESULT)
    with pytest.raises(Refused) as raised:
        store.append(session, CALL)
    assert (raised.value.rule, raised.value.ids) == ("duplicate_tool_use_id", ["toolu_1"])
    assert rows_of(store, session) == 3


def test_cancel_pending_tombstones_the_calls_then_the_turn_goes_on(store):
    session = store.create_session()
    store.append(session, {"role": "user", "content": "go"})
    store.append(session, CALL)
    assert next(r for r in store.sessions() if r["id"] == session)["pending_tool_use_ids"] == [
        "toolu_1"]
    assert store.cancel_pending(session, reason="user pressed stop") == ["toolu_1"]
    assert store.cancel_pending(session) == []
    store.append(session, {"role": "user", "content": "never mind"})
    tombstone = store.export(session, "anthropic")["messages"][2]["content"][0]
    assert tombstone["is_error"] is True and "user pressed stop" in tombstone["content"]
    assert store.check(session) == []


@pytest.mark.parametrize("bad", [
    "not a dict",
    ["a", "list"],
    {"content": "no role"},
    {"role": "user"},
    {"role": "robot", "content": "hi"},
    {"role": "user", "content": 5},
    {"role": "user", "content": [{"no": "type"}]},
    {"role": "assistant", "content": [{"type": "tool_use", "name": "ls", "input": {}}]},
    {"role": "assistant", "content": [
        {"type": "tool_result", "tool_use_id": "x", "content": "y"}]},
    {"role": "user", "content": float("nan")},
    {"role": "user", "content": {1, 2}},
    {"role": "user", "content": [{"type": "text", "text": "deep", "x": deep(5000)}]},
    {"role": "user", "content": [{"type": "text", "text": "deep", "x": deep(200)}]},
])
def test_what_is_not_a_message_raises_invalid_input_and_writes_nothing(store, bad):
    session = store.create_session()
    store.append(session, {"role": "user", "content": "hi"})
    with pytest.raises(Error) as raised:
        store.append(session, bad)
    assert type(raised.value) in (InvalidInput, Refused)
    assert rows_of(store, session) == 1


def test_unknown_sessions_and_formats_raise_typed_errors(store):
    for call in (
        lambda: store.append("nope", {"role": "user", "content": "hi"}),
        lambda: store.export("nope", "anthropic"),
        lambda: store.check("nope"),
        lambda: store.cancel_pending("nope"),
    ):
        with pytest.raises(UnknownSession):
            call()
    session = store.create_session()
    with pytest.raises(InvalidInput):
        store.export(session, "cobol")
    assert store.sessions()[0]["messages"] == 0


def test_a_closed_store_raises_closed_store_for_every_call(db):
    store = Store(db)
    session = store.create_session()
    store.close()
    store.close()
    assert store.closed
    for call in (
        store.create_session,
        store.sessions,
        lambda: store.append(session, {"role": "user", "content": "hi"}),
        lambda: store.export(session, "anthropic"),
        lambda: store.check(session),
        lambda: store.cancel_pending(session),
    ):
        with pytest.raises(ClosedStore):
            call()
    with Store(db) as reopened:
        assert reopened.sessions()[0]["messages"] == 0


def test_a_file_that_is_not_a_database_is_an_error(tmp_path):
    path = tmp_path / "not.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(Error):
        Store(str(path))
    assert path.read_bytes() == b"this is not sqlite" * 100


def test_exceptions_form_one_family():
    for kind in (Refused, InvalidInput, UnknownSession, ClosedStore):
        assert issubclass(kind, session_store.Error)
    assert issubclass(session_store.Error, Exception)


def test_store_calls_release_the_gil(store):
    """While the store works, another Python thread runs. With a long switch interval Python
    hands the GIL to the other thread only when the running one lets it go, so the counter
    moves during a call only if the call released the GIL."""
    session = store.create_session()
    stop = threading.Event()
    counts = []

    def count():
        while not stop.is_set():
            counts.append(None)

    big = {"role": "user", "content": "x" * 1_000_000}
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.2)
    thread = threading.Thread(target=count)
    thread.start()
    try:
        progressed = 0
        for i in range(10):
            if i:
                store.append(session, {"role": "assistant", "content": "ok"})
            before = len(counts)
            store.append(session, big)
            progressed += len(counts) > before
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(interval)
    # Holding the GIL, no call could let the counter move at all.
    assert progressed >= 1
