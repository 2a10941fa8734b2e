-- PostgreSQL dialect of migrations/V7__part_kinds_model_title.sql: the second-release part
-- kinds (image, document, server_tool_use, server_tool_result, opaque), who wrote an
-- assistant message (messages.model) and a session's title (sessions.title).
--
-- PostgreSQL alters a CHECK in place, so `parts` is not rebuilt: V1's inline CHECK on kind
-- (named parts_kind_check) is dropped and the wider one added NOT VALID, which checks every
-- new or updated row and leaves a row another writer stored with a kind outside the contract
-- as it was, for store-repair to report (as SQLite's copy with ignore_check_constraints does).
-- `reverted_parts` has no CHECK on kind; `reverted_messages` mirrors messages.model.

ALTER TABLE messages ADD COLUMN IF NOT EXISTS model TEXT;
ALTER TABLE sessions ADD COLUMN IF NOT EXISTS title TEXT;
ALTER TABLE reverted_messages ADD COLUMN IF NOT EXISTS model TEXT;

ALTER TABLE parts DROP CONSTRAINT IF EXISTS parts_kind_check;
ALTER TABLE parts ADD CONSTRAINT parts_kind_check CHECK (kind IN (
    'text', 'reasoning', 'redacted_reasoning', 'tool_use', 'tool_result',
    'image', 'document', 'server_tool_use', 'server_tool_result', 'opaque')) NOT VALID;
