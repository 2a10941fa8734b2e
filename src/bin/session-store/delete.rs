//! `delete`: remove a session and all its rows, then give the space back to the file system.

use std::io::Write;

use session_store::Store;

use crate::open;
use crate::size::bytes;

pub fn run(store: &Store, session: &str, out: &mut impl Write) -> anyhow::Result<()> {
    let id = open::session(store, session)?;
    let deleted = store.delete_session(&id)?;
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
