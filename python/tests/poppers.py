"""A popper process for test_agents: pops items from one session until it is empty."""

from __future__ import annotations

import json


def pop_all(db, session_id, start, out):
    """Waits for ``start``, then pops until the session is empty; puts the popped items (as
    JSON text, in pop order) on ``out``."""
    from session_store.agents import Session

    session = Session(session_id, db)
    popped = []
    start.wait()
    while True:
        item = session.pop_item_sync()
        if item is None:
            break
        popped.append(json.dumps(item, sort_keys=True))
    session.close()
    out.put(popped)
