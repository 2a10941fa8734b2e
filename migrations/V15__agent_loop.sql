-- The agent loop (third release): streaming messages, sub-agent links.
--
-- * `messages.state`: `open` while an assistant message streams in (`Store::begin_message`,
--   one part per transaction), `complete` once finished (every message written whole, and
--   every row written before this migration), `interrupted` when its writer went away before
--   finishing it. `messages.writer` names the handle that streams an open message (process
--   and handle), so the next write to the session can tell a live writer from a dead one.
--   The partial index finds a session's open message with one probe per write.
-- * `sessions.parent_tool_use_id`: the tool_use in the `parent_id` session that spawned this
--   one (a sub-agent's Task call); `sessions.state`: `active`, `completed` or `incomplete`
--   for a sub-agent (NULL for a session nobody spawned).
-- * `reverted_messages` mirrors the new message columns, so a revert and its undo keep them.
ALTER TABLE messages ADD COLUMN state TEXT NOT NULL DEFAULT 'complete'
    CHECK (state = 'open' OR state = 'complete' OR state = 'interrupted');
ALTER TABLE messages ADD COLUMN writer TEXT;
CREATE INDEX IF NOT EXISTS messages_open ON messages (session_id) WHERE state = 'open';

ALTER TABLE reverted_messages ADD COLUMN state TEXT NOT NULL DEFAULT 'complete';
ALTER TABLE reverted_messages ADD COLUMN writer TEXT;

ALTER TABLE sessions ADD COLUMN parent_tool_use_id TEXT;
ALTER TABLE sessions ADD COLUMN state TEXT
    CHECK (state IS NULL OR state = 'active' OR state = 'completed' OR state = 'incomplete');
