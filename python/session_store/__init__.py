"""The session store from Python: a binding of the Rust library ``session-store``.

``Store(db)`` opens a SQLite file (created if missing) or a ``postgres://`` URL. Messages go
in as dicts in the Anthropic Messages shape; a write the pairing rules refuse raises
:class:`Refused` and writes nothing. Every call runs the store's work with the GIL released.

The adapters for agent SDKs live in :mod:`session_store.agents` (OpenAI Agents SDK) and
:mod:`session_store.claude` (Claude Agent SDK).
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Union

from ._native import ClosedStore, Error, InvalidInput, Refused, UnknownSession
from ._native import Store as _NativeStore

__all__ = [
    "Store",
    "Error",
    "Refused",
    "InvalidInput",
    "UnknownSession",
    "ClosedStore",
    "FORMATS",
]

#: The export formats (``export(session, format)``).
FORMATS = ("anthropic", "openai", "responses", "gemini")


def _dumps(value: Any, what: str) -> str:
    """``value`` as JSON text; what JSON cannot hold is :class:`InvalidInput`."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as error:
        raise InvalidInput(f"{what} is not JSON: {error}") from None


class Store:
    """A session store on a file path or a ``postgres://`` URL.

    Usable as a context manager (closed on exit). Thread-safe; the store's work runs with
    the GIL released, so other Python threads go on meanwhile.
    """

    def __init__(self, db: Union[str, "os.PathLike[str]"]) -> None:
        self._db = os.fspath(db)
        self._native = _NativeStore(self._db)

    def __repr__(self) -> str:
        state = "closed" if self._native.closed else "open"
        return f"<session_store.Store {self._db!r} ({state})>"

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the store; later calls raise :class:`ClosedStore`."""
        self._native.close()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._native.closed

    def create_session(self) -> str:
        """A new session; its id."""
        return self._native.create_session()

    def append(self, session: str, message: Dict[str, Any]) -> None:
        """Appends ``message`` (``{"role": "user" | "assistant", "content": str | [blocks]}``).

        Tool results go in a user message, as in Anthropic's API; the store keeps them in a
        tool message before the rest. Raises :class:`Refused` (``rule``, ``ids``) when the
        pairing rules refuse it, :class:`InvalidInput` when it is not a message,
        :class:`UnknownSession` for an unknown session; nothing is written then.
        """
        if not isinstance(message, dict):
            raise InvalidInput(f"a message is a dict, not {type(message).__name__}")
        self._native.append(session, _dumps(message, "the message"))

    def cancel_pending(self, session: str, reason: Optional[str] = None) -> List[str]:
        """Answers the session's pending tool calls with tombstones; their ids."""
        return self._native.cancel_pending(session, reason)

    def export(self, session: str, format: str, model: Optional[str] = None) -> Dict[str, Any]:
        """The request body the library would send now (the CLI's ``export``).

        ``format`` is one of :data:`FORMATS`; ``model`` (``provider/model``) is the model the
        request is for.
        """
        return json.loads(self._native.export(session, format, model))

    def check(self, session: str) -> List[Dict[str, Any]]:
        """The contract's rules the session breaks, each ``{"rule": name, ...}``; empty when healthy."""
        return json.loads(self._native.check(session))

    def sessions(self) -> List[Dict[str, Any]]:
        """One row per session, as ``session-store sessions --json`` prints them."""
        return json.loads(self._native.sessions())

    def subagents(self, parent: Optional[str] = None) -> List[Dict[str, Any]]:
        """The sub-agents ``parent`` spawned (every one when None), in creation order, each
        ``{"id", "parent", "parent_tool_use_id", "state"}`` (``state``: ``active``,
        ``completed`` or ``incomplete``)."""
        return json.loads(self._native.subagents(parent))

    def delete_session(self, session: str) -> bool:
        """Deletes the session and all its rows; False when there was none."""
        return self._native.delete_session(session)
