//! `compact`: replace the head of a session by a summary in what the provider sees.

use std::io::Write;

use session_store::{CompactionOutcome, NothingToCompact, Store};

use crate::open;
use crate::sessions::count;
use crate::terminal::escape_line;

pub fn run(
    store: &Store,
    session: &str,
    min_keep_tail: usize,
    summary: &str,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let id = open::session(store, session)?;
    let shown = escape_line(id.as_str());
    match store.compact(&id, min_keep_tail, summary)? {
        CompactionOutcome::Compacted {
            summary,
            newly_compacted,
            kept,
        } => {
            // Summaries are numbered per session here: `summaries.id` counts the whole
            // database and means nothing to a person looking at one session.
            let number = store.summaries(&id)?.len();
            writeln!(
                out,
                "compacted turns {}..={} of session {shown}: {} newly compacted, {} visible after summary {number} of the session",
                summary.first_turn,
                summary.last_turn,
                count(newly_compacted, "message", "messages"),
                count(kept, "message stays", "messages stay"),
            )?
        }
        // Not an error: the contract says a compaction that reaches the first turn changes
        // nothing, and a script may run compact on every session.
        CompactionOutcome::NothingToCompact { reason } => writeln!(
            out,
            "nothing to compact in session {shown}: {}",
            why(&reason)
        )?,
    }
    Ok(())
}

fn why(reason: &NothingToCompact) -> String {
    match reason {
        NothingToCompact::EmptyHistory => "it has no messages".into(),
        NothingToCompact::TailCoversHistory => "it is not longer than the tail to keep".into(),
        NothingToCompact::ReachedFirstTurn => {
            "keeping the tail whole reaches back to the first turn".into()
        }
        NothingToCompact::AlreadyCompacted { compacted } => format!(
            "the turn-aligned cut does not reach past the {compacted} messages already compacted"
        ),
    }
}
