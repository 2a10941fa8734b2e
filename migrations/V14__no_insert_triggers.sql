-- Appends stop paying for INSERT triggers on `messages` and `parts` (issue 16). A table
-- with a row trigger makes every INSERT into it a statement that may have to undo itself
-- halfway: SQLite then keeps a statement journal (a copy of each page the statement
-- touches) and runs a multi-row INSERT through a temporary table. Together these were about
-- a fifth of an append's instructions, one message per commit. The three INSERT triggers go;
-- what they did is done otherwise, for every writer as before:
--
-- * `sessions_count_message_insert` added to `sessions.message_count` and cleared
--   `sessions.tail_state`. The store now adds its own messages in the UPDATE it already
--   makes of the session row (appends), or counts the session again (undo, mend, fork,
--   copy); the session list checks the count against the seqs (store/read.rs) and counts
--   the rows of a session where another writer inserted messages. Deletes and moves keep
--   their triggers. PostgreSQL's V14 drops its twin of this trigger too: the append is
--   written once for both engines (store/write.rs).
-- * `sessions_tail_part_insert` cleared the tail state when a tool part was inserted. The
--   state now names the largest part id when it was written and the number of parts in
--   the session's open block (the messages from the last user or assistant message on:
--   all the pairing check reads), and the store trusts it only when its last seq is the
--   session's and either no part was inserted since (the largest id is the same) or the
--   block still holds that many parts (`store/write.rs`, `stored_tail`). The largest id
--   is the id of the last part the state's own append inserted (SQLite gives a new row the
--   largest id plus one), so it can only come back after that part was deleted or moved:
--   the triggers that clear the state on a deleted or changed part now fire for a part of
--   any kind and for a change of its id. (A part another writer inserts with an id chosen
--   by hand, below the largest, or with INSERT OR REPLACE over an existing id, passes the
--   shortcut: a plain INSERT does not.) Updates and deletes of messages still clear it.
-- * `parts_fts_after_insert` indexed a part inserted at or below the search mark at once:
--   an id SQLite handed out again after the parts with the largest ids were deleted. Such an
--   id can no longer fall at or below the mark: deleting an indexed part now brings the mark
--   down to the largest id left, so the next part's id is above it and the next catch-up
--   indexes it. (An id another writer chooses by hand, in a gap below the mark, is not
--   indexed until the index is rebuilt; the store never chooses ids.)
DROP TRIGGER IF EXISTS sessions_count_message_insert;
DROP TRIGGER IF EXISTS sessions_tail_part_delete;
DROP TRIGGER IF EXISTS sessions_tail_part_update;

CREATE TRIGGER sessions_tail_part_delete AFTER DELETE ON parts BEGIN
    UPDATE sessions SET tail_state = NULL
    WHERE id = (SELECT session_id FROM messages WHERE id = OLD.message_id)
      AND tail_state IS NOT NULL;
END;

CREATE TRIGGER sessions_tail_part_update
AFTER UPDATE OF id, message_id, ordinal, kind, tool_use_id ON parts BEGIN
    UPDATE sessions SET tail_state = NULL
    WHERE id IN (SELECT session_id FROM messages WHERE id IN (OLD.message_id, NEW.message_id))
      AND tail_state IS NOT NULL;
END;

DROP TRIGGER IF EXISTS sessions_tail_part_insert;
DROP TRIGGER IF EXISTS parts_fts_after_insert;
DROP TRIGGER IF EXISTS parts_fts_after_delete;

CREATE TRIGGER parts_fts_after_delete AFTER DELETE ON parts
WHEN old.id <= (SELECT indexed_through FROM search_state) BEGIN
    INSERT INTO parts_fts (parts_fts, rowid, text, tool_name, input) VALUES (
        'delete', old.id,
        CASE WHEN old.kind <> 'redacted_reasoning' THEN old.text END,
        CASE WHEN old.kind IN ('tool_use', 'server_tool_use') THEN old.tool_name END,
        CASE WHEN old.kind IN ('tool_use', 'server_tool_use') THEN old.input END);
    UPDATE search_state SET indexed_through = (SELECT COALESCE(MAX(id), 0) FROM parts)
    WHERE indexed_through > (SELECT COALESCE(MAX(id), 0) FROM parts);
END;
