-- The forensic views: the contract's rules in SQL, for people with the sqlite3 shell.
--
-- Not a migration: `store/views.rs` creates these views when a writable store opens a file
-- whose views were made from other SQL (it keeps the hash of this text in `store_views`), so
-- a fix here reaches every database without a new migration. Each statement is one
-- `CREATE VIEW name AS`, starting a line, in dependency order; views.rs drops every view it
-- owns before running them.
--
-- The definitions are the library's check (history/rules.rs, pairing by the walk of
-- history/grammar.rs; tests/views_props.rs holds the two together): the turn of a message is
-- max(u - 1, 0), where u counts the user messages up to it; system messages never break a
-- tool pair; a call of an assistant message whose tool block ends the session is pending
-- (legal, listed in tool_calls and session_turns, not a problem); a call or result whose
-- tool_use_id is NULL or '' matches nothing; a call has exactly one answer.
--
-- Every view is linear in the rows it reads: window functions and one pass over the rows,
-- never a subquery run once per part. Every window is partitioned by session_id first, so a
-- filter on session_id reaches the base tables' indexes and a query about one session only
-- computes that session.

-- Every message with its contract turn and the user/assistant messages around it.
CREATE VIEW message_turns AS
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
CREATE VIEW message_parts AS
SELECT session_id, turn, message_id, seq, role, compacted, created_at, part_id,
       ROW_NUMBER() OVER (PARTITION BY session_id, message_id ORDER BY ordinal, part_id) - 1 AS part,
       kind, text, tool_use_id, tool_name, input, is_error, prev_speaker_seq, next_speaker_seq
FROM (
    SELECT mt.session_id, mt.turn, mt.message_id, mt.seq, mt.role, mt.compacted, mt.created_at,
           p.id AS part_id, p.ordinal, p.kind, p.text, p.tool_use_id, p.tool_name, p.input,
           p.is_error, mt.prev_speaker_seq, mt.next_speaker_seq
    FROM message_turns mt JOIN parts p ON p.message_id = mt.message_id
);

-- Every tool_use and tool_result with what pairs it, as the library's walk pairs them
-- (history/grammar.rs), by counting within windows instead of looking each one up.
--
-- `id` is the tool_use_id with NULL read as ''. `anchor` is the message a part pairs through:
-- a call's own message; a result's last user or assistant message before it (for a result in
-- a tool message, the assistant message before its tool block; for one in a user message,
-- the message before that user message). Calls and results pair within one
-- (session_id, id, anchor), in (seq, part) order, which puts an assistant message's calls
-- before every result that can pair with them. A result in a tool message takes the first
-- call with its id not taken yet (a call has exactly one answer); so does a result in the
-- user message that closes the block (misplaced there: the call it takes is not answered by
-- the contract's letter, but nothing else can take it); a result in a system or assistant
-- message takes nothing, and is an orphan when no call is left for it. Per row:
--   is_call       a tool_use of an assistant message with an id: the only kind that can be
--                 answered or pending;
--   is_answer     a tool_result with an id in a tool message: the only kind that answers;
--   is_take       a tool_result with an id in a tool or user message: the kinds that take;
--   calls         how many calls the anchor makes with this id;
--   answers       how many results in tool messages take them (in the calls' tool block);
--   takes         how many results take them (answers, then those of the closing user message);
--   call_nth      for a call: which call with this id of its message it is (the n-th call is
--                 answered when there are n answers);
--   take_before   for a result: how many results took a call with its id before it (it is an
--                 orphan when they took them all);
--   use_nth       which tool_use with this (non-empty) id in the session this is (> 1: a
--                 duplicate id);
--   first_use_seq the seq of the first tool_use with this id in the session (up to this row).
-- (One PARTITION BY per level, each starting with session_id: SQLite pushes a filter into a
-- window subquery only then. The windows of a level share one ORDER BY: one sort per level.)
CREATE VIEW tool_pairing AS
SELECT y.*,
       SUM(y.kind = 'tool_use' AND y.id <> '') OVER id_upto AS use_nth,
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
               (mp.kind = 'tool_use' AND mp.role = 'assistant' AND COALESCE(mp.tool_use_id, '') <> '') AS is_call,
               (mp.kind = 'tool_result' AND mp.role = 'tool' AND COALESCE(mp.tool_use_id, '') <> '') AS is_answer,
               (mp.kind = 'tool_result' AND mp.role IN ('tool', 'user') AND COALESCE(mp.tool_use_id, '') <> '') AS is_take
        FROM message_parts mp
        WHERE mp.kind IN ('tool_use', 'tool_result')
    ) x
    WINDOW anchor_upto AS (PARTITION BY x.session_id, x.id, x.anchor ORDER BY x.seq, x.part
                           ROWS UNBOUNDED PRECEDING),
           anchor_all AS (PARTITION BY x.session_id, x.id, x.anchor ORDER BY x.seq, x.part
                          ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
) y
WINDOW id_upto AS (PARTITION BY y.session_id, y.id ORDER BY y.seq, y.part ROWS UNBOUNDED PRECEDING);

-- Every tool_use: answered in the tool block after its message? does its message end the
-- session's speaking (at_end)? pending (unanswered, at the end, and an assistant message's
-- call with an id, so still legal)? A tool_use outside an assistant message, or without an
-- id, is never answered nor pending.
CREATE VIEW tool_calls AS
SELECT session_id, turn, message_id, seq, role, part_id, part, tool_use_id, tool_name,
       compacted, created_at,
       (is_call AND call_nth <= answers) AS answered,
       next_speaker_seq IS NULL AS at_end,
       (is_call AND call_nth > answers AND next_speaker_seq IS NULL) AS pending
