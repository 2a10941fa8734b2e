-- The PostgreSQL twin of migrations/V14__no_insert_triggers_on_parts.sql, which drops
-- SQLite's two INSERT triggers on `parts` (a statement journal and a temporary table on
-- every append there). PostgreSQL keeps its trigger that clears `sessions.tail_state` on an
-- insert of a tool part: the tail state's shortcut (no part inserted anywhere since it was
-- written, read as the largest part id) holds on SQLite, whose writers take turns, but not
-- here, where another transaction may hold an id below ours and commit after us; the
-- trigger then clears the state behind it. PostgreSQL's full-text index is a generated
-- column (V11), with no trigger to drop. The statement below reads no table and writes
-- nothing.
SELECT 1 WHERE false;
