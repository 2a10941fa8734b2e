//! Full-text search on PostgreSQL: the twin of `store/search.rs` over migration V11's
//! `parts.search_document` (a stored generated column, `parts_search_document` of the part,
//! see that migration for what is indexed) and its GIN index.
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

use super::{require_session, PgStore};
use crate::error::Result;
use crate::model::SessionId;
use crate::store::search::query_terms;
use crate::store::{SearchHit, SearchOptions};

/// What the index holds for part `p`: V11's stored generated column, indexed by GIN.
const DOCUMENT: &str = "p.search_document";

/// One term of a query: its words in order (a phrase), the last one a prefix when `prefix`.
#[derive(Debug, PartialEq, Eq)]
struct Phrase {
    words: Vec<String>,
    prefix: bool,
}

/// A person's query as phrases: each term of [`query_terms`] split into its words (runs of
/// letters and digits, lowercased), as the index splits the text.
fn phrases(query: &str) -> Result<Vec<Phrase>> {
    Ok(query_terms(query)?
        .into_iter()
        .filter_map(|(stem, prefix)| {
            let words: Vec<String> = words(&stem).into_iter().map(|w| w.2).collect();
            (!words.is_empty()).then_some(Phrase { words, prefix })
        })
        .collect())
}

/// The words of `text`: byte range and lowercase form of each run of letters and digits
/// (what the index's `regexp_replace` leaves for the parser, and SQLite's unicode61 finds).
fn words(text: &str) -> Vec<(usize, usize, String)> {
    let mut out = Vec::new();
    let mut start = None;
    for (at, c) in text.char_indices() {
        match (c.is_alphanumeric(), start) {
            (true, None) => start = Some(at),
            (false, Some(from)) => {
                out.push((from, at, text[from..at].to_lowercase()));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(from) = start {
        out.push((from, text.len(), text[from..].to_lowercase()));
    }
    out
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
             SELECT p.id AS part_id, p.message_id, p.kind, p.text, p.tool_name, p.input,
                    -ts_rank({DOCUMENT}, q.q, 1)::FLOAT8 AS score
             FROM parts p CROSS JOIN q
             WHERE {DOCUMENT} @@ q.q AND p.id >= $3
             ORDER BY score, p.id LIMIT $2)
         SELECT m.session_id, m.id, m.seq, m.turn_index, m.role, h.part_id, h.kind,
                h.text, h.tool_name, h.input, h.score
         FROM hits h JOIN messages m ON m.id = h.message_id
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
                p.text, p.tool_name, p.input, -ts_rank({DOCUMENT}, q.q, 1)::FLOAT8 AS score
         FROM messages m JOIN parts p ON p.message_id = m.id CROSS JOIN q
         WHERE m.session_id = $3 AND {DOCUMENT} @@ q.q
         ORDER BY score, p.id LIMIT $2"
    )
}

/// Where one phrase occurs in a column: first and last word index.
type Instance = (usize, usize, usize);

fn instances(words: &[(usize, usize, String)], phrases: &[Phrase]) -> Vec<Instance> {
    let mut out = Vec::new();
    for (index, phrase) in phrases.iter().enumerate() {
        let n = phrase.words.len();
        for at in 0..words.len().saturating_sub(n - 1) {
            let hit = phrase.words.iter().enumerate().all(|(k, word)| {
                let found = &words[at + k].2;
                if phrase.prefix && k + 1 == n {
                    found.starts_with(word.as_str())
                } else {
                    found == word
                }
            });
            if hit {
                out.push((index, at, at + n - 1));
            }
        }
    }
    out.sort_by_key(|&(_, first, last)| (first, last));
    out
}

/// FTS5's window score: 1000 for each phrase found in `[from, from + size)`, 1 for each
/// repeat; with the first word of the first and the word after the last instance in it.
fn window_score(
    instances: &[Instance],
    phrases: usize,
    from: usize,
    size: usize,
) -> (u64, usize, usize) {
    let mut seen = vec![false; phrases];
    let (mut score, mut first, mut last) = (0, None, 0);
    for &(phrase, start, end) in instances {
        if start >= from && start < from + size {
            score += if std::mem::replace(&mut seen[phrase], true) {
                1
            } else {
                1000
            };
            first.get_or_insert(start);
            last = end + 1;
        }
    }
    (score, first.unwrap_or(from), last)
}

/// The snippet as SQLite's FTS5 `snippet()` cuts it (the column with the best window, about
/// `size` words around the matches, `…` where it stops short of the column's start or end,
/// each phrase found wrapped in the highlight); computed here from the part's columns.
fn snippet(
    columns: &[Option<&str>],
    phrases: &[Phrase],
    size: usize,
    highlight: &(String, String),
) -> String {
    let size = size.max(1);
    // (score, column, first word)
    let mut best: Option<(u64, usize, usize)> = None;
    for (index, column) in columns.iter().enumerate() {
        let Some(text) = column else { continue };
        let words = words(text);
        let found = instances(&words, phrases);
        let mut consider = |score: u64, start: usize| {
            if best.is_none_or(|(top, _, _)| score > top) {
                best = Some((score, index, start));
            }
        };
        if words.len() <= size {
            consider(window_score(&found, phrases.len(), 0, size).0, 0);
            continue;
        }
        for &(_, start, _) in &found {
            let (score, first, last) = window_score(&found, phrases.len(), start, size);
            let centred = first.saturating_sub(size.saturating_sub(last - first) / 2);
            consider(score, centred.min(words.len() - size));
        }
    }
    let Some((_, column, start)) = best else {
        return String::new();
    };
    let text = columns[column].unwrap_or_default();
    let words = words(text);
    if words.is_empty() {
        return text.to_owned();
    }
    let end = (start + size - 1).min(words.len() - 1);
    // The phrases found, merged where they overlap, clipped to the window.
    let mut marks: Vec<(usize, usize)> = Vec::new();
    for (_, first, last) in instances(&words, phrases) {
        let (first, last) = (first.max(start), last.min(end));
        if first > last {
            continue;
        }
        match marks.last_mut() {
            Some(previous) if first <= previous.1 => previous.1 = previous.1.max(last),
            _ => marks.push((first, last)),
        }
    }
    let mut out = String::new();
    let mut offset = 0;
    if start > 0 {
        out.push('…');
        offset = words[start].0;
    }
    for (first, last) in marks {
        out.push_str(&text[offset..words[first].0]);
        out.push_str(&highlight.0);
        out.push_str(&text[words[first].0..words[last].1]);
        out.push_str(&highlight.1);
        offset = words[last].1;
    }
    if end + 1 >= words.len() {
        out.push_str(&text[offset..]);
    } else {
        out.push_str(&text[offset..words[end].1]);
        out.push('…');
    }
    out
}

/// The columns a part's snippet may come from, as the index reads them: its text (not for
/// redacted reasoning), and a call's tool name and input.
fn snippet_columns<'r>(
    kind: &str,
    text: Option<&'r str>,
    name: Option<&'r str>,
    input: Option<&'r str>,
) -> [Option<&'r str>; 3] {
    let call = matches!(kind, "tool_use" | "server_tool_use");
    [
        text.filter(|_| kind != "redacted_reasoning"),
        name.filter(|_| call),
        input.filter(|_| call),
    ]
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

    fn cut(text: &str, query: &str, size: usize) -> String {
        let marks = ("[".to_owned(), "]".to_owned());
        snippet(
            &[Some(text)],
            &phrases(query).expect("few terms"),
            size,
            &marks,
        )
    }

    #[test]
    fn snippets_highlight_phrases_and_say_where_they_were_cut() {
        assert_eq!(
            cut("Deploy the staging cluster", "staging deploy", 16),
            "[Deploy] the [staging] cluster"
        );
        assert_eq!(
            cut("path: src/main.rs, line 3", "\"src/main.rs\"", 16),
            "path: [src/main.rs], line 3"
        );
        assert_eq!(cut("run_shell", "run_shell", 16), "[run_shell]");
        assert_eq!(cut("Deployed it", "depl*", 16), "[Deployed] it");
        assert_eq!(cut("a b c d e f g h i j", "e", 4), "…d [e] f g…");
        assert_eq!(cut("a b c d e f g h i j", "j", 4), "…g h i [j]");
        assert_eq!(cut("a b c d e f g h i j", "a", 4), "[a] b c d…");
        // The column with the best window: the tool name over the input that lacks the word.
        let marks = ("[".to_owned(), "]".to_owned());
        let columns = [None, Some("read_file"), Some("{\"path\": \"notes\"}")];
        assert_eq!(
            snippet(&columns, &phrases("notes").expect("one term"), 16, &marks),
            "{\"path\": \"[notes]\"}"
        );
        assert_eq!(
            snippet(&columns, &phrases("read").expect("one term"), 16, &marks),
            "[read]_file"
        );
    }
}
