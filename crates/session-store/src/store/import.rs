//! Importing a whole session at once: the session row and every message in one transaction.

use rusqlite::{params, Connection};

use super::write::append_in;
use super::{format_time, now, Store};
use crate::error::Result;
use crate::import::Imported;
use crate::model::{NewMessage, Role, SessionId};

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

/// What [`Store::import`] created.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ImportedSessions {
    /// The imported conversation.
    pub session: SessionId,
    /// Its child sessions (sub-agents), in the source's order, depth first.
    pub children: Vec<SessionId>,
}

const SET_TITLE: &str = "UPDATE sessions SET title = ?2 WHERE id = ?1";

const SET_PARENT: &str = "UPDATE sessions SET parent_id = ?2 WHERE id = ?1";

const MARK_BEFORE: &str =
    "UPDATE messages SET compacted = 1 WHERE session_id = ?1 AND seq < ?2 AND compacted = 0";

const INSERT_SUMMARY: &str = "
    INSERT INTO summaries
        (session_id, first_turn, last_turn, compacted_from_turn, through_seq, text, created_at)
    VALUES (?1, 0, ?2, ?3, ?4, ?5, ?6)";

/// Records the child session on the call that spawned it.
const LINK_CALL: &str = "
    UPDATE parts SET provider_metadata =
        json_set(COALESCE(provider_metadata, '{}'), '$.session_store.child_session', ?3)
    WHERE kind = 'tool_use' AND tool_use_id = ?2
      AND message_id IN (SELECT id FROM messages WHERE session_id = ?1)";

impl Store {
    /// Stores everything an importer produced, in one transaction: the session with its
    /// title and messages (with their usage rows), the compactions the source made (the
    /// turns before each summary compacted, the summary stored), and child sessions for the
    /// conversations run beside it, each named on the call that spawned it under
    /// `provider_metadata.session_store.child_session`.
    ///
    /// A child's `sessions.parent_id` names the imported session (its `forked_at_turn`
    /// stays NULL: it is not a fork). A compaction that would not cut at a turn start is
    /// left out (the importers never make one).
    pub fn import(&self, imported: &Imported) -> Result<ImportedSessions> {
        if let Some(pg) = self.postgres() {
            return pg.import_tree(imported);
        }
        self.write(|tx| {
            let mut children = Vec::new();
            let session = import_in(tx, imported, None, &mut children)?;
            Ok(ImportedSessions { session, children })
        })
    }
}

fn import_in(
    conn: &Connection,
    imported: &Imported,
    parent: Option<&SessionId>,
    children: &mut Vec<SessionId>,
) -> Result<SessionId> {
    let id = SessionId::random();
    let created = format_time(now());
    conn.prepare_cached(INSERT_SESSION)?
        .execute(params![id.as_str(), created])?;
    if let Some(title) = &imported.title {
        conn.prepare_cached(SET_TITLE)?
            .execute(params![id.as_str(), title])?;
    }
    if let Some(parent) = parent {
        conn.prepare_cached(SET_PARENT)?
            .execute(params![id.as_str(), parent.as_str()])?;
    }
    let messages: Vec<NewMessage> = imported
        .system
        .iter()
        .chain(&imported.messages)
        .cloned()
        .collect();
    let appended = append_in(conn, &id, &messages)?;
    let offset = usize::from(imported.system.is_some());
    let mut compacted_from = 0;
    for compaction in &imported.compactions {
        let index = offset + compaction.at;
        let (Some(cut), Some(before)) = (
            appended.get(index),
            index.checked_sub(1).and_then(|i| appended.get(i)),
        ) else {
            continue;
        };
        let opens_turn = messages[index].role == Role::User && cut.turn_index > before.turn_index;
        if !opens_turn || cut.turn_index < 1 || cut.turn_index <= compacted_from {
            continue;
        }
        conn.prepare_cached(MARK_BEFORE)?
            .execute(params![id.as_str(), cut.seq])?;
        conn.prepare_cached(INSERT_SUMMARY)?.execute(params![
            id.as_str(),
            cut.turn_index - 1,
            compacted_from,
            before.seq,
            compaction.summary,
            created,
        ])?;
        compacted_from = cut.turn_index;
    }
    for child in &imported.children {
        let child_id = import_in(conn, &child.imported, Some(&id), children)?;
        if let Some(call) = &child.spawned_by {
            conn.prepare_cached(LINK_CALL)?.execute(params![
                id.as_str(),
                call,
                child_id.as_str()
            ])?;
        }
        children.push(child_id);
    }
    Ok(id)
}
