-- Second-release part kinds (image, document, server_tool_use, server_tool_result, opaque),
-- who wrote an assistant message (messages.model) and a session's title (sessions.title).
--
-- SQLite cannot alter a CHECK constraint, so `parts` is rebuilt the documented way inside
-- this migration's transaction (columns another writer added to an adopted `parts` table,
-- beyond the contract's, and its own indexes on it are not carried over): a new table with the wider CHECK, every row copied with its
-- id, the old table dropped, the new one renamed, its index recreated. Nothing references
-- parts(id) by foreign key (repair_log.part_id is a plain column), so no other table needs
-- rebuilding. Since SQLite 3.26 a RENAME re-checks every view, and the views of V4/V5 that
-- read `parts` would name a dropped table at that moment: they are dropped first and created
-- again afterwards (their current definitions, V5's where V5 replaced V4's), unchanged but
-- for problem_orphan_tool_result, which now also names a second answer to one call, as the
-- library's check does.
-- `reverted_parts` (V2) has no CHECK on kind and needs no rebuild; `reverted_messages`
-- mirrors the new `messages.model` column (store/revert.rs copies it both ways).

ALTER TABLE messages ADD COLUMN model TEXT;
ALTER TABLE sessions ADD COLUMN title TEXT;
ALTER TABLE reverted_messages ADD COLUMN model TEXT;

DROP VIEW IF EXISTS tombstones;
DROP VIEW IF EXISTS session_turns;
DROP VIEW IF EXISTS problems;
DROP VIEW IF EXISTS problem_misplaced_tool_result;
DROP VIEW IF EXISTS problem_duplicate_tool_use_id;
DROP VIEW IF EXISTS problem_orphan_tool_result;
DROP VIEW IF EXISTS problem_dangling_tool_use;
DROP VIEW IF EXISTS tool_calls;
DROP VIEW IF EXISTS message_parts;

CREATE TABLE parts_v7 (
    id                INTEGER PRIMARY KEY,
    message_id        INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    ordinal           INTEGER NOT NULL,
    kind              TEXT NOT NULL CHECK (kind IN ('text', 'reasoning', 'redacted_reasoning', 'tool_use', 'tool_result',
                                                    'image', 'document', 'server_tool_use', 'server_tool_result', 'opaque')),
    text              TEXT,
    tool_use_id       TEXT,
    tool_name         TEXT,
    input             TEXT,
    is_error          INTEGER NOT NULL DEFAULT 0 CHECK (is_error IN (0, 1)),
    provider_metadata TEXT,
    UNIQUE (message_id, ordinal)
);
-- Every row is copied, also one another writer stored with a kind outside the contract (a
-- table adopted by V1 may have no CHECK): it stays as it was, for store-repair to report as
-- `unreadable_row`, instead of failing the migration and with it every open.
PRAGMA ignore_check_constraints = ON;
INSERT INTO parts_v7 (id, message_id, ordinal, kind, text, tool_use_id, tool_name, input, is_error, provider_metadata)
SELECT id, message_id, ordinal, kind, text, tool_use_id, tool_name, input, is_error, provider_metadata FROM parts;
PRAGMA ignore_check_constraints = OFF;
DROP TABLE parts;
ALTER TABLE parts_v7 RENAME TO parts;
CREATE INDEX IF NOT EXISTS parts_by_tool_use_id ON parts (tool_use_id) WHERE tool_use_id IS NOT NULL;

-- The views, as V4 and V5 left them.

CREATE VIEW message_parts AS
SELECT mt.session_id, mt.turn, mt.message_id, mt.seq, mt.role, mt.compacted, mt.created_at,
       p.id AS part_id,
       (SELECT COUNT(*) FROM parts e WHERE e.message_id = p.message_id AND e.ordinal < p.ordinal) AS part,
       p.kind, p.text, p.tool_use_id, p.tool_name, p.input, p.is_error,
       mt.prev_speaker_seq, mt.next_speaker_seq
FROM message_turns mt JOIN parts p ON p.message_id = mt.message_id;

CREATE VIEW tool_calls AS
SELECT c.session_id, c.turn, c.message_id, c.seq, c.role, c.part_id, c.part, c.tool_use_id, c.tool_name,
       c.compacted, c.created_at,
       EXISTS (
           SELECT 1 FROM messages r JOIN parts rp ON rp.message_id = r.id
           WHERE r.session_id = c.session_id AND r.role = 'tool' AND rp.kind = 'tool_result'
             AND rp.tool_use_id = c.tool_use_id AND r.seq > c.seq
             AND (c.next_speaker_seq IS NULL OR r.seq < c.next_speaker_seq)
       ) AS answered,
       c.next_speaker_seq IS NULL AS at_end
FROM message_parts c
WHERE c.kind = 'tool_use';

CREATE VIEW problem_dangling_tool_use AS
SELECT 'dangling_tool_use' AS rule, session_id, turn, message_id, seq, part_id, part, tool_use_id,
       'tool_use "' || tool_use_id || '" (' || COALESCE(tool_name, '?') || ') at seq ' || seq
           || CASE WHEN role <> 'assistant'
                   THEN ' never got a result: it sits in a ' || role || ' message, where no result can answer it'
                   ELSE ' never got a result: its tool block ends without a result for it' END AS detail
