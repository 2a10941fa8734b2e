//! Full-text search over every live part of every session (SQLite FTS5, migration V8; the
//! PostgreSQL twin is `pg/search.rs`, over migration V11).
//!
//! The index (`parts_fts`) holds text, reasoning and tool_result content, and each call's tool
//! name and JSON input. Appends do not index (migration V12: that cost an append more than
//! the rows themselves); [`catch_up`] indexes every part above `search_state.indexed_through`
//! in one batch before a search, and triggers keep the rows already indexed exact for every
//! writer. A read-only store cannot catch up: it finds what the last writable search indexed. Results are ranked by bm25 (best first) and carry a snippet, the
//! session, the message and the turn.
//!
//! Cost: ranking reads every match it ranks, so a word found in one part of ten would cost in
//! proportion to the database. Ranking stops at the newest [`SearchOptions::max_ranked`]
//! matches (found by a cheap walk down the rowids), and a one-session search reads the index
//! only in the range of that session's part ids. What remains proportional to a term's
//! frequency is bm25's document count for it (one pass over its doclist, a few milliseconds
//! for a term in 100,000 parts); BENCHMARKS.md has the figures.
//!
//! A person's query is never FTS5 syntax: [`fts_query`] quotes every whitespace-separated term
//! as a phrase (all terms must match), so `"`, `*`, `(`, `NEAR`, `AND` or a lone `-` cannot make
//! the query an error. A term ending in `*` stays a prefix search (`deploy*`).

use rusqlite::{params, Connection, OptionalExtension, Row};

use super::handle::Store;
use super::pool::SqliteEngine;
use super::reports::{SearchHit, SearchOptions};
use super::terms::{holds_a_word, query_terms, raw_terms};
use super::write::require_session;
use crate::error::Result;
use crate::model::SessionId;

/// The rowid of the `?2`-th newest match: ranking starts there when a query matches more.
const NEWEST_BOUND: &str =
    "SELECT rowid FROM parts_fts WHERE parts_fts MATCH ?1 ORDER BY rowid DESC LIMIT 1 OFFSET ?2";

/// The best hits over all sessions among matches with `rowid >= ?6`: FTS5 sorts by rank
/// itself, so only the returned hits are joined and given a snippet.
const SEARCH_ALL: &str = "
    WITH hits AS (
        SELECT rowid AS part_id, rank AS score,
               snippet(parts_fts, -1, ?2, ?3, '…', ?4) AS snippet
        FROM parts_fts WHERE parts_fts MATCH ?1 AND rowid >= ?6 ORDER BY rank LIMIT ?5)
    SELECT m.session_id, m.id, m.seq, m.turn_index, m.role, h.part_id, p.kind, h.snippet, h.score,
           p.ordinal
    FROM hits h JOIN parts p ON p.id = h.part_id JOIN messages m ON m.id = p.message_id
    ORDER BY h.score, h.part_id";

/// The range of part ids a session holds: the index is read only there, so the cost follows
/// the session (and what was written while it was live), not the whole database.
const SESSION_PART_RANGE: &str = "
    SELECT MIN(p.id), MAX(p.id) FROM messages m JOIN parts p ON p.message_id = m.id
    WHERE m.session_id = ?1";

const SEARCH_SESSION: &str = "
    SELECT m.session_id, m.id, m.seq, m.turn_index, m.role, parts_fts.rowid, p.kind,
           snippet(parts_fts, -1, ?2, ?3, '…', ?4), parts_fts.rank, p.ordinal
    FROM parts_fts JOIN parts p ON p.id = parts_fts.rowid JOIN messages m ON m.id = p.message_id
    WHERE parts_fts MATCH ?1 AND parts_fts.rowid BETWEEN ?7 AND ?8 AND m.session_id = ?6
    ORDER BY parts_fts.rank, parts_fts.rowid LIMIT ?5";

/// The index's mark and the highest part id: parts above the mark wait to be indexed.
const BACKLOG: &str =
    "SELECT (SELECT indexed_through FROM search_state), (SELECT MAX(id) FROM parts)";

