//! Streaming writes: an assistant message stored part by part while the model still sends
//! it ([`Store::begin_message`], [`OpenMessage::push`], [`OpenMessage::finish`]), and the
//! interruption of one whose writer went away.
//!
//! Each call is one transaction, written once over [`Sql`] for both engines. The open
//! message is a `messages` row with `state = 'open'` and the handle's token in `writer`
//! ([`super::writer`]). A part is one row, inserted whole: a reader sees a part entirely or
//! not at all. Every other write to the session first asks [`settle_in`]: an open message
//! whose writer is still there refuses the write ([`Error::MessageOpen`]); one whose
//! writer is gone is marked `interrupted` and its unanswered calls get tombstones
//! ([`pairing::interruption`]), then the write goes on.

use chrono::{DateTime, Utc};
use serde_json::json;

use super::apply::LoggedChange;
use super::encode::insert_part;
use super::handle::Store;
use super::rows::Range;
use super::sql::{int_at, keyed, text_at, values, Sql};
use super::time::parse_time;
use super::time::{format_time, now};
use super::write::{append_in, stored_tail, Run};
use super::writer::{self, Lease};
use crate::error::{Error, Result};
use crate::history::grammar::{Resume, Walk};
use crate::history::pairing;
use crate::history::rules::{HealthRule, Problem};
use crate::history::tail::TailState;
use crate::history::turns::next_turn_index;
use crate::model::{Appended, Part, Role, SessionId};

/// An assistant message being stored while it streams in: each [`OpenMessage::push`] is
/// committed (durable as the store's [`crate::Durability`] promises) when it returns;
/// [`OpenMessage::finish`] marks it complete. Dropped unfinished, the message is marked
/// `interrupted` at once (its calls answered with tombstones); if the process dies
/// instead, the next write to the session does that.
#[derive(Debug)]
pub struct OpenMessage {
    store: Store,
    session: SessionId,
    appended: Appended,
    token: String,
    parts: usize,
    done: bool,
}

impl Store {
    /// Begins an assistant message that will be stored part by part while it streams in.
    ///
    /// Refused like an append ([`Error::Refused`]: only an assistant message streams, and
    /// not while a call is pending); [`Error::MessageOpen`] while another writer's message
    /// of the session is still streaming. The message's `seq` and `turn_index` are assigned
    /// now: it is the session's last message until it is finished.
    pub fn begin_message(&self, session: &SessionId, role: Role) -> Result<OpenMessage> {
        let token = writer::register();
        let begun = self.write(|tx| begin_in(tx, session, role, &token));
        match begun {
            Ok(appended) => Ok(OpenMessage {
                store: self.clone(),
                session: session.clone(),
                appended,
                token,
                parts: 0,
                done: false,
            }),
            Err(error) => {
                writer::release(&token);
                Err(error)
            }
        }
    }

    /// Marks `interrupted` every open message of the session whose writer went away, and
    /// answers their calls with tombstones; [`Error::MessageOpen`] when a live writer still
    /// streams one. What every write to a session does first; `store-repair` calls it too.
    ///
    /// A writer of this host is asked directly; one on another host counts as gone once it
    /// has been silent longer than [`crate::repair::WRITER_LEASE`]. Each message interrupted
    /// gets a `repair_log` row (rule `abandoned_message`, action `interrupt`), with the number
    /// of tombstones written and the calls they answer.
    pub fn settle_open_messages(&self, session: &SessionId) -> Result<bool> {
        self.write(|tx| {
            tx.lock_session(session)?;
            Ok(!settle_in(tx, session)?.is_empty())
        })
    }
}

impl OpenMessage {
    /// The `seq`, `turn_index` and row id the message was given when it began.
    pub fn appended(&self) -> &Appended {
        &self.appended
    }

    /// The session it belongs to.
    pub fn session(&self) -> &SessionId {
        &self.session
    }

    /// How many parts are stored so far.
    pub fn len(&self) -> usize {
        self.parts
    }

    /// True before the first part is stored.
    pub fn is_empty(&self) -> bool {
        self.parts == 0
    }

    /// Stores the next part; committed when this returns. The message with this part added
    /// is checked as an append of it whole would be (the streaming rule of
    /// `history/pairing.rs`): a refused part ([`Error::Refused`]) writes nothing and the
    /// message stays open.
    /// [`Error::MessageNotOpen`] when the message was interrupted meanwhile.
    pub fn push(&mut self, part: Part) -> Result<()> {
        let (session, appended, token) = (&self.session, &self.appended, &self.token);
        self.store
            .write(|tx| push_in(tx, session, appended, token, &part))?;
        self.parts += 1;
        Ok(())
    }

