-- Compaction summaries and undoable reverts (issue 3).
--
-- `messages` and `parts` always hold the live history, so the contract's invariants and every
-- reader (store-repair, the sqlite3 shell) keep working on them unchanged. A revert moves the
-- reverted messages and parts here, into `reverted_messages` / `reverted_parts`, grouped under
-- one `reverts` row; undoing it moves them back. The next append to the session deletes its
-- `reverts` rows, and the cascade takes the moved rows with them: gone for good.
--
-- The reverted_* tables mirror the columns of messages and parts. A later migration that adds
-- a column to messages or parts adds it to the mirror as well (ALTER TABLE in that migration)
-- and to the copy SQL in store/revert.rs, or a revert and undo would lose its values (the test
-- `reverted_tables_mirror_every_live_column` fails until the tables match).

CREATE TABLE IF NOT EXISTS reverts (
    id          INTEGER PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    from_turn   INTEGER NOT NULL,       -- the turn asked for: that turn and every later one moved
    from_seq    INTEGER NOT NULL,       -- seq of the first moved message
    created_at  TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS reverts_by_session ON reverts (session_id, id);

CREATE TABLE IF NOT EXISTS reverted_messages (
    id          INTEGER PRIMARY KEY,
    revert_id   INTEGER NOT NULL REFERENCES reverts(id) ON DELETE CASCADE,
    original_id INTEGER NOT NULL,       -- messages.id before the revert (kept on undo when free)
    session_id  TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    turn_index  INTEGER NOT NULL,
    role        TEXT NOT NULL,
    compacted   INTEGER NOT NULL DEFAULT 0,
    created_at  TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS reverted_messages_by_revert ON reverted_messages (revert_id, seq);

CREATE TABLE IF NOT EXISTS reverted_parts (
    id                  INTEGER PRIMARY KEY,
    reverted_message_id INTEGER NOT NULL REFERENCES reverted_messages(id) ON DELETE CASCADE,
    ordinal             INTEGER NOT NULL,
    kind                TEXT NOT NULL,
    text                TEXT,
    tool_use_id         TEXT,
    tool_name           TEXT,
    input               TEXT,
    is_error            INTEGER NOT NULL DEFAULT 0,
    provider_metadata   TEXT
);
CREATE INDEX IF NOT EXISTS reverted_parts_by_message ON reverted_parts (reverted_message_id, ordinal);

-- One row per compaction. A summary replaces the whole compacted head in what the provider
-- sees (turns first_turn..=last_turn); the latest live one (largest id, reverted_by NULL) is
-- the one in use. A revert that takes compacted turns back sets reverted_by on the summaries
-- that covered them, so undo can restore them and the next append deletes them.
CREATE TABLE IF NOT EXISTS summaries (
    id                  INTEGER PRIMARY KEY,
    session_id          TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    first_turn          INTEGER NOT NULL,
    last_turn           INTEGER NOT NULL,
    compacted_from_turn INTEGER NOT NULL,   -- first turn this compaction newly marked
    through_seq         INTEGER NOT NULL,   -- seq of the last message it replaces
    text                TEXT NOT NULL,
    created_at          TEXT NOT NULL,
    reverted_by         INTEGER REFERENCES reverts(id) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS summaries_by_session ON summaries (session_id, id);
CREATE INDEX IF NOT EXISTS summaries_by_revert ON summaries (reverted_by) WHERE reverted_by IS NOT NULL;
