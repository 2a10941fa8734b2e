-- The PostgreSQL twin of migrations/V12__search_index_deferred.sql, which moves SQLite's FTS5
-- indexing out of the append (a catch-up before each search). PostgreSQL's index (V11: a
-- stored generated column with a GIN index, whose pending list already batches insertions)
-- needs no change: this migration exists so both dialects keep the same history (version and
-- name). The statement below reads no table and writes nothing.
SELECT 1 WHERE false;
