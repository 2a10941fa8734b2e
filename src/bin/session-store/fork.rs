//! `fork`: a new session holding the turns of another before `--at-turn`; prints its id.

use std::io::Write;

use session_store::Store;

use crate::{open, shapes};

pub fn run(
    store: &Store,
    session: &str,
    at_turn: i64,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let id = open::session(store, session)?;
    let forked = store.fork(&id, at_turn)?;
    if json {
        shapes::print(out, &shapes::forked(&forked))?;
    } else {
        // stdout holds the id alone, for scripts (`new=$(session-store fork ...)`).
        writeln!(out, "{}", forked.id)?;
    }
    if !forked.tombstoned.is_empty() {
        eprintln!(
            "session-store: answered {} call(s) pending at the cut with tombstones: {}",
            forked.tombstoned.len(),
            forked.tombstoned.join(", ")
        );
    }
    if forked.uncompacted > 0 {
        eprintln!(
            "session-store: {} compacted message(s) are visible again: their summary covers turns the fork does not hold",
            forked.uncompacted
        );
    }
    Ok(())
}
