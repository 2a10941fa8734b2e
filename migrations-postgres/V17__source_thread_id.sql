-- The twin of ../migrations/V17__source_thread_id.sql: `sessions.source_thread_id`, the id
-- the source gave an imported conversation (a Codex rollout's thread id).
ALTER TABLE sessions ADD COLUMN IF NOT EXISTS source_thread_id TEXT;
CREATE INDEX IF NOT EXISTS sessions_source_thread_id ON sessions (source_thread_id)
    WHERE source_thread_id IS NOT NULL;
