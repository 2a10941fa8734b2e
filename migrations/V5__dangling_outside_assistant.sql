-- dangling_tool_use: a tool_use outside an assistant message is dangling even at the end of
-- the session. Only an assistant message's call can be answered or pending (contract,
-- "pending"); V4's view let such a call at the end pass as pending.
DROP VIEW IF EXISTS problem_dangling_tool_use;
CREATE VIEW problem_dangling_tool_use AS
SELECT 'dangling_tool_use' AS rule, session_id, turn, message_id, seq, part_id, part, tool_use_id,
       'tool_use "' || tool_use_id || '" (' || COALESCE(tool_name, '?') || ') at seq ' || seq
           || CASE WHEN role <> 'assistant'
                   THEN ' never got a result: it sits in a ' || role || ' message, where no result can answer it'
                   ELSE ' never got a result: its tool block ends without a result for it' END AS detail
FROM tool_calls
WHERE role <> 'assistant' OR (NOT answered AND NOT at_end);
