//! A person's search query as terms: what both engines' searches and the snippets read.

use crate::error::Result;

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
/// (`search::fts_query` for FTS5, `pg/search.rs` for PostgreSQL's `tsquery`); the time it takes
/// is linear in the query's length.
pub(crate) fn query_terms(query: &str) -> Result<Vec<(String, bool)>> {
    let mut seen = std::collections::HashSet::new();
    let mut terms = Vec::new();
    for (stem, prefix) in raw_terms(query) {
        // FTS5 would see an empty phrase, which matches nothing.
        if !holds_a_word(stem) || !seen.insert((stem, prefix)) {
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

/// Every whitespace-separated term of a query, its trailing `*`s removed, with whether it
/// had any (a prefix search). FTS5 reads its query as a C string: a NUL would end it inside
/// a quoted term, so control characters separate terms like whitespace.
pub(crate) fn raw_terms(query: &str) -> impl Iterator<Item = (&str, bool)> {
    query
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|term| !term.is_empty())
        .map(|term| match term.strip_suffix('*') {
            Some(stem) => (stem.trim_end_matches('*'), true),
            None => (term, false),
        })
}

/// Whether a term holds a letter or digit, which both engines' indexes keep as words.
pub(crate) fn holds_a_word(term: &str) -> bool {
    term.chars().any(char::is_alphanumeric)
}
