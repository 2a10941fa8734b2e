-- The SQLite twin of ../migrations-postgres/V20__append_reads_by_key.sql, which replaces
-- PostgreSQL's tail-read function. SQLite has no such function (its tail read is a
-- statement in `store/sqlite.rs`); this migration keeps both dialects' history in step.
-- The statement below reads no table and writes nothing.
SELECT 1 WHERE false;
