-- The SQLite twin of migrations-postgres/V11__search_index.sql, which gives PostgreSQL its
-- full-text index. SQLite has had one since V8 (FTS5 `parts_fts`, kept by triggers), so this
-- migration changes nothing: it exists so both dialects keep the same history (version and
-- name). The statement below is valid SQL that reads no table and writes nothing.
SELECT 1 WHERE 0;
