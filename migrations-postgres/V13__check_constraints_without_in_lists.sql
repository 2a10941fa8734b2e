-- The PostgreSQL twin of migrations/V13__check_constraints_without_in_lists.sql, which
-- rewrites two SQLite CHECK constraints of the form `x IN (constants)` as chains of `=`
-- (SQLite built a temporary index of the list for every INSERT). PostgreSQL tests such a
-- list in place, so its constraints stay as they are: this migration exists so both
-- dialects keep the same history (version and name). The statement below reads no table and
-- writes nothing.
SELECT 1 WHERE false;
