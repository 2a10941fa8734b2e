-- The SQLite twin of ../migrations-postgres/V16__append_round_trips_search_catch_up.sql,
-- which gives PostgreSQL's append one round trip for the session's lock and tail state
-- (SQLite's `BEGIN IMMEDIATE` holds the file's lock already, and the tail is one statement
-- here). This migration exists so both dialects keep the same history (version and name).
-- The statement below reads no table and writes nothing.
SELECT 1 WHERE false;