    /// Says the writer is still there without storing a part: renews its lease (the
    /// session's `updated_at`), so a writer on another host that is silent for long (a model
    /// thinking for minutes) is not taken for gone ([`crate::repair::WRITER_LEASE`]).
    /// [`Error::MessageNotOpen`] when the message was interrupted meanwhile.
    pub fn keep_alive(&mut self) -> Result<()> {
        let (session, appended, token) = (&self.session, &self.appended, &self.token);
        self.store.write(|tx| {
            require_open(tx, session, appended, token)?;
            let now = format_time(now());
            tx.run(TOUCH, &values![session.as_str(), now.as_str()])?;
            Ok(())
        })
    }

    /// Records which model writes the message (`messages.model`, `"provider/model"` as
    /// [`crate::NewMessage::by_model`] takes it), at any time while it is open; committed
    /// when this returns. Signatures are bound to their model: an export for another model
    /// leaves this message's signed reasoning out, as it does for an appended message.
    /// [`Error::MessageNotOpen`] when the message was interrupted meanwhile; a model an
    /// append would refuse (a NUL character) is refused alike ([`Error::Refused`]), nothing
    /// written.
    pub fn set_model(&mut self, model: impl Into<String>) -> Result<()> {
        // The append's rule for a message's model (`check_texts`: no NUL), asked of the
        // message as an append would carry it.
        let carried = crate::NewMessage::assistant(Vec::new()).by_model(model);
        pairing::check_texts(&carried).map_err(|reason| Error::Refused {
            session: self.session.clone(),
            index: 0,
            reason,
        })?;
        let model = carried.model.unwrap_or_default();
        let (session, appended, token) = (&self.session, &self.appended, &self.token);
        self.store
            .write(|tx| set_model_in(tx, session, appended, token, &model))
    }

    /// Marks the message complete. A message without parts cannot be: it is refused
    /// ([`crate::Refusal::EmptyMessage`]) and, the handle being gone, marked `interrupted`.
    pub fn finish(mut self) -> Result<Appended> {
        let (session, appended, token) = (&self.session, &self.appended, &self.token);
        self.store
            .write(|tx| finish_in(tx, session, appended, token))?;
        self.done = true;
        writer::release(&self.token);
        Ok(self.appended.clone())
    }
}

impl Drop for OpenMessage {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        writer::release(&self.token);
        // Best effort: if this fails (the database went away), the next write to the session
        // finds the writer gone and does the same.
        if let Err(error) = self.store.settle_open_messages(&self.session) {
            tracing::warn!(session = %self.session, %error, "could not mark a dropped message interrupted");
        }
    }
}

/// No `ORDER BY` (the few rows are sorted by [`open_rows`]): with one, SQLite's planner
/// walked the session's `(session_id, seq)` index to skip a sort, reading every message of
/// the session on every write, instead of probing the partial index `messages_open`.
const OPEN_MESSAGES: &str = "
    SELECT id, seq, turn_index, writer FROM messages
    WHERE session_id = ?1 AND state = 'open'";
/// When the writers of a session's open messages were last heard from ([`super::writer`]).
const HEARD: &str = "SELECT updated_at FROM sessions WHERE id = ?1";
const INTERRUPT: &str =
    "UPDATE messages SET state = 'interrupted', writer = NULL WHERE session_id = ?1 AND state = 'open'";
const INSERT_OPEN: &str = "
    INSERT INTO messages (session_id, seq, turn_index, role, compacted, created_at, state, writer)
    VALUES (?1, ?2, ?3, ?4, 0, ?5, 'open', ?6)";
const MESSAGE_STATE: &str = "SELECT state, writer FROM messages WHERE id = ?1 AND session_id = ?2";
/// Whether the session uses the call id `?1` in a message other than `?3`, where the
/// engine keeps no call ids ([`Sql::calls_used`]; rows carry their session there): the
/// parts' own index, no join.
const CALL_USED_ELSEWHERE: &str = "
    SELECT 1 FROM parts p
    WHERE p.tool_use_id = ?1 AND p.kind = 'tool_use' AND p.session_id = ?2 AND p.message_id <> ?3
    LIMIT 1";
