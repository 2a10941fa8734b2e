//! `delete`: remove a session and all its rows, then give the space back to the file system.

use std::io::Write;

use session_store::Store;

use crate::size::bytes;
use crate::{open, shapes};

pub fn run(store: &Store, session: &str, json: bool, out: &mut impl Write) -> anyhow::Result<()> {
    let id = open::session(store, session)?;
    let deleted = store.delete_session(&id)?;
    if json {
        // The server reclaims a PostgreSQL database's space itself: no sizes there.
        let reclaimed = (!store.is_postgres())
            .then(|| store.reclaim_space())
            .transpose()?;
        return shapes::print(
            out,
            &serde_json::json!({
                "session": deleted.session.as_str(),
                "messages": deleted.messages,
                "bytes_before": reclaimed.map(|r| r.before_bytes),
                "bytes_after": reclaimed.map(|r| r.after_bytes),
            }),
        );
    }
    writeln!(
        out,
        "deleted session {} ({} messages)",
        deleted.session, deleted.messages
    )?;
    if store.is_postgres() {
        // The server reclaims the rows' space itself (autovacuum); there is no file.
        return Ok(());
    }
    let reclaimed = store.reclaim_space()?;
    writeln!(
        out,
        "database {} -> {}",
        bytes(reclaimed.before_bytes),
        bytes(reclaimed.after_bytes)
    )?;
    Ok(())
}
