-- store-repair's log, and views that let a person read a broken session with the sqlite3 shell.
--
-- The views implement the contract's rules (shared CONTRACT.md) with the same definitions as
-- the library's check (history/rules.rs): the turn of a message is max(u - 1, 0), where u
-- counts the user messages up to it; system messages never break a tool pair. Pending calls
-- (their tool block ends the session) are legal and listed in session_turns, not as problems.

-- One row per change store-repair made: which rule it mends, what it did, to which message
-- and part, the values before and after as JSON.
CREATE TABLE IF NOT EXISTS repair_log (
    id          INTEGER PRIMARY KEY,
    session_id  TEXT NOT NULL,
    rule        TEXT NOT NULL,
    action      TEXT NOT NULL,
    message_id  INTEGER,
    part_id     INTEGER,
    before_json TEXT,
    after_json  TEXT,
    repaired_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS repair_log_by_session ON repair_log (session_id, id);

-- Every message with its contract turn and the user/assistant messages around it.
CREATE VIEW IF NOT EXISTS message_turns AS
SELECT id AS message_id, session_id, seq, role, compacted, created_at,
       turn_index AS stored_turn_index,
       MAX(users - 1, 0) AS turn,
       prev_speaker_seq, next_speaker_seq
FROM (
    SELECT m.id, m.session_id, m.seq, m.role, m.compacted, m.created_at, m.turn_index,
           SUM(m.role = 'user') OVER upto AS users,
           MAX(CASE WHEN m.role IN ('user', 'assistant') THEN m.seq END) OVER before_it AS prev_speaker_seq,
           MIN(CASE WHEN m.role IN ('user', 'assistant') THEN m.seq END) OVER after_it AS next_speaker_seq
    FROM messages m
    WINDOW upto AS (PARTITION BY m.session_id ORDER BY m.seq ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW),
           before_it AS (PARTITION BY m.session_id ORDER BY m.seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
           after_it AS (PARTITION BY m.session_id ORDER BY m.seq ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING)
);

-- Every part with its message's place; `part` is its position in the message (from 0).
-- (A count, not a window over parts: a filter on session_id must reach message_turns.)
CREATE VIEW IF NOT EXISTS message_parts AS
SELECT mt.session_id, mt.turn, mt.message_id, mt.seq, mt.role, mt.compacted, mt.created_at,
       p.id AS part_id,
       (SELECT COUNT(*) FROM parts e WHERE e.message_id = p.message_id AND e.ordinal < p.ordinal) AS part,
       p.kind, p.text, p.tool_use_id, p.tool_name, p.input, p.is_error,
       mt.prev_speaker_seq, mt.next_speaker_seq
FROM message_turns mt JOIN parts p ON p.message_id = mt.message_id;

-- Every tool_use: answered in the tool block after its message? does that block end the
-- session (then an unanswered call is pending, not dangling)? A tool_use outside an
-- assistant message (role <> 'assistant') can never be answered.
CREATE VIEW IF NOT EXISTS tool_calls AS
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

-- Each message with the compaction state of its turn and session. (One window partition per
-- level: SQLite pushes a filter on session_id into a subquery only when all its windows
-- share one PARTITION BY, and per-session queries must not compute every session.)
CREATE VIEW IF NOT EXISTS message_compaction AS
SELECT t.*,
       MIN(CASE WHEN compacted = 0 THEN seq END) OVER session_w AS session_first_visible_seq,
       MIN(CASE WHEN compacted = 0 THEN turn END) OVER session_w AS session_first_visible_turn
FROM (
    SELECT mt.*,
           MIN(seq) OVER turn_w AS turn_first_seq,
           COUNT(*) OVER turn_w AS turn_messages,
           SUM(compacted) OVER turn_w AS turn_compacted,
           MIN(CASE WHEN compacted = 0 THEN seq END) OVER turn_w AS turn_first_visible_seq,
           MIN(CASE WHEN compacted = 1 THEN seq END) OVER turn_w AS turn_first_compacted_seq
    FROM message_turns mt
    WINDOW turn_w AS (PARTITION BY session_id, turn)
) t
WINDOW session_w AS (PARTITION BY session_id);

-- One view per rule: a row per violation.
CREATE VIEW IF NOT EXISTS problem_turn_index_mismatch AS
SELECT 'turn_index_mismatch' AS rule, session_id, turn, message_id, seq,
       NULL AS part_id, NULL AS part, NULL AS tool_use_id,
       role || ' message seq ' || seq || ' has turn_index ' || stored_turn_index || ', expected ' || turn AS detail
FROM message_turns
WHERE stored_turn_index IS NOT turn;

CREATE VIEW IF NOT EXISTS problem_split_turn_compaction AS
SELECT 'split_turn_compaction' AS rule, session_id, turn, message_id, seq,
       NULL AS part_id, NULL AS part, NULL AS tool_use_id,
       'turn ' || turn || ': ' || turn_compacted || ' of ' || turn_messages
           || ' messages compacted; the cut falls inside the turn at seq ' || seq AS detail
FROM message_compaction
WHERE turn_compacted > 0 AND turn_compacted < turn_messages AND seq = turn_first_visible_seq;

CREATE VIEW IF NOT EXISTS problem_compaction_gap AS
SELECT 'compaction_gap' AS rule, session_id, turn, message_id, seq,
       NULL AS part_id, NULL AS part, NULL AS tool_use_id,
       'turn ' || turn || ' is compacted but turn ' || session_first_visible_turn || ' before it is not' AS detail
FROM message_compaction
WHERE compacted = 1 AND seq = turn_first_compacted_seq AND session_first_visible_seq < turn_first_seq;

CREATE VIEW IF NOT EXISTS problem_dangling_tool_use AS
SELECT 'dangling_tool_use' AS rule, session_id, turn, message_id, seq, part_id, part, tool_use_id,
       'tool_use "' || tool_use_id || '" (' || COALESCE(tool_name, '?') || ') at seq ' || seq
           || ' never got a result: its tool block ends without a result for it' AS detail
FROM tool_calls
WHERE NOT answered AND NOT at_end;

CREATE VIEW IF NOT EXISTS problem_orphan_tool_result AS
SELECT 'orphan_tool_result' AS rule, r.session_id, r.turn, r.message_id, r.seq, r.part_id, r.part, r.tool_use_id,
       'tool_result for "' || COALESCE(r.tool_use_id, '') || '" at seq ' || r.seq || ': '
           || CASE WHEN r.prev_speaker_seq IS NULL THEN 'no user or assistant message comes before it'
                   ELSE 'the message before its block (seq ' || r.prev_speaker_seq
                        || ') is not an assistant message with a tool_use of that id' END AS detail
FROM message_parts r
WHERE r.kind = 'tool_result'
  AND NOT EXISTS (
      SELECT 1 FROM messages a JOIN parts ap ON ap.message_id = a.id
      WHERE a.session_id = r.session_id AND a.seq = r.prev_speaker_seq AND a.role = 'assistant'
        AND ap.kind = 'tool_use' AND ap.tool_use_id = r.tool_use_id
  );

CREATE VIEW IF NOT EXISTS problem_duplicate_tool_use_id AS
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

CREATE VIEW IF NOT EXISTS problem_misplaced_tool_result AS
SELECT 'misplaced_tool_result' AS rule, session_id, turn, message_id, seq, part_id, part, tool_use_id,
       'tool_result for "' || COALESCE(tool_use_id, '') || '" sits in a ' || role
           || ' message (seq ' || seq || ')' AS detail
FROM message_parts
WHERE kind = 'tool_result' AND role <> 'tool';

-- Every violation of every rule.
CREATE VIEW IF NOT EXISTS problems AS
SELECT * FROM problem_turn_index_mismatch
UNION ALL SELECT * FROM problem_split_turn_compaction
UNION ALL SELECT * FROM problem_compaction_gap
UNION ALL SELECT * FROM problem_dangling_tool_use
UNION ALL SELECT * FROM problem_orphan_tool_result
UNION ALL SELECT * FROM problem_duplicate_tool_use_id
UNION ALL SELECT * FROM problem_misplaced_tool_result;

-- Each session's turns: where they start and end, how many messages, compacted (1 when every
-- message is), and the calls still pending at the end of the session.
CREATE VIEW IF NOT EXISTS session_turns AS
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

-- Tombstones: error results written for calls that never got a real one (by cancel_pending
-- or by store-repair).
CREATE VIEW IF NOT EXISTS tombstones AS
SELECT r.session_id, r.turn, r.message_id, r.seq, r.part_id, r.tool_use_id, r.text, r.created_at,
       EXISTS (SELECT 1 FROM repair_log l WHERE l.part_id = r.part_id AND l.action = 'tombstone') AS by_repair
FROM message_parts r
WHERE r.kind = 'tool_result' AND r.is_error = 1
  AND r.text LIKE 'Tool call cancelled before it returned a result%';
