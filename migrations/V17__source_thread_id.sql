-- `sessions.source_thread_id`: the id the source gave the conversation an import stored (a
-- Codex rollout's `session_meta.payload.id`), so that a sub-agent's own log imported later
-- finds the session of the thread that spawned it. NULL for sessions of other sources.
ALTER TABLE sessions ADD COLUMN source_thread_id TEXT;
CREATE INDEX IF NOT EXISTS sessions_source_thread_id ON sessions (source_thread_id)
    WHERE source_thread_id IS NOT NULL;
