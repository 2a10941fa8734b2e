"""A transcript store for the Claude Agent SDK (``claude-agent-sdk``) kept in the session store.

``SessionStore(db)`` implements the SDK's ``SessionStore`` (``append``, ``load``,
``list_sessions``, ``list_session_summaries``, ``delete``, ``list_subkeys``). Each
``(project_key, session_id, subpath)`` is one session of the store, whose id is
``claude:<project_key>:<session_id>[:<subpath>]`` (``%`` and ``:`` escaped as ``%25`` and
``%3A``). Entries are kept verbatim (``load`` gives them back deep-equal); the Claude Code
transcript lines among them also become the session's messages and parts, read the way
``session-store import --format claude-code`` reads a log, and title it, so ``sessions``,
``search``, ``usage``, ``export`` and ``store-repair`` work on what the SDK mirrored. A
``subagents/*`` subpath's session is recorded as a sub-agent of the main session
(``Store.subagents``: parent, the ``Task`` call whose prompt started it, its state), as
``import --format claude-code`` records a sidechain. The async methods run the store's work
on a worker thread (the package's own, :mod:`session_store._worker`).

Example::

    from claude_agent_sdk import ClaudeAgentOptions, query
    from session_store.claude import SessionStore

    options = ClaudeAgentOptions(session_store=SessionStore("sessions.db"))
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, Optional, Union

from . import Store, _dumps, _worker

__all__ = ["SessionStore", "store_session_id"]

_PREFIX = "claude:"
#: The subpaths whose sessions are sub-agents of the main session.
_SUBAGENTS = "subagents/"


def _escape(part: str) -> str:
    return part.replace("%", "%25").replace(":", "%3A")


def _unescape(part: str) -> str:
    return part.replace("%3A", ":").replace("%25", "%")


def store_session_id(key: Mapping[str, Any]) -> str:
    """The id of the store's session that holds ``key``'s entries."""
    parts = [key["project_key"], key["session_id"]]
    subpath = key.get("subpath")
    if subpath:
        parts.append(subpath)
    return _PREFIX + ":".join(_escape(str(p)) for p in parts)


class SessionStore:
    """The Claude Agent SDK ``SessionStore`` over the session store."""

    def __init__(self, db: Union[str, "os.PathLike[str]", Store]) -> None:
        self._store = db if isinstance(db, Store) else Store(db)

    @property
    def store(self) -> Store:
        """The store the entries are kept in."""
        return self._store

    def close(self) -> None:
        """Closes the store."""
        self._store.close()

    # Blocking halves: each call into the store releases the GIL.

    def _ids_under(self, prefix: str) -> List[str]:
        return [i for i in self._store._native.sessions_with_prefix(prefix) if i.startswith(prefix)]

    def append_sync(self, key: Mapping[str, Any], entries: List[Dict[str, Any]]) -> str:
        """:meth:`append` without the event loop; what it did to the messages."""
        if not entries:
            return "unchanged"
        text = _dumps(list(entries), "the entries")
        store_id = store_session_id(key)
        outcome = self._store._native.claude_append(store_id, text)
        self._link_subagents(key, store_id)
        return outcome

    def _link_subagents(self, key: Mapping[str, Any], store_id: str) -> None:
        """A ``subagents/*`` subpath's session is a sub-agent of its main session (parent,
        spawning call, state): linked when either is appended to, since the main session's
        answer to the spawning call changes the state."""
        native = self._store._native
        subpath = key.get("subpath")
        if subpath:
            main = store_session_id({**key, "subpath": None})
            if str(subpath).startswith(_SUBAGENTS) and native.has_session(main):
                native.claude_link_subagent(main, store_id)
            return
        prefix = store_id + ":"
        children = [c for c in self._ids_under(prefix)
                    if _unescape(c[len(prefix):]).startswith(_SUBAGENTS)]
        if not children:
            return
        # A child whose spawning call is known and answered is settled: only the others can
        # change with what the main session appended.
        settled = {s["id"] for s in json.loads(native.subagents(store_id))
                   if s["parent_tool_use_id"] is not None and s["state"] != "active"}
        for child in children:
            if child not in settled:
                native.claude_link_subagent(store_id, child)

    def load_sync(self, key: Mapping[str, Any]) -> Optional[List[Dict[str, Any]]]:
        """:meth:`load` without the event loop."""
        text = self._store._native.claude_load(store_session_id(key))
        return None if text is None else json.loads(text)

    def list_sessions_sync(self, project_key: str) -> List[Dict[str, Any]]:
        """:meth:`list_sessions` without the event loop."""
        prefix = _PREFIX + _escape(project_key) + ":"
        listed = []
        for store_id in self._ids_under(prefix):
            rest = store_id[len(prefix):]
            if ":" in rest:  # a subpath
                continue
            mtime = self._store._native.updated_at_ms(store_id)
            if mtime is not None:
                listed.append({"session_id": _unescape(rest), "mtime": mtime})
        return listed

    def list_session_summaries_sync(self, project_key: str) -> List[Dict[str, Any]]:
        """:meth:`list_session_summaries` without the event loop: the SDK's own fold over
        each session's entries, stamped with the session's storage time."""
        from claude_agent_sdk._internal.session_summary import fold_session_summary

        summaries = []
        for listed in self.list_sessions_sync(project_key):
            key = {"project_key": project_key, "session_id": listed["session_id"]}
            entries = self.load_sync(key)
            if entries is None:
                continue
            summary = fold_session_summary(None, key, entries)
            summary["mtime"] = listed["mtime"]
            summaries.append(summary)
        return summaries

    def delete_sync(self, key: Mapping[str, Any]) -> None:
        """:meth:`delete` without the event loop."""
        store_id = store_session_id(key)
        doomed = [store_id]
        if not key.get("subpath"):
            doomed += self._ids_under(store_id + ":")
        for one in doomed:
            self._store.delete_session(one)

    def list_subkeys_sync(self, key: Mapping[str, Any]) -> List[str]:
        """:meth:`list_subkeys` without the event loop."""
        prefix = store_session_id({**key, "subpath": None}) + ":"
        return [_unescape(i[len(prefix):]) for i in self._ids_under(prefix)]

    # The SDK's protocol.

    async def append(self, key: Mapping[str, Any], entries: List[Dict[str, Any]]) -> None:
        """Keeps ``entries`` after the key's earlier ones, in one transaction."""
        await _worker.run(self.append_sync, key, entries)

    async def load(self, key: Mapping[str, Any]) -> Optional[List[Dict[str, Any]]]:
        """Every entry of ``key`` in order; None for a key never written."""
        return await _worker.run(self.load_sync, key)

    async def list_sessions(self, project_key: str) -> List[Dict[str, Any]]:
        """The project's sessions (no subpaths), with their mtime in epoch milliseconds."""
        return await _worker.run(self.list_sessions_sync, project_key)

    async def list_session_summaries(self, project_key: str) -> List[Dict[str, Any]]:
        """The project's session summaries (no subpaths)."""
        return await _worker.run(self.list_session_summaries_sync, project_key)

    async def delete(self, key: Mapping[str, Any]) -> None:
        """Deletes the key's session; a main key takes its subpaths along."""
        await _worker.run(self.delete_sync, key)

    async def list_subkeys(self, key: Mapping[str, Any]) -> List[str]:
        """The subpaths under the key's session."""
        return await _worker.run(self.list_subkeys_sync, key)
