-- The SQLite twin of ../migrations-postgres/V22__search_document_bounded.sql, which bounds a
-- part's PostgreSQL search document to its first 100,000 characters (a tsvector holds at
-- most 1 MB; a larger one failed every search of the database). SQLite's FTS5 index has no
-- such limit and keeps indexing all of a part; this migration keeps both dialects' history
-- in step. The statement below reads no table and writes nothing.
SELECT 1 WHERE false;
