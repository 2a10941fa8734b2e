//! `budget SESSION --limit TOKENS [--json]`: the next request's size against a limit, and
//! the smallest compaction on a turn boundary that brings it under.

use std::io::Write;

use session_store::Store;

use crate::open;

pub fn run(
    store: &Store,
    session: &str,
    limit: u64,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let id = open::session(store, session)?;
    let budget = store.budget(&id, limit)?;
    if json {
        serde_json::to_writer_pretty(&mut *out, &budget)?;
        writeln!(out)?;
        return Ok(());
    }
    let reported = budget
        .reported_input_tokens
        .map_or_else(|| "none".to_owned(), |n| n.to_string());
    writeln!(out, "reported input tokens\t{reported}")?;
    writeln!(out, "estimated since\t{}", budget.estimated_since)?;
    writeln!(out, "estimate\t{}", budget.estimate)?;
    writeln!(out, "limit\t{}", budget.limit)?;
    writeln!(out, "over\t{}", if budget.over { "yes" } else { "no" })?;
    match (budget.compact_through_turn, budget.keep_messages) {
        (Some(turn), Some(keep)) => writeln!(
            out,
            "compact through turn\t{turn}\t(session-store compact {} --min-keep-tail {keep} --summary TEXT)",
            id.as_str()
        )?,
        _ if budget.over => writeln!(out, "compact through turn\tnone fits (the last turn alone is over)")?,
        _ => writeln!(out, "compact through turn\tnot needed")?,
    }
    Ok(())
}
