//! `search QUERY [--session SESSION] [--json] [--limit N]`: full-text search over every
//! session's text, reasoning, tool inputs and tool results, best match first.

use std::io::Write;

use session_store::{SearchOptions, Store};

use crate::open;
use crate::terminal::escape_line;

pub fn run(
    store: &Store,
    query: &str,
    session: Option<&str>,
    limit: usize,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let session = session.map(|s| open::session(store, s)).transpose()?;
    let options = SearchOptions {
        session,
        limit,
        ..SearchOptions::default()
    };
    // The first search after many writes brings the full-text index up to date first.
    let spinner = crate::progress::spinner("searching");
    let hits = store.search(query, &options);
    spinner.finish_and_clear();
    let hits = hits?;
    if store.search_index_behind()? {
        eprintln!(
            "session-store: the search index of {} misses parts written since it was last \
             updated, and this database cannot be written here to update it: parts it misses \
             are not found (search it once with write access to bring the index up to date)",
            crate::terminal::escape_line(&open::shown(store.path()))
        );
    }
    if json {
        serde_json::to_writer_pretty(&mut *out, &hits)?;
        writeln!(out)?;
        return Ok(());
    }
    // Snippets and tool names are somebody else's text: shown, not obeyed, as by `show`.
    for hit in &hits {
        let snippet = hit.snippet.split_whitespace().collect::<Vec<_>>().join(" ");
        writeln!(
            out,
            "{}\tturn={}\tseq={}\t{}/{}\t{}",
            escape_line(hit.session.as_str()),
            hit.turn,
            hit.seq,
            escape_line(&hit.role),
            escape_line(&hit.kind),
            escape_line(&snippet)
        )?;
    }
    Ok(())
}
