"""The package on PostgreSQL: ``Store``, ``agents.Session`` and ``claude.SessionStore`` opened on
the URL in ``SESSION_STORE_TEST_PG`` (``.ci/run`` sets it; unset, every test here is skipped and
says why). The database is shared with other tests and runs: each test works on sessions (and
Claude project keys) of its own, named with a fresh random tag, and deletes them at the end."""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest
from claude_agent_sdk.testing import run_session_store_conformance

from session_store import InvalidInput, Refused, Store, UnknownSession
from session_store.agents import Session
from session_store.claude import SessionStore, store_session_id

URL = os.environ.get("SESSION_STORE_TEST_PG", "").strip()

pytestmark = pytest.mark.skipif(
    not URL,
    reason="SESSION_STORE_TEST_PG is unset: the PostgreSQL tests are skipped "
    "(README, \"Tests against PostgreSQL\")",
)

FORMATS = ("anthropic", "openai", "responses", "gemini")


def tag() -> str:
    """A name no other test or run uses."""
    return f"pytest-{uuid.uuid4().hex}"


@pytest.fixture
def pg():
    """A store on the PostgreSQL URL, closed after the test."""
    with Store(URL) as store:
        yield store


def test_store_operations_on_postgres(pg):
    session = pg.create_session()
    try:
        pg.append(session, {"role": "user", "content": "list /tmp"})
        pg.append(session, {"role": "assistant", "content": [
            {"type": "tool_use", "id": f"{session}-call", "name": "ls", "input": {"p": "/tmp"}}]})
        with pytest.raises(Refused) as refused:
            pg.append(session, {"role": "user", "content": "never mind"})
        assert refused.value.rule == "dangling_tool_use"
        assert refused.value.ids == [f"{session}-call"]
        assert pg.cancel_pending(session, "stopped") == [f"{session}-call"]
        pg.append(session, {"role": "user", "content": "never mind"})
        assert pg.check(session) == []
        for format in FORMATS:
            assert pg.export(session, format)
        rows = [r for r in pg.sessions() if r["id"] == session]
        assert len(rows) == 1 and rows[0]["messages"] == 4 and rows[0]["health"] == "ok"
        with pytest.raises(InvalidInput):
            pg.append(session, {"role": "user"})
        with pytest.raises(UnknownSession):
            pg.check(tag())
    finally:
        assert pg.delete_session(session)
    assert not pg.delete_session(session)


def test_agents_session_on_postgres(pg):
    name = tag()
    session = Session(name, pg)
    try:
        items = []
        for n in range(6):
            items += [
                {"role": "user", "content": f"question {n}"},
                {"type": "function_call", "call_id": f"{name}-{n}", "name": "ls",
                 "arguments": '{"n": %d}' % n},
                {"type": "function_call_output", "call_id": f"{name}-{n}", "output": "a b"},
                {"role": "assistant", "content": [
                    {"type": "output_text", "text": f"answer {n}", "annotations": []}]},
            ]
        asyncio.run(session.add_items(items[:12]))
        asyncio.run(session.add_items(items[12:]))
        assert asyncio.run(session.get_items()) == items
        for limit in range(1, len(items) + 2):
            window = asyncio.run(session.get_items(limit=limit))
            assert window == items[len(items) - len(window):]
            assert len(window) <= limit
            assert not window or window[0].get("type") != "function_call_output"
        assert asyncio.run(session.pop_item()) == items[-1]
        assert asyncio.run(session.get_items()) == items[:-1]
        assert pg.check(name) == []
        asyncio.run(session.clear_session())
        assert asyncio.run(session.get_items()) == []
    finally:
        pg.delete_session(name)


def test_claude_session_store_on_postgres(pg):
    project = tag()
    store = SessionStore(pg)
    key = {"project_key": project, "session_id": "s1"}
    sub = {**key, "subpath": "subagents/agent-1"}
    entries = [
        {"type": "user", "uuid": "u1", "sessionId": "s1", "timestamp": "2026-01-01T00:00:00Z",
         "message": {"role": "user", "content": "hello"}},
        {"type": "assistant", "uuid": "a1", "sessionId": "s1",
         "timestamp": "2026-01-01T00:00:01Z",
         "message": {"id": "m1", "role": "assistant", "model": "claude-sonnet-4-5",
                     "content": [{"type": "text", "text": "hi"}]}},
    ]
    try:
        asyncio.run(store.append(key, entries[:1]))
        asyncio.run(store.append(key, entries[1:]))
        asyncio.run(store.append(sub, [{"type": "x", "n": 1}]))
        assert asyncio.run(store.load(key)) == entries
        assert asyncio.run(store.load({**key, "session_id": "none"})) is None
        assert [s["session_id"] for s in asyncio.run(store.list_sessions(project))] == ["s1"]
        assert asyncio.run(store.list_subkeys(key)) == ["subagents/agent-1"]
        # A `subagents/*` subpath is a sub-agent of the main session (no call spawned it).
        assert pg.subagents(store_session_id(key)) == [{
            "id": store_session_id(sub), "parent": store_session_id(key),
            "parent_tool_use_id": None, "state": "incomplete"}]
        # The transcript lines are the store's messages too.
        exported = pg.export(store_session_id(key), "anthropic")
        assert [m["role"] for m in exported["messages"]] == ["user", "assistant"]
        asyncio.run(store.delete(key))
        assert asyncio.run(store.load(key)) is None
        assert asyncio.run(store.load(sub)) is None
    finally:
        for one in (key, sub):
            pg.delete_session(store_session_id(one))


class Tagged(SessionStore):
    """A SessionStore whose project keys carry a tag of its own, so that the conformance
    suite's fixed keys (``proj``, ``A``, ``B``) name sessions no other store in the shared
    database has."""

    def __init__(self, db, project_tag):
        super().__init__(db)
        self.project_tag = project_tag

    def _tagged(self, key):
        return {**key, "project_key": f"{self.project_tag}/{key['project_key']}"}

    def append_sync(self, key, entries):
        return super().append_sync(self._tagged(key), entries)

    def load_sync(self, key):
        return super().load_sync(self._tagged(key))

    def list_sessions_sync(self, project_key):
        return super().list_sessions_sync(f"{self.project_tag}/{project_key}")

    def delete_sync(self, key):
        return super().delete_sync(self._tagged(key))

    def list_subkeys_sync(self, key):
        return super().list_subkeys_sync(self._tagged(key))


def test_the_sdk_conformance_suite_passes_on_postgres(pg):
    made = []

    def make_store():
        made.append(Tagged(pg, tag()))
        return made[-1]

    try:
        asyncio.run(run_session_store_conformance(make_store))
        assert len(made) > 14
    finally:
        for store in made:
            prefix = "claude:" + store.project_tag.replace("%", "%25").replace(":", "%3A")
            for session in pg._native.sessions_with_prefix(prefix):
                pg.delete_session(session)
