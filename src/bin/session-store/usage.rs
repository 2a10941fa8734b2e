//! `usage SESSION [--json]`: tokens per turn and in total, where the source recorded them.

use std::io::Write;

use session_store::{Store, TokenTotals};

use crate::open;

pub fn run(store: &Store, session: &str, json: bool, out: &mut impl Write) -> anyhow::Result<()> {
    let id = open::session(store, session)?;
    let usage = store.usage(&id)?;
    if json {
        serde_json::to_writer_pretty(&mut *out, &usage)?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(
        out,
        "turn\tmessages\tinput\toutput\tcache_read\tcache_write\tmodels"
    )?;
    for turn in &usage.turns {
        writeln!(
            out,
            "{}\t{}\t{}",
            turn.turn,
            columns(&turn.tokens),
            turn.models.join(",")
        )?;
    }
    writeln!(out, "total\t{}\t", columns(&usage.total))?;
    Ok(())
}

/// The counts, `-` where no message reported one.
fn columns(tokens: &TokenTotals) -> String {
    let show = |n: Option<i64>| n.map_or_else(|| "-".to_owned(), |n| n.to_string());
    format!(
        "{}\t{}\t{}\t{}\t{}",
        tokens.messages,
        show(tokens.input_tokens),
        show(tokens.output_tokens),
        show(tokens.cache_read_tokens),
        show(tokens.cache_write_tokens)
    )
}
