-- Appends stop paying for the full-text index (issue 16). With V8's triggers every commit
-- flushed FTS5's pending terms into a new segment, which made an append 2.3x-2.5x what the
-- same rows cost without the index. From here on a new part is indexed later, in one batch:
-- `search_state.indexed_through` is the highest part id the index has caught up to, and
-- the store catches up (every part above it, one INSERT ... SELECT, then the mark moves to
-- MAX(parts.id)) at open and before each search, in a write transaction of its own.
--
-- The triggers still keep indexed rows exact for every writer, plain SQL from other code
-- included: a part at or below the mark that is deleted or changed leaves or changes the
-- index at once, and a part inserted at or below it (an id SQLite reused after the rows
-- with the largest ids were deleted) is indexed at once. A part above the mark is the
-- catch-up's: nothing in the index refers to it until then. The mark never moves down.
-- Without the row (a database edited by hand), the catch-up rebuilds the index.
CREATE TABLE IF NOT EXISTS search_state (
    id              INTEGER PRIMARY KEY CHECK (id = 1),
    indexed_through INTEGER NOT NULL
);

INSERT OR IGNORE INTO search_state (id, indexed_through)
SELECT 1, COALESCE(MAX(id), 0) FROM parts;

DROP TRIGGER IF EXISTS parts_fts_after_insert;
DROP TRIGGER IF EXISTS parts_fts_after_delete;
DROP TRIGGER IF EXISTS parts_fts_after_update;

CREATE TRIGGER parts_fts_after_insert AFTER INSERT ON parts
WHEN new.id <= (SELECT indexed_through FROM search_state) BEGIN
    INSERT INTO parts_fts (rowid, text, tool_name, input)
    SELECT id, text, tool_name, input FROM parts_search_source WHERE id = new.id;
END;

CREATE TRIGGER parts_fts_after_delete AFTER DELETE ON parts
WHEN old.id <= (SELECT indexed_through FROM search_state) BEGIN
    INSERT INTO parts_fts (parts_fts, rowid, text, tool_name, input) VALUES (
        'delete', old.id,
        CASE WHEN old.kind <> 'redacted_reasoning' THEN old.text END,
        CASE WHEN old.kind IN ('tool_use', 'server_tool_use') THEN old.tool_name END,
        CASE WHEN old.kind IN ('tool_use', 'server_tool_use') THEN old.input END);
END;

CREATE TRIGGER parts_fts_after_update AFTER UPDATE OF id, kind, text, tool_name, input ON parts BEGIN
    INSERT INTO parts_fts (parts_fts, rowid, text, tool_name, input)
    SELECT 'delete', old.id,
        CASE WHEN old.kind <> 'redacted_reasoning' THEN old.text END,
        CASE WHEN old.kind IN ('tool_use', 'server_tool_use') THEN old.tool_name END,
        CASE WHEN old.kind IN ('tool_use', 'server_tool_use') THEN old.input END
    WHERE old.id <= (SELECT indexed_through FROM search_state);
    INSERT INTO parts_fts (rowid, text, tool_name, input)
    SELECT id, text, tool_name, input FROM parts_search_source
    WHERE id = new.id AND new.id <= (SELECT indexed_through FROM search_state);
END;
