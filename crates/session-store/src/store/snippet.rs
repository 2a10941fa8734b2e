//! Snippets cut in Rust the way SQLite's FTS5 `snippet()` cuts them: the column with the best
//! window of about `snippet_tokens` words, phrases highlighted whole, `…` where the window
//! stops short. PostgreSQL's search cuts every snippet here (it has no `snippet()`); SQLite's
//! cuts here the parts whose stored text holds a NUL, where FTS5 reads the column as a C
//! string and would stop at it (the store refuses NUL on write; other code may write one).
//! Words are runs of letters and digits, lowercased, as both indexes split text.

use crate::error::Result;
use crate::store::terms::query_terms;

/// One term of a query: its words in order (a phrase), the last one a prefix when `prefix`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Phrase {
    /// The phrase's words, lowercase.
    pub(crate) words: Vec<String>,
    /// Whether the last word is a prefix.
    pub(crate) prefix: bool,
}

/// A person's query as phrases: each term of [`query_terms`] split into its words (runs of
/// letters and digits, lowercased), as the index splits the text.
pub(crate) fn phrases(query: &str) -> Result<Vec<Phrase>> {
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
pub(crate) fn snippet(
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
pub(crate) fn snippet_columns<'r>(
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

#[cfg(test)]
mod tests {
    use super::*;

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
