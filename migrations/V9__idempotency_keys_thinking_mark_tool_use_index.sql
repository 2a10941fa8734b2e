-- Issue 16: idempotent appends, a prefix-stable thinking latch, and a lighter index on parts.
-- Every addition is nullable, defaulted or a new table: a plain INSERT naming only the
-- contract's columns still works.

-- Idempotent append: a caller's key for a message, unique within its session. A retry after
-- an ambiguous failure (timeout, crash between commit and acknowledgement) finds the key and
-- gets the stored message back instead of storing it twice. A table of its own, not a column
-- of `messages`: appends without a key (most of them) pay nothing, and the row goes with its
-- message (ON DELETE CASCADE: a reverted or deleted message frees its key).
CREATE TABLE IF NOT EXISTS idempotency_keys (
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    key         TEXT NOT NULL,
    message_id  INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    PRIMARY KEY (session_id, key)
) WITHOUT ROWID;
-- The cascade from messages looks its rows up by message.
CREATE INDEX IF NOT EXISTS idempotency_keys_by_message ON idempotency_keys (message_id);

-- Thinking retention (history/thinking.rs): the seq of the session's last message when the
-- idle latch last fired. Reasoning is stripped from assistant messages up to there (except the
-- most recent ones kept) and kept on every later message, so each request after the latch
-- keeps the one before it as a byte prefix. NULL: never fired (or fired before this column
-- existed; the next export sets it).
ALTER TABLE sessions ADD COLUMN thinking_stripped_through INTEGER;

-- The tool_use id index held tool_results too, and every insert of either paid for a
-- random-place B-tree insert (provider ids are random). Only tool_uses are looked up by id
-- (is this id taken in the session?); results are found through their message.
DROP INDEX IF EXISTS parts_by_tool_use_id;
CREATE INDEX IF NOT EXISTS parts_tool_use_ids ON parts (tool_use_id)
    WHERE kind = 'tool_use' AND tool_use_id IS NOT NULL;

-- How many messages each session holds, kept by triggers on every insert and delete, whoever
-- runs it (appends, reverts and their undo, repairs, cascades, other writers on this schema),
-- so listing sessions reads one row per session instead of counting every session's index
-- entries (BENCHMARKS.md: 10,000 sessions of 100 messages).
ALTER TABLE sessions ADD COLUMN message_count INTEGER NOT NULL DEFAULT 0;
UPDATE sessions SET message_count = (SELECT COUNT(*) FROM messages m WHERE m.session_id = sessions.id);
CREATE TRIGGER IF NOT EXISTS sessions_count_message_insert AFTER INSERT ON messages BEGIN
    UPDATE sessions SET message_count = message_count + 1 WHERE id = NEW.session_id;
END;
CREATE TRIGGER IF NOT EXISTS sessions_count_message_delete AFTER DELETE ON messages BEGIN
    UPDATE sessions SET message_count = message_count - 1 WHERE id = OLD.session_id;
END;
CREATE TRIGGER IF NOT EXISTS sessions_count_message_move AFTER UPDATE OF session_id ON messages
WHEN OLD.session_id IS NOT NEW.session_id BEGIN
    UPDATE sessions SET message_count = message_count - 1 WHERE id = OLD.session_id;
    UPDATE sessions SET message_count = message_count + 1 WHERE id = NEW.session_id;
END;
-- A session row written after its messages (by a writer without foreign keys) counts them.
CREATE TRIGGER IF NOT EXISTS sessions_count_on_create AFTER INSERT ON sessions BEGIN
    UPDATE sessions SET message_count = (SELECT COUNT(*) FROM messages m WHERE m.session_id = NEW.id)
    WHERE id = NEW.id;
END;
