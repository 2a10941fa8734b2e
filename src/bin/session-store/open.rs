//! Opening the database and naming sessions: read commands never create a file, and a
//! unique id prefix of [`MIN_PREFIX`] characters or more names a session.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use session_store::{SessionId, Store};

/// The shortest id prefix that names a session (a UUID's first group).
pub const MIN_PREFIX: usize = 8;

/// How many candidates an ambiguous prefix lists.
const SHOWN_CANDIDATES: usize = 5;

/// The database path given by `--db` or `$SESSION_STORE_DB`.
pub fn path(db: &Option<PathBuf>) -> anyhow::Result<&Path> {
    match db {
        Some(path) => Ok(path),
        None => bail!("no database given: pass --db PATH or set SESSION_STORE_DB"),
    }
}

/// Opens an existing database (bringing it to the current schema, as the library does on
/// every open, when it may write it; read-only when it may not, so read commands work on a
/// read-only mount or another user's file); a missing file is an error, not a new empty
/// database.
pub fn existing(db: &Option<PathBuf>) -> anyhow::Result<Store> {
    let path = path(db)?;
    // A PostgreSQL URL names a database, not a file; the library connects to it.
    if !session_store::is_database_url(&path.to_string_lossy()) {
        // `exists()` is false for any error: a symlink loop or a folder without search
        // permission is not "no database", and says what it is.
        match std::fs::metadata(path) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                bail!("no database at {}", path.display())
            }
            Err(error) => bail!("cannot reach {}: {error}", path.display()),
            Ok(_) => {}
        }
    }
    tracing::info!(db = %shown(path), "opening");
    Store::open_readable(path).with_context(|| format!("cannot open {}", shown(path)))
}

/// Opens the database, creating it when it does not exist yet.
pub fn or_create(path: &Path) -> anyhow::Result<Store> {
    tracing::info!(db = %shown(path), "opening (created if missing)");
    Store::open(path).with_context(|| format!("cannot open {}", shown(path)))
}

/// The database as a person may see it: a file's path, or a URL without its password.
pub fn shown(path: &Path) -> String {
    session_store::redact_database_url(&path.to_string_lossy())
}

/// The session with this id, or the one session whose id starts with it (8 characters or
/// more); an error naming it otherwise.
pub fn session(store: &Store, id: &str) -> anyhow::Result<SessionId> {
    let exact = SessionId::new(id);
    if store.has_session(&exact)? {
        return Ok(exact);
    }
    if id.chars().count() < MIN_PREFIX {
        bail!("unknown session {id} (a prefix names a session from {MIN_PREFIX} characters on)");
    }
    let found = store.sessions_with_prefix(id, SHOWN_CANDIDATES + 1)?;
    match found.as_slice() {
        [] => bail!("unknown session {id}"),
        [one] => {
            tracing::debug!(prefix = id, session = %one, "prefix resolved");
            Ok(one.clone())
        }
        many => {
            let mut names: Vec<&str> = many
                .iter()
                .take(SHOWN_CANDIDATES)
                .map(SessionId::as_str)
                .collect();
            if many.len() > SHOWN_CANDIDATES {
                names.push("...");
            }
            bail!(
                "ambiguous session prefix {id}: it starts {} (give more characters)",
                names.join(", ")
            )
        }
    }
}
