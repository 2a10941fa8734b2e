-- PostgreSQL dialect of migrations/V6__view_definitions.sql. In SQLite this migration hands
-- the forensic views over to store/views.sql; PostgreSQL's views never were in migrations
-- (store/pg/views.sql, recreated at open when it changed), so nothing changes here. Kept so
-- both dialects share one history.
SELECT 1;
