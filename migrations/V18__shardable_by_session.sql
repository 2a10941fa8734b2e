-- The SQLite twin of ../migrations-postgres/V18__shardable_by_session.sql, which gives every
-- PostgreSQL table its session's id (keys and foreign keys along it, no trigger) so that a
-- distributed engine can shard the store by session. A SQLite database is one file and is
-- never sharded: its tables keep their columns and triggers (a session column on `parts`
-- would cost disk and time on every append). This migration exists so both dialects keep the
-- same history (version and name). The statement below reads no table and writes nothing.
SELECT 1 WHERE false;
