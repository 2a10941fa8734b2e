-- Sessions as people manage them (issue 13): fork lineage, token usage, full-text search.
--
-- Every added column is nullable, so a plain INSERT naming only the contract's columns works.

-- Fork lineage (contract, second release). A fork names the session it was copied from and
-- the first turn it did not copy. Deleting the parent keeps the fork and forgets the link
-- (forked_at_turn stays: the session is still known to be a fork).
ALTER TABLE sessions ADD COLUMN parent_id TEXT REFERENCES sessions(id) ON DELETE SET NULL;
ALTER TABLE sessions ADD COLUMN forked_at_turn INTEGER;
CREATE INDEX IF NOT EXISTS sessions_by_parent ON sessions (parent_id) WHERE parent_id IS NOT NULL;

-- What one assistant message cost, where the provider (or the imported source) said so.
CREATE TABLE IF NOT EXISTS usage (
    message_id         INTEGER REFERENCES messages(id) ON DELETE CASCADE,
    model              TEXT,
    input_tokens       INTEGER,
    output_tokens      INTEGER,
    cache_read_tokens  INTEGER,
    cache_write_tokens INTEGER
);
CREATE INDEX IF NOT EXISTS usage_by_message ON usage (message_id);

-- A revert moves messages to reverted_messages and deletes the live rows, which would cascade
-- to their usage rows: the usage moves aside with them (store/revert.rs) and comes back on undo.
CREATE TABLE IF NOT EXISTS reverted_usage (
    reverted_message_id INTEGER NOT NULL REFERENCES reverted_messages(id) ON DELETE CASCADE,
    model               TEXT,
    input_tokens        INTEGER,
    output_tokens       INTEGER,
    cache_read_tokens   INTEGER,
    cache_write_tokens  INTEGER
);
CREATE INDEX IF NOT EXISTS reverted_usage_by_message ON reverted_usage (reverted_message_id);

-- Full-text search over every live part: text, reasoning, tool_result content (and the title
-- of media parts) in `text`; a call's tool name and JSON input in `tool_name` / `input`.
-- Encrypted reasoning (redacted_reasoning) is opaque and not indexed; neither is the JSON of
-- media, results or opaque blocks (base64 data would swamp the index).
--
-- parts_search_source says once what is indexed; the FTS5 table reads it as its external
-- content (snippets and 'rebuild'), so the index holds no second copy of the text. The
-- triggers keep the index current for every writer, including plain SQL from other code;
-- rows deleted by a foreign-key cascade (a revert, a deleted session) fire them as well.
-- Reverted rows are not live and not searchable; an undo inserts them again, and with them
-- their index entries.
CREATE VIEW IF NOT EXISTS parts_search_source AS
SELECT id,
       CASE WHEN kind <> 'redacted_reasoning' THEN text END AS text,
       CASE WHEN kind IN ('tool_use', 'server_tool_use') THEN tool_name END AS tool_name,
       CASE WHEN kind IN ('tool_use', 'server_tool_use') THEN input END AS input
FROM parts;

CREATE VIRTUAL TABLE IF NOT EXISTS parts_fts USING fts5(
    text, tool_name, input,
    content = 'parts_search_source',
    content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);

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

-- Existing databases: index every part already stored.
INSERT INTO parts_fts (parts_fts) VALUES ('rebuild');
