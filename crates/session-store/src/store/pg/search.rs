//! Full-text search on PostgreSQL: the twin of `store/search.rs` over the GIN index of
//! migration V11 (`parts_search_document`, see that migration for what is indexed).
//!
//! The same hits as SQLite's FTS5 index for the same query: the same words (every run of
//! non-alphanumeric characters separates words, both sides lowercase), every term required,
//! a quoted term a phrase of its words in order, `term*` a prefix search. The query goes
//! through the same [`query_terms`] as FTS5's, and is built as a `tsquery` of bare words and
//! operators only, so no query is a syntax error. What differs:
//! - ranking is `ts_rank` (term frequency over log document length), not bm25; the score is
//!   its negation, so lower is better on both backends and hits come best first;
//! - snippets are `ts_headline`'s (the passage starts at a match, FTS5 centres it), with
//!   `…` added where the passage does not reach the start or end of the text, as FTS5 does;
//!   a word PostgreSQL's parser reads as part of a larger token (a file name, a URL) is
//!   found but not highlighted;
//! - diacritics count (`café` does not match `cafe`; SQLite removes them).

use postgres::Row;

use super::{require_session, PgStore};
use crate::error::Result;
use crate::model::SessionId;
use crate::store::search::query_terms;
use crate::store::{SearchHit, SearchOptions};

/// What the index holds for part `p` (the index's expression, so the index is used).
const DOCUMENT: &str = "parts_search_document(p.kind, p.text, p.tool_name, p.input)";

/// Marks around a highlighted word inside the server (private-use characters, replaced by
/// the caller's highlight afterwards): no quoting rules of `ts_headline`'s options to meet.
const OPEN_MARK: char = '\u{E000}';
const CLOSE_MARK: char = '\u{E001}';

