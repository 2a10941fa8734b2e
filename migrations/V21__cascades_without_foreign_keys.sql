-- The deletes the schema's foreign keys cascade, also on a connection that does not enforce
-- them: the stock `sqlite3` shell starts with `foreign_keys` off, so a person who deletes a
-- message or a session there used to leave its parts (and usage, keys, reverts, ...)
-- behind. SQLite reuses the largest rowid once its row is gone, so the next message the
-- store inserted took the deleted message's id and with it the parts left behind: its own
-- parts then collided with theirs (every append of the session failed), or it took theirs
-- as its own.
--
-- One trigger per parent table repeats, for each foreign key that points at it, the action
-- the key declares (ON DELETE CASCADE or SET NULL), only when foreign keys are off: with them
-- on SQLite does it already. A test holds these to the keys (`tests/cascades.rs`).

CREATE TRIGGER cascade_sessions_delete AFTER DELETE ON sessions
WHEN (SELECT foreign_keys FROM pragma_foreign_keys) = 0 BEGIN
    DELETE FROM messages WHERE session_id = OLD.id;
    DELETE FROM reverts WHERE session_id = OLD.id;
    DELETE FROM summaries WHERE session_id = OLD.id;
    DELETE FROM idempotency_keys WHERE session_id = OLD.id;
    UPDATE sessions SET parent_id = NULL WHERE parent_id = OLD.id;
END;

CREATE TRIGGER cascade_messages_delete AFTER DELETE ON messages
WHEN (SELECT foreign_keys FROM pragma_foreign_keys) = 0 BEGIN
    DELETE FROM parts WHERE message_id = OLD.id;
    DELETE FROM usage WHERE message_id = OLD.id;
    DELETE FROM idempotency_keys WHERE message_id = OLD.id;
END;

CREATE TRIGGER cascade_reverts_delete AFTER DELETE ON reverts
WHEN (SELECT foreign_keys FROM pragma_foreign_keys) = 0 BEGIN
    DELETE FROM reverted_messages WHERE revert_id = OLD.id;
    DELETE FROM summaries WHERE reverted_by = OLD.id;
END;

CREATE TRIGGER cascade_reverted_messages_delete AFTER DELETE ON reverted_messages
WHEN (SELECT foreign_keys FROM pragma_foreign_keys) = 0 BEGIN
    DELETE FROM reverted_parts WHERE reverted_message_id = OLD.id;
    DELETE FROM reverted_usage WHERE reverted_message_id = OLD.id;
END;
