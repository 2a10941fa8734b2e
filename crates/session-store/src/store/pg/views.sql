-- The forensic views in PostgreSQL's dialect: the same names, columns and rules as the SQLite
-- views (`store/views.sql`, whose comments explain each one), recreated at open when this text
-- changed (its checksum is the comment on the view `problems`). One `problem_<rule>` view per
-- contract rule and `problems` (all of them), `session_turns`, `tool_calls`, `tombstones`,
-- with the helpers `message_turns`, `message_parts`, `tool_pairing`, `message_compaction`,
-- `compaction_problems` and `pairing_problems`.
--
-- The pairing is the library's walk (history/grammar.rs), as in SQLite's views: calls and
-- results pair within (session, id, anchor) by counting in windows; a call has exactly one
-- answer, so a second result for an answered call is an orphan. Dialect only: booleans
-- SQLite sums are 0/1 integers here (`is_call`, `is_answer`, `is_take`), sums of BIGINT are
-- cast back to BIGINT, `tool_calls`' flags and `tombstones.by_repair` are booleans.
DROP VIEW IF EXISTS tombstones, session_turns, problems, problem_misplaced_tool_result,
    problem_duplicate_tool_use_id, problem_orphan_tool_result, problem_dangling_tool_use,
    problem_compaction_gap, problem_split_turn_compaction, problem_turn_index_mismatch,
    pairing_problems, compaction_problems, message_compaction, tool_calls, tool_pairing,
    message_parts, message_turns CASCADE;

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
SELECT session_id, turn, message_id, seq, role, compacted, created_at, part_id,
       ROW_NUMBER() OVER (PARTITION BY session_id, message_id ORDER BY ordinal, part_id) - 1 AS part,
       kind, text, tool_use_id, tool_name, input, is_error, prev_speaker_seq, next_speaker_seq
FROM (
    SELECT mt.session_id, mt.turn, mt.message_id, mt.seq, mt.role, mt.compacted, mt.created_at,
           p.id AS part_id, p.ordinal, p.kind, p.text, p.tool_use_id, p.tool_name, p.input,
           p.is_error, mt.prev_speaker_seq, mt.next_speaker_seq
    FROM message_turns mt JOIN parts p ON p.session_id = mt.session_id AND p.message_id = mt.message_id
) AS mp;

CREATE VIEW tool_pairing AS
SELECT y.*,
       SUM(CASE WHEN y.kind = 'tool_use' AND y.id <> '' THEN 1 ELSE 0 END) OVER id_upto AS use_nth,
       MIN(CASE WHEN y.kind = 'tool_use' THEN y.seq END) OVER id_upto AS first_use_seq
