-- Second-release part kinds (image, document, server_tool_use, server_tool_result, opaque),
-- who wrote an assistant message (messages.model) and a session's title (sessions.title).
--
-- SQLite cannot alter a CHECK constraint, so `parts` is rebuilt the documented way inside
-- this migration's transaction: a new table with the wider CHECK, every row copied with its
-- id, the old table dropped, the new one renamed, its index created again. Nothing refers to
-- parts(id) by foreign key (repair_log.part_id is a plain column; parts_fts keys its rows by
-- the same ids, which the copy keeps), so no other table needs rebuilding. Columns another
-- writer added to an adopted `parts` table, beyond the contract's, are not carried over.
--
-- Views that read `parts` (store/views.sql, V8's parts_search_source) name it, and since
-- SQLite 3.26 a RENAME re-checks every view, which would fail on the dropped name: the
-- rename runs with legacy_alter_table, which leaves views and triggers as they are. They
-- name `parts`, so they read the new table as soon as it has the name.
--
-- `reverted_parts` (V2) has no CHECK on kind and needs no rebuild; `reverted_messages`
-- mirrors the new `messages.model` column (store/revert.rs copies it both ways).

ALTER TABLE messages ADD COLUMN model TEXT;
ALTER TABLE sessions ADD COLUMN title TEXT;
ALTER TABLE reverted_messages ADD COLUMN model TEXT;

CREATE TABLE parts_v7 (
    id                INTEGER PRIMARY KEY,
    message_id        INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    ordinal           INTEGER NOT NULL,
    kind              TEXT NOT NULL CHECK (kind IN ('text', 'reasoning', 'redacted_reasoning', 'tool_use', 'tool_result',
                                                    'image', 'document', 'server_tool_use', 'server_tool_result', 'opaque')),
    text              TEXT,
    tool_use_id       TEXT,
    tool_name         TEXT,
    input             TEXT,
    is_error          INTEGER NOT NULL DEFAULT 0 CHECK (is_error IN (0, 1)),
    provider_metadata TEXT,
    UNIQUE (message_id, ordinal)
);
-- Every row is copied, also one another writer stored with a kind outside the contract (a
-- table adopted by V1 may have no CHECK): it stays as it was, for store-repair to report as
-- `unreadable_row`, instead of failing the migration and with it every open.
PRAGMA ignore_check_constraints = ON;
INSERT INTO parts_v7 (id, message_id, ordinal, kind, text, tool_use_id, tool_name, input, is_error, provider_metadata)
SELECT id, message_id, ordinal, kind, text, tool_use_id, tool_name, input, is_error, provider_metadata FROM parts;
PRAGMA ignore_check_constraints = OFF;
DROP TABLE parts;
PRAGMA legacy_alter_table = ON;
ALTER TABLE parts_v7 RENAME TO parts;
PRAGMA legacy_alter_table = OFF;
CREATE INDEX IF NOT EXISTS parts_by_tool_use_id ON parts (tool_use_id) WHERE tool_use_id IS NOT NULL;

-- The triggers V8 puts on `parts` for the full-text index, as V8 writes them. A database a
-- build migrated to V8 before this migration existed loses them with the old table; they
-- come back here. On every other database V8 runs next, in the same open, and its
-- `IF NOT EXISTS` leaves these in place.
CREATE TRIGGER IF NOT EXISTS parts_fts_after_insert AFTER INSERT ON parts BEGIN
    INSERT INTO parts_fts (rowid, text, tool_name, input)
    SELECT id, text, tool_name, input FROM parts_search_source WHERE id = new.id;
END;

CREATE TRIGGER IF NOT EXISTS parts_fts_after_delete AFTER DELETE ON parts BEGIN
    INSERT INTO parts_fts (parts_fts, rowid, text, tool_name, input) VALUES (
        'delete', old.id,
        CASE WHEN old.kind <> 'redacted_reasoning' THEN old.text END,
        CASE WHEN old.kind IN ('tool_use', 'server_tool_use') THEN old.tool_name END,
        CASE WHEN old.kind IN ('tool_use', 'server_tool_use') THEN old.input END);
END;

CREATE TRIGGER IF NOT EXISTS parts_fts_after_update AFTER UPDATE OF id, kind, text, tool_name, input ON parts BEGIN
    INSERT INTO parts_fts (parts_fts, rowid, text, tool_name, input) VALUES (
        'delete', old.id,
        CASE WHEN old.kind <> 'redacted_reasoning' THEN old.text END,
        CASE WHEN old.kind IN ('tool_use', 'server_tool_use') THEN old.tool_name END,
        CASE WHEN old.kind IN ('tool_use', 'server_tool_use') THEN old.input END);
    INSERT INTO parts_fts (rowid, text, tool_name, input)
    SELECT id, text, tool_name, input FROM parts_search_source WHERE id = new.id;
END;
