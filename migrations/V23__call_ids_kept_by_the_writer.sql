-- An append's check that its calls are new in their session (PROVIDER_RULES.md rule 6) no
-- longer probes an index of every call id: SQLite's write connection keeps each session's
-- call ids (`store/memory.rs`), catching up from the session's last messages. The index's
-- keys were provider ids (random), so a turn's calls landed in as many random leaves, each a
-- page written to the WAL in every commit and again at the checkpoint (BENCHMARKS.md).
DROP INDEX IF EXISTS parts_tool_use_ids;

-- The calls by message: where the catch-up reads a session's ids (its messages from a seq on,
-- by `(session_id, seq)`, then each one's calls here), where a person finds a call from its
-- message, and where a call is found in a session by its id (its messages, each looked up
-- by `(message_id, kind, tool_use_id)`; `kind` is in the key so that SQLite reads the ids
-- from the index alone, no part's row). Message ids only grow, so new entries go at its end:
-- one page per commit.
CREATE INDEX IF NOT EXISTS parts_calls ON parts (message_id, kind, tool_use_id)
    WHERE kind = 'tool_use' AND tool_use_id IS NOT NULL;