const INDEX_ABOVE: &str = "
    INSERT INTO parts_fts (rowid, text, tool_name, input)
    SELECT id, text, tool_name, input FROM parts_search_source WHERE id > ?1";

const REBUILD: &str = "INSERT INTO parts_fts (parts_fts) VALUES ('rebuild')";

/// The mark never moves down: ids below a deleted maximum may come back (rowid reuse), and
/// the triggers index those at once.
const MOVE_MARK: &str = "
    INSERT INTO search_state (id, indexed_through) VALUES (1, ?1)
    ON CONFLICT (id) DO UPDATE SET indexed_through = MAX(indexed_through, excluded.indexed_through)";

/// Whether [`catch_up`] has anything to do (a missing mark counts).
pub(crate) fn index_behind(conn: &Connection) -> Result<bool> {
    let (mark, max): (Option<i64>, Option<i64>) = conn
        .prepare_cached(BACKLOG)?
        .query_row([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    Ok(mark.is_none_or(|mark| max.unwrap_or(0) > mark))
}

/// Indexes every part above the mark and moves the mark to the highest part id; without a
/// mark, rebuilds the index. The caller's write transaction makes both one step.
pub(crate) fn catch_up(conn: &Connection) -> Result<()> {
    let (mark, max): (Option<i64>, Option<i64>) = conn
        .prepare_cached(BACKLOG)?
        .query_row([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    let max = max.unwrap_or(0);
    match mark {
        None => {
            conn.prepare_cached(REBUILD)?.execute([])?;
        }
        Some(mark) if max > mark => {
            conn.prepare_cached(INDEX_ABOVE)?.execute([mark])?;
        }
        Some(_) => return Ok(()),
    }
    conn.prepare_cached(MOVE_MARK)?.execute([max])?;
    Ok(())
}

impl SqliteEngine {
    /// Brings the full-text index up to the last part (see the module docs); a read-only
    /// store, which cannot write the index, searches what it has.
    pub(crate) fn catch_up_search_index(&self) -> Result<()> {
        if !self.read(index_behind)? {
            return Ok(());
        }
        match self.write(catch_up) {
            Err(error) if error.is_read_only() => Ok(()),
            other => other,
        }
    }
}

impl Store {
    /// True when the full-text index misses parts written since it was last brought up to
    /// date and this store could not bring it up to date (it may not write the file: a
    /// read-only store, mount or file): a search then finds only the parts indexed, and a
    /// caller should say so. Always false on PostgreSQL, whose index is the server's.
    pub fn search_index_behind(&self) -> Result<bool> {
        self.engine.search_index_behind()
    }
}

fn hit_from_row(row: &Row<'_>) -> rusqlite::Result<SearchHit> {
    Ok(SearchHit {
        session: SessionId::new(row.get::<_, String>(0)?),
        message_id: row.get(1)?,
        seq: row.get(2)?,
        turn: row.get(3)?,
        role: row.get(4)?,
        part_id: row.get(5)?,
        ordinal: row.get(9)?,
        kind: row.get(6)?,
        snippet: row.get::<_, Option<String>>(7)?.unwrap_or_default(),
        score: row.get(8)?,
    })
}

impl Store {
    /// Searches the text, reasoning, tool inputs and tool results of every session (or of
    /// `options.session`) for all the words of `query`, best match first.
    ///
    /// Any string is a valid query (every term is quoted as a phrase); one without words
    /// finds nothing.
    ///
    /// On PostgreSQL the same query finds the same parts (migration V11's index, the same
    /// words) with snippets cut the same way; the score is `ts_rank`'s (negated: lower is
    /// better here too), not bm25's, and accents are not removed (`store/pg/search.rs`).
    /// An unknown `options.session` is [`crate::Error::UnknownSession`].
    ///
    /// ```
    /// use session_store::{NewMessage, SearchOptions, Store};
    ///
    /// # fn main() -> session_store::Result<()> {
    /// # let dir = tempfile::tempdir().expect("tempdir");
    /// let store = Store::open(dir.path().join("sessions.db"))?;
    /// let session = store.create_session()?;
    /// store.append(&session, NewMessage::user("Deploy the staging cluster"))?;
    /// let hits = store.search("staging deploy", &SearchOptions::default())?;
    /// assert_eq!(hits.len(), 1);
    /// assert_eq!(hits[0].snippet, "[Deploy] the [staging] cluster");
    /// assert!(store.search("\"unbalanced (", &SearchOptions::default())?.is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub fn search(&self, query: &str, options: &SearchOptions) -> Result<Vec<SearchHit>> {
        self.engine.search(query, options)
    }
}

impl SqliteEngine {
    /// [`Store::search`] on SQLite.
    pub(super) fn search(&self, query: &str, options: &SearchOptions) -> Result<Vec<SearchHit>> {
        if let Some(session) = &options.session {
            self.read(|conn| require_session(conn, session))?;
        }
        let Some(fts) = fts_query(query)? else {
            return Ok(Vec::new());
        };
        self.catch_up_search_index()?;
        let limit = i64::try_from(options.limit).unwrap_or(i64::MAX);
        let tokens = options.snippet_tokens.clamp(1, 64) as i64;
        let (open, close) = (&options.highlight.0, &options.highlight.1);
        self.read(|conn| {
            let hits = match &options.session {
                None => {
                    let offset = i64::try_from(options.max_ranked.max(1) - 1).unwrap_or(i64::MAX);
                    let from: i64 = conn
                        .prepare_cached(NEWEST_BOUND)?
                        .query_row(params![fts, offset], |row| row.get(0))
                        .optional()?
                        .unwrap_or(i64::MIN);
                    conn.prepare_cached(SEARCH_ALL)?
                        .query_map(params![fts, open, close, tokens, limit, from], hit_from_row)?
                        .collect::<rusqlite::Result<Vec<_>>>()?
                }
                Some(session) => {
                    require_session(conn, session)?;
                    let (low, high): (Option<i64>, Option<i64>) = conn
                        .prepare_cached(SESSION_PART_RANGE)?
                        .query_row([session.as_str()], |row| Ok((row.get(0)?, row.get(1)?)))?;
                    let (Some(low), Some(high)) = (low, high) else {
                        return Ok(Vec::new());
                    };
                    conn.prepare_cached(SEARCH_SESSION)?
                        .query_map(
                            params![fts, open, close, tokens, limit, session.as_str(), low, high],
                            hit_from_row,
                        )?
                        .collect::<rusqlite::Result<Vec<_>>>()?
                }
            };
            let mut hits = hits;
            recut_where_nul(conn, &mut hits, query, options)?;
            Ok(hits)
        })
    }
}

/// A hit's columns when its text or tool name holds a NUL: FTS5's `snippet()` reads the
/// column as a C string and stops there.
const NUL_COLUMNS: &str = "
    SELECT kind, text, tool_name, input FROM parts
    WHERE id = ?1 AND (instr(text, char(0)) > 0 OR instr(tool_name, char(0)) > 0)";

/// Cuts again, in Rust ([`super::snippet`]), the snippet of each hit whose part holds a NUL,
/// so it shows the text past the NUL as the part holds it (only other code writes one: the
/// store refuses it on write).
fn recut_where_nul(
    conn: &Connection,
    hits: &mut [SearchHit],
    query: &str,
    options: &SearchOptions,
) -> Result<()> {
    let mut phrases = None;
    for hit in hits {
        let columns = conn
            .prepare_cached(NUL_COLUMNS)?
            .query_row([hit.part_id], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, Option<String>>(1)?,
                    row.get::<_, Option<String>>(2)?,
                    row.get::<_, Option<String>>(3)?,
                ))
            })
            .optional()?;
        let Some((kind, text, name, input)) = columns else {
            continue;
        };
        let phrases = match &mut phrases {
            Some(phrases) => phrases,
            None => phrases.insert(super::snippet::phrases(query)?),
        };
        let columns = super::snippet::snippet_columns(
            &kind,
            text.as_deref(),
            name.as_deref(),
            input.as_deref(),
        );
        hit.snippet = super::snippet::snippet(
            &columns,
            phrases,
            options.snippet_tokens.clamp(1, 64),
            &options.highlight,
        );
    }
    Ok(())
}

