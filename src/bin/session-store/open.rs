//! Opening the database: read commands never create a file.

use std::path::Path;

use anyhow::{bail, Context};
use session_store::{SessionId, Store};

/// Opens an existing database (bringing it to the current schema, as the library does on
/// every open); a missing file is an error, not a new empty database.
pub fn existing(path: &Path) -> anyhow::Result<Store> {
    if !path.exists() {
        bail!("no database at {}", path.display());
    }
    Store::open(path).with_context(|| format!("cannot open {}", path.display()))
}

/// Opens the database, creating it when it does not exist yet.
pub fn or_create(path: &Path) -> anyhow::Result<Store> {
    Store::open(path).with_context(|| format!("cannot open {}", path.display()))
}

/// The session with this id, or an error naming it.
pub fn session(store: &Store, id: &str) -> anyhow::Result<SessionId> {
    let id = SessionId::new(id);
    if !store.has_session(&id)? {
        bail!("unknown session {id}");
    }
    Ok(id)
}
