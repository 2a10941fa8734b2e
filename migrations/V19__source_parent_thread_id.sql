-- `sessions.source_parent_thread_id`: the id of the thread that spawned an imported
-- sub-agent conversation, as its source names it (a Codex rollout's
-- `session_meta.payload.source.subagent.thread_spawn.parent_thread_id`), so that the
-- parent's rollout imported later finds its children. NULL for sessions of other sources.
ALTER TABLE sessions ADD COLUMN source_parent_thread_id TEXT;
CREATE INDEX IF NOT EXISTS sessions_source_parent_thread_id ON sessions (source_parent_thread_id)
    WHERE source_parent_thread_id IS NOT NULL;
