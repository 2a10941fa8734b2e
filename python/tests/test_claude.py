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
