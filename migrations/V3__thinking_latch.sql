-- Thinking retention state (issue 4), kept in the session row so it survives a restart.
-- thinking_latched: 1 once the session sat idle past the threshold; stays on until cleared.
-- last_completion_at: RFC 3339 time of the last completed assistant message, NULL if unknown.
-- Both have defaults, so an INSERT naming only the contract's columns still works.
ALTER TABLE sessions ADD COLUMN thinking_latched INTEGER NOT NULL DEFAULT 0 CHECK (thinking_latched IN (0, 1));
ALTER TABLE sessions ADD COLUMN last_completion_at TEXT;