FROM tool_pairing
WHERE kind = 'tool_use';

-- Each message with the compaction state of its turn and session. (One window partition per
-- level: SQLite pushes a filter on session_id into a subquery only when all its windows
-- share one PARTITION BY, and per-session queries must not compute every session.)
CREATE VIEW message_compaction AS
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

-- The violations, a row each, every row with a sentence in `detail`. Rules found in the same
-- rows are found in one pass: the compaction rules over message_compaction, the four pairing
-- rules over tool_pairing (joined with two constant rows, as a part can break two rules:
-- a call dangling and a duplicate, a result an orphan and misplaced).
CREATE VIEW problem_turn_index_mismatch AS
SELECT 'turn_index_mismatch' AS rule, session_id, turn, message_id, seq,
       NULL AS part_id, NULL AS part, NULL AS tool_use_id,
       role || ' message seq ' || seq || ' has turn_index ' || COALESCE(stored_turn_index, 'NULL')
           || ', expected ' || turn AS detail
FROM message_turns
WHERE stored_turn_index IS NOT turn;

CREATE VIEW compaction_problems AS
SELECT rule, session_id, turn, message_id, seq, NULL AS part_id, NULL AS part, NULL AS tool_use_id,
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
                THEN 'compaction_gap' END AS rule
    FROM message_compaction c
)
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
                     AND NOT (t.is_call AND (t.call_nth <= t.answers OR t.next_speaker_seq IS NULL))
                THEN 'dangling_tool_use'
                WHEN t.kind = 'tool_use' AND w.k = 2 AND t.use_nth > 1
                THEN 'duplicate_tool_use_id'
                WHEN t.kind = 'tool_result' AND w.k = 1
                     AND (t.calls = 0 OR t.take_before >= t.calls)
                THEN 'orphan_tool_result'
                WHEN t.kind = 'tool_result' AND w.k = 2 AND t.role <> 'tool'
                THEN 'misplaced_tool_result' END AS rule
    FROM tool_pairing t JOIN (SELECT 1 AS k UNION ALL SELECT 2 AS k) w
)
WHERE rule IS NOT NULL;

-- One view per rule.
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