FROM (
    SELECT x.*,
           SUM(x.is_call) OVER anchor_all AS calls,
           SUM(x.is_answer) OVER anchor_all AS answers,
           SUM(x.is_take) OVER anchor_all AS takes,
           SUM(x.is_call) OVER anchor_upto AS call_nth,
           SUM(x.is_take) OVER anchor_upto - x.is_take AS take_before
    FROM (
        SELECT mp.*,
               COALESCE(mp.tool_use_id, '') AS id,
               CASE WHEN mp.kind = 'tool_use' THEN mp.seq ELSE mp.prev_speaker_seq END AS anchor,
               CASE WHEN mp.kind = 'tool_use' AND mp.role = 'assistant' AND COALESCE(mp.tool_use_id, '') <> ''
                    THEN 1 ELSE 0 END AS is_call,
               CASE WHEN mp.kind = 'tool_result' AND mp.role = 'tool' AND COALESCE(mp.tool_use_id, '') <> ''
                    THEN 1 ELSE 0 END AS is_answer,
               CASE WHEN mp.kind = 'tool_result' AND mp.role IN ('tool', 'user') AND COALESCE(mp.tool_use_id, '') <> ''
                    THEN 1 ELSE 0 END AS is_take
        FROM message_parts mp
        WHERE mp.kind IN ('tool_use', 'tool_result')
    ) x
    WINDOW anchor_upto AS (PARTITION BY x.session_id, x.id, x.anchor ORDER BY x.seq, x.part
                           ROWS UNBOUNDED PRECEDING),
           anchor_all AS (PARTITION BY x.session_id, x.id, x.anchor ORDER BY x.seq, x.part
                          ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
) y
WINDOW id_upto AS (PARTITION BY y.session_id, y.id ORDER BY y.seq, y.part ROWS UNBOUNDED PRECEDING);

CREATE VIEW tool_calls AS
SELECT session_id, turn, message_id, seq, role, part_id, part, tool_use_id, tool_name,
       compacted, created_at,
       (is_call = 1 AND call_nth <= answers) AS answered,
       next_speaker_seq IS NULL AS at_end,
       (is_call = 1 AND call_nth > answers AND next_speaker_seq IS NULL) AS pending
FROM tool_pairing
WHERE kind = 'tool_use';

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
       role || ' message seq ' || seq || ' has turn_index ' || COALESCE(stored_turn_index::TEXT, 'NULL')
           || ', expected ' || turn AS detail
FROM message_turns
WHERE stored_turn_index IS DISTINCT FROM turn;

CREATE VIEW compaction_problems AS
SELECT rule, session_id, turn, message_id, seq,
       NULL::BIGINT AS part_id, NULL::BIGINT AS part, NULL::TEXT AS tool_use_id,
       CASE rule
           WHEN 'split_turn_compaction'
           THEN 'turn ' || turn || ': ' || turn_compacted || ' of ' || turn_messages
                || ' messages compacted; the cut falls inside the turn at seq ' || seq
           ELSE 'turn ' || turn || ' is compacted but turn ' || session_first_visible_turn
                || ' before it is not' END AS detail
FROM (
    SELECT c.*,
           CASE WHEN turn_compacted > 0 AND turn_compacted < turn_messages AND seq = turn_first_visible_seq
                THEN 'split_turn_compaction'
                WHEN compacted = 1 AND seq = turn_first_compacted_seq
                     AND session_first_visible_seq < turn_first_seq
                THEN 'compaction_gap' END::TEXT AS rule
    FROM message_compaction c
) AS r
WHERE rule IS NOT NULL;

CREATE VIEW pairing_problems AS
SELECT rule, session_id, turn, message_id, seq, part_id, part, tool_use_id,
       CASE rule
           WHEN 'dangling_tool_use'
           THEN 'tool_use "' || id || '" (' || COALESCE(tool_name, '?') || ') at seq ' || seq
                || ' never got a result: '
                || CASE WHEN id = '' THEN 'it has no id, so no result can answer it'
                        WHEN role <> 'assistant' THEN 'it sits in a ' || role || ' message, where no result can answer it'
                        WHEN call_nth <= takes THEN 'its only result sits in the user message after it, not in a tool message'
                        ELSE 'its tool block ends without a result for it' END
           WHEN 'duplicate_tool_use_id'
           THEN 'tool_use id "' || id || '" at seq ' || seq || ' part ' || part
                || ' is used earlier in the session (first at seq ' || first_use_seq || ')'
           WHEN 'orphan_tool_result'
           THEN 'tool_result for "' || id || '" at seq ' || seq || ': '
                || CASE WHEN calls > 0 THEN 'the call (seq ' || anchor || ') is answered already, and a call has exactly one answer'
                        WHEN id = '' THEN 'it has no id, so it answers no call'
                        WHEN anchor IS NULL THEN 'no user or assistant message comes before it'
                        ELSE 'the message before its block (seq ' || anchor
                             || ') is not an assistant message with a tool_use of that id' END
           ELSE 'tool_result for "' || id || '" sits in a ' || role || ' message (seq ' || seq || ')'
       END AS detail
FROM (
    SELECT t.*,
           CASE WHEN t.kind = 'tool_use' AND w.k = 1
                     AND NOT (t.is_call = 1 AND (t.call_nth <= t.answers OR t.next_speaker_seq IS NULL))
                THEN 'dangling_tool_use'
                WHEN t.kind = 'tool_use' AND w.k = 2 AND t.use_nth > 1
                THEN 'duplicate_tool_use_id'
                WHEN t.kind = 'tool_result' AND w.k = 1
                     AND (t.calls = 0 OR t.take_before >= t.calls)
                THEN 'orphan_tool_result'
                WHEN t.kind = 'tool_result' AND w.k = 2 AND t.role <> 'tool'
                THEN 'misplaced_tool_result' END::TEXT AS rule
    FROM tool_pairing t CROSS JOIN (SELECT 1 AS k UNION ALL SELECT 2 AS k) w
) AS r
WHERE rule IS NOT NULL;

CREATE VIEW problem_split_turn_compaction AS
SELECT * FROM compaction_problems WHERE rule = 'split_turn_compaction';

CREATE VIEW problem_compaction_gap AS
SELECT * FROM compaction_problems WHERE rule = 'compaction_gap';

CREATE VIEW problem_dangling_tool_use AS
SELECT * FROM pairing_problems WHERE rule = 'dangling_tool_use';

CREATE VIEW problem_orphan_tool_result AS
SELECT * FROM pairing_problems WHERE rule = 'orphan_tool_result';

CREATE VIEW problem_duplicate_tool_use_id AS
SELECT * FROM pairing_problems WHERE rule = 'duplicate_tool_use_id';

CREATE VIEW problem_misplaced_tool_result AS
SELECT * FROM pairing_problems WHERE rule = 'misplaced_tool_result';

CREATE VIEW problems AS
SELECT * FROM problem_turn_index_mismatch
UNION ALL SELECT * FROM compaction_problems
UNION ALL SELECT * FROM pairing_problems;

CREATE VIEW session_turns AS
SELECT session_id, turn, first_seq, last_seq, messages,
       CASE WHEN compacted_messages = messages THEN 1 ELSE 0 END AS compacted,
       compacted_messages, pending_calls
FROM (
    SELECT u.*,
           MIN(u.seq) OVER turn_w AS first_seq, MAX(u.seq) OVER turn_w AS last_seq,
           (SUM(u.is_message) OVER turn_w)::BIGINT AS messages,
           (SUM(u.compacted) OVER turn_w)::BIGINT AS compacted_messages,
           (SUM(u.is_pending) OVER turn_w)::BIGINT AS pending_calls
    FROM (
        SELECT session_id, turn, seq, compacted, 1 AS is_message, 0 AS is_pending
        FROM message_turns
        UNION ALL
        SELECT session_id, turn, NULL::BIGINT, 0, 0, 1
        FROM (
            SELECT c.*,
                   SUM(c.is_answer) OVER anchor_all AS answers,
                   SUM(c.is_call) OVER anchor_upto AS call_nth
            FROM (
                SELECT mt.session_id, mt.turn, mt.seq, p.ordinal, p.id AS part_id,
                       COALESCE(p.tool_use_id, '') AS id,
                       CASE WHEN p.kind = 'tool_use' THEN mt.seq ELSE mt.prev_speaker_seq END AS anchor,
                       CASE WHEN p.kind = 'tool_use' AND mt.role = 'assistant' AND COALESCE(p.tool_use_id, '') <> ''
                            THEN 1 ELSE 0 END AS is_call,
                       CASE WHEN p.kind = 'tool_result' AND mt.role = 'tool' AND COALESCE(p.tool_use_id, '') <> ''
                            THEN 1 ELSE 0 END AS is_answer
                FROM message_turns mt JOIN parts p ON p.session_id = mt.session_id AND p.message_id = mt.message_id
                WHERE mt.next_speaker_seq IS NULL AND p.kind IN ('tool_use', 'tool_result')
            ) c
            WINDOW anchor_upto AS (PARTITION BY c.session_id, c.id, c.anchor ORDER BY c.seq, c.ordinal, c.part_id
                                   ROWS UNBOUNDED PRECEDING),
                   anchor_all AS (PARTITION BY c.session_id, c.id, c.anchor ORDER BY c.seq, c.ordinal, c.part_id
                                  ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
        ) AS pc
        WHERE is_call = 1 AND call_nth > answers
    ) u
    WINDOW turn_w AS (PARTITION BY u.session_id, u.turn)
) AS st
WHERE seq = first_seq;

CREATE VIEW tombstones AS
SELECT session_id, turn, message_id, seq, part_id, tool_use_id, text, created_at, by_repair
FROM (
    SELECT u.*, MAX(u.logged) OVER (PARTITION BY u.session_id, u.part_id) = 1 AS by_repair
    FROM (
        SELECT session_id, turn, message_id, seq, part_id, tool_use_id, text, created_at,
               0 AS logged, 1 AS is_part
        FROM message_parts
        WHERE kind = 'tool_result' AND is_error = 1
          AND text LIKE 'Tool call cancelled before it returned a result%'
        UNION ALL
        SELECT session_id, NULL::BIGINT, NULL::BIGINT, NULL::BIGINT, part_id, NULL::TEXT, NULL::TEXT, NULL::TEXT, 1, 0
        FROM repair_log
        WHERE action = 'tombstone' AND part_id IS NOT NULL
    ) u
) AS t
WHERE is_part = 1;