/// `?1` the session (SQLite's parts name their message only), `?2` the message.
const PARTS_OF: &str = "SELECT COUNT(*) FROM parts WHERE message_id = ?2";
/// [`PARTS_OF`] where rows carry their session: routed to the session's shard.
const PARTS_OF_KEYED: &str = "SELECT COUNT(*) FROM parts WHERE session_id = ?1 AND message_id = ?2";
const SET_MODEL: &str = "UPDATE messages SET model = ?2 WHERE session_id = ?3 AND id = ?1";
const COMPLETE: &str =
    "UPDATE messages SET state = 'complete', writer = NULL WHERE session_id = ?2 AND id = ?1";
/// The tail state stays: an open message is the session's last, past the state's `seq`, so
/// every reader takes the state as stale and reads the rows; a streamed part only adds, so
/// the state still names the run of appends (whose kept call ids the next write catches up,
/// `store/memory.rs`).
const TOUCH: &str = "UPDATE sessions SET updated_at = ?2 WHERE id = ?1";
const TOUCH_COUNTED: &str = "
    UPDATE sessions SET updated_at = ?2, message_count = message_count + 1 WHERE id = ?1";
/// The state the session row keeps, for its run of appends ([`TailState::epoch`]).
const STATE: &str = "SELECT tail_state FROM sessions WHERE id = ?1";

/// An open message as a settle reads it.
struct OpenRow {
    id: i64,
    seq: i64,
    turn: Option<i64>,
    writer: Option<String>,
    /// When its writer was last heard from: the session's `updated_at` ([`super::writer`]).
    heard: Option<DateTime<Utc>>,
}

impl OpenRow {
    fn is_gone(&self, lease: &Lease) -> bool {
        writer::is_gone(self.writer.as_deref(), self.heard, lease)
    }
}

/// Every open message of the session, in `seq` order.
fn open_rows(db: &mut impl Sql, session: &SessionId) -> Result<Vec<OpenRow>> {
    let mut open = Vec::new();
    db.each_row(OPEN_MESSAGES, &values![session.as_str()], &mut |r| {
        open.push(OpenRow {
            id: int_at(r, 0)?.unwrap_or(0),
            seq: int_at(r, 1)?.unwrap_or(0),
            turn: int_at(r, 2)?,
            writer: text_at(r, 3)?,
            heard: None,
        });
        Ok(())
    })?;
    if open.is_empty() {
        return Ok(open);
    }
    open.sort_unstable_by_key(|row| row.seq);
    let mut heard = None;
    db.each_row(HEARD, &values![session.as_str()], &mut |r| {
        heard = text_at(r, 0)?.as_deref().and_then(parse_time);
        Ok(())
    })?;
    for row in &mut open {
        row.heard = heard;
    }
    Ok(open)
}

/// Why open messages were interrupted, as the repair log says (`after_json.cause`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cause {
    /// Its writer went away (a process that is gone, a handle dropped, a lease run out).
    WriterGone,
    /// It is a fork's copy of a message still open in the source: no writer writes the copy.
    Forked,
}

impl Cause {
    fn as_str(self) -> &'static str {
        match self {
            Cause::WriterGone => "writer_gone",
            Cause::Forked => "forked",
        }
    }
}

/// [`Store::settle_open_messages`] in the caller's write transaction (which holds the
/// session's lock), on either engine, judging writers on other hosts by the standard lease:
/// the repair log's rows of what it interrupted (empty: nothing was open).
pub(crate) fn settle_in(db: &mut impl Sql, session: &SessionId) -> Result<Vec<LoggedChange>> {
    settle_with(db, session, &Lease::standard())
}

/// [`settle_in`] under `lease` (`store-repair --writer-lease`).
pub(crate) fn settle_with(
    db: &mut impl Sql,
    session: &SessionId,
    lease: &Lease,
) -> Result<Vec<LoggedChange>> {
    let open = open_rows(db, session)?;
    if let Some(live) = open.iter().find(|row| !row.is_gone(lease)) {
        return Err(Error::MessageOpen {
            session: session.clone(),
            seq: live.seq,
        });
    }
    Ok(interrupt_in(db, session, Cause::WriterGone)?.logged)
}

/// What [`interrupt_in`] did.
#[derive(Debug, Default)]
pub(crate) struct Interrupted {
    /// One repair-log row per message interrupted.
    pub(crate) logged: Vec<LoggedChange>,
    /// The calls its tombstones answered.
    pub(crate) answered: Vec<String>,
}

