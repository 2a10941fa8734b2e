-- The twin of ../migrations/V19__source_parent_thread_id.sql:
-- `sessions.source_parent_thread_id`, the id of the thread that spawned an imported
-- sub-agent conversation (a Codex rollout's `thread_spawn.parent_thread_id`).
ALTER TABLE sessions ADD COLUMN IF NOT EXISTS source_parent_thread_id TEXT;
CREATE INDEX IF NOT EXISTS sessions_source_parent_thread_id ON sessions (source_parent_thread_id)
    WHERE source_parent_thread_id IS NOT NULL;
