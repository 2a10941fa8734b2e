-- The PostgreSQL twin of ../migrations/V23__call_ids_kept_by_the_writer.sql, which drops
-- SQLite's index of every call id (its write connection keeps each session's ids instead).
-- PostgreSQL keeps `parts_tool_use_ids (session_id, tool_use_id)`: its appends probe it by
-- the session's key, and its writers are many processes that keep nothing. This migration
-- keeps both dialects' history in step. The statement below reads no table and writes
-- nothing.
SELECT 1 WHERE false;
