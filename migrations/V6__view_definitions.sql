-- The forensic views leave the migration chain (issue 9). From here on `store/views.rs`
-- owns them: when a writable store opens the file and the views were made from other SQL
-- than this build's `store/views.sql`, it drops every view it owns and creates them again,
-- in one transaction, then records here what it made: one row per view, with the FNV-1a 64
-- hash of the SQL text it came from. The views V4 and V5 created are replaced that way on
-- the first open after this migration (in this migration's own transaction).
CREATE TABLE IF NOT EXISTS store_views (
    name TEXT PRIMARY KEY,
    hash TEXT NOT NULL
);
