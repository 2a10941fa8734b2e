-- A part's search document is its first 100,000 characters (V11's text, or a call's tool
-- name and input): a tsvector holds at most 1 MB, and one part whose words made a larger one
-- (a tool result listing a big tree, a log of hashes) failed the index's catch-up with
-- "string is too long for tsvector", so every later search of the database failed with it.
-- 100,000 characters make at most about 600 KB (a one-character word and its separator add
-- one entry of at most 12 bytes). SQLite's FTS5 index has no such limit and indexes all of a
-- part (`../migrations/V22__search_document_bounded.sql`). Documents already computed stay
-- as they are; this changes the ones computed from now on.
CREATE OR REPLACE FUNCTION parts_search_document(kind TEXT, text TEXT, tool_name TEXT, input TEXT)
RETURNS tsvector
LANGUAGE SQL IMMUTABLE PARALLEL SAFE
AS $$
    SELECT to_tsvector('simple'::regconfig, regexp_replace(
        left(concat_ws(' ',
            CASE WHEN kind <> 'redacted_reasoning' THEN text END,
            CASE WHEN kind IN ('tool_use', 'server_tool_use') THEN tool_name END,
            CASE WHEN kind IN ('tool_use', 'server_tool_use') THEN input END), 100000),
        '[^[:alnum:]]+', ' ', 'g'))
$$;
