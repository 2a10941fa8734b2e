-- The contract's three tables (shared CONTRACT.md), with the indexes the store reads by.
-- IF NOT EXISTS: a database whose tables were created by other code that follows the
-- contract is adopted as it is, not refused.

CREATE TABLE IF NOT EXISTS sessions (
    id          TEXT PRIMARY KEY,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS messages (
    id          INTEGER PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    turn_index  INTEGER NOT NULL,
    role        TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    compacted   INTEGER NOT NULL DEFAULT 0 CHECK (compacted IN (0, 1)),
    created_at  TEXT NOT NULL,
    UNIQUE (session_id, seq)
);

-- Turn-aware reads: pages and slices are keyset scans over (session_id, turn_index, seq).
CREATE INDEX IF NOT EXISTS messages_by_turn ON messages (session_id, turn_index, seq);
-- Turn starts: the last user message of a session, found without a scan.
CREATE INDEX IF NOT EXISTS messages_user_starts ON messages (session_id, seq) WHERE role = 'user';

CREATE TABLE IF NOT EXISTS parts (
    id                INTEGER PRIMARY KEY,
    message_id        INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    ordinal           INTEGER NOT NULL,
    kind              TEXT NOT NULL CHECK (kind IN ('text', 'reasoning', 'redacted_reasoning', 'tool_use', 'tool_result')),
    text              TEXT,
    tool_use_id       TEXT,
    tool_name         TEXT,
    input             TEXT,
    is_error          INTEGER NOT NULL DEFAULT 0 CHECK (is_error IN (0, 1)),
    provider_metadata TEXT,
    UNIQUE (message_id, ordinal)
);

-- Pairing checks: is this tool_use id taken, which result answers it.
CREATE INDEX IF NOT EXISTS parts_by_tool_use_id ON parts (tool_use_id) WHERE tool_use_id IS NOT NULL;
