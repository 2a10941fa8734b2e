-- Full-text search on PostgreSQL (issue 14): the twin of SQLite's FTS5 index `parts_fts` (V8).
--
-- `parts_search_document` says once what a part contributes to the index, as SQLite's view
-- `parts_search_source` does: its text (not for redacted_reasoning, whose text is opaque),
-- and a call's tool name and JSON input (tool_use and server_tool_use only). Every run of
-- characters that is not a letter or digit becomes one space before PostgreSQL's parser
-- reads it, so the words are the ones SQLite's unicode61 tokenizer finds (`src/main.rs` is
-- `src`, `main`, `rs`, not one file-name token); the `simple` configuration lowercases and
-- keeps every word (no stemming, no stop words), as unicode61 does. What differs from
-- SQLite: diacritics stay (`café` does not match `cafe`), ranking is ts_rank, not bm25.
--
-- The GIN index is over the function's value: no column, no trigger, nothing to keep
-- current; every writer's rows (plain SQL from other code included) are indexed by the
-- server, and a deleted part leaves the index with its row. `store/pg/search.rs` queries
-- with the same expression, so the planner uses the index.
CREATE OR REPLACE FUNCTION parts_search_document(kind TEXT, text TEXT, tool_name TEXT, input TEXT)
RETURNS tsvector
LANGUAGE SQL IMMUTABLE PARALLEL SAFE
AS $$
    SELECT to_tsvector('simple'::regconfig, regexp_replace(
        concat_ws(' ',
            CASE WHEN kind <> 'redacted_reasoning' THEN text END,
            CASE WHEN kind IN ('tool_use', 'server_tool_use') THEN tool_name END,
            CASE WHEN kind IN ('tool_use', 'server_tool_use') THEN input END),
        '[^[:alnum:]]+', ' ', 'g'))
$$;

CREATE INDEX IF NOT EXISTS parts_search ON parts
    USING GIN (parts_search_document(kind, text, tool_name, input));
