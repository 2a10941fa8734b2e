//! Full-text search on PostgreSQL: the twin of `store/search.rs` over
//! `parts.search_document` (`parts_search_document` of the part, migration V11 says what is
//! indexed) and its GIN index. As on SQLite, an append does not index its parts: their
//! document stays NULL until [`catch_up`] (before each search, in a write transaction of its
//! own; migration V16) computes every missing one.
//!
//! The same hits as SQLite's FTS5 index for the same query: the same words (every run of
//! characters that is not a letter or digit separates words, both sides lowercase), every
//! term required, a quoted term a phrase of its words in order, `term*` a prefix search. The
//! query goes through the same [`query_terms`] as FTS5's, and is built as a `tsquery` of bare
//! words and operators only, so no query is a syntax error. Snippets are cut here, in Rust,
//! the way FTS5's `snippet()` cuts them (the column with the best window of about
//! `snippet_tokens` words, phrases highlighted whole, `…` where the window stops short), from
//! the hit's columns: only the returned hits are read. What differs from SQLite:
//! - ranking is `ts_rank` normalised by the log of the part's length, not bm25: the same
//!   order where one part says the words more often or in fewer words, not the same numbers;
//!   the score is its negation, so lower is better on both backends;
//! - FTS5 may move a long snippet's window to a sentence start; this one centres it on the
//!   matches;
//! - diacritics count (`café` does not match `cafe`; SQLite's tokenizer removes them).
//! - characters are classed by today's Unicode (`char::is_alphanumeric`, `[[:alnum:]]`); SQLite's
//!   unicode61 by Unicode 6.1, so a symbol assigned since (`🔾`) is part of a word there.

use postgres::Row;

use super::{require_session, PgStore, Tx};
use crate::error::Result;
use crate::model::SessionId;
use crate::store::reports::{SearchHit, SearchOptions};
use crate::store::snippet::{phrases, snippet, snippet_columns, Phrase};

/// What the index holds for part `p`: its document, indexed by GIN (NULL until indexed).
const DOCUMENT: &str = "p.search_document";

/// The advisory lock key of the catch-up (an arbitrary constant): one at a time, so two
/// searches never compute the same documents nor wait on each other's rows in turn.
const CATCH_UP_LOCK: i64 = 0x5e55_1011_5e4c;

/// Whether a part is waiting for its document (the partial index `parts_unindexed`).
const BEHIND: &str = "SELECT EXISTS (SELECT 1 FROM parts WHERE search_document IS NULL)";
/// [`BEHIND`] for one session's parts: routed to its shard.
const SESSION_BEHIND: &str =
    "SELECT EXISTS (SELECT 1 FROM parts WHERE session_id = $1 AND search_document IS NULL)";

const CATCH_UP: &str = "
    UPDATE parts SET search_document = parts_search_document(kind, text, tool_name, input)
    WHERE search_document IS NULL";
/// [`CATCH_UP`] for one session's parts: routed to its shard.
const SESSION_CATCH_UP: &str = "
    UPDATE parts SET search_document = parts_search_document(kind, text, tool_name, input)
    WHERE session_id = $1 AND search_document IS NULL";

/// Indexes every part whose document is missing (only `session`'s when a search reads one
/// session: what it reads, in statements routed to its shard), in the caller's write
/// transaction; nothing when none is (one statement, through the partial index).
pub(crate) fn catch_up(tx: &mut Tx<'_>, session: Option<&SessionId>) -> Result<()> {
    let behind = match session {
        Some(session) => tx
            .query_one(SESSION_BEHIND, &[&session.as_str()])?
            .try_get(0)?,
        None => behind(tx)?,
    };
    if !behind {
        return Ok(());
    }
    tx.query("SELECT pg_advisory_xact_lock($1)", &[&CATCH_UP_LOCK])?;
    match session {
        Some(session) => tx.execute(SESSION_CATCH_UP, &[&session.as_str()])?,
        None => tx.execute(CATCH_UP, &[])?,
    };
    Ok(())
}

/// Whether some part is not indexed yet.
fn behind(tx: &mut Tx<'_>) -> Result<bool> {
    Ok(tx.query_one(BEHIND, &[])?.try_get(0)?)
}

/// A person's query as a `tsquery` text for `to_tsquery('simple', ...)`: each phrase's words
/// joined by `<->`, the last with `:*` for a prefix term, the phrases joined by `&`. Words
/// are runs of letters and digits only, so the text is never a syntax error. `None` when the
/// query has no word.
fn ts_query(phrases: &[Phrase]) -> Option<String> {
    let terms: Vec<String> = phrases
        .iter()
        .map(|phrase| {
            let joined = phrase.words.join(" <-> ");
            if phrase.prefix {
                format!("({joined}:*)")
            } else {
                format!("({joined})")
            }
        })
        .collect();
    (!terms.is_empty()).then(|| terms.join(" & "))
}

/// The newest `$2 + 1`-th match: ranking starts there when a query matches more.
fn newest_bound_sql() -> String {
    format!(
        "SELECT p.id FROM parts p WHERE {DOCUMENT} @@ to_tsquery('simple', $1)
         ORDER BY p.id DESC LIMIT 1 OFFSET $2"
    )
}

