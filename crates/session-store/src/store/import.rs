//! Importing a whole session at once: the session row and every message in one transaction.

use rusqlite::params;

use super::write::append_in;
use super::{format_time, now, Store};
use crate::error::Result;
use crate::model::{NewMessage, SessionId};

const INSERT_SESSION: &str =
    "INSERT INTO sessions (id, created_at, updated_at) VALUES (?1, ?2, ?2)";

impl Store {
    /// Creates a session with a fresh id holding `messages`, in one transaction: if any
    /// message is refused by the pairing rules (or anything else fails), neither the session
    /// nor any message is written.
    ///
    /// Pairs with the importers in [`crate::import_transcript`], whose output it accepts as is:
    /// `store.import_session(import::import(format, &text)?.into_messages())`.
    pub fn import_session(&self, messages: Vec<NewMessage>) -> Result<SessionId> {
        if let Some(pg) = self.postgres() {
            return pg.import_session(&messages);
        }
        let id = SessionId::random();
        self.write(|tx| {
            tx.prepare_cached(INSERT_SESSION)?
                .execute(params![id.as_str(), format_time(now())])?;
            append_in(tx, &id, &messages)?;
            Ok(())
        })?;
        Ok(id)
    }
}