/// Scripts written without spaces between words (Han, Hiragana, Katakana, Thai): the
/// indexes keep a whole run of them as one word.
fn unspaced_script(c: char) -> bool {
    matches!(c,
        '\u{3040}'..='\u{30ff}' | '\u{3400}'..='\u{4dbf}' | '\u{4e00}'..='\u{9fff}'
        | '\u{f900}'..='\u{faff}' | '\u{0e00}'..='\u{0e7f}' | '\u{20000}'..='\u{2ffff}')
}

/// Why `query` may find nothing the text holds, one sentence per term the index cannot
/// match as written: a term without a letter or digit (an emoji, punctuation) is left out,
/// and a term of Han, kana or Thai matches a whole run of that script only (the indexes
/// split words at spaces and punctuation), so a part of a word needs `*`. Empty when every
/// term is searched as a person would expect. Pure: for a caller to show next to an empty
/// result (the CLI prints them on stderr).
pub fn search_notes(query: &str) -> Vec<String> {
    let mut notes = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (stem, prefix) in raw_terms(query) {
        if !seen.insert((stem, prefix)) {
            continue;
        }
        if !holds_a_word(stem) {
            if !stem.is_empty() {
                notes.push(format!(
                    "{stem:?} holds no letter or digit: the index keeps words only (no emoji, symbols or punctuation), so it was left out of the search"
                ));
            }
        } else if !prefix && stem.chars().any(unspaced_script) {
            notes.push(format!(
                "{stem:?} matches only a whole run of its script: the index splits words at spaces and punctuation, and Han, kana and Thai text has none between words; {stem}* finds the runs that start with it"
            ));
        }
    }
    notes
}

