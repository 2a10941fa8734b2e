//! Sub-agent links: `sessions.parent_tool_use_id` and `sessions.state` of a child session,
//! recorded when an import creates it and read for `show` and `sessions --tree`. Written
//! once over [`Sql`] for both engines; the state's rule is
//! [`crate::history::subagents::subagent_state`].

use super::handle::Store;
use super::sql::{int_at, text_at, values, Sql};
use super::write::stored_tail;
use crate::error::Result;
use crate::history::subagents::{spawn_prompt, spawned_thread, subagent_state, SpawnCall};
use crate::import::Imported;
use crate::model::{Role, SessionId, Subagent};

const ANSWER: &str = "
    SELECT p.text, p.is_error FROM parts p JOIN messages m ON m.id = p.message_id
    WHERE m.session_id = ?1 AND p.kind = 'tool_result' AND p.tool_use_id = ?2
    ORDER BY m.seq, p.ordinal LIMIT 1";
const CALLED: &str = "
    SELECT 1 FROM parts p JOIN messages m ON m.id = p.message_id
    WHERE m.session_id = ?1 AND p.kind = 'tool_use' AND p.tool_use_id = ?2 LIMIT 1";
const RECORD: &str = "UPDATE sessions SET parent_tool_use_id = ?2, state = ?3 WHERE id = ?1";
const SET_PARENT: &str = "UPDATE sessions SET parent_id = ?2 WHERE id = ?1";
const PARENT_OF: &str = "SELECT parent_id FROM sessions WHERE id = ?1";
/// The first text of the session's first user message (none when that message has none).
const FIRST_USER_TEXT: &str = "
    SELECT p.text FROM parts p JOIN messages m ON m.id = p.message_id
    WHERE m.session_id = ?1 AND p.kind = 'text'
      AND m.seq = (SELECT MIN(seq) FROM messages WHERE session_id = ?1 AND role = 'user')
    ORDER BY p.ordinal LIMIT 1";
/// The session's calls, in order, with their inputs.
const CALLS: &str = "
    SELECT p.tool_use_id, p.input FROM parts p JOIN messages m ON m.id = p.message_id
    WHERE m.session_id = ?1 AND p.kind = 'tool_use' AND p.tool_use_id IS NOT NULL
    ORDER BY m.seq, p.ordinal";
const CHILDREN_OF: &str = "
    SELECT id, parent_id, parent_tool_use_id, state FROM sessions
    WHERE parent_id = ?1 AND (parent_tool_use_id IS NOT NULL OR state IS NOT NULL)
    ORDER BY created_at, id";
const SET_CALL: &str = "UPDATE sessions SET parent_tool_use_id = ?2 WHERE id = ?1";
const SET_SOURCE_THREAD: &str = "UPDATE sessions SET source_thread_id = ?2 WHERE id = ?1";
const SET_SOURCE_PARENT_THREAD: &str =
    "UPDATE sessions SET source_parent_thread_id = ?2 WHERE id = ?1";
/// The other sessions stored for the source's thread id, latest first (by the source's
/// dates, then by id when one thread was imported twice).
const BY_SOURCE_THREAD: &str = "
    SELECT id FROM sessions WHERE source_thread_id = ?1 AND id <> ?2
    ORDER BY created_at DESC, id";
/// The sub-agents' logs that name the thread ?1 as their parent and are linked to none yet,
/// oldest first, with their own thread ids.
const WAITING_CHILDREN: &str = "
    SELECT id, source_thread_id FROM sessions
    WHERE source_parent_thread_id = ?1 AND parent_id IS NULL AND id <> ?2
    ORDER BY created_at, id";
/// Whether the call ?2 of ?1 already spawned a linked session other than ?3.
const CALL_TAKEN: &str = "
    SELECT 1 FROM sessions WHERE parent_id = ?1 AND parent_tool_use_id = ?2 AND id <> ?3 LIMIT 1";
