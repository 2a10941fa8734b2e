-- An append's first round trip (store/write.rs, `append_in`, through `Sql::tail_row`): the
-- session's row lock, then its tail state, its last seq and whether a message is streaming,
-- read after the lock is granted. One statement cannot do both: under READ COMMITTED a
-- `SELECT ... FOR UPDATE` that waited for another writer returns the row as that writer
-- committed it, but its subqueries still read the snapshot taken before the wait (a last
-- seq one append behind the state). A VOLATILE SQL function takes a fresh snapshot for each
-- of its statements, so the second reads what the lock holder committed; the client sends
-- one statement. It reads the session's own rows only (its row by id, its messages by
-- `session_id`). No row: no such session.
CREATE OR REPLACE FUNCTION session_store_tail_for_write(session TEXT)
RETURNS TABLE (tail_state TEXT, last_seq BIGINT, open_messages BOOLEAN)
LANGUAGE SQL VOLATILE
AS $$
    SELECT 1 FROM sessions WHERE id = session FOR UPDATE;
    SELECT s.tail_state,
           (SELECT COALESCE(MAX(m.seq), 0) FROM messages m WHERE m.session_id = session),
           EXISTS (SELECT 1 FROM messages m WHERE m.session_id = session AND m.state = 'open')
    FROM sessions s WHERE s.id = session;
$$;