/// A person's query as a `tsquery` text for `to_tsquery('simple', ...)`: each term's words
/// joined by `<->` (a phrase), the last with `:*` for a prefix term, the terms joined by `&`.
/// Words are runs of letters and digits only, so the text is never a syntax error. `None`
/// when the query has no word.
pub(crate) fn ts_query(query: &str) -> Option<String> {
    let terms: Vec<String> = query_terms(query)
        .into_iter()
        .filter_map(|(stem, prefix)| {
            let words: Vec<String> = stem
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .map(str::to_lowercase)
                .collect();
            if words.is_empty() {
                return None;
            }
            let phrase = words.join(" <-> ");
            Some(if prefix {
                format!("({phrase}:*)")
            } else {
                format!("({phrase})")
            })
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

/// The best `$2` hits among parts with `id >= $3` (all sessions, or session `$4` when set),
/// with the text their snippet is cut from; `$5` is `ts_headline`'s options.
fn search_sql() -> String {
    format!(
        "WITH q AS (SELECT to_tsquery('simple', $1) AS q),
         hits AS (
             SELECT p.id AS part_id, p.message_id, p.kind,
                    -ts_rank({DOCUMENT}, q.q)::FLOAT8 AS score,
                    COALESCE(CASE WHEN p.kind <> 'redacted_reasoning' THEN p.text END,
                             concat_ws(' ', p.tool_name, p.input)) AS source
             FROM parts p CROSS JOIN q
             WHERE {DOCUMENT} @@ q.q AND p.id >= $3
               AND ($4::TEXT IS NULL OR p.message_id IN (SELECT id FROM messages WHERE session_id = $4))
             ORDER BY score, p.id LIMIT $2)
         SELECT m.session_id, m.id, m.seq, m.turn_index, m.role, h.part_id, h.kind,
                ts_headline('simple', h.source, q.q, $5), h.source, h.score
         FROM hits h CROSS JOIN q JOIN messages m ON m.id = h.message_id
         ORDER BY h.score, h.part_id"
    )
}

/// `ts_headline`'s options for a snippet of about `tokens` words.
fn headline_options(tokens: usize) -> String {
    let max = tokens.clamp(2, 64);
    let min = (max / 2).max(1);
    format!(
        "StartSel={OPEN_MARK}, StopSel={CLOSE_MARK}, MaxWords={max}, MinWords={min}, ShortWord=0"
    )
}

/// The snippet as FTS5 gives it: the caller's highlight around each match, and `…` where the
/// passage stops short of the text's start or end.
fn snippet(headline: &str, source: &str, highlight: &(String, String)) -> String {
    let plain: String = headline
        .chars()
        .filter(|&c| c != OPEN_MARK && c != CLOSE_MARK)
        .collect();
    let plain = plain.trim();
    let mut out = String::new();
    if !source.trim_start().starts_with(plain) {
        out.push('…');
    }
    out.push_str(
        &headline
            .trim()
            .replace(OPEN_MARK, &highlight.0)
            .replace(CLOSE_MARK, &highlight.1),
    );
    if !source.trim_end().ends_with(plain) {
        out.push('…');
    }
    out
}

fn hit_from_row(row: &Row, highlight: &(String, String)) -> Result<SearchHit> {
    let headline: Option<String> = row.try_get(7)?;
    let source: Option<String> = row.try_get(8)?;
    Ok(SearchHit {
        session: SessionId::new(row.try_get::<_, String>(0)?),
        message_id: row.try_get(1)?,
        seq: row.try_get(2)?,
        turn: row.try_get(3)?,
        role: row.try_get(4)?,
        part_id: row.try_get(5)?,
        kind: row.try_get(6)?,
        snippet: snippet(
            &headline.unwrap_or_default(),
            &source.unwrap_or_default(),
            highlight,
        ),
        score: row.try_get(9)?,
    })
}

impl PgStore {
    /// `Store::search` on PostgreSQL: the same hits, best first (see the module).
    pub(crate) fn search(&self, query: &str, options: &SearchOptions) -> Result<Vec<SearchHit>> {
        let ts = ts_query(query);
        let limit = i64::try_from(options.limit).unwrap_or(i64::MAX);
        self.read(|tx| {
            if let Some(session) = &options.session {
                require_session(tx, session)?;
            }
            let Some(ts) = ts else {
                return Ok(Vec::new());
            };
            let from = match &options.session {
                // A session's matches are few: every one of them is ranked.
                Some(_) => i64::MIN,
                None => {
                    let offset = i64::try_from(options.max_ranked.max(1) - 1).unwrap_or(i64::MAX);
                    tx.query_opt(&newest_bound_sql(), &[&ts, &offset])?
                        .map(|row| row.try_get(0))
                        .transpose()?
                        .unwrap_or(i64::MIN)
                }
            };
            let session = options.session.as_ref().map(SessionId::as_str);
            tx.query(
                &search_sql(),
                &[
                    &ts,
                    &limit,
                    &from,
                    &session,
                    &headline_options(options.snippet_tokens),
                ],
            )?
            .iter()
            .map(|row| hit_from_row(row, &options.highlight))
            .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_query_becomes_bare_words_and_operators() {
        assert_eq!(
            ts_query("Deploy staging").as_deref(),
            Some("(deploy) & (staging)")
        );
        assert_eq!(
            ts_query("\"src/main.rs\" depl*").as_deref(),
            Some("(src <-> main <-> rs) & (depl:*)")
        );
        assert_eq!(
            ts_query("say \"hi\" NEAR(a & !b").as_deref(),
            Some("(say) & (hi) & (near <-> a) & (b)")
        );
        assert_eq!(ts_query("  - * \" ( "), None);
        assert_eq!(ts_query("a\u{0}b:*'").as_deref(), Some("(a) & (b)"));
    }

    #[test]
    fn snippets_say_where_they_were_cut() {
        let marks = ("[".to_owned(), "]".to_owned());
        let whole = format!("{OPEN_MARK}Deploy{CLOSE_MARK} the cluster");
        assert_eq!(
            snippet(&whole, "Deploy the cluster", &marks),
            "[Deploy] the cluster"
        );
        let inner = format!("{OPEN_MARK}b{CLOSE_MARK} c");
        assert_eq!(snippet(&inner, "a b c d", &marks), "…[b] c…");
    }
}