/// The session's results, in order, with their texts.
const RESULTS: &str = "
    SELECT p.tool_use_id, p.text FROM parts p JOIN messages m ON m.id = p.message_id
    WHERE m.session_id = ?1 AND p.kind = 'tool_result' AND p.tool_use_id IS NOT NULL
    ORDER BY m.seq, p.ordinal";
const ALL_SUBAGENTS: &str = "
    SELECT id, parent_id, parent_tool_use_id, state FROM sessions
    WHERE parent_tool_use_id IS NOT NULL OR state IS NOT NULL
    ORDER BY created_at, id";

impl Store {
    /// The sub-agents `parent` spawned, or every sub-agent of the database when `parent` is
    /// `None`, in creation order.
    pub fn subagents(&self, parent: Option<&SessionId>) -> Result<Vec<Subagent>> {
        self.read(|tx| subagents_in(tx, parent))
    }
}

impl Store {
    /// Records `child` as a sub-agent of `parent`, as an import records a sidechain it
    /// reads: `sessions.parent_id`, the call in `parent` that spawned it (the first whose
    /// `prompt` is the child's first user text and that no other sub-agent is linked to:
    /// `parent_tool_use_id`) and its state, in one write transaction. The call's parts are
    /// left as the writer stored them (no `session_store.child_session`): a mirror compares
    /// what it stored with what it reads again from its source. Calling it again brings the link up to date (the parent's call
    /// answered since, the child's conversation grown). For writers that mirror a parent and
    /// its sub-agents as separate records (the Claude adapter's `subagents/*` subpaths).
    pub fn link_subagent(&self, parent: &SessionId, child: &SessionId) -> Result<Subagent> {
        self.write(|db| link_subagent_in(db, parent, child))
    }
}

/// [`Store::link_subagent`] in the caller's write transaction, on either engine.
fn link_subagent_in(db: &mut impl Sql, parent: &SessionId, child: &SessionId) -> Result<Subagent> {
    db.lock_session(child)?;
    db.require_session(parent)?;
    db.run(SET_PARENT, &values![child.as_str(), parent.as_str()])?;
    let mut first_text: Option<String> = None;
    db.each_row(FIRST_USER_TEXT, &values![child.as_str()], &mut |r| {
        first_text = text_at(r, 0)?;
        Ok(())
    })?;
    let mut candidates: Vec<String> = Vec::new();
    if let Some(first_text) = first_text {
        db.each_row(CALLS, &values![parent.as_str()], &mut |r| {
            let input: Option<serde_json::Value> =
                text_at(r, 1)?.and_then(|text| serde_json::from_str(&text).ok());
            if input.as_ref().and_then(spawn_prompt) == Some(first_text.as_str()) {
                candidates.extend(text_at(r, 0)?);
            }
            Ok(())
        })?;
    }
    // A call spawns one sub-agent: of the calls with the child's prompt, the first that no
    // other linked session names.
    let mut spawned_by: Option<String> = None;
    for call in candidates {
        let taken = db.optional_int(
            CALL_TAKEN,
            &values![parent.as_str(), call.as_str(), child.as_str()],
        )?;
        if taken.is_none() {
            spawned_by = Some(call);
            break;
        }
    }
    record_in(db, Some(parent), child, spawned_by.as_deref())?;
    let mut linked = subagents_in(db, Some(parent))?;
    linked.retain(|s| &s.id == child);
    linked
        .pop()
        .ok_or_else(|| crate::Error::UnknownSession(child.clone()))
}

/// [`Store::subagents`] in the caller's snapshot, on either engine.
fn subagents_in(db: &mut impl Sql, parent: Option<&SessionId>) -> Result<Vec<Subagent>> {
    let mut found = Vec::new();
    let mut each = |r: &dyn super::rows::Cells| {
        found.push(Subagent {
            id: SessionId::new(text_at(r, 0)?.unwrap_or_default()),
            parent: text_at(r, 1)?.map(SessionId::new),
            parent_tool_use_id: text_at(r, 2)?,
            state: text_at(r, 3)?.and_then(|s| s.parse().ok()),
        });
        Ok(())
    };
    match parent {
        Some(parent) => db.each_row(CHILDREN_OF, &values![parent.as_str()], &mut each)?,
        None => db.each_row(ALL_SUBAGENTS, &[], &mut each)?,
    }
    Ok(found)
}

