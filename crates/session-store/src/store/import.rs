//! Importing a whole session at once: the session row and every message in one transaction.

use rusqlite::params;

use super::compaction::compact_in;
use super::write::append_in;
use super::{format_time, now, Store};
use crate::error::Result;
use crate::history::blank::is_blank;
use crate::import::Imported;
use crate::model::{NewMessage, SessionId};

const INSERT_SESSION: &str =
    "INSERT INTO sessions (id, created_at, updated_at) VALUES (?1, ?2, ?2)";

impl Store {
    /// Creates a session with a fresh id holding `messages`, in one transaction: if any
    /// message is refused by the pairing rules (or anything else fails), neither the session
    /// nor any message is written.
    ///
    /// Pairs with the importers in [`crate::import`], whose output it accepts as is:
    /// `store.import_session(import::import(format, &text)?.into_messages())`.
    pub fn import_session(&self, messages: Vec<NewMessage>) -> Result<SessionId> {
        let id = SessionId::random();
        self.write(|tx| {
            tx.prepare_cached(INSERT_SESSION)?
                .execute(params![id.as_str(), format_time(now())])?;
            append_in(tx, &id, &messages)?;
            Ok(())
        })?;
        Ok(id)
    }

    /// Creates a session from what an importer produced, in one transaction: its messages
    /// (the system prompt first), and the compaction the source recorded, if any (Codex's
    /// `compacted` marker), as a store compaction: the whole turns before the marker are
    /// marked compacted and the source's summary stored for them. A marker that falls in
    /// the first turn compacts nothing; the messages are still imported.
    ///
    /// ```
    /// use session_store::{import, Store};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path().join("sessions.db"))?;
    /// let body = r#"{"input": [{"role": "user", "content": "hi"}]}"#;
    /// let session = store.import(import::import(import::Format::Responses, body)?)?;
    /// assert_eq!(store.messages(&session)?.len(), 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn import(&self, imported: Imported) -> Result<SessionId> {
        let compaction = imported.compaction.clone();
        let system = usize::from(imported.system.is_some());
        let messages = imported.into_messages();
        let id = SessionId::random();
        self.write(|tx| {
            tx.prepare_cached(INSERT_SESSION)?
                .execute(params![id.as_str(), format_time(now())])?;
            append_in(tx, &id, &messages)?;
            if let Some(compaction) = compaction.filter(|c| !is_blank(&c.summary)) {
                let keep = messages.len().saturating_sub(compaction.before + system);
                // Nothing to compact (the marker is in the first turn) is not an error.
                compact_in(tx, &id, keep, &compaction.summary)?;
            }
            Ok(())
        })?;
        Ok(id)
    }
}
