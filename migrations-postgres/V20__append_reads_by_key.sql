-- An append's cost on PostgreSQL, whatever the planner's statistics: the tail read of every
-- write (`session_store_tail_for_write`) by plans answered by a key, and a part's insert
-- without an entry in the full-text index (see the end).
--
-- PL/pgSQL keeps a generic plan per statement. Planned before `ANALYZE` has seen the
-- tables (a new database, for the first minute or so), V18's statements read every row of
-- the session: "the last user or assistant message" as a scan of the session's messages and
-- a sort, and the calls' probe as a scan of every call of the session filtered by id (1.2 ms
-- an append at 2,000 messages, growing with the session). Here each statement is one the
-- planner can only answer by a key: the largest seq and part id (an index's end), each
-- message walked back from the last by its (session, seq) key until a user or assistant
-- one, with its parts counted by (session, message) (a gap in the seqs falls back to V18's
-- statement), and each call id probed alone on `parts_tool_use_ids`.
--
-- One function serves writes and reads: `session_store_tail(session, calls, lock_session)`
-- locks the session's row first when `lock_session` (a write: its later statements then
-- read what was committed before the lock), and probes `calls` (NULL: none). It replaces
-- V16/V18's `session_store_tail_for_write`; the columns are V18's.

DROP FUNCTION IF EXISTS session_store_tail_for_write(TEXT, TEXT[]);
CREATE FUNCTION session_store_tail(session TEXT, calls TEXT[], lock_session BOOLEAN)
RETURNS TABLE (tail_state TEXT, last_seq BIGINT, open_messages BOOLEAN, last_part BIGINT,
               block_parts BIGINT, taken TEXT[])
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    state TEXT;
    top BIGINT;
    top_part BIGINT;
    open BOOLEAN;
    block BIGINT := 0;
    walked BIGINT;
    walked_role TEXT;
    walked_parts BIGINT;
    one_call TEXT;
    stored TEXT[] := '{}';
BEGIN
    IF lock_session THEN
        SELECT s.tail_state INTO state FROM sessions s WHERE s.id = session FOR UPDATE;
    ELSE
        SELECT s.tail_state INTO state FROM sessions s WHERE s.id = session;
    END IF;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- After the lock (each statement a new snapshot: what the previous writer committed).
    -- One statement each: PL/pgSQL keeps a plan per statement from its first runs, when the
    -- tables may be nearly empty; the three in one statement kept a plan that read every
    -- row of the session.
    top := (SELECT COALESCE(MAX(m.seq), 0) FROM messages m WHERE m.session_id = session);
    top_part := (SELECT COALESCE(MAX(p.id), 0) FROM parts p WHERE p.session_id = session);
    open := EXISTS (SELECT 1 FROM messages m WHERE m.session_id = session AND m.state = 'open');
    -- The open block: from the last user or assistant message to the end, walked back
    -- message by message by key, each message's parts counted by key.
    walked := top;
    WHILE walked > 0 LOOP
        SELECT m.role, (SELECT COUNT(*) FROM parts p
                        WHERE p.session_id = session AND p.message_id = m.id)
        INTO walked_role, walked_parts
        FROM messages m WHERE m.session_id = session AND m.seq = walked;
        IF NOT FOUND THEN
            -- A gap in the seqs: the block counted by V18's statement.
            block := (SELECT COUNT(*) FROM messages m
                      JOIN parts p ON p.session_id = m.session_id AND p.message_id = m.id
                      WHERE m.session_id = session AND m.seq >= COALESCE(
                          (SELECT MAX(b.seq) FROM messages b
                           WHERE b.session_id = session AND b.role IN ('user', 'assistant')),
                          0));
            EXIT;
        END IF;
        block := block + walked_parts;
        EXIT WHEN walked_role IN ('user', 'assistant');
        walked := walked - 1;
    END LOOP;
    -- Each call id probed alone, on `parts_tool_use_ids`.
    FOREACH one_call IN ARRAY COALESCE(calls, '{}') LOOP
        IF NOT one_call = ANY (stored) THEN
            PERFORM 1 FROM parts p
            WHERE p.session_id = session AND p.kind = 'tool_use' AND p.tool_use_id = one_call;
            IF FOUND THEN
                stored := stored || one_call;
            END IF;
        END IF;
    END LOOP;
    tail_state := state;
    last_seq := top;
    open_messages := open;
    last_part := top_part;
    block_parts := block;
    taken := stored;
    RETURN NEXT;
END;
$$;

-- The full-text index holds only indexed parts: a part is inserted with a NULL document, and
-- a GIN index enters a NULL too (an entry on every insert, through the index's one pending
-- list that every writer locks). A search's `search_document @@ query` implies NOT NULL, so
-- the planner still uses it. The parts waiting for their document are listed by session, so
-- writers of different sessions do not all insert at the end of one index.
DROP INDEX IF EXISTS parts_search;
CREATE INDEX parts_search ON parts USING GIN (search_document) WHERE search_document IS NOT NULL;
DROP INDEX IF EXISTS parts_unindexed;
CREATE INDEX parts_unindexed ON parts (session_id, id) WHERE search_document IS NULL;
