-- PostgreSQL dialect of migrations/V1__initial_schema.sql: the contract's three tables with
-- the same columns. Integers are BIGINT (SQLite's INTEGER is 64-bit), flags stay 0/1 BIGINT,
-- ids are BIGSERIAL, timestamps stay RFC 3339 TEXT, so a row reads back the same from either
-- backend and the same SQL text (`compacted = 0`) works on both.

CREATE TABLE IF NOT EXISTS sessions (
    id          TEXT PRIMARY KEY,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS messages (
    id          BIGSERIAL PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq         BIGINT NOT NULL,
    turn_index  BIGINT NOT NULL,
    role        TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    compacted   BIGINT NOT NULL DEFAULT 0 CHECK (compacted IN (0, 1)),
    created_at  TEXT NOT NULL,
    UNIQUE (session_id, seq)
);

CREATE INDEX IF NOT EXISTS messages_by_turn ON messages (session_id, turn_index, seq);
CREATE INDEX IF NOT EXISTS messages_user_starts ON messages (session_id, seq) WHERE role = 'user';

CREATE TABLE IF NOT EXISTS parts (
    id                BIGSERIAL PRIMARY KEY,
    message_id        BIGINT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    ordinal           BIGINT NOT NULL,
    kind              TEXT NOT NULL CHECK (kind IN ('text', 'reasoning', 'redacted_reasoning', 'tool_use', 'tool_result')),
    text              TEXT,
    tool_use_id       TEXT,
    tool_name         TEXT,
    input             TEXT,
    is_error          BIGINT NOT NULL DEFAULT 0 CHECK (is_error IN (0, 1)),
    provider_metadata TEXT,
    UNIQUE (message_id, ordinal)
);

CREATE INDEX IF NOT EXISTS parts_by_tool_use_id ON parts (tool_use_id) WHERE tool_use_id IS NOT NULL;
