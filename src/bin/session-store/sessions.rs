//! `sessions`: one line per session.
//!
//! Each line is tab-separated `key=value` fields after the id, so scripts can `cut -f` and
//! people can read it: `ID  messages=N  turns=N  compacted_turns=N  pending=N  health=...`.

use std::collections::BTreeSet;
use std::io::Write;

use session_store::{Message, Store};

pub fn run(store: &Store, out: &mut impl Write) -> anyhow::Result<()> {
    for info in store.sessions()? {
        let messages = store.messages(&info.id)?;
        let pending = store.pending_tool_uses(&info.id)?.len();
        let stats = Stats::of(&messages);
        writeln!(
            out,
            "{}\tmessages={}\tturns={}\tcompacted_turns={}\tpending={}\thealth={}",
            info.id,
            messages.len(),
            stats.turns,
            stats.compacted_turns,
            pending,
            health(pending),
        )?;
    }
    Ok(())
}

struct Stats {
    turns: usize,
    compacted_turns: usize,
}

impl Stats {
    fn of(messages: &[Message]) -> Self {
        let turns: BTreeSet<i64> = messages.iter().map(|m| m.turn_index).collect();
        let compacted: BTreeSet<i64> = messages
            .iter()
            .filter(|m| m.compacted)
            .map(|m| m.turn_index)
            .collect();
        Self {
            turns: turns.len(),
            compacted_turns: compacted.len(),
        }
    }
}

/// The store's full health check is not wired in yet: only pending calls are looked at, so a
/// session without any says `unchecked` rather than `ok`.
fn health(pending: usize) -> &'static str {
    if pending > 0 {
        "pending"
    } else {
        "unchecked"
    }
}