/// Records a child session an import created: the call in `parent` that spawned it (when
/// the source links one and the parent has it) and its state, in the import's transaction.
/// Without a stored `parent` (a sub-agent's own log imported alone) only the state is
/// recorded, from the child's own conversation.
pub(crate) fn record_in(
    db: &mut impl Sql,
    parent: Option<&SessionId>,
    child: &SessionId,
    spawned_by: Option<&str>,
) -> Result<()> {
    let call = match (parent, spawned_by) {
        (Some(parent), Some(id))
            if db
                .optional_int(CALLED, &values![parent.as_str(), id])?
                .is_some() =>
        {
            Some((parent, id))
        }
        _ => None,
    };
    let mut answer: Option<(String, bool)> = None;
    if let Some((parent, id)) = call {
        db.each_row(ANSWER, &values![parent.as_str(), id], &mut |r| {
            answer = Some((text_at(r, 0)?.unwrap_or_default(), int_at(r, 1)? == Some(1)));
            Ok(())
        })?;
    }
    let spawn = match (call, &answer) {
        (None, _) => SpawnCall::Unknown,
        (Some(_), Some((content, is_error))) => SpawnCall::Answered {
            content,
            is_error: *is_error,
        },
        (Some((parent, id)), None) => {
            let pending = super::write::pending_in(db, parent)?;
            if pending.iter().any(|p| p == id) {
                SpawnCall::Pending
            } else {
                SpawnCall::Unknown
            }
        }
    };
    let end = stored_tail(db, child)?.resume;
    let finished = end.speaker == Some(Role::Assistant) && end.calls.is_empty();
    let state = subagent_state(spawn, finished);
    let call = call.map(|(_, id)| id);
    db.run(RECORD, &values![child.as_str(), call, state.as_str()])?;
    Ok(())
}

/// Records what an imported conversation's source says of its own thread: its id
/// (`sessions.source_thread_id`), and, for a sub-agent's own log ([`Imported::subagent`]),
/// the thread that spawned it (`sessions.source_parent_thread_id`) and its link to a stored
/// session of that thread (see [`link_source_child_in`]); with no such session stored, its
/// state alone. Then the sub-agents' logs stored before this one that name its thread as
/// their parent and wait for one are linked to it: the link does not depend on which of
/// the two was stored first, nor on whether both came in one transaction.
pub(crate) fn record_source_in(
    db: &mut impl Sql,
    session: &SessionId,
    imported_as: SourceIds<'_>,
) -> Result<()> {
    if let Some(thread) = imported_as.thread {
        db.run(SET_SOURCE_THREAD, &values![session.as_str(), thread])?;
    }
    if let Some(origin) = imported_as.subagent {
        let parent_thread = origin.parent_thread_id.as_deref();
        // A thread does not spawn itself: a log naming its own thread as its parent would
        // link under an earlier copy of itself.
        let parent_thread = parent_thread.filter(|parent| Some(*parent) != imported_as.thread);
        db.run(
            SET_SOURCE_PARENT_THREAD,
            &values![session.as_str(), parent_thread],
        )?;
        let mut parents: Vec<SessionId> = Vec::new();
        if let Some(parent_thread) = parent_thread {
            db.each_row(
                BY_SOURCE_THREAD,
                &values![parent_thread, session.as_str()],
                &mut |r| {
                    parents.extend(text_at(r, 0)?.map(SessionId::new));
                    Ok(())
                },
            )?;
        }
        let mut linked = false;
        for parent in &parents {
            if link_source_child_in(db, parent, session, imported_as.thread)? {
                linked = true;
                break;
            }
        }
        if !linked {
            record_in(db, None, session, None)?;
        }
    }
    if let Some(thread) = imported_as.thread {
        let mut waiting: Vec<(SessionId, Option<String>)> = Vec::new();
        db.each_row(
            WAITING_CHILDREN,
            &values![thread, session.as_str()],
            &mut |r| {
                if let Some(id) = text_at(r, 0)? {
                    waiting.push((SessionId::new(id), text_at(r, 1)?));
                }
                Ok(())
            },
        )?;
        for (child, child_thread) in &waiting {
            db.lock_session(child)?;
            link_source_child_in(db, session, child, child_thread.as_deref())?;
        }
    }
    Ok(())
}