/// Marks every open message of the session `interrupted` (its parts stay), answers its
/// unanswered calls with tombstones ([`pairing::interruption`]) and writes one
/// `repair_log` row per message (rule `abandoned_message`, action `interrupt`: the writer
/// before; the cause, the tombstones and the ids they answer after). What settling does,
/// and what a fork does to its copy of an open message.
pub(crate) fn interrupt_in(
    db: &mut impl Sql,
    session: &SessionId,
    cause: Cause,
) -> Result<Interrupted> {
    let open = open_rows(db, session)?;
    if open.is_empty() {
        return Ok(Interrupted::default());
    }
    db.run(INTERRUPT, &values![session.as_str()])?;
    let walk = Walk::resume(stored_tail(db, session)?.resume);
    let mut answered = Vec::new();
    if let Some(tombstones) = pairing::interruption(&walk) {
        answered = super::fork::answered_by(&tombstones);
        append_in(db, session, &[tombstones])?;
    }
    let stamp = format_time(now());
    let last = open.len() - 1;
    let mut logged = Vec::with_capacity(open.len());
    for (index, row) in open.iter().enumerate() {
        // The calls pending at the end are the last open message's.
        let ids: &[String] = if index == last { &answered } else { &[] };
        let change = LoggedChange {
            rule: HealthRule::AbandonedMessage,
            action: "interrupt",
            message_id: row.id,
            seq: Some(row.seq),
            part_id: None,
            before: Some(json!({"state": "open", "writer": row.writer})),
            after: json!({
                "state": "interrupted",
                "cause": cause.as_str(),
                "tombstones": ids.len(),
                "tool_use_ids": ids,
            }),
        };
        super::apply::log_change(db, session, &change, &stamp)?;
        logged.push(change);
    }
    Ok(Interrupted { logged, answered })
}

/// The check's finding for each open message of the session whose writer is gone (rule
/// `abandoned_message`), on either engine; read-only.
pub(crate) fn abandoned_in(
    db: &mut impl Sql,
    session: &SessionId,
    lease: &Lease,
) -> Result<Vec<Problem>> {
    let found = open_rows(db, session)?
        .into_iter()
        .filter(|row| row.is_gone(lease))
        .map(|row| Problem {
            session_id: session.clone(),
            rule: HealthRule::AbandonedMessage,
            turn: row.turn,
            message_id: Some(row.id),
            seq: Some(row.seq),
            part: None,
            tool_use_id: None,
            detail: format!(
                "message {} is still open but its writer is gone; it is to be marked \
                 interrupted and its calls answered with tombstones",
                row.seq
            ),
        })
        .collect();
    Ok(found)
}

/// [`Store::begin_message`] in the caller's write transaction, on either engine.
fn begin_in(db: &mut impl Sql, session: &SessionId, role: Role, token: &str) -> Result<Appended> {
    db.lock_session(session)?;
    settle_in(db, session)?;
    let position = stored_tail(db, session)?;
    let walk = Walk::resume(position.resume);
    pairing::check_begin(&walk, role).map_err(|reason| Error::Refused {
        session: session.clone(),
        index: 0,
        reason,
    })?;
    if !position.from_stored_state {
        super::write::forget_reverts(db, session)?;
    }
    let seq = position.last_seq + 1;
    let turn_index = next_turn_index(position.last_user_turn, role);
    let now = format_time(now());
    let id = db.insert(
        INSERT_OPEN,
        &values![
            session.as_str(),
            seq,
            turn_index,
            role.as_str(),
            now.as_str(),
            token
        ],
    )?;
    db.run(TOUCH_COUNTED, &values![session.as_str(), now.as_str()])?;
    Ok(Appended {
        id,
        seq,
        turn_index,
    })
}

/// Fails with [`Error::MessageNotOpen`] unless the message is open under `token`.
fn require_open(
    db: &mut impl Sql,
    session: &SessionId,
    message: &Appended,
    token: &str,
) -> Result<()> {
    db.lock_session(session)?;
    let mut found: Option<(Option<String>, Option<String>)> = None;
    db.each_row(
        MESSAGE_STATE,
        &values![message.id, session.as_str()],
        &mut |r| {
            found = Some((text_at(r, 0)?, text_at(r, 1)?));
            Ok(())
        },
    )?;
    let state = match found {
        Some((Some(state), Some(writer))) if state == "open" && writer == token => return Ok(()),
        Some((Some(state), _)) if state == "open" => "another writer's".to_owned(),
        Some((state, _)) => state.unwrap_or_else(|| "unknown".to_owned()),
        None => "gone".to_owned(),
    };
    Err(Error::MessageNotOpen {
        session: session.clone(),
        seq: message.seq,
        state,
    })
}

