-- PostgreSQL dialect of migrations/V8__fork_usage_search.sql: fork lineage columns, the
-- usage table and its revert mirror. The SQLite full-text index (FTS5 table, its source view
-- and triggers) has no twin here: search on PostgreSQL is not built yet (a tsvector column
-- with a GIN index would be its dialect).
ALTER TABLE sessions ADD COLUMN IF NOT EXISTS parent_id TEXT REFERENCES sessions(id) ON DELETE SET NULL;
ALTER TABLE sessions ADD COLUMN IF NOT EXISTS forked_at_turn BIGINT;
CREATE INDEX IF NOT EXISTS sessions_by_parent ON sessions (parent_id) WHERE parent_id IS NOT NULL;

CREATE TABLE IF NOT EXISTS usage (
    message_id         BIGINT REFERENCES messages(id) ON DELETE CASCADE,
    model              TEXT,
    input_tokens       BIGINT,
    output_tokens      BIGINT,
    cache_read_tokens  BIGINT,
    cache_write_tokens BIGINT
);
CREATE INDEX IF NOT EXISTS usage_by_message ON usage (message_id);

CREATE TABLE IF NOT EXISTS reverted_usage (
    reverted_message_id BIGINT NOT NULL REFERENCES reverted_messages(id) ON DELETE CASCADE,
    model               TEXT,
    input_tokens        BIGINT,
    output_tokens       BIGINT,
    cache_read_tokens   BIGINT,
    cache_write_tokens  BIGINT
);
CREATE INDEX IF NOT EXISTS reverted_usage_by_message ON reverted_usage (reverted_message_id);
