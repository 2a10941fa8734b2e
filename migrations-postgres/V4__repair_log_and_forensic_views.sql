-- PostgreSQL dialect of migrations/V4__repair_log_and_forensic_views.sql: the repair log.
-- The forensic views are not part of this dialect's migrations: the SQLite views are moving
-- out of migrations (recreated at open from store/views.sql); the PostgreSQL ones follow the
-- same way: store/pg/views.sql, recreated at open when it changed.
CREATE TABLE IF NOT EXISTS repair_log (
    id          BIGSERIAL PRIMARY KEY,
    session_id  TEXT NOT NULL,
    rule        TEXT NOT NULL,
    action      TEXT NOT NULL,
    message_id  BIGINT,
    part_id     BIGINT,
    before_json TEXT,
    after_json  TEXT,
    repaired_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS repair_log_by_session ON repair_log (session_id, id);
