-- Appends spent about a quarter of their SQLite instructions on two CHECK constraints (issue
-- 16): SQLite tests `x IN (three or more constants)` by building a temporary index of the
-- list each time a statement runs (a b-tree opened, filled and closed), once for every
-- INSERT into `messages` (role) and once for every INSERT into `parts` (kind). The same
-- constraints written as a chain of `=` comparisons test the value in place. They accept and
-- refuse exactly the same values: both forms are NULL only for a NULL (and the columns are
-- NOT NULL), true for a listed value and false for any other, compared with the column's
-- own (binary) collation.
--
-- SQLite cannot alter a constraint, and rebuilding the tables would copy every row (and
-- dropping `messages` with foreign keys on would first delete every part through the
-- cascade). The constraint text is rewritten in place instead: SQLite's documented procedure
-- for schema changes that every stored row already satisfies
-- (https://sqlite.org/lang_altertable.html, "Making Other Kinds Of Table Schema Changes").
-- `replace` changes only the exact text V1 and V7 wrote; a table another writer created,
-- adopted by V1, keeps whatever constraint it has. `writable_schema = RESET` turns the
-- flag off and makes this connection read the schema again. Other connections open at this
-- moment keep the old form until they next read the schema: it means the same.
PRAGMA writable_schema = ON;

UPDATE sqlite_schema
SET sql = replace(sql,
    'CHECK (role IN (''system'', ''user'', ''assistant'', ''tool''))',
    'CHECK (role = ''system'' OR role = ''user'' OR role = ''assistant'' OR role = ''tool'')')
WHERE type = 'table' AND name = 'messages';

UPDATE sqlite_schema
SET sql = replace(sql,
    'CHECK (kind IN (''text'', ''reasoning'', ''redacted_reasoning'', ''tool_use'', ''tool_result'',
                                                    ''image'', ''document'', ''server_tool_use'', ''server_tool_result'', ''opaque''))',
    'CHECK (kind = ''text'' OR kind = ''reasoning'' OR kind = ''tool_use'' OR kind = ''tool_result''
                           OR kind = ''redacted_reasoning'' OR kind = ''image'' OR kind = ''document''
                           OR kind = ''server_tool_use'' OR kind = ''server_tool_result'' OR kind = ''opaque'')')
WHERE type = 'table' AND name = 'parts';

PRAGMA writable_schema = RESET;
