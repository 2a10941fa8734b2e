-- Issue 16: the end of each session kept in its row, so an append's pairing check reads one
-- row instead of five queries (last seq, last user turn, last speaker, its calls, the answers
-- so far). Nullable: NULL means unknown, and the store then reads the rows as before and
-- writes the state back with its append. The text is the store's own encoding
-- (`history/tail.rs`: `[1, last_seq, last_user_turn, speaker, open calls, answered ids]`).
ALTER TABLE sessions ADD COLUMN tail_state TEXT;

-- The state is a cache and never a second truth: every change of a message or of a tool part,
-- whoever makes it (the store's reverts, mends, imports, copies and forks, or other code on
-- this schema), clears it, and the store also uses it only when its last seq is the session's
-- real MAX(seq). The message count triggers of V9 clear it in the UPDATE they already run.
DROP TRIGGER IF EXISTS sessions_count_message_insert;
CREATE TRIGGER sessions_count_message_insert AFTER INSERT ON messages BEGIN
    UPDATE sessions SET message_count = message_count + 1, tail_state = NULL
    WHERE id = NEW.session_id;
END;
DROP TRIGGER IF EXISTS sessions_count_message_delete;
CREATE TRIGGER sessions_count_message_delete AFTER DELETE ON messages BEGIN
    UPDATE sessions SET message_count = message_count - 1, tail_state = NULL
    WHERE id = OLD.session_id;
END;
CREATE TRIGGER IF NOT EXISTS sessions_tail_message_update
AFTER UPDATE OF session_id, seq, turn_index, role ON messages BEGIN
    UPDATE sessions SET tail_state = NULL
    WHERE id IN (OLD.session_id, NEW.session_id) AND tail_state IS NOT NULL;
END;
CREATE TRIGGER IF NOT EXISTS sessions_tail_part_insert AFTER INSERT ON parts
WHEN NEW.kind IN ('tool_use', 'tool_result') BEGIN
    UPDATE sessions SET tail_state = NULL
    WHERE id = (SELECT session_id FROM messages WHERE id = NEW.message_id)
      AND tail_state IS NOT NULL;
END;
CREATE TRIGGER IF NOT EXISTS sessions_tail_part_delete AFTER DELETE ON parts
WHEN OLD.kind IN ('tool_use', 'tool_result') BEGIN
    UPDATE sessions SET tail_state = NULL
    WHERE id = (SELECT session_id FROM messages WHERE id = OLD.message_id)
      AND tail_state IS NOT NULL;
END;
CREATE TRIGGER IF NOT EXISTS sessions_tail_part_update
AFTER UPDATE OF message_id, ordinal, kind, tool_use_id ON parts BEGIN
    UPDATE sessions SET tail_state = NULL
    WHERE id IN (SELECT session_id FROM messages WHERE id IN (OLD.message_id, NEW.message_id))
      AND tail_state IS NOT NULL;
END;
