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

-- The full-text index no longer taxes every insert (SQLite's V12, in PostgreSQL's terms).
-- V11's stored generated column made the server parse every part's text into a tsvector and
-- add it to the GIN index inside the append (0.19 ms of server time for a parts INSERT, 0.02
-- ms without). From here on `parts.search_document` is a plain column, NULL until the part
-- is indexed: the store catches up (every part whose document is NULL, one UPDATE, under an
-- advisory lock so that two searches do not index the same rows) before each search, in a
-- write transaction of its own (`store/pg/search.rs`). A partial index finds those parts
-- (a small B-tree entry per inserted part, dropped once it is indexed); the GIN index only
-- grows at the catch-up. A change of what a part says (its kind, text, tool name or input),
-- by any writer, plain SQL from other code included, sets its document back to NULL for the
-- next catch-up (a trigger on UPDATE only: an insert pays nothing). What the document holds
-- is still `parts_search_document` (V11), so the hits are the same. Dropping the generated
-- column drops V11's index; the existing parts are indexed here, once.
ALTER TABLE parts DROP COLUMN IF EXISTS search_document;
ALTER TABLE parts ADD COLUMN search_document tsvector;
UPDATE parts SET search_document = parts_search_document(kind, text, tool_name, input);
CREATE INDEX parts_search ON parts USING GIN (search_document);
CREATE INDEX parts_unindexed ON parts (id) WHERE search_document IS NULL;

CREATE OR REPLACE FUNCTION parts_forget_search_document() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.search_document := NULL;
    RETURN NEW;
END;
$$;
DROP TRIGGER IF EXISTS parts_search_document_update ON parts;
CREATE TRIGGER parts_search_document_update
    BEFORE UPDATE OF kind, text, tool_name, input ON parts
    FOR EACH ROW
    WHEN (OLD.kind IS DISTINCT FROM NEW.kind OR OLD.text IS DISTINCT FROM NEW.text
          OR OLD.tool_name IS DISTINCT FROM NEW.tool_name OR OLD.input IS DISTINCT FROM NEW.input)
    EXECUTE FUNCTION parts_forget_search_document();
