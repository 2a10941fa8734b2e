-- The forensic views in PostgreSQL's dialect: the same names, columns and rules as the SQLite
-- views (migrations V4 and V5 there), recreated at open when this text changed (its checksum
-- is the comment on the view `problems`). One `problem_<rule>` view per contract rule and
-- `problems` (all of them), `session_turns`, `tool_calls`, `tombstones`, with the helpers
-- `message_turns`, `message_parts` and `message_compaction`.
DROP VIEW IF EXISTS tombstones, session_turns, problems, problem_misplaced_tool_result,
    problem_duplicate_tool_use_id, problem_orphan_tool_result, problem_dangling_tool_use,
    problem_compaction_gap, problem_split_turn_compaction, problem_turn_index_mismatch,
    message_compaction, tool_calls, message_parts, message_turns CASCADE;

CREATE VIEW message_turns AS
SELECT id AS message_id, session_id, seq, role, compacted, created_at,
       turn_index AS stored_turn_index,
       GREATEST(users - 1, 0) AS turn,
       prev_speaker_seq, next_speaker_seq
FROM (
    SELECT m.id, m.session_id, m.seq, m.role, m.compacted, m.created_at, m.turn_index,
           SUM(CASE WHEN m.role = 'user' THEN 1 ELSE 0 END) OVER upto AS users,
           MAX(CASE WHEN m.role IN ('user', 'assistant') THEN m.seq END) OVER before_it AS prev_speaker_seq,
           MIN(CASE WHEN m.role IN ('user', 'assistant') THEN m.seq END) OVER after_it AS next_speaker_seq
    FROM messages m
    WINDOW upto AS (PARTITION BY m.session_id ORDER BY m.seq ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW),
           before_it AS (PARTITION BY m.session_id ORDER BY m.seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
           after_it AS (PARTITION BY m.session_id ORDER BY m.seq ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING)
) AS w;

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

CREATE VIEW message_compaction AS
SELECT t.*,
       MIN(CASE WHEN compacted = 0 THEN seq END) OVER session_w AS session_first_visible_seq,
       MIN(CASE WHEN compacted = 0 THEN turn END) OVER session_w AS session_first_visible_turn
FROM (
    SELECT mt.*,
           MIN(seq) OVER turn_w AS turn_first_seq,
           COUNT(*) OVER turn_w AS turn_messages,
           (SUM(compacted) OVER turn_w)::BIGINT AS turn_compacted,
           MIN(CASE WHEN compacted = 0 THEN seq END) OVER turn_w AS turn_first_visible_seq,
           MIN(CASE WHEN compacted = 1 THEN seq END) OVER turn_w AS turn_first_compacted_seq
    FROM message_turns mt
    WINDOW turn_w AS (PARTITION BY session_id, turn)
) t
WINDOW session_w AS (PARTITION BY session_id);

CREATE VIEW problem_turn_index_mismatch AS
SELECT 'turn_index_mismatch'::TEXT AS rule, session_id, turn, message_id, seq,
       NULL::BIGINT AS part_id, NULL::BIGINT AS part, NULL::TEXT AS tool_use_id,
       role || ' message seq ' || seq || ' has turn_index ' || stored_turn_index || ', expected ' || turn AS detail
FROM message_turns
WHERE stored_turn_index IS DISTINCT FROM turn;

CREATE VIEW problem_split_turn_compaction AS
SELECT 'split_turn_compaction'::TEXT AS rule, session_id, turn, message_id, seq,
       NULL::BIGINT AS part_id, NULL::BIGINT AS part, NULL::TEXT AS tool_use_id,
       'turn ' || turn || ': ' || turn_compacted || ' of ' || turn_messages
           || ' messages compacted; the cut falls inside the turn at seq ' || seq AS detail
FROM message_compaction
WHERE turn_compacted > 0 AND turn_compacted < turn_messages AND seq = turn_first_visible_seq;

CREATE VIEW problem_compaction_gap AS
SELECT 'compaction_gap'::TEXT AS rule, session_id, turn, message_id, seq,
       NULL::BIGINT AS part_id, NULL::BIGINT AS part, NULL::TEXT AS tool_use_id,
       'turn ' || turn || ' is compacted but turn ' || session_first_visible_turn || ' before it is not' AS detail
FROM message_compaction
WHERE compacted = 1 AND seq = turn_first_compacted_seq AND session_first_visible_seq < turn_first_seq;

CREATE VIEW problem_dangling_tool_use AS
SELECT 'dangling_tool_use'::TEXT AS rule, session_id, turn, message_id, seq, part_id, part, tool_use_id,
       'tool_use "' || COALESCE(tool_use_id, '') || '" (' || COALESCE(tool_name, '?') || ') at seq ' || seq
           || CASE WHEN role <> 'assistant'
                   THEN ' never got a result: it sits in a ' || role || ' message, where no result can answer it'
                   ELSE ' never got a result: its tool block ends without a result for it' END AS detail
FROM tool_calls
WHERE role <> 'assistant' OR COALESCE(tool_use_id, '') = '' OR (NOT answered AND NOT at_end);

CREATE VIEW problem_orphan_tool_result AS
SELECT 'orphan_tool_result'::TEXT AS rule, session_id, turn, message_id, seq, part_id, part, tool_use_id,
       'tool_result for "' || COALESCE(tool_use_id, '') || '" at seq ' || seq || ': '
           || CASE WHEN prev_speaker_seq IS NULL THEN 'no user or assistant message comes before it'
                   ELSE 'the message before its block (seq ' || prev_speaker_seq
                        || ') is not an assistant message with a tool_use of that id' END AS detail
FROM (
    SELECT r.*,
           EXISTS (
               SELECT 1 FROM messages a JOIN parts ap ON ap.message_id = a.id
               WHERE a.session_id = r.session_id AND a.seq = r.prev_speaker_seq AND a.role = 'assistant'
                 AND ap.kind = 'tool_use' AND ap.tool_use_id = r.tool_use_id AND r.tool_use_id <> ''
           ) AS called
    FROM message_parts r
    WHERE r.kind = 'tool_result'
) AS results
WHERE NOT called;

CREATE VIEW problem_duplicate_tool_use_id AS
SELECT 'duplicate_tool_use_id'::TEXT AS rule, session_id, turn, message_id, seq, part_id, part, tool_use_id,
       'tool_use id "' || tool_use_id || '" at seq ' || seq || ' part ' || part
           || ' is used earlier in the session (first at seq ' || first_seq || ')' AS detail
FROM (
    SELECT u.*,
           ROW_NUMBER() OVER (PARTITION BY session_id, tool_use_id ORDER BY seq, part) AS nth,
           MIN(seq) OVER (PARTITION BY session_id, tool_use_id) AS first_seq
    FROM message_parts u
    WHERE u.kind = 'tool_use'
) AS uses
WHERE nth > 1;

CREATE VIEW problem_misplaced_tool_result AS
SELECT 'misplaced_tool_result'::TEXT AS rule, session_id, turn, message_id, seq, part_id, part, tool_use_id,
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
           COUNT(*) OVER turn_w AS messages, (SUM(compacted) OVER turn_w)::BIGINT AS compacted_messages
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
