-- The PostgreSQL twin of ../migrations/V21__cascades_without_foreign_keys.sql, which makes
-- SQLite cascade deletes on a connection that does not enforce foreign keys (the `sqlite3`
-- shell's default). PostgreSQL always enforces them; this migration keeps both dialects'
-- history in step. The statement below reads no table and writes nothing.
SELECT 1 WHERE false;