/// [`OpenMessage::push`] in the caller's write transaction, on either engine.
fn push_in(
    db: &mut impl Sql,
    session: &SessionId,
    message: &Appended,
    token: &str,
    part: &Part,
) -> Result<()> {
    require_open(db, session, message, token)?;
    let so_far = db
        .load_messages(session, Range::Seqs(message.seq, message.seq))?
        .pop()
        .map(|m| m.parts)
        .unwrap_or_default();
    let taken = match part.call_id() {
        Some(id) => used_elsewhere(db, session, message, id)?,
        None => Vec::new(),
    };
    let before = Resume {
        messages: usize::try_from(message.seq - 1).unwrap_or_default(),
        taken,
        ..Resume::default()
    };
    pairing::check_push(before, &so_far, part).map_err(|reason| Error::Refused {
        session: session.clone(),
        index: 0,
        reason,
    })?;
    let ordinal = i64::try_from(so_far.len()).unwrap_or(i64::MAX);
    insert_part(db, session, message.id, ordinal, part)?;
    let now = format_time(now());
    db.run(TOUCH, &values![session.as_str(), now.as_str()])?;
    Ok(())
}

/// `[id]` when the session uses the call id `id` in a message other than `message`, else
/// none: from the call ids the engine keeps for the session's run of appends
/// ([`Sql::calls_used`]), else by the parts' index.
fn used_elsewhere(
    db: &mut impl Sql,
    session: &SessionId,
    message: &Appended,
    id: &str,
) -> Result<Vec<String>> {
    let mut state = None;
    db.each_row(STATE, &values![session.as_str()], &mut |r| {
        state = text_at(r, 0)?;
        Ok(())
    })?;
    let run = Run {
        epoch: state
            .as_deref()
            .and_then(TailState::decode)
            .map(|tail| tail.epoch)
            .filter(|epoch| *epoch != 0),
        last_seq: message.seq,
        except_seq: Some(message.seq),
        remembered: false,
    };
    if let Some(used) = db.calls_used(session, &run, &[id])? {
        return Ok(used);
    }
    let found = db.optional_int(
        CALL_USED_ELSEWHERE,
        &values![id, session.as_str(), message.id],
    )?;
    Ok(found.map(|_| vec![id.to_owned()]).unwrap_or_default())
}

/// [`OpenMessage::set_model`] in the caller's write transaction, on either engine.
fn set_model_in(
    db: &mut impl Sql,
    session: &SessionId,
    message: &Appended,
    token: &str,
    model: &str,
) -> Result<()> {
    require_open(db, session, message, token)?;
    db.run(SET_MODEL, &values![message.id, model, session.as_str()])?;
    Ok(())
}

/// [`OpenMessage::finish`] in the caller's write transaction, on either engine.
fn finish_in(
    db: &mut impl Sql,
    session: &SessionId,
    message: &Appended,
    token: &str,
) -> Result<()> {
    require_open(db, session, message, token)?;
    if db
        .optional_int(
            keyed(db, PARTS_OF, PARTS_OF_KEYED),
            &values![session.as_str(), message.id],
        )?
        .unwrap_or(0)
        == 0
    {
        return Err(Error::Refused {
            session: session.clone(),
            index: 0,
            reason: pairing::Refusal::EmptyMessage,
        });
    }
    db.run(COMPLETE, &values![message.id, session.as_str()])?;
    let now = format_time(now());
    db.run(TOUCH, &values![session.as_str(), now.as_str()])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every write to a session asks for its open messages first: the partial index
    /// `messages_open` answers that with one probe, whatever the session's length. A plan
    /// that walks the session's `(session_id, seq)` index instead reads every message of the
    /// session on every append (quadratic in its length).
    #[test]
    fn the_open_message_probe_of_every_write_uses_the_partial_index() {
        let mut conn = rusqlite::Connection::open_in_memory().expect("open");
        crate::store::schema::migrate(&mut conn).expect("migrate");
        for sql in [OPEN_MESSAGES, INTERRUPT] {
            let steps = crate::store::sql::sqlite_plan(&conn, sql);
            assert!(
                steps.iter().any(|step| step.contains("messages_open")),
                "{sql}: {steps:?}"
            );
            assert!(
                !steps.iter().any(|step| step.contains("SCAN")
                    || step.contains("sqlite_autoindex_messages")
                    || step.contains("TEMP B-TREE")),
                "{sql}: {steps:?}"
            );
        }
    }
}