/// The best `$2` hits among parts with `id >= $3` over all sessions, with the columns their
/// snippet is cut from. `ts_rank` normalised by the log of the document's length (1): a
/// shorter part that says the words as often ranks first, as bm25 ranks it.
fn search_sql() -> String {
    format!(
        "WITH q AS (SELECT to_tsquery('simple', $1) AS q),
         hits AS (
             SELECT p.id AS part_id, p.session_id, p.message_id, p.kind, p.text, p.tool_name, p.input,
                    p.ordinal, -ts_rank({DOCUMENT}, q.q, 1)::FLOAT8 AS score
             FROM parts p CROSS JOIN q
             WHERE {DOCUMENT} @@ q.q AND p.id >= $3
             ORDER BY score, p.id LIMIT $2)
         SELECT m.session_id, m.id, m.seq, m.turn_index, m.role, h.part_id, h.kind,
                h.text, h.tool_name, h.input, h.score, h.ordinal
         FROM hits h JOIN messages m ON m.session_id = h.session_id AND m.id = h.message_id
         ORDER BY h.score, h.part_id"
    )
}

/// The best `$2` hits of session `$3`: read from the session's messages (an index on
/// `session_id`, then each message's parts), so the cost follows the session, not how often
/// the words occur elsewhere.
fn search_session_sql() -> String {
    format!(
        "WITH q AS (SELECT to_tsquery('simple', $1) AS q)
         SELECT m.session_id, m.id, m.seq, m.turn_index, m.role, p.id, p.kind,
                p.text, p.tool_name, p.input, -ts_rank({DOCUMENT}, q.q, 1)::FLOAT8 AS score,
                p.ordinal
         FROM messages m JOIN parts p ON p.session_id = m.session_id AND p.message_id = m.id
         CROSS JOIN q
         WHERE m.session_id = $3 AND {DOCUMENT} @@ q.q
         ORDER BY score, p.id LIMIT $2"
    )
}

fn hit_from_row(row: &Row, phrases: &[Phrase], options: &SearchOptions) -> Result<SearchHit> {
    let kind: String = row.try_get(6)?;
    let (text, name, input): (Option<&str>, Option<&str>, Option<&str>) =
        (row.try_get(7)?, row.try_get(8)?, row.try_get(9)?);
    let columns = snippet_columns(&kind, text, name, input);
    Ok(SearchHit {
        session: SessionId::new(row.try_get::<_, String>(0)?),
        message_id: row.try_get(1)?,
        seq: row.try_get(2)?,
        turn: row.try_get(3)?,
        role: row.try_get(4)?,
        part_id: row.try_get(5)?,
        ordinal: row.try_get(11)?,
        snippet: snippet(
            &columns,
            phrases,
            options.snippet_tokens.clamp(1, 64),
            &options.highlight,
        ),
        kind,
        score: row.try_get(10)?,
    })
}

impl PgStore {
    /// `Store::search` on PostgreSQL: the same hits, best first (see the module).
    pub(crate) fn search(&self, query: &str, options: &SearchOptions) -> Result<Vec<SearchHit>> {
        let phrases = phrases(query)?;
        let ts = ts_query(&phrases);
        let limit = i64::try_from(options.limit).unwrap_or(i64::MAX);
        if let Some(session) = &options.session {
            super::nameable(session)?;
        }
        if !self.read_only && ts.is_some() {
            self.write(|tx| catch_up(tx, options.session.as_ref()))?;
        }
        self.read(|tx| {
            if let Some(session) = &options.session {
                require_session(tx, session)?;
            }
            let Some(ts) = ts else {
                return Ok(Vec::new());
            };
            let rows = match &options.session {
                Some(session) => {
                    tx.query(&search_session_sql(), &[&ts, &limit, &session.as_str()])?
                }
                None => {
                    let offset = i64::try_from(options.max_ranked.max(1) - 1).unwrap_or(i64::MAX);
                    let from = tx
                        .query_opt(&newest_bound_sql(), &[&ts, &offset])?
                        .map(|row| row.try_get(0))
                        .transpose()?
                        .unwrap_or(i64::MIN);
                    tx.query(&search_sql(), &[&ts, &limit, &from])?
                }
            };
            rows.iter()
                .map(|row| hit_from_row(row, &phrases, options))
                .collect()
        })
    }
}

impl PgStore {
    /// `Store::search_index_behind` on PostgreSQL: some part waits for its document (a
    /// read-only store cannot catch up; its searches miss those parts).
    pub(crate) fn search_index_behind(&self) -> Result<bool> {
        self.read(behind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tq(query: &str) -> Option<String> {
        ts_query(&phrases(query).expect("few terms"))
    }

    #[test]
    fn every_query_becomes_bare_words_and_operators() {
        assert_eq!(
            tq("Deploy staging").as_deref(),
            Some("(deploy) & (staging)")
        );
        assert_eq!(
            tq("\"src/main.rs\" depl*").as_deref(),
            Some("(src <-> main <-> rs) & (depl:*)")
        );
        assert_eq!(
            tq("say \"hi\" NEAR(a & !b").as_deref(),
            Some("(say) & (hi) & (near <-> a) & (b)")
        );
        assert_eq!(tq("  - * \" ( "), None);
        assert_eq!(tq("a\u{0}b:*'").as_deref(), Some("(a) & (b)"));
    }
}
