//! `search QUERY [--session SESSION] [--json] [--limit N]`: full-text search over every
//! session's text, reasoning, tool inputs and tool results, best match first.

use std::io::Write;

use session_store::{SearchOptions, Store};

use crate::open;

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
    let hits = store.search(query, &options)?;
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
    for hit in &hits {
        let snippet = hit.snippet.split_whitespace().collect::<Vec<_>>().join(" ");
        writeln!(
            out,
            "{}\tturn={}\tseq={}\t{}/{}\t{}",
            hit.session, hit.turn, hit.seq, hit.role, hit.kind, snippet
        )?;
    }
    Ok(())
}
