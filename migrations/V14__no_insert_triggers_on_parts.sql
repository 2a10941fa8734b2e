-- Appends stop paying for triggers on `parts` (issue 16). A table with a row trigger makes
-- every INSERT into it a statement that may have to undo itself halfway (SQLite then keeps a
-- statement journal, a copy of each page the statement touches, and runs a multi-row INSERT
-- through a temporary table); for an append one message per commit that was about a tenth
-- of its time. `parts` had two INSERT triggers; both go, and what they did is done
-- otherwise, for every writer as before:
--
-- * `sessions_tail_part_insert` cleared `sessions.tail_state` when a tool part was inserted.
--   The state now carries the number of parts in the session's open block (the messages
--   from the last user or assistant message on: all the pairing check reads), and the store
--   trusts it only when that count and the last seq are the rows' own (`store/write.rs`,
--   `stored_tail`). A part another writer adds to the block changes the count; a part added
--   before the block changes nothing the check reads. Message inserts, and updates and
--   deletes of tool parts, still clear the state through their triggers.
-- * `parts_fts_after_insert` indexed a part inserted at or below the search mark at once:
--   an id SQLite handed out again after the parts with the largest ids were deleted. Such an
--   id can no longer fall at or below the mark: deleting an indexed part now brings the mark
--   down to the largest id left, so the next part's id is above it and the next catch-up
--   indexes it. (An id another writer chooses by hand, in a gap below the mark, is not
--   indexed until the index is rebuilt; the store never chooses ids.)
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
