-- PostgreSQL dialect of migrations/V10__session_tail_state.sql: the end of each session kept
-- in its row (`history/tail.rs` encodes it), NULL when unknown, cleared by triggers on every
-- change of a message or a tool part, whoever makes it.

ALTER TABLE sessions ADD COLUMN IF NOT EXISTS tail_state TEXT;

-- V9's message count function clears the state in the UPDATE it already runs.
CREATE OR REPLACE FUNCTION sessions_count_messages() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        UPDATE sessions SET message_count = message_count - 1, tail_state = NULL
        WHERE id = OLD.session_id;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        UPDATE sessions SET message_count = message_count + 1, tail_state = NULL
        WHERE id = NEW.session_id;
    END IF;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION sessions_clear_tail_of_message() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE sessions SET tail_state = NULL
    WHERE id IN (OLD.session_id, NEW.session_id) AND tail_state IS NOT NULL;
    RETURN NULL;
END;
$$;
DROP TRIGGER IF EXISTS sessions_tail_message_update ON messages;
CREATE TRIGGER sessions_tail_message_update
    AFTER UPDATE OF session_id, seq, turn_index, role ON messages
    FOR EACH ROW EXECUTE FUNCTION sessions_clear_tail_of_message();

CREATE OR REPLACE FUNCTION sessions_clear_tail_of_part() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        UPDATE sessions SET tail_state = NULL
        WHERE id = (SELECT session_id FROM messages WHERE id = OLD.message_id)
          AND tail_state IS NOT NULL;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        UPDATE sessions SET tail_state = NULL
        WHERE id = (SELECT session_id FROM messages WHERE id = NEW.message_id)
          AND tail_state IS NOT NULL;
    END IF;
    RETURN NULL;
END;
$$;
DROP TRIGGER IF EXISTS sessions_tail_part_insert ON parts;
CREATE TRIGGER sessions_tail_part_insert AFTER INSERT ON parts
    FOR EACH ROW WHEN (NEW.kind IN ('tool_use', 'tool_result'))
    EXECUTE FUNCTION sessions_clear_tail_of_part();
DROP TRIGGER IF EXISTS sessions_tail_part_delete ON parts;
CREATE TRIGGER sessions_tail_part_delete AFTER DELETE ON parts
    FOR EACH ROW WHEN (OLD.kind IN ('tool_use', 'tool_result'))
    EXECUTE FUNCTION sessions_clear_tail_of_part();
DROP TRIGGER IF EXISTS sessions_tail_part_update ON parts;
CREATE TRIGGER sessions_tail_part_update
    AFTER UPDATE OF message_id, ordinal, kind, tool_use_id ON parts
    FOR EACH ROW EXECUTE FUNCTION sessions_clear_tail_of_part();
