-- A schema a distributed engine (Citus) can shard by session, on plain PostgreSQL the same
-- store with the same rows. Every table of session data carries the session's id (`sessions`
-- its own `id`), so each table can be distributed by it, colocated with `sessions`:
--
-- - `parts`, `usage`, `reverted_parts` and `reverted_usage` gain `session_id`, filled here
--   from their message (a `usage` row with no message, which no query ever read, is dropped:
--   a distributed row needs its session) and written by the store from now on;
-- - every PRIMARY KEY and UNIQUE constraint includes `session_id` (ids stay drawn from their
--   sequences, so they stay unique in the database as before; the keys only gain a column);
-- - every foreign key among session data includes it on both sides (`parts (session_id,
--   message_id) -> messages (session_id, id)`, and so on), with the same ON DELETE CASCADE;
-- - lineage is a plain column: `sessions.parent_id` loses its foreign key to `sessions(id)`
--   (a key between two rows of one distributed table that are not on one shard), and
--   deleting a session sets its children's `parent_id` to NULL in the store's own statement
--   (`store/retention.rs`), as the key's ON DELETE SET NULL did;
-- - no trigger: the message count, the tail state (`sessions.tail_state`) and the search
--   document's reset (`parts.search_document`) are kept by the statements that change the
--   rows, in the same transaction, as on SQLite's append (a distributed table takes no
--   trigger that reads another shard). The store's appends keep the session's largest part
--   id in the tail state and check it, with the open block's part count, against the rows
--   (`session_store_tail_for_write`), so a part another writer inserts into the session is
--   seen without a trigger; other code that updates or deletes a session's messages or
--   parts sets its `tail_state` to NULL (and a rewritten part's `search_document`), as the
--   store's statements do (docs/CONTRACT.md).
--
-- The tail state of every session is cleared once here: the next append of each rebuilds it
-- from its rows, in the new form.

-- The triggers and their functions.
DROP TRIGGER IF EXISTS parts_search_document_update ON parts;
DROP TRIGGER IF EXISTS sessions_count_message_delete ON messages;
DROP TRIGGER IF EXISTS sessions_count_message_move ON messages;
DROP TRIGGER IF EXISTS sessions_count_message_insert ON messages;
DROP TRIGGER IF EXISTS sessions_count_on_create ON sessions;
DROP TRIGGER IF EXISTS sessions_tail_message_update ON messages;
DROP TRIGGER IF EXISTS sessions_tail_part_delete ON parts;
DROP TRIGGER IF EXISTS sessions_tail_part_insert ON parts;
DROP TRIGGER IF EXISTS sessions_tail_part_update ON parts;
DROP FUNCTION IF EXISTS parts_forget_search_document();
DROP FUNCTION IF EXISTS sessions_count_messages();
DROP FUNCTION IF EXISTS sessions_count_on_create();
DROP FUNCTION IF EXISTS sessions_clear_tail_of_message();
DROP FUNCTION IF EXISTS sessions_clear_tail_of_part();

-- Every foreign key that names an `id` alone goes first (the keys they lean on change).
ALTER TABLE sessions DROP CONSTRAINT IF EXISTS sessions_parent_id_fkey;
ALTER TABLE parts DROP CONSTRAINT IF EXISTS parts_message_id_fkey;
ALTER TABLE usage DROP CONSTRAINT IF EXISTS usage_message_id_fkey;
ALTER TABLE idempotency_keys DROP CONSTRAINT IF EXISTS idempotency_keys_message_id_fkey;
ALTER TABLE reverted_messages DROP CONSTRAINT IF EXISTS reverted_messages_revert_id_fkey;
ALTER TABLE reverted_parts DROP CONSTRAINT IF EXISTS reverted_parts_reverted_message_id_fkey;
ALTER TABLE reverted_usage DROP CONSTRAINT IF EXISTS reverted_usage_reverted_message_id_fkey;
ALTER TABLE summaries DROP CONSTRAINT IF EXISTS summaries_reverted_by_fkey;

-- The session column where it was missing, filled from the row's message.
ALTER TABLE parts ADD COLUMN session_id TEXT;
UPDATE parts p SET session_id = m.session_id FROM messages m WHERE m.id = p.message_id;
DELETE FROM parts WHERE session_id IS NULL;
ALTER TABLE parts ALTER COLUMN session_id SET NOT NULL;

ALTER TABLE usage ADD COLUMN session_id TEXT;
UPDATE usage u SET session_id = m.session_id FROM messages m WHERE m.id = u.message_id;
DELETE FROM usage WHERE session_id IS NULL;
ALTER TABLE usage ALTER COLUMN session_id SET NOT NULL;
ALTER TABLE usage ALTER COLUMN message_id SET NOT NULL;

ALTER TABLE reverted_parts ADD COLUMN session_id TEXT;
UPDATE reverted_parts p SET session_id = r.session_id
FROM reverted_messages r WHERE r.id = p.reverted_message_id;
DELETE FROM reverted_parts WHERE session_id IS NULL;
ALTER TABLE reverted_parts ALTER COLUMN session_id SET NOT NULL;

ALTER TABLE reverted_usage ADD COLUMN session_id TEXT;
UPDATE reverted_usage u SET session_id = r.session_id
FROM reverted_messages r WHERE r.id = u.reverted_message_id;
DELETE FROM reverted_usage WHERE session_id IS NULL;
ALTER TABLE reverted_usage ALTER COLUMN session_id SET NOT NULL;

-- Primary and unique keys that include the session.
ALTER TABLE messages DROP CONSTRAINT messages_pkey;
ALTER TABLE messages ADD CONSTRAINT messages_pkey PRIMARY KEY (session_id, id);
ALTER TABLE parts DROP CONSTRAINT parts_pkey;
ALTER TABLE parts ADD CONSTRAINT parts_pkey PRIMARY KEY (session_id, id);
ALTER TABLE parts DROP CONSTRAINT IF EXISTS parts_message_id_ordinal_key;
ALTER TABLE parts ADD CONSTRAINT parts_session_id_message_id_ordinal_key
    UNIQUE (session_id, message_id, ordinal);
ALTER TABLE reverts DROP CONSTRAINT reverts_pkey;
ALTER TABLE reverts ADD CONSTRAINT reverts_pkey PRIMARY KEY (session_id, id);
ALTER TABLE reverted_messages DROP CONSTRAINT reverted_messages_pkey;
ALTER TABLE reverted_messages ADD CONSTRAINT reverted_messages_pkey PRIMARY KEY (session_id, id);
ALTER TABLE reverted_parts DROP CONSTRAINT reverted_parts_pkey;
ALTER TABLE reverted_parts ADD CONSTRAINT reverted_parts_pkey PRIMARY KEY (session_id, id);
ALTER TABLE summaries DROP CONSTRAINT summaries_pkey;
ALTER TABLE summaries ADD CONSTRAINT summaries_pkey PRIMARY KEY (session_id, id);
ALTER TABLE repair_log DROP CONSTRAINT repair_log_pkey;
ALTER TABLE repair_log ADD CONSTRAINT repair_log_pkey PRIMARY KEY (session_id, id);

-- Foreign keys along the session.
ALTER TABLE parts ADD CONSTRAINT parts_message_fkey FOREIGN KEY (session_id, message_id)
    REFERENCES messages (session_id, id) ON DELETE CASCADE;
ALTER TABLE usage ADD CONSTRAINT usage_message_fkey FOREIGN KEY (session_id, message_id)
    REFERENCES messages (session_id, id) ON DELETE CASCADE;
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_message_fkey
    FOREIGN KEY (session_id, message_id) REFERENCES messages (session_id, id) ON DELETE CASCADE;
ALTER TABLE reverted_messages ADD CONSTRAINT reverted_messages_revert_fkey
    FOREIGN KEY (session_id, revert_id) REFERENCES reverts (session_id, id) ON DELETE CASCADE;
ALTER TABLE reverted_parts ADD CONSTRAINT reverted_parts_message_fkey
    FOREIGN KEY (session_id, reverted_message_id) REFERENCES reverted_messages (session_id, id)
    ON DELETE CASCADE;
ALTER TABLE reverted_usage ADD CONSTRAINT reverted_usage_message_fkey
    FOREIGN KEY (session_id, reverted_message_id) REFERENCES reverted_messages (session_id, id)
    ON DELETE CASCADE;
-- MATCH SIMPLE: a live summary (`reverted_by` NULL) references nothing.
ALTER TABLE summaries ADD CONSTRAINT summaries_revert_fkey FOREIGN KEY (session_id, reverted_by)
    REFERENCES reverts (session_id, id) ON DELETE CASCADE;
-- The reverted messages of a revert go with their session too (they had no key of their own).
ALTER TABLE reverted_messages ADD CONSTRAINT reverted_messages_session_fkey
    FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE;

-- Indexes led by the session, each query of one session reads one session's entries.
DROP INDEX IF EXISTS parts_tool_use_ids;
CREATE INDEX parts_tool_use_ids ON parts (session_id, tool_use_id)
    WHERE kind = 'tool_use' AND tool_use_id IS NOT NULL;
DROP INDEX IF EXISTS usage_by_message;
CREATE INDEX usage_by_message ON usage (session_id, message_id);
DROP INDEX IF EXISTS idempotency_keys_by_message;
CREATE INDEX idempotency_keys_by_message ON idempotency_keys (session_id, message_id);
DROP INDEX IF EXISTS reverted_messages_by_revert;
CREATE INDEX reverted_messages_by_revert ON reverted_messages (session_id, revert_id, seq);
DROP INDEX IF EXISTS reverted_parts_by_message;
CREATE INDEX reverted_parts_by_message ON reverted_parts (session_id, reverted_message_id, ordinal);
DROP INDEX IF EXISTS reverted_usage_by_message;
CREATE INDEX reverted_usage_by_message ON reverted_usage (session_id, reverted_message_id);
DROP INDEX IF EXISTS summaries_by_revert;
CREATE INDEX summaries_by_revert ON summaries (session_id, reverted_by) WHERE reverted_by IS NOT NULL;

-- The append's first round trip (V16's) also reads what the tail state is checked against
-- now that no trigger clears it on an insert: the session's largest part id (an index-only
-- probe of `parts_pkey`) and the number of parts in its open block (the messages from its
-- last user or assistant message on: a few index probes), each in the session.
-- It also answers which of the append's calls (`calls`, their tool_use ids) the session
-- already uses, so the append's probe of its ids is no round trip of its own.
-- In PL/pgSQL now: its statements' plans are kept for the connection's life (a SQL function
-- planned both of them again on every call); each statement still takes a fresh snapshot,
-- so the second reads what the lock holder committed.
DROP FUNCTION IF EXISTS session_store_tail_for_write(TEXT);
DROP FUNCTION IF EXISTS session_store_tail_for_write(TEXT, TEXT[]);
CREATE FUNCTION session_store_tail_for_write(session TEXT, calls TEXT[])
RETURNS TABLE (tail_state TEXT, last_seq BIGINT, open_messages BOOLEAN, last_part BIGINT,
               block_parts BIGINT, taken TEXT[])
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
BEGIN
    PERFORM 1 FROM sessions WHERE id = session FOR UPDATE;
    RETURN QUERY
    SELECT s.tail_state,
           (SELECT COALESCE(MAX(m.seq), 0) FROM messages m WHERE m.session_id = session),
           EXISTS (SELECT 1 FROM messages m WHERE m.session_id = session AND m.state = 'open'),
           (SELECT COALESCE(MAX(p.id), 0) FROM parts p WHERE p.session_id = session),
           (SELECT COUNT(*) FROM messages m
            JOIN parts p ON p.session_id = m.session_id AND p.message_id = m.id
            WHERE m.session_id = session AND m.seq >= COALESCE(
                (SELECT b.seq FROM messages b
                 WHERE b.session_id = session AND b.role IN ('user', 'assistant')
                 ORDER BY b.seq DESC LIMIT 1), 0)),
           ARRAY(SELECT DISTINCT p.tool_use_id FROM parts p
                 WHERE p.session_id = session AND p.kind = 'tool_use'
                   AND p.tool_use_id = ANY (calls))
    FROM sessions s WHERE s.id = session;
END;
$$;

UPDATE sessions SET tail_state = NULL WHERE tail_state IS NOT NULL;
