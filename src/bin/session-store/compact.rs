//! `compact`: replace the head of a session by a summary in what the provider sees.

use std::io::Write;

use session_store::{CompactionOutcome, NothingToCompact, SessionId, Store};

use crate::open;
use crate::sessions::count;
use crate::terminal::escape_line;

pub fn run(
    store: &Store,
    session: &str,
    (min_keep_tail, summary): (usize, &str),
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let id = open::session(store, session)?;
    let shown = escape_line(id.as_str());
    let outcome = store.compact(&id, min_keep_tail, summary)?;
    if json {
        return crate::shapes::print(out, &json_of(store, &id, &outcome)?);
    }
    match outcome {
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

/// `compact --json`: `{"session", "compacted": true, "first_turn", "last_turn",
/// "newly_compacted", "kept", "summary_number"}` or `{"session", "compacted": false, "reason"}`.
fn json_of(
    store: &Store,
    id: &SessionId,
    outcome: &CompactionOutcome,
) -> anyhow::Result<serde_json::Value> {
    Ok(match outcome {
        CompactionOutcome::Compacted {
            summary,
            newly_compacted,
            kept,
        } => serde_json::json!({
            "session": id.as_str(),
            "compacted": true,
            "first_turn": summary.first_turn,
            "last_turn": summary.last_turn,
            "newly_compacted": newly_compacted,
            "kept": kept,
            "summary_number": store.summaries(id)?.len(),
        }),
        CompactionOutcome::NothingToCompact { reason } => serde_json::json!({
            "session": id.as_str(),
            "compacted": false,
            "reason": why(reason),
        }),
    })
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
