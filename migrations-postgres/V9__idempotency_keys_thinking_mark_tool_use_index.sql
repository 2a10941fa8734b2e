-- PostgreSQL dialect of migrations/V9__idempotency_keys_thinking_mark_tool_use_index.sql:
-- idempotency keys, where the thinking latch last fired, the tool_use id index narrowed to
-- tool_uses, and sessions.message_count kept by triggers on every insert and delete.

CREATE TABLE IF NOT EXISTS idempotency_keys (
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    key         TEXT NOT NULL,
    message_id  BIGINT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    PRIMARY KEY (session_id, key)
);
CREATE INDEX IF NOT EXISTS idempotency_keys_by_message ON idempotency_keys (message_id);

ALTER TABLE sessions ADD COLUMN IF NOT EXISTS thinking_stripped_through BIGINT;

DROP INDEX IF EXISTS parts_by_tool_use_id;
CREATE INDEX IF NOT EXISTS parts_tool_use_ids ON parts (tool_use_id)
    WHERE kind = 'tool_use' AND tool_use_id IS NOT NULL;

ALTER TABLE sessions ADD COLUMN IF NOT EXISTS message_count BIGINT NOT NULL DEFAULT 0;
UPDATE sessions SET message_count = (SELECT COUNT(*) FROM messages m WHERE m.session_id = sessions.id);

CREATE OR REPLACE FUNCTION sessions_count_messages() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        UPDATE sessions SET message_count = message_count - 1 WHERE id = OLD.session_id;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        UPDATE sessions SET message_count = message_count + 1 WHERE id = NEW.session_id;
    END IF;
    RETURN NULL;
END;
$$;
DROP TRIGGER IF EXISTS sessions_count_message_insert ON messages;
CREATE TRIGGER sessions_count_message_insert AFTER INSERT ON messages
    FOR EACH ROW EXECUTE FUNCTION sessions_count_messages();
DROP TRIGGER IF EXISTS sessions_count_message_delete ON messages;
CREATE TRIGGER sessions_count_message_delete AFTER DELETE ON messages
    FOR EACH ROW EXECUTE FUNCTION sessions_count_messages();
DROP TRIGGER IF EXISTS sessions_count_message_move ON messages;
CREATE TRIGGER sessions_count_message_move AFTER UPDATE OF session_id ON messages
    FOR EACH ROW WHEN (OLD.session_id IS DISTINCT FROM NEW.session_id)
    EXECUTE FUNCTION sessions_count_messages();

-- A session row written after its messages (by a writer without foreign keys) counts them.
CREATE OR REPLACE FUNCTION sessions_count_on_create() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE sessions SET message_count = (SELECT COUNT(*) FROM messages m WHERE m.session_id = NEW.id)
    WHERE id = NEW.id;
    RETURN NULL;
END;
$$;
DROP TRIGGER IF EXISTS sessions_count_on_create ON sessions;
CREATE TRIGGER sessions_count_on_create AFTER INSERT ON sessions
    FOR EACH ROW EXECUTE FUNCTION sessions_count_on_create();