/// A person's query as an FTS5 query that cannot be a syntax error: each term of
/// [`query_terms`] becomes a quoted phrase (inner `"` doubled), all of them required; a
/// trailing `*` on a term keeps it a prefix search. `Ok(None)` when the query has no term;
/// [`crate::Error::TooManySearchTerms`] past [`MAX_SEARCH_TERMS`].
pub fn fts_query(query: &str) -> Result<Option<String>> {
    let terms: Vec<String> = query_terms(query)?
        .into_iter()
        .map(|(stem, prefix)| {
            let quoted = format!("\"{}\"", stem.replace('"', "\"\""));
            if prefix {
                quoted + "*"
            } else {
                quoted
            }
        })
        .collect();
    Ok((!terms.is_empty()).then(|| terms.join(" ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::terms::MAX_SEARCH_TERMS;

    fn fts(query: &str) -> Option<String> {
        fts_query(query).expect("within the term cap")
    }

    #[test]
    fn every_term_is_quoted_and_syntax_characters_are_inert() {
        assert_eq!(
            fts("deploy staging").as_deref(),
            Some("\"deploy\" \"staging\"")
        );
        assert_eq!(
            fts("say \"hi\" NEAR(a").as_deref(),
            Some("\"say\" \"\"\"hi\"\"\" \"NEAR(a\"")
        );
        assert_eq!(fts("depl*").as_deref(), Some("\"depl\"*"));
        assert_eq!(fts("  - * \" ( "), None);
        assert_eq!(fts(""), None);
        assert_eq!(fts("a\u{0}b").as_deref(), Some("\"a\" \"b\""));
    }

    #[test]
    fn repeated_terms_count_once_and_too_many_distinct_terms_are_refused() {
        let repeated = "deploy ".repeat(20_000);
        assert_eq!(fts(&repeated).as_deref(), Some("\"deploy\""));
        assert_eq!(
            fts("deploy deploy* deploy x deploy*").as_deref(),
            Some("\"deploy\" \"deploy\"* \"x\"")
        );
        let at_cap: Vec<String> = (0..MAX_SEARCH_TERMS).map(|n| format!("w{n}")).collect();
        let at_cap = at_cap.join(" ");
        assert_eq!(
            query_terms(&at_cap).map(|t| t.len()).ok(),
            Some(MAX_SEARCH_TERMS)
        );
        let over = format!("{at_cap} {at_cap} one-more");
        assert!(matches!(
            query_terms(&over),
            Err(crate::Error::TooManySearchTerms {
                max: MAX_SEARCH_TERMS
            })
        ));
    }
}
