-- PostgreSQL dialect of migrations/V2__turns_compaction_revert.sql: summaries, reverts and the
-- reverted_* mirrors of messages and parts (same columns; a later migration that adds a column
-- to messages or parts adds it to the mirror here too, and to the copy SQL in store/pg/).

CREATE TABLE IF NOT EXISTS reverts (
    id          BIGSERIAL PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    from_turn   BIGINT NOT NULL,
    from_seq    BIGINT NOT NULL,
    created_at  TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS reverts_by_session ON reverts (session_id, id);

CREATE TABLE IF NOT EXISTS reverted_messages (
    id          BIGSERIAL PRIMARY KEY,
    revert_id   BIGINT NOT NULL REFERENCES reverts(id) ON DELETE CASCADE,
    original_id BIGINT NOT NULL,
    session_id  TEXT NOT NULL,
    seq         BIGINT NOT NULL,
    turn_index  BIGINT NOT NULL,
    role        TEXT NOT NULL,
    compacted   BIGINT NOT NULL DEFAULT 0,
    created_at  TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS reverted_messages_by_revert ON reverted_messages (revert_id, seq);

CREATE TABLE IF NOT EXISTS reverted_parts (
    id                  BIGSERIAL PRIMARY KEY,
    reverted_message_id BIGINT NOT NULL REFERENCES reverted_messages(id) ON DELETE CASCADE,
    ordinal             BIGINT NOT NULL,
    kind                TEXT NOT NULL,
    text                TEXT,
    tool_use_id         TEXT,
    tool_name           TEXT,
    input               TEXT,
    is_error            BIGINT NOT NULL DEFAULT 0,
    provider_metadata   TEXT
);
CREATE INDEX IF NOT EXISTS reverted_parts_by_message ON reverted_parts (reverted_message_id, ordinal);

CREATE TABLE IF NOT EXISTS summaries (
    id                  BIGSERIAL PRIMARY KEY,
    session_id          TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    first_turn          BIGINT NOT NULL,
    last_turn           BIGINT NOT NULL,
    compacted_from_turn BIGINT NOT NULL,
    through_seq         BIGINT NOT NULL,
    text                TEXT NOT NULL,
    created_at          TEXT NOT NULL,
    reverted_by         BIGINT REFERENCES reverts(id) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS summaries_by_session ON summaries (session_id, id);
CREATE INDEX IF NOT EXISTS summaries_by_revert ON summaries (reverted_by) WHERE reverted_by IS NOT NULL;
