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
-- The value is kept in a stored generated column, `parts.search_document`, with a GIN index
-- on it: the server computes it for every row any writer inserts or updates (plain SQL from
-- other code included), so nothing here needs a trigger, and a search reads it instead of
-- parsing the text again (ranking, and the recheck of a phrase, read the stored value). The
-- column is PostgreSQL's own: it is not in the contract, and the store never writes it
-- (the fork and copy column lists leave generated columns out). On a database that already
-- holds parts, adding the column rewrites `parts` once, computing every part's value, with
-- the table locked meanwhile (5.4 s for 100,000 parts, column and index, on the shared
-- build machine).
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

ALTER TABLE parts ADD COLUMN IF NOT EXISTS search_document tsvector
    GENERATED ALWAYS AS (parts_search_document(kind, text, tool_name, input)) STORED;

CREATE INDEX IF NOT EXISTS parts_search ON parts USING GIN (search_document);
