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
use serde::{Deserialize, Serialize};

use super::write::require_session;
use super::{SqliteEngine, Store};
use crate::error::Result;
use crate::model::SessionId;

/// What [`Store::search`] looks for besides the query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchOptions {
    /// Only this session's parts.
    pub session: Option<SessionId>,
    /// At most this many hits (best first).
    pub limit: usize,
    /// Put before and after each matched term in the snippet.
    pub highlight: (String, String),
    /// About how many tokens of context a snippet shows (at most 64).
    pub snippet_tokens: usize,
    /// When a query matches more parts than this, only the newest `max_ranked` matches are
    /// ranked (by bm25, with the whole index's statistics): ranking reads every candidate, so
    /// this bounds the cost of a common word however large the database grows.
    /// `usize::MAX` ranks every match.
    pub max_ranked: usize,
}

impl Default for SearchOptions {
    fn default() -> Self {
        Self {
            session: None,
            limit: 20,
            highlight: ("[".to_owned(), "]".to_owned()),
            snippet_tokens: 16,
            max_ranked: 1_000,
        }
    }
}

/// One part that matched.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchHit {
    /// The session it belongs to.
    pub session: SessionId,
    /// `messages.id` of its message.
    pub message_id: i64,
    /// The message's `seq`.
    pub seq: i64,
    /// The message's turn.
    pub turn: i64,
    /// The message's role, as stored.
    pub role: String,
    /// `parts.id`.
    pub part_id: i64,
    /// The part's kind, as stored (`text`, `reasoning`, `tool_use`, `tool_result`, ...).
    pub kind: String,
    /// The matched passage with the terms highlighted.
    pub snippet: String,
    /// bm25 relevance: lower is better (SQLite's sign convention). On PostgreSQL: `ts_rank`
    /// normalised by length, negated (lower is better there too; the numbers differ).
    pub score: f64,
}

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
    SELECT m.session_id, m.id, m.seq, m.turn_index, m.role, h.part_id, p.kind, h.snippet, h.score
    FROM hits h JOIN parts p ON p.id = h.part_id JOIN messages m ON m.id = p.message_id
    ORDER BY h.score, h.part_id";

/// The range of part ids a session holds: the index is read only there, so the cost follows
/// the session (and what was written while it was live), not the whole database.
const SESSION_PART_RANGE: &str = "
    SELECT MIN(p.id), MAX(p.id) FROM messages m JOIN parts p ON p.message_id = m.id
    WHERE m.session_id = ?1";

const SEARCH_SESSION: &str = "
    SELECT m.session_id, m.id, m.seq, m.turn_index, m.role, parts_fts.rowid, p.kind,
           snippet(parts_fts, -1, ?2, ?3, '…', ?4), parts_fts.rank
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
        match self.write(|tx| catch_up(tx)) {
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
            Ok(hits)
        })
    }
}

/// The most distinct terms a query may hold. Every term is required, and both engines'
/// matching and snippet costs grow with the square of the terms (1,000 terms took 21 s of
/// CPU); a person's query rarely holds 20. A query with more distinct terms is refused
/// ([`crate::Error::TooManySearchTerms`]), never cut short: dropping a required term would
/// widen what it finds. Repeated terms count once (a term required twice is required once).
pub const MAX_SEARCH_TERMS: usize = 64;

/// A person's query as terms: separated by whitespace or control characters, each with
/// whether it ends in `*` (a prefix search), the `*`s removed, each distinct term once, in
/// order of first appearance. A term with no letter or digit (e.g. `-`, `*`, `"`) holds no
/// word and is left out. More than [`MAX_SEARCH_TERMS`] distinct terms is
/// [`crate::Error::TooManySearchTerms`]. Both backends read queries through this
/// ([`fts_query`] for FTS5, `pg/search.rs` for PostgreSQL's `tsquery`); the time it takes
/// is linear in the query's length.
pub(crate) fn query_terms(query: &str) -> Result<Vec<(String, bool)>> {
    let mut seen = std::collections::HashSet::new();
    let mut terms = Vec::new();
    // FTS5 reads its query as a C string: a NUL would end it inside a quoted term. Control
    // characters separate terms like whitespace.
    for term in query.split(|c: char| c.is_whitespace() || c.is_control()) {
        let (stem, prefix) = match term.strip_suffix('*') {
            Some(stem) => (stem.trim_end_matches('*'), true),
            None => (term, false),
        };
        // FTS5 would see an empty phrase, which matches nothing.
        if !stem.chars().any(char::is_alphanumeric) || !seen.insert((stem, prefix)) {
            continue;
        }
        if seen.len() > MAX_SEARCH_TERMS {
            return Err(crate::Error::TooManySearchTerms {
                max: MAX_SEARCH_TERMS,
            });
        }
        terms.push((stem.to_owned(), prefix));
    }
    Ok(terms)
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
