-- The twin of ../migrations/V15__agent_loop.sql: streaming messages (`messages.state`,
-- `messages.writer`, the partial index on open messages), the `reverted_messages` mirror,
-- and sub-agent links (`sessions.parent_tool_use_id`, `sessions.state`).
ALTER TABLE messages ADD COLUMN IF NOT EXISTS state TEXT NOT NULL DEFAULT 'complete'
    CHECK (state = 'open' OR state = 'complete' OR state = 'interrupted');
ALTER TABLE messages ADD COLUMN IF NOT EXISTS writer TEXT;
CREATE INDEX IF NOT EXISTS messages_open ON messages (session_id) WHERE state = 'open';

ALTER TABLE reverted_messages ADD COLUMN IF NOT EXISTS state TEXT NOT NULL DEFAULT 'complete';
ALTER TABLE reverted_messages ADD COLUMN IF NOT EXISTS writer TEXT;

ALTER TABLE sessions ADD COLUMN IF NOT EXISTS parent_tool_use_id TEXT;
ALTER TABLE sessions ADD COLUMN IF NOT EXISTS state TEXT
    CHECK (state IS NULL OR state = 'active' OR state = 'completed' OR state = 'incomplete');
