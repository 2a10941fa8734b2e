"""A session for the OpenAI Agents SDK (``openai-agents``) kept in the session store.

``Session(session_id, db)`` implements the SDK's ``Session`` protocol. The Responses input
items the SDK adds become messages and parts of the store's session ``session_id`` (created
on the first write), so ``session-store sessions/show/export/search`` and ``store-repair``
see them; each item is also kept verbatim, so ``get_items`` gives back what went in
(deep-equal). The store adds one thing: a function call still unanswered when the next user
item arrives is answered first with a tombstone ``function_call_output`` (the history stays
valid, and the run goes on). ``get_items(limit)`` returns the latest items that fit in
``limit`` without cutting a call from its output. The async methods run the store's work on
a worker thread (the package's own, :mod:`session_store._worker`), never on the event loop.

Example::

    from agents import Agent, Runner
    from session_store.agents import Session

    session = Session("support-42", "sessions.db")
    result = await Runner.run(agent, "What is in /tmp?", session=session)
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Union

from . import Store, _dumps, _worker

if TYPE_CHECKING:  # pragma: no cover
    from agents.memory.session_settings import SessionSettings

__all__ = ["Session"]


def _item_json(value: Any) -> Any:
    """What ``json.dumps`` meets besides plain data: the SDK's pydantic items."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_unset=True)
    raise TypeError(f"an item of type {type(value).__name__} is not JSON")


def _default_settings() -> Optional["SessionSettings"]:
    try:
        from agents.memory.session_settings import SessionSettings
    except ImportError:  # the SDK is not installed: the settings are the caller's
        return None
    return SessionSettings()


class Session:
    """The OpenAI Agents SDK ``Session`` protocol over a session of the store."""

    def __init__(
        self,
        session_id: str,
        db: Union[str, "os.PathLike[str]", Store],
        session_settings: Optional["SessionSettings"] = None,
    ) -> None:
        self.session_id = session_id
        self._store = db if isinstance(db, Store) else Store(db)
        self.session_settings = (
            session_settings if session_settings is not None else _default_settings()
        )

    @property
    def store(self) -> Store:
        """The store the items are kept in."""
        return self._store

    def close(self) -> None:
        """Closes the store (only when this session opened it from a path or URL)."""
        self._store.close()

    def _limit(self, limit: Optional[int]) -> Optional[int]:
        if limit is not None:
            return limit
        settings = self.session_settings
        if settings is None:
            return None
        if isinstance(settings, dict):
            return settings.get("limit")
        return getattr(settings, "limit", None)

    # Blocking halves: each call into the store releases the GIL.

    def get_items_sync(self, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        """:meth:`get_items` without the event loop."""
        limit = self._limit(limit)
        if limit is not None and limit == 0:
            return []
        native_limit = limit if limit is not None and limit > 0 else None
        native = self._store._native
        # Each item's place is found by the shape this adapter writes, without reading the
        # item: parsing the list is the check. A row another writer broke makes it not JSON;
        # then every part's metadata is decoded, and what is not JSON is left out.
        try:
            return json.loads(native.agents_get_items(self.session_id, native_limit))
        except (ValueError, RecursionError):
            return json.loads(native.agents_get_items(self.session_id, native_limit, True))

    def add_items_sync(self, items: List[Any]) -> None:
        """:meth:`add_items` without the event loop."""
        if not isinstance(items, list):
            items = list(items)
        try:
            text = json.dumps(items, ensure_ascii=False, allow_nan=False, default=_item_json)
        except (TypeError, ValueError, RecursionError):
            text = _dumps(items, "the items")
        self._store._native.agents_add_items(self.session_id, text)

    def pop_item_sync(self) -> Optional[Dict[str, Any]]:
        """:meth:`pop_item` without the event loop."""
        popped = self._store._native.agents_pop_item(self.session_id)
        return None if popped is None else json.loads(popped)

    def clear_session_sync(self) -> None:
        """:meth:`clear_session` without the event loop."""
        self._store.delete_session(self.session_id)

    # The SDK's protocol.

    async def get_items(self, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        """The session's items, oldest first; with ``limit`` (or ``session_settings.limit``)
        the latest ones that fit without cutting a call from its output."""
        return await _worker.run(self.get_items_sync, limit)

    async def add_items(self, items: List[Any]) -> None:
        """Appends ``items`` (Responses input items) in one transaction; a refused batch
        raises :class:`session_store.Refused` and writes nothing."""
        await _worker.run(self.add_items_sync, items)

    async def pop_item(self) -> Optional[Dict[str, Any]]:
        """Removes the latest item and returns it; None when the session is empty."""
        return await _worker.run(self.pop_item_sync)

    async def clear_session(self) -> None:
        """Removes every item (the store's session is deleted)."""
        await _worker.run(self.clear_session_sync)
