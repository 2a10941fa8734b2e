-- PostgreSQL dialect of migrations/V5__dangling_outside_assistant_and_idless_calls.sql. In
-- SQLite this migration redefines two forensic views; PostgreSQL's views are not kept in
-- migrations (see V4), so nothing changes here. Kept so both dialects share one history.
SELECT 1;