-- Every violation of every rule.
CREATE VIEW problems AS
SELECT * FROM problem_turn_index_mismatch
UNION ALL SELECT * FROM compaction_problems
UNION ALL SELECT * FROM pairing_problems;

-- Each session's turns: where they start and end, how many messages, compacted (1 when every
-- message is), and the calls still pending at the end of the session. (Messages and pending
-- calls are one stream, counted per turn in one window: no lookup per turn or per call.)
CREATE VIEW session_turns AS
SELECT session_id, turn, first_seq, last_seq, messages,
       CASE WHEN compacted_messages = messages THEN 1 ELSE 0 END AS compacted,
       compacted_messages, pending_calls
FROM (
    SELECT u.*,
           MIN(u.seq) OVER turn_w AS first_seq, MAX(u.seq) OVER turn_w AS last_seq,
           SUM(u.is_message) OVER turn_w AS messages, SUM(u.compacted) OVER turn_w AS compacted_messages,
           SUM(u.is_pending) OVER turn_w AS pending_calls
    FROM (
        SELECT session_id, turn, seq, compacted, 1 AS is_message, 0 AS is_pending
        FROM message_turns
        UNION ALL
        SELECT session_id, turn, NULL, 0, 0, 1
        FROM (
            -- tool_calls' pending, over the rows after a session's last user or assistant
            -- message only: the calls that can be pending and the results that can answer them.
            SELECT c.*,
                   SUM(c.is_answer) OVER anchor_all AS answers,
                   SUM(c.is_call) OVER anchor_upto AS call_nth
            FROM (
                SELECT mt.session_id, mt.turn, mt.seq, p.ordinal, p.id AS part_id,
                       COALESCE(p.tool_use_id, '') AS id,
                       CASE WHEN p.kind = 'tool_use' THEN mt.seq ELSE mt.prev_speaker_seq END AS anchor,
                       (p.kind = 'tool_use' AND mt.role = 'assistant' AND COALESCE(p.tool_use_id, '') <> '') AS is_call,
                       (p.kind = 'tool_result' AND mt.role = 'tool' AND COALESCE(p.tool_use_id, '') <> '') AS is_answer
                FROM message_turns mt JOIN parts p ON p.message_id = mt.message_id
                WHERE mt.next_speaker_seq IS NULL AND p.kind IN ('tool_use', 'tool_result')
            ) c
            WINDOW anchor_upto AS (PARTITION BY c.session_id, c.id, c.anchor ORDER BY c.seq, c.ordinal, c.part_id
                                   ROWS UNBOUNDED PRECEDING),
                   anchor_all AS (PARTITION BY c.session_id, c.id, c.anchor ORDER BY c.seq, c.ordinal, c.part_id
                                  ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
        )
        WHERE is_call AND call_nth > answers
    ) u
    WINDOW turn_w AS (PARTITION BY u.session_id, u.turn)
)
WHERE seq = first_seq;

-- Tombstones: error results written for calls that never got a real one (by cancel_pending
-- or by store-repair); by_repair is 1 when repair_log records store-repair writing it.
-- (The parts and the log's rows are one stream, matched per part_id in a window.)
CREATE VIEW tombstones AS
SELECT session_id, turn, message_id, seq, part_id, tool_use_id, text, created_at, by_repair
FROM (
    SELECT u.*, MAX(u.logged) OVER (PARTITION BY u.session_id, u.part_id) AS by_repair
    FROM (
        SELECT session_id, turn, message_id, seq, part_id, tool_use_id, text, created_at,
               0 AS logged, 1 AS is_part
        FROM message_parts
        WHERE kind = 'tool_result' AND is_error = 1
          AND text LIKE 'Tool call cancelled before it returned a result%'
        UNION ALL
        SELECT session_id, NULL, NULL, NULL, part_id, NULL, NULL, NULL, 1, 0
        FROM repair_log
        WHERE action = 'tombstone' AND part_id IS NOT NULL
    ) u
)
WHERE is_part = 1;