FROM tool_calls
WHERE role <> 'assistant' OR COALESCE(tool_use_id, '') = '' OR (NOT answered AND NOT at_end);

-- orphan_tool_result, as the grammar reads it now: a call has exactly one answer, so a
-- second result for it in its block (tool messages, or the user message closing it) is an
-- orphan too. A call id used by n calls of the message takes n answers.
CREATE VIEW problem_orphan_tool_result AS
SELECT 'orphan_tool_result' AS rule, session_id, turn, message_id, seq, part_id, part, tool_use_id,
       'tool_result for "' || COALESCE(tool_use_id, '') || '" at seq ' || seq || ': '
           || CASE WHEN prev_speaker_seq IS NULL THEN 'no user or assistant message comes before it'
                   WHEN calls > 0 THEN 'its call is answered already (a call has exactly one answer)'
                   ELSE 'the message before its block (seq ' || prev_speaker_seq
                        || ') is not an assistant message with a tool_use of that id' END AS detail
FROM (
    SELECT r.*,
           (SELECT COUNT(*) FROM messages a JOIN parts ap ON ap.message_id = a.id
            WHERE a.session_id = r.session_id AND a.seq = r.prev_speaker_seq AND a.role = 'assistant'
              AND ap.kind = 'tool_use' AND ap.tool_use_id = r.tool_use_id AND r.tool_use_id <> ''
           ) AS calls,
           (SELECT COUNT(*) FROM message_parts e
            WHERE e.session_id = r.session_id AND e.kind = 'tool_result'
              AND e.tool_use_id = r.tool_use_id AND e.role IN ('tool', 'user')
              AND e.prev_speaker_seq = r.prev_speaker_seq
              AND (e.seq < r.seq OR (e.seq = r.seq AND e.part < r.part))
           ) AS earlier
    FROM message_parts r
    WHERE r.kind = 'tool_result'
)
WHERE calls <= earlier;

CREATE VIEW problem_duplicate_tool_use_id AS
SELECT 'duplicate_tool_use_id' AS rule, session_id, turn, message_id, seq, part_id, part, tool_use_id,
       'tool_use id "' || tool_use_id || '" at seq ' || seq || ' part ' || part
           || ' is used earlier in the session (first at seq ' || first_seq || ')' AS detail
FROM (
    SELECT u.*,
           ROW_NUMBER() OVER (PARTITION BY session_id, tool_use_id ORDER BY seq, part) AS nth,
           MIN(seq) OVER (PARTITION BY session_id, tool_use_id) AS first_seq
    FROM message_parts u
    WHERE u.kind = 'tool_use'
)
WHERE nth > 1;

CREATE VIEW problem_misplaced_tool_result AS
SELECT 'misplaced_tool_result' AS rule, session_id, turn, message_id, seq, part_id, part, tool_use_id,
       'tool_result for "' || COALESCE(tool_use_id, '') || '" sits in a ' || role
           || ' message (seq ' || seq || ')' AS detail
FROM message_parts
WHERE kind = 'tool_result' AND role <> 'tool';

CREATE VIEW problems AS
SELECT * FROM problem_turn_index_mismatch
UNION ALL SELECT * FROM problem_split_turn_compaction
UNION ALL SELECT * FROM problem_compaction_gap
UNION ALL SELECT * FROM problem_dangling_tool_use
UNION ALL SELECT * FROM problem_orphan_tool_result
UNION ALL SELECT * FROM problem_duplicate_tool_use_id
UNION ALL SELECT * FROM problem_misplaced_tool_result;

CREATE VIEW session_turns AS
SELECT t.session_id, t.turn, t.first_seq, t.last_seq, t.messages,
       CASE WHEN t.compacted_messages = t.messages THEN 1 ELSE 0 END AS compacted,
       t.compacted_messages,
       (SELECT COUNT(*) FROM messages a JOIN parts p ON p.message_id = a.id
        WHERE a.session_id = t.session_id AND a.seq BETWEEN t.first_seq AND t.last_seq
          AND p.kind = 'tool_use'
          AND NOT EXISTS (SELECT 1 FROM messages n WHERE n.session_id = a.session_id
                          AND n.seq > a.seq AND n.role IN ('user', 'assistant'))
          AND NOT EXISTS (SELECT 1 FROM messages r JOIN parts q ON q.message_id = r.id
                          WHERE r.session_id = a.session_id AND r.role = 'tool' AND r.seq > a.seq
                            AND q.kind = 'tool_result' AND q.tool_use_id = p.tool_use_id)
       ) AS pending_calls
FROM (
    SELECT session_id, turn, seq,
           MIN(seq) OVER turn_w AS first_seq, MAX(seq) OVER turn_w AS last_seq,
           COUNT(*) OVER turn_w AS messages, SUM(compacted) OVER turn_w AS compacted_messages
    FROM message_turns
    WINDOW turn_w AS (PARTITION BY session_id, turn)
) t
WHERE t.seq = t.first_seq;

CREATE VIEW tombstones AS
SELECT r.session_id, r.turn, r.message_id, r.seq, r.part_id, r.tool_use_id, r.text, r.created_at,
       EXISTS (SELECT 1 FROM repair_log l WHERE l.part_id = r.part_id AND l.action = 'tombstone') AS by_repair
FROM message_parts r
WHERE r.kind = 'tool_result' AND r.is_error = 1
  AND r.text LIKE 'Tool call cancelled before it returned a result%';
