-- dangling_tool_use: a tool_use outside an assistant message is dangling even at the end of
-- the session. Only an assistant message's call can be answered or pending (contract,
-- "pending"); V4's view let such a call at the end pass as pending. A call without an id
-- (NULL or '') matches no result either.
DROP VIEW IF EXISTS problem_dangling_tool_use;
CREATE VIEW problem_dangling_tool_use AS
SELECT 'dangling_tool_use' AS rule, session_id, turn, message_id, seq, part_id, part, tool_use_id,
       'tool_use "' || tool_use_id || '" (' || COALESCE(tool_name, '?') || ') at seq ' || seq
           || CASE WHEN role <> 'assistant'
                   THEN ' never got a result: it sits in a ' || role || ' message, where no result can answer it'
                   ELSE ' never got a result: its tool block ends without a result for it' END AS detail
FROM tool_calls
WHERE role <> 'assistant' OR COALESCE(tool_use_id, '') = '' OR (NOT answered AND NOT at_end);

-- orphan_tool_result: a result without an id answers nothing (V4 compared NULL and missed it).
DROP VIEW IF EXISTS problem_orphan_tool_result;
CREATE VIEW problem_orphan_tool_result AS
SELECT 'orphan_tool_result' AS rule, session_id, turn, message_id, seq, part_id, part, tool_use_id,
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
)
WHERE NOT called;