/// Links `child`, a sub-agent's own log whose source names `parent`'s thread as the one
/// that spawned it, to `parent`: `parent_id`, `parent_tool_use_id` (the call whose result
/// names `child_thread`, see [`spawned_thread`]), `session_store.child_session` on that call
/// and the child's state (from its own end: `spawn_agent` answers as soon as the thread
/// starts, so its result says nothing of how the sub-agent ended). A call spawns one
/// sub-agent: when that call already names another session linked to it (the same log
/// imported twice), nothing is written and `false` is returned, so a second copy of the
/// parent can take the second copy of the child.
fn link_source_child_in(
    db: &mut impl Sql,
    parent: &SessionId,
    child: &SessionId,
    child_thread: Option<&str>,
) -> Result<bool> {
    // Two logs that each name the other's thread as their parent would make a circle.
    if descends_from(db, parent, child)? {
        return Ok(false);
    }
    let mut spawned_by: Option<String> = None;
    if let Some(thread) = child_thread {
        db.each_row(RESULTS, &values![parent.as_str()], &mut |r| {
            if spawned_by.is_none()
                && text_at(r, 1)?
                    .and_then(|text| spawned_thread(&text))
                    .as_deref()
                    == Some(thread)
            {
                spawned_by = text_at(r, 0)?;
            }
            Ok(())
        })?;
    }
    if let Some(call) = &spawned_by {
        let taken = db.optional_int(
            CALL_TAKEN,
            &values![parent.as_str(), call.as_str(), child.as_str()],
        )?;
        if taken.is_some() {
            return Ok(false);
        }
    }
    db.run(SET_PARENT, &values![child.as_str(), parent.as_str()])?;
    record_in(db, Some(parent), child, None)?;
    db.run(SET_CALL, &values![child.as_str(), spawned_by.as_deref()])?;
    if let Some(call) = &spawned_by {
        db.link_call(parent, call, child)?;
    }
    Ok(true)
}

/// Whether `session` is `ancestor` or one of its descendants, by the stored `parent_id`s
/// (a circle another writer left is walked once).
fn descends_from(db: &mut impl Sql, session: &SessionId, ancestor: &SessionId) -> Result<bool> {
    let mut seen = std::collections::HashSet::new();
    let mut at = Some(session.as_str().to_owned());
    while let Some(id) = at.take() {
        if id == ancestor.as_str() {
            return Ok(true);
        }
        if !seen.insert(id.clone()) {
            break;
        }
        db.each_row(PARENT_OF, &values![id.as_str()], &mut |r| {
            at = text_at(r, 0)?;
            Ok(())
        })?;
    }
    Ok(false)
}

/// What an import's source says of the conversation's own thread.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SourceIds<'a> {
    /// [`Imported::source_thread_id`].
    pub(crate) thread: Option<&'a str>,
    /// [`Imported::subagent`].
    pub(crate) subagent: Option<&'a crate::import::SubagentOrigin>,
}

impl<'a> SourceIds<'a> {
    /// The ids an importer's whole output names.
    pub(crate) fn of(imported: &'a Imported) -> Self {
        Self {
            thread: imported.source_thread_id.as_deref(),
            subagent: imported.subagent.as_ref(),
        }
    }
}
