//! The PostgreSQL import target: what `store/import.rs`'s import logic asks of a PostgreSQL
//! transaction. The append itself is `store/write.rs`'s `append_in`, written once over the
//! engine seam, after the session's row lock.

use super::lock_session;
use super::Tx;
use crate::error::Result;
use serde_json::Value;

use crate::model::{Appended, NewMessage, SessionId};
use crate::store::import::{Compaction, ImportTarget};
use crate::store::write::append_in;

pub(crate) use crate::store::write::tail_of;

/// [`crate::Store::import`] and [`crate::Store::import_reader`] on PostgreSQL: the import
/// logic of `store/import.rs`, the same rows, in the caller's transaction.
impl ImportTarget for Tx<'_> {
    fn create_session(
        &mut self,
        created: &str,
        title: Option<&str>,
        parent: Option<&SessionId>,
    ) -> Result<SessionId> {
        let id = SessionId::random();
        self.execute(
            "INSERT INTO sessions (id, created_at, updated_at, title, parent_id) VALUES ($1, $2, $2, $3, $4)",
            &[&id.as_str(), &created, &title, &parent.map(SessionId::as_str)],
        )?;
        lock_session(self, &id)?;
        Ok(id)
    }

    fn set_title(&mut self, session: &SessionId, title: &str) -> Result<()> {
        self.execute(
            "UPDATE sessions SET title = $2 WHERE id = $1",
            &[&session.as_str(), &title],
        )?;
        Ok(())
    }

    fn append(&mut self, session: &SessionId, messages: &[NewMessage]) -> Result<Vec<Appended>> {
        append_in(self, session, messages)
    }

    fn compact(&mut self, session: &SessionId, c: &Compaction<'_>) -> Result<()> {
        self.execute(
            "UPDATE messages SET compacted = 1 WHERE session_id = $1 AND seq < $2 AND compacted = 0",
            &[&session.as_str(), &c.seq],
        )?;
        self.execute(
            "INSERT INTO summaries
                (session_id, first_turn, last_turn, compacted_from_turn, through_seq, text, created_at)
             VALUES ($1, 0, $2, $3, $4, $5, $6)",
            &[
                &session.as_str(),
                &c.last_turn,
                &c.compacted_from,
                &c.through_seq,
                &c.text,
                &c.created,
            ],
        )?;
        Ok(())
    }

    fn link_call(&mut self, session: &SessionId, call: &str, child: &SessionId) -> Result<()> {
        link_call(self, session, call, child)
    }
}

/// Records the child session on the call that spawned it (`session_store.child_session` in
/// the call's provider metadata), as SQLite's `json_set` does.
fn link_call(tx: &mut Tx<'_>, session: &SessionId, call: &str, child: &SessionId) -> Result<()> {
    let rows = tx.query(
        "SELECT p.id, p.provider_metadata FROM parts p JOIN messages m ON m.id = p.message_id
         WHERE m.session_id = $1 AND p.kind = 'tool_use' AND p.tool_use_id = $2",
        &[&session.as_str(), &call],
    )?;
    for row in &rows {
        let part: i64 = row.try_get(0)?;
        let raw: Option<String> = row.try_get(1)?;
        let mut metadata = raw
            .as_deref()
            .and_then(|raw| serde_json::from_str::<Value>(raw).ok())
            .filter(Value::is_object)
            .unwrap_or_else(|| Value::Object(Default::default()));
        if let Some(object) = metadata.as_object_mut() {
            let entry = object
                .entry("session_store")
                .or_insert_with(|| Value::Object(Default::default()));
            if !entry.is_object() {
                *entry = Value::Object(Default::default());
            }
            if let Some(inner) = entry.as_object_mut() {
                inner.insert(
                    "child_session".to_owned(),
                    Value::String(child.as_str().to_owned()),
                );
            }
        }
        tx.execute(
            "UPDATE parts SET provider_metadata = $2 WHERE id = $1",
            &[&part, &serde_json::to_string(&metadata)?],
        )?;
    }
    Ok(())
}
