//! `cancel`: tombstones for a session's pending tool calls, so the conversation can go on.

use std::io::Write;

use session_store::Store;

use crate::open;
use crate::terminal::escape_line;

pub fn run(
    store: &Store,
    session: &str,
    reason: &str,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let id = open::session(store, session)?;
    let answered = store.cancel_pending(&id, reason)?;
    if answered.is_empty() {
        eprintln!(
            "session-store: nothing pending in session {}; nothing written",
            escape_line(id.as_str())
        );
    }
    tracing::info!(session = %id, answered = answered.len(), "cancelled");
    if json {
        let body = serde_json::json!({"session": id.as_str(), "tombstoned": answered});
        return crate::shapes::print(out, &body);
    }
    for call in answered {
        writeln!(out, "{}", escape_line(&call))?;
    }
    Ok(())
}
