-- PostgreSQL dialect of migrations/V3__thinking_latch.sql: the idle latch of thinking retention.
ALTER TABLE sessions ADD COLUMN IF NOT EXISTS thinking_latched BIGINT NOT NULL DEFAULT 0 CHECK (thinking_latched IN (0, 1));
ALTER TABLE sessions ADD COLUMN IF NOT EXISTS last_completion_at TEXT;
