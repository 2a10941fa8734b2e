//! `sessions`: one line per session.
//!
//! Each line is tab-separated `key=value` fields after the id, so scripts can `cut -f` and
//! people can read it: `ID  messages=N  turns=N  compacted_turns=N  pending=N  health=...`.
//! `health` is `ok`, or the contract's rule names the session breaks (comma-separated), from
//! the same check `store-repair` runs; a pending call is legal and only counted. A session
//! whose rows are outside the contract is listed last with `health=unreadable_row` and `?`
//! for what cannot be counted; it does not stop the others.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use session_store::history::rules::Rule;
use session_store::store::repair::RepairOptions;
use session_store::{Message, SessionId, Store};

pub fn run(store: &Store, out: &mut impl Write) -> anyhow::Result<()> {
    let report = store.check(&[], &RepairOptions::default())?;
    let mut broken: BTreeMap<SessionId, BTreeSet<&'static str>> = BTreeMap::new();
    for violation in &report.violations {
        broken
            .entry(violation.session_id.clone())
            .or_default()
            .insert(violation.rule.as_str());
    }
    let unreadable: BTreeSet<&SessionId> = report
        .violations
        .iter()
        .filter(|v| v.rule == Rule::UnreadableRow)
        .map(|v| &v.session_id)
        .collect();
    for info in store.sessions()? {
        if unreadable.contains(&info.id) {
            continue;
        }
        let messages = store.messages(&info.id)?;
        let pending = store.pending_tool_uses(&info.id)?.len();
        let stats = Stats::of(&messages);
        let health = broken.get(&info.id).map_or_else(
            || "ok".to_owned(),
            |rules| rules.iter().copied().collect::<Vec<_>>().join(","),
        );
        writeln!(
            out,
            "{}\tmessages={}\tturns={}\tcompacted_turns={}\tpending={}\thealth={health}",
            info.id,
            messages.len(),
            stats.turns,
            stats.compacted_turns,
            pending,
        )?;
    }
    for session in unreadable {
        writeln!(
            out,
            "{session}\tmessages=?\tturns=?\tcompacted_turns=?\tpending=?\thealth=unreadable_row"
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
