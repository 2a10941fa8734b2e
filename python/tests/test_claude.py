"""session_store.claude.SessionStore: the Claude Agent SDK's conformance suite, and Claude
Code transcripts mirrored into sessions of the store as `import --format claude-code` reads
them, whatever the batches."""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from claude_agent_sdk.testing import run_session_store_conformance
from claude_agent_sdk.testing.session_store_conformance import _OPTIONAL_METHODS, _has_optional

from session_store import ClosedStore, InvalidInput, Store
from session_store.claude import SessionStore, store_session_id

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures", "transcripts")
TRANSCRIPTS = [
    "agentcmd/claude/full-session-two.jsonl",
    "agentcmd/claude/full-session-three.jsonl",
    "agentcmd/claude/full-session-five.jsonl",
    "agentcmd/claude/full-session-askuserquestion.jsonl",
    "spotter/short.jsonl",
    "spotter/tool_heavy.jsonl",
    "fasthooks/sample_main_transcript.jsonl",
]
FORMATS = ("anthropic", "openai", "responses", "gemini")


def lines_of(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_the_sdk_conformance_suite_passes_with_nothing_skipped(tmp_path):
    made = []

    def make_store():
        made.append(SessionStore(str(tmp_path / f"store-{len(made)}.db")))
        return made[-1]

    probe = make_store()
    assert all(_has_optional(probe, m, frozenset()) for m in _OPTIONAL_METHODS)
    asyncio.run(run_session_store_conformance(make_store))
    assert len(made) > 14


def mirror(db, name, key, batch):
    store = SessionStore(db)
    lines = lines_of(name)
    outcomes = []
    for start in range(0, len(lines), batch):
        outcomes.append(store.append_sync(key, lines[start:start + batch]))
    return store, lines, outcomes


@pytest.mark.parametrize("name", TRANSCRIPTS)
def test_a_transcript_in_any_batches_is_mirrored_as_the_whole_file_reads(tmp_path, name):
    key = {"project_key": "-home-me-project", "session_id": "s"}
    whole, lines, _ = mirror(str(tmp_path / "whole.db"), name, key, 10**6)
    session = store_session_id(key)
    expected = {fmt: whole.store.export(session, fmt) for fmt in FORMATS}
    assert whole.store.check(session) == []
    assert whole.load_sync(key) == lines
    for batch in (1, 3, 7):
        store, _, outcomes = mirror(str(tmp_path / f"b{batch}.db"), name, key, batch)
        assert store.load_sync(key) == lines
        assert store.store.check(session) == [], batch
        for fmt in FORMATS:
            assert store.store.export(session, fmt) == expected[fmt], (batch, fmt)
        row = next(r for r in store.store.sessions() if r["id"] == session)
        whole_row = next(r for r in whole.store.sessions() if r["id"] == session)
        assert row["title"] == whole_row["title"] and row["title"]
        assert (row["turns"], row["health"]) == (whole_row["turns"], "ok")
        assert "appended" in outcomes


def test_a_message_split_across_batches_is_rewritten_not_duplicated(tmp_path):
    key = {"project_key": "p", "session_id": "split"}
    _, _, outcomes = mirror(str(tmp_path / "one.db"), "spotter/tool_heavy.jsonl", key, 1)
    # One line per content block: a line that extends the last batch's assistant message
    # rewrites that turn; the whole-file comparison above shows the result is the same.
    assert outcomes.count("rewrote") >= 3
    assert outcomes.count("appended") >= 10


def test_subagent_transcripts_are_subkeys_of_their_session(tmp_path):
    store = SessionStore(str(tmp_path / "sub.db"))
    main = {"project_key": "p", "session_id": "258c7280"}
    base = "spotter/258c7280-ae70-4798-800f-63464d01a85d"
    store.append_sync(main, lines_of(base + ".jsonl")[:200])
    for agent in ("agent-a881341", "agent-acompact-fffbd0"):
        sub = {**main, "subpath": f"subagents/{agent}"}
        store.append_sync(sub, lines_of(f"{base}/subagents/{agent}.jsonl"))
        assert store.load_sync(sub) == lines_of(f"{base}/subagents/{agent}.jsonl")
        assert store.store.check(store_session_id(sub)) == []
    assert sorted(asyncio.run(store.list_subkeys(main))) == [
        "subagents/agent-a881341", "subagents/agent-acompact-fffbd0"]
    assert [s["session_id"] for s in asyncio.run(store.list_sessions("p"))] == ["258c7280"]
    assert store.store.check(store_session_id(main)) == []
    asyncio.run(store.delete(main))
    assert store.store.sessions() == []


def test_keys_with_separators_stay_apart(tmp_path):
    store = SessionStore(str(tmp_path / "keys.db"))
    keys = [
        {"project_key": "a:b", "session_id": "c"},
        {"project_key": "a", "session_id": "b:c"},
        {"project_key": "a%3Ab", "session_id": "c"},
        {"project_key": "a", "session_id": "b", "subpath": "c"},
    ]
    for n, key in enumerate(keys):
        store.append_sync(key, [{"type": "x", "n": n}])
    for n, key in enumerate(keys):
        assert store.load_sync(key) == [{"type": "x", "n": n}]
    assert [s["session_id"] for s in store.list_sessions_sync("a")] == ["b:c"]
    assert store.list_subkeys_sync({"project_key": "a", "session_id": "b"}) == ["c"]


@pytest.mark.parametrize("bad", [
    ["not an object"],
    [{"type": "user", "uuid": "u1"}],
    [{"type": "assistant", "message": "not an object"}],
    [{"type": "x", "n": float("nan")}],
])
def test_bad_entries_raise_invalid_input_and_write_nothing(tmp_path, bad):
    store = SessionStore(str(tmp_path / "bad.db"))
    key = {"project_key": "p", "session_id": "s"}
    first = lines_of("spotter/short.jsonl")[:4]
    store.append_sync(key, first)
    before = store.store.sessions()
    with pytest.raises(InvalidInput):
        asyncio.run(store.append(key, [{"type": "x"}, *bad]))
    assert store.load_sync(key) == first
    assert store.store.sessions() == before
    store.close()
    with pytest.raises(ClosedStore):
        asyncio.run(store.load(key))


def test_the_mirror_is_searchable_by_the_store_tools(tmp_path):
    db = str(tmp_path / "m.db")
    store = SessionStore(db)
    key = {"project_key": "p", "session_id": "short"}
    store.append_sync(key, lines_of("spotter/short.jsonl"))
    with Store(db) as plain:
        row = plain.sessions()[0]
        assert row["messages"] > 2 and row["health"] == "ok"
        body = plain.export(row["id"], "anthropic")
        assert body["messages"][0]["role"] == "user"
        assert "claude_agent_sdk" not in json.dumps(body)


def line(kind, uuid, content, message_id=None, **extra):
    """A Claude Code transcript line (an assistant line of the API message `message_id`)."""
    message = {"role": kind, "content": content}
    if kind == "assistant":
        message.update({"id": message_id or f"msg-{uuid}", "model": "claude-sonnet-4-5"})
    return {"type": kind, "uuid": uuid, "sessionId": "s", "timestamp": "2026-01-01T00:00:00Z",
            "message": message, **extra}


def task_call(call_id, prompt):
    return [{"type": "tool_use", "id": call_id, "name": "Task",
             "input": {"description": "look", "prompt": prompt}}]


def sidechain(agent, prompt, answer):
    """A sub-agent's own transcript (its `subagents/agent-*` subpath): every line a sidechain."""
    marks = {"isSidechain": True, "agentId": agent}
    lines = [line("user", f"{agent}-u", prompt, **marks)]
    if answer is not None:
        lines.append(line("assistant", f"{agent}-a", [{"type": "text", "text": answer}],
                          **marks))
    return lines


def test_subagent_subpaths_are_linked_to_the_task_call_that_spawned_them(tmp_path):
    store = SessionStore(str(tmp_path / "s.db"))
    main = {"project_key": "p", "session_id": "s"}
    main_id = store_session_id(main)

    def sub(agent):
        return {**main, "subpath": f"subagents/agent-{agent}"}

    def links():
        return {s["id"]: (s["parent"], s["parent_tool_use_id"], s["state"])
                for s in store.store.subagents(main_id)}

    asyncio.run(store.append(main, [
        line("user", "u1", "find two bugs"),
        # Claude Code writes one line per content block of an API message.
        line("assistant", "a1", task_call("call_a", "look in parser.rs"), message_id="m1"),
        line("assistant", "a2", task_call("call_b", "look in lexer.rs"), message_id="m1"),
    ]))
    # Sub-agent a is answered by its call's result; b's call stays pending; c matches no call.
    asyncio.run(store.append(sub("a"), sidechain("a", "look in parser.rs", None)))
    asyncio.run(store.append(sub("b"), sidechain("b", "look in lexer.rs", "line 4")))
    asyncio.run(store.append(sub("c"), sidechain("c", "something else", "done")))
    asyncio.run(store.append({**main, "subpath": "notes/x"}, [{"type": "x"}]))
    a, b, c = (store_session_id(sub(agent)) for agent in "abc")
    assert links() == {
        a: (main_id, "call_a", "active"),
        b: (main_id, "call_b", "active"),
        c: (main_id, None, "completed"),
    }
    asyncio.run(store.append(sub("a"), sidechain("a", "x", "parser.rs:12")[1:]))
    asyncio.run(store.append(main, [line("user", "u2", [
        {"type": "tool_result", "tool_use_id": "call_a", "content": "parser.rs:12"}])]))
    assert links()[a] == (main_id, "call_a", "completed")
    assert links()[b] == (main_id, "call_b", "active")
    # The main session moving on tombstones b's call: b did not complete.
    asyncio.run(store.append(main, [line("user", "u3", "thanks")]))
    assert links()[b] == (main_id, "call_b", "incomplete")
    assert store.store.subagents() == store.store.subagents(main_id)
    # A sub-agent mirrored before its main session is linked when the main one arrives.
    early = {"project_key": "p", "session_id": "early"}
    early_sub = {**early, "subpath": "subagents/agent-z"}
    asyncio.run(store.append(early_sub, sidechain("z", "go", "went")))
    assert store.store.subagents(store_session_id(early)) == []
    asyncio.run(store.append(early, [line("user", "e1", "start"),
                                     line("assistant", "e2", task_call("call_z", "go"))]))
    assert [(s["id"], s["parent_tool_use_id"], s["state"])
            for s in store.store.subagents(store_session_id(early))] == [
        (store_session_id(early_sub), "call_z", "active")]
    for key in (main, early):
        assert store.store.check(store_session_id(key)) == []


# Transcripts made up line by line, in the shapes where reading only the mirror's last turn
# again could differ from reading the whole transcript.

def _user(uuid, text, **fields):
    return {"type": "user", "uuid": uuid, "isSidechain": False,
            "message": {"role": "user", "content": text}, **fields}


def _assistant(uuid, message_id, block, **fields):
    return {"type": "assistant", "uuid": uuid, "isSidechain": False,
            "message": {"role": "assistant", "id": message_id, "model": "claude-sonnet-4-5",
                        "content": [block]}, **fields}


def _call(call_id):
    return {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": "ls"}}


def _result(uuid, call_id):
    return _user(uuid, [{"type": "tool_result", "tool_use_id": call_id, "content": "a.txt"}])


def _turn(n):
    """A prompt, then one API message whose two calls' lines interleave with their results
    (Claude Code writes one line per block), then the answer."""
    m = f"msg_{n}"
    return [
        _user(f"u{n}", f"question {n}"),
        _assistant(f"a{n}t", m, {"type": "text", "text": "Looking."}),
        _assistant(f"a{n}c1", m, _call(f"c{n}a")),
        _result(f"r{n}a", f"c{n}a"),
        _assistant(f"a{n}c2", m, _call(f"c{n}b")),
        _result(f"r{n}b", f"c{n}b"),
        _assistant(f"a{n}x", f"answer_{n}", {"type": "text", "text": f"Answer {n}."}),
    ]


def _shape(name):
    turns = [line for n in range(6) for line in _turn(n)]
    if name == "plain":
        return turns
    if name == "duplicate_uuids":  # a resumed session writes earlier lines again
        return turns[:21] + turns[7:14] + turns[21:]
    if name == "compaction":
        return turns[:21] + [
            {"type": "system", "subtype": "compact_boundary", "uuid": "cb"},
            _user("cs", "This session is being continued. Summary: six questions.",
                  isCompactSummary=True),
        ] + turns[21:]
    if name == "title":
        return (turns[:10] + [{"type": "custom-title", "customTitle": "Renamed", "sessionId": "s"}]
                + turns[10:30] + [{"type": "summary", "summary": "Legacy", "leafUuid": "x"}]
                + turns[30:])
    if name == "late_lines":  # lines of a turn written after the next prompt
        late = turns[:14] + [turns[20]] + turns[14:20] + turns[21:]
        return late
    if name == "sidechain":  # a sub-agent's lines inside the main log
        side = [dict(line, isSidechain=True, agentId="ag1", uuid="s" + line["uuid"])
                for line in _turn(9)]
        return turns[:7] + side + turns[7:]
    raise ValueError(name)


SHAPES = ["plain", "duplicate_uuids", "compaction", "title", "late_lines", "sidechain"]


def mirrored_messages(db, session):
    """The session's messages as stored, without the entries' own (system) messages."""
    import sqlite3

    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT m.seq, m.turn_index, m.role, m.model, m.compacted, p.kind, p.text,"
            " p.tool_use_id, p.tool_name, p.input, p.is_error, p.provider_metadata"
            " FROM messages m JOIN parts p ON p.message_id = m.id WHERE m.session_id = ?"
            " ORDER BY m.seq, p.ordinal", (session,)).fetchall()
    messages = {}
    for seq, *row in rows:
        messages.setdefault(seq, []).append(row)
    return [parts for parts in messages.values()
            if not all(p[1] == "system" and p[4] == "opaque" for p in parts)]


@pytest.mark.parametrize("shape", SHAPES)
def test_a_mirror_appended_in_batches_equals_the_one_shot_import(tmp_path, shape):
    lines = _shape(shape)
    key = {"project_key": "p", "session_id": shape}
    session = store_session_id(key)
    whole_db = str(tmp_path / "whole.db")
    whole = SessionStore(whole_db)
    whole.append_sync(key, lines)
    expected = mirrored_messages(whole_db, session)
    title = next(r["title"] for r in whole.store.sessions() if r["id"] == session)
    assert expected and title
    for batch in (1, 2, 3, 5, 8):
        db = str(tmp_path / f"b{batch}.db")
        store = SessionStore(db)
        for start in range(0, len(lines), batch):
            store.append_sync(key, lines[start:start + batch])
        assert mirrored_messages(db, session) == expected, batch
        assert store.load_sync(key) == lines
        assert store.store.check(session) == whole.store.check(session)
        row = next(r for r in store.store.sessions() if r["id"] == session)
        assert row["title"] == title, batch
        for fmt in FORMATS:
            assert store.store.export(session, fmt) == whole.store.export(session, fmt)
        appends = -(-len(lines) // batch)
        whole_reads = store.store._native.claude_whole_reads
        assert 1 <= whole_reads <= appends
        if shape == "plain" and batch == 1:
            # Every line after the first: only the last turn is read again.
            assert whole_reads == 1


def test_a_mirror_written_by_another_handle_is_read_whole_again(tmp_path):
    """The cursor holds while the session's last message is this handle's last: another
    writer's append makes the next one read the whole transcript, and the mirror stays
    the one-shot import's."""
    lines = _shape("plain")
    key = {"project_key": "p", "session_id": "two"}
    db = str(tmp_path / "two.db")
    first, second = SessionStore(db), SessionStore(db)
    for n, line in enumerate(lines):
        (first if (n // 5) % 2 == 0 else second).append_sync(key, [line])
    whole_db = str(tmp_path / "whole.db")
    SessionStore(whole_db).append_sync(key, lines)
    session = store_session_id(key)
    assert mirrored_messages(db, session) == mirrored_messages(whole_db, session)
    assert first.load_sync(key) == lines
    # Each run of 5 lines starts with a whole read: the other handle wrote last (or, first,
    # nobody had).
    reads = first.store._native.claude_whole_reads + second.store._native.claude_whole_reads
    assert reads == -(-len(lines) // 5)


def test_a_session_deleted_and_written_again_by_another_handle_is_read_whole(tmp_path):
    """Another handle deletes the session and writes as many lines again (the same messages
    count, the same last seq): this handle's next append still reads the whole transcript."""
    lines = _shape("plain")
    key = {"project_key": "p", "session_id": "again"}
    db = str(tmp_path / "again.db")
    first, second = SessionStore(db), SessionStore(db)
    for line in lines[:14]:
        first.append_sync(key, [line])
    second.delete_sync(key)
    replayed = [dict(line, uuid="x" + line["uuid"]) for line in lines[:14]]
    for line in replayed:
        second.append_sync(key, [line])
    reads = first.store._native.claude_whole_reads
    first.append_sync(key, [lines[14]])
    assert first.store._native.claude_whole_reads == reads + 1
    for line in lines[15:]:
        first.append_sync(key, [line])
    whole_db = str(tmp_path / "whole.db")
    SessionStore(whole_db).append_sync(key, replayed + lines[14:])
    session = store_session_id(key)
    assert mirrored_messages(db, session) == mirrored_messages(whole_db, session)
    assert first.load_sync(key) == replayed + lines[14:]
