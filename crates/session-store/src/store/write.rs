//! The write path: sessions are created, and messages appended, only through checks that keep
//! every tool_use paired with its result.

use rusqlite::{Connection, OptionalExtension};

use super::encode::{insert_message, Guard, MessageRow, Touch};
use super::handle::Store;
use super::memory::{CallMemory, Calls};
use super::rows::Range;
use super::sql::{text_at, values, Sql, Value};
use super::time::{format_time, now};
use crate::error::{Error, Result};
use crate::history::grammar::{Resume, Walk};
use crate::history::pairing;
use crate::history::tail::{block_parts_after, TailState};
use crate::history::turns::next_turn_index;
use crate::model::{Appended, NewMessage, Part, Role, SessionId};

impl Store {
    /// Creates a session with a fresh random id.
    pub fn create_session(&self) -> Result<SessionId> {
        let id = SessionId::random();
        self.create_session_with_id(&id)?;
        Ok(id)
    }

    /// Creates a session with the caller's id; [`Error::SessionExists`] if it is taken,
    /// [`Error::InvalidSessionId`] if no engine could keep it on every engine (longer than
    /// [`crate::MAX_ID_BYTES`], or holding a NUL character).
    pub fn create_session_with_id(&self, id: &SessionId) -> Result<()> {
        self.write(|tx| create_session_in(tx, id))
    }

    /// Appends one message, assigning its `seq` and `turn_index`.
    ///
    /// Refused with [`Error::Refused`], and nothing written, when the message would break a
    /// tool pair (see [`pairing::Refusal`]).
    pub fn append(&self, session: &SessionId, message: NewMessage) -> Result<Appended> {
        let mut appended = self.append_batch(session, vec![message])?;
        appended.pop().ok_or_else(|| Error::Refused {
            session: session.clone(),
            index: 0,
            reason: pairing::Refusal::EmptyMessage,
        })
    }

    /// Appends several messages (typically a whole turn) in one transaction, validated as a
    /// whole: either all are stored or none is.
    pub fn append_batch(
        &self,
        session: &SessionId,
        messages: Vec<NewMessage>,
    ) -> Result<Vec<Appended>> {
        let one = super::encode::fits_one_statement(&messages);
        self.append_write(session, one, |tx| append_in(tx, session, &messages))
    }

    /// Answers every pending tool_use of the session with a tombstone result (`is_error = 1`,
    /// text saying it was cancelled and why), in one transaction. Returns the ids it answered;
    /// with nothing pending it writes nothing and returns an empty list.
    ///
    /// Call it when a turn is interrupted between storing the assistant message and storing
    /// the results, and on start-up for sessions a crash left pending.
    pub fn cancel_pending(&self, session: &SessionId, reason: &str) -> Result<Vec<String>> {
        self.write(|tx| cancel_in(tx, session, reason))
    }

    /// The tool_uses of the session still waiting for a result, in part order.
    pub fn pending_tool_uses(&self, session: &SessionId) -> Result<Vec<String>> {
        self.read(|tx| pending_in(tx, session))
    }
}

const CREATE_SESSION: &str = "
    INSERT INTO sessions (id, created_at, updated_at) VALUES (?1, ?2, ?2)
    ON CONFLICT (id) DO NOTHING";

/// [`Store::create_session_with_id`] in the caller's write transaction, on either engine.
fn create_session_in(db: &mut impl Sql, id: &SessionId) -> Result<()> {
    keepable_id(id)?;
    let now = format_time(now());
    if db.run(CREATE_SESSION, &values![id.as_str(), now.as_str()])? == 0 {
        return Err(Error::SessionExists(id.clone()));
    }
    Ok(())
}

/// [`Store::cancel_pending`] in the caller's write transaction, on either engine.
fn cancel_in(db: &mut impl Sql, session: &SessionId, reason: &str) -> Result<Vec<String>> {
    db.lock_session(session)?;
    super::stream::settle_in(db, session)?;
    let position = stored_tail(db, session)?;
    let walk = Walk::resume(position.resume);
    let Some(message) = pairing::tombstones(&walk, reason) else {
        return Ok(Vec::new());
    };
    let ids = message
        .parts
        .iter()
        .filter_map(Part::answers)
        .map(str::to_owned)
        .collect();
    append_in(db, session, &[message])?;
    Ok(ids)
}

/// [`Store::pending_tool_uses`] in the caller's read snapshot, on either engine: the walk
/// resumed at the session's end ([`stored_tail`]).
pub(crate) fn pending_in(db: &mut impl Sql, session: &SessionId) -> Result<Vec<String>> {
    Ok(Walk::resume(stored_tail(db, session)?.resume).pending())
}

/// [`pending_in`] for a session listing: a session whose open block holds a row outside
/// the contract lists no pending call (its health says `unreadable_row`) rather than hiding
/// every other session.
pub(crate) fn pending_listed(db: &mut impl Sql, session: &SessionId) -> Result<Vec<String>> {
    match pending_in(db, session) {
        Err(Error::CorruptRow { .. }) => Ok(Vec::new()),
        other => other,
    }
}

/// Refuses a new session's id that an engine cannot keep (`model::unkeepable_id`), the
/// same on every engine, before any statement binds it.
pub(crate) fn keepable_id(id: &SessionId) -> Result<()> {
    match crate::model::unkeepable_id(id.as_str()) {
        Some(reason) => Err(Error::InvalidSessionId { reason }),
        None => Ok(()),
    }
}

/// Refuses a session's text (a title, a summary) that holds a NUL character, which
/// PostgreSQL cannot keep: the same refusal on every engine, before any statement binds it
/// (the messages' texts: `pairing::check_texts`).
pub(crate) fn keepable(session: &SessionId, field: &'static str, text: Option<&str>) -> Result<()> {
    if text.is_some_and(|text| text.contains('\0')) {
        return Err(Error::NulInSessionText {
            session: session.clone(),
            field,
        });
    }
    Ok(())
}

/// Validates `messages` against the session's tail, then inserts them, on either engine; the
/// caller owns the transaction (on PostgreSQL it holds the session's row lock,
/// [`Sql::lock_session`]; SQLite's `BEGIN IMMEDIATE` holds the file's).
///
/// A remembered tail ([`Sql::remembered_tail`]) is tried first. One not yet proved current
/// ([`Remembered::unproved`], PostgreSQL) that the first insert finds wrong, or that refuses
/// the append, wrote nothing: the append then runs again on the tail read from the rows,
/// which decides.
pub(crate) fn append_in(
    db: &mut impl Sql,
    session: &SessionId,
    messages: &[NewMessage],
) -> Result<Vec<Appended>> {
    // An id no engine can keep (a NUL) is refused by `check_texts`, before it binds.
    let calls: Vec<&str> = messages
        .iter()
        .flat_map(|m| m.parts.iter().filter_map(Part::call_id))
        .filter(|id| !id.contains('\0'))
        .collect();
    if let Some(appended) = append_on(db, session, messages, &calls, true)? {
        return Ok(appended);
    }
    // A tail read from the rows carries no check and decides every refusal itself: `None`
    // here would be a bug, reported rather than retried.
    append_on(db, session, messages, &calls, false)?.ok_or_else(|| Error::CorruptRow {
        table: "sessions",
        row_id: 0,
        detail: format!("the append to {session} on the tail read from its rows wrote nothing"),
    })
}

/// [`append_in`] of `messages`, whose call ids are `calls`, on the remembered tail
/// (`remembered`) or on the tail read under the lock.
/// `None`, with nothing written: no tail is remembered, or a remembered one still to be
/// proved did not hold or refused the append.
fn append_on(
    db: &mut impl Sql,
    session: &SessionId,
    messages: &[NewMessage],
    calls: &[&str],
    remembered: bool,
) -> Result<Option<Vec<Appended>>> {
    // A tail had without reading the rows (SQLite: this connection's memory; PostgreSQL:
    // the state the session row keeps, checked by the first insert), else the tail read
    // under the session's lock.
    let memory = match remembered {
        true => db.remembered_tail(session, calls)?,
        false => None,
    };
    let on_remembered = memory.is_some();
    let (mut position, taken) = match memory {
        Some(Remembered {
            tail,
            taken,
            unproved,
            version,
        }) => (
            Position {
                unproved,
                version,
                ..Position::stored(tail)
            },
            Some(taken),
        ),
        // Nothing remembered: the read tail decides ([`append_in`]).
        None if remembered => return Ok(None),
        None => locked_position(db, session, calls)?,
    };
    // An unproved tail is checked by its open block's parts above its first part id: one
    // that does not name it cannot be checked by key, and the read tail decides.
    if position.unproved && position.block_after.is_none() {
        return Ok(None);
    }
    check_texts(session, messages)?;
    // A retry: the messages whose keys are stored come back as stored; the rest goes on.
    // A one-statement append (a remembered row version) reads nothing first: its statement
    // writes only where the session stores none of its key (`encode.rs`).
    let replayed = match position.version {
        Some(_) => Vec::new(),
        None => super::idempotency::replayed(db, session, messages)?,
    };
    if replayed.len() == messages.len() {
        return Ok(Some(replayed));
    }
    let skip = replayed.len();
    let messages = &messages[skip..];
    let refused = |index, reason| Error::Refused {
        session: session.clone(),
        index: skip + index,
        reason,
    };
    let mut resume = std::mem::take(&mut position.resume);
    let calls_left: Vec<&str> = messages
        .iter()
        .flat_map(|m| m.parts.iter().filter_map(Part::call_id))
        .collect();
    let last_seq_before = position.last_seq;
    resume.taken = match taken {
        // Read with the lock or remembered: the ids of the messages still to append taken.
        Some(taken) => calls_left
            .iter()
            .filter(|id| taken.iter().any(|t| t == *id))
            .map(|id| (*id).to_owned())
            .collect(),
        None if calls_left.is_empty() => Vec::new(),
        None => {
            let run = Run {
                epoch: Some(position.epoch),
                last_seq: position.last_seq,
                except_seq: None,
                remembered: false,
            };
            match db.calls_used(session, &run, &calls_left)? {
                Some(used) => used,
                None => used_tool_use_ids(db, session, &calls_left)?,
            }
        }
    };
    let mut walk = Walk::resume(resume);
    for (index, message) in messages.iter().enumerate() {
        // Every text passed `check_texts` above.
        if let Err(reason) = pairing::check_append_scanned(&mut walk, message) {
            // A tail not yet proved current refuses nothing: the read one decides.
            if position.unproved {
                return Ok(None);
            }
            return Err(refused(index, reason));
        }
    }
    // An append ends the chance to undo earlier reverts of the session (a state the row
    // kept proves there are none: a revert clears it, and only an append writes it).
    if !position.from_stored_state {
        forget_reverts(db, session)?;
    }
    // Formatted once: the messages without their own time and the session's `updated_at`.
    let now = format_time(now());
    let count = i64::try_from(messages.len()).unwrap_or(i64::MAX);
    let mut appended = replayed;
    appended.reserve(messages.len());
    let mut touched = false;
    let mut version = None;
    for (index, message) in messages.iter().enumerate() {
        let refused_usage = |reason| refused(index, reason);
        // The first insert checks a tail not yet proved, before `advance` moves past it.
        let check = if index == 0 { position.check() } else { None };
        let (seq, turn_index) = position.advance(message.role);
        // The last message's statement writes the session row too where the engine can
        // ([`super::encode::Touch`]): the new tail is known but for its largest part id.
        let last = index + 1 == messages.len();
        let tail_head = (last && db.rows_carry_session())
            .then(|| position.after(&walk, messages).encode_open_ended());
        let touch = tail_head.as_deref().map(|tail_head| Touch {
            now: &now,
            tail_head,
            messages: count,
            parts_before: position.parts_max,
        });
        let guard = check.as_ref().map(|check| Guard { check, calls });
        let Some((one, wrote_session, left)) = insert_next(
            db,
            session,
            &mut position,
            (seq, turn_index),
            message,
            &now,
            (touch.as_ref(), guard.as_ref()),
            refused_usage,
        )?
        else {
            // The remembered tail did not hold: nothing was written.
            return Ok(None);
        };
        appended.push(one);
        touched |= wrote_session;
        version = version.or(left);
    }
    let added: Vec<(&str, i64)> = messages
        .iter()
        .zip(&appended[skip..])
        .flat_map(|(m, one)| {
            m.parts
                .iter()
                .filter_map(Part::call_id)
                .map(|id| (id, one.seq))
        })
        .collect();
    db.remember_calls(
        session,
        &AppendedCalls {
            epoch: position.epoch,
            seqs: (last_seq_before, position.last_seq),
            added: &added,
            checked: match on_remembered {
                true => !calls.is_empty(),
                false => !calls_left.is_empty(),
            },
            remembered: on_remembered,
        },
    );
    // The walk that checked the append states the new tail; no trigger counts the inserted
    // messages (V14 on both engines), this UPDATE does.
    let tail = position.after(&walk, messages);
    if !touched {
        let encoded = tail.encode();
        let touched = db.run(
            TOUCH_WITH_TAIL,
            &values![session.as_str(), now.as_str(), encoded.as_str(), count],
        )?;
        // A remembered tail read no session row: the row this UPDATE finds proves it is there.
        if touched != 1 {
            return Err(Error::UnknownSession(session.clone()));
        }
    }
    db.remember_tail(session, tail, version);
    Ok(Some(appended))
}

/// The session's lock with the tail its row keeps (or `UnknownSession`), in one statement,
/// with which of `calls` the session uses where that statement says ([`TailRow::taken`]);
/// a message another writer left streaming is settled first (`store/stream.rs`).
fn locked_position(
    db: &mut impl Sql,
    session: &SessionId,
    calls: &[&str],
) -> Result<(Position, Option<Vec<String>>)> {
    let mut row = db
        .tail_row_for_append(session, calls)?
        .ok_or_else(|| Error::UnknownSession(session.clone()))?;
    if row.open_messages {
        super::stream::settle_in(db, session)?;
        Ok((stored_tail(db, session)?, None))
    } else {
        let taken = row.taken.take();
        Ok((position_of(db, session, row)?, taken))
    }
}

/// An empty append, and texts no engine can keep, are refused before any statement binds
/// them.
fn check_texts(session: &SessionId, messages: &[NewMessage]) -> Result<()> {
    if messages.is_empty() {
        return Err(Error::Refused {
            session: session.clone(),
            index: 0,
            reason: pairing::Refusal::EmptyMessage,
        });
    }
    for (index, message) in messages.iter().enumerate() {
        pairing::check_texts(message).map_err(|reason| Error::Refused {
            session: session.clone(),
            index,
            reason,
        })?;
    }
    Ok(())
}

/// Inserts `message` (checked) as the session's next one, at `(seq, turn_index)` from
/// [`Position::advance`], with its usage and its idempotency key; raises the position's
/// largest part id. Also whether the session row was written with it (`touch`), and the
/// row version that write left where the engine reports one. `None`,
/// with nothing written: the `guard` of a remembered tail did not hold.
#[allow(clippy::too_many_arguments)] // one append's parts, each needed once
fn insert_next(
    db: &mut impl Sql,
    session: &SessionId,
    position: &mut Position,
    (seq, turn_index): (i64, i64),
    message: &NewMessage,
    now: &str,
    (touch, guard): (Option<&Touch<'_>>, Option<&Guard<'_>>),
    refused: impl Fn(pairing::Refusal) -> Error,
) -> Result<Option<(Appended, bool, Option<i64>)>> {
    let created_at = message.created_at.map(format_time);
    let created_at = created_at.as_deref().unwrap_or(now);
    let row = MessageRow {
        seq,
        turn_index,
        created_at,
    };
    // Checked before anything is written; the message's statement writes the row where it
    // can, else its own statement does.
    let usage = match &message.usage {
        Some(usage) => super::usage::usage_values(usage, &refused)?,
        None => None,
    };
    let Some(inserted) = insert_message(db, session, row, message, (touch, guard), usage.as_ref())?
    else {
        return Ok(None);
    };
    let id = inserted.id;
    position.parts_max = position.parts_max.max(inserted.last_part.unwrap_or(0));
    if let (Some(usage), false) = (&usage, inserted.with_usage) {
        super::usage::insert_usage(db, session, id, usage)?;
    }
    if !inserted.with_key {
        super::idempotency::record(db, session, message, id)?;
    }
    Ok(Some((
        Appended {
            id,
            seq,
            turn_index,
        },
        inserted.touched,
        inserted.version,
    )))
}

/// Fails with [`Error::UnknownSession`] unless the session exists.
pub(crate) fn require_session(conn: &Connection, session: &SessionId) -> Result<()> {
    let found = conn
        .prepare_cached("SELECT 1 FROM sessions WHERE id = ?1")?
        .query_row([session.as_str()], |_| Ok(()))
        .optional()?;
    found.ok_or_else(|| Error::UnknownSession(session.clone()))
}

/// Where the next message of a session goes, and what it may be.
#[derive(Debug)]
pub(crate) struct Position {
    /// The pairing state at the end of the session.
    pub(crate) resume: Resume,
    /// The highest `seq` so far (0 for an empty session).
    pub(crate) last_seq: i64,
    /// The turn of the last user message, if any.
    pub(crate) last_user_turn: Option<i64>,
    /// How many parts the open block holds (see [`TailState::block_parts`]).
    pub(crate) block_parts: i64,
    /// The largest part id the state is checked against ([`TailRow::parts_max`]) before
    /// the append; each inserted message's parts raise it to the largest id they took.
    pub(crate) parts_max: i64,
    /// Whether this came from the state the session row keeps, which only an append writes
    /// and every revert, undo and mend clears: then no revert of the session is waiting for
    /// an undo, and the append has none to forget.
    pub(crate) from_stored_state: bool,
    /// The session's largest part id before its last user or assistant message went in,
    /// where known ([`TailState::block_after`]).
    pub(crate) block_after: Option<i64>,
    /// Whether nothing proves this tail current yet ([`Remembered::unproved`]): the append's
    /// first insert checks it ([`Position::check`]).
    pub(crate) unproved: bool,
    /// The session row's version the tail was remembered at ([`Remembered::version`]).
    pub(crate) version: Option<i64>,
    /// The run of appends this one goes on ([`TailState::epoch`]): the stored state's,
    /// else a new one.
    pub(crate) epoch: i64,
}

/// A new run of appends' [`TailState::epoch`]: random, never 0 (not known).
fn new_epoch() -> i64 {
    let (high, _) = uuid::Uuid::new_v4().as_u64_pair();
    i64::try_from(high >> 1).unwrap_or(i64::MAX).max(1)
}

impl Position {
    /// The position at the end of a session whose stored tail state is `tail`, current.
    fn stored(tail: TailState) -> Self {
        Position {
            resume: tail.resume(),
            last_seq: tail.last_seq,
            last_user_turn: tail.last_user_turn,
            block_parts: tail.block_parts,
            parts_max: tail.parts_through,
            from_stored_state: true,
            block_after: tail.block_after,
            unproved: false,
            version: None,
            epoch: match tail.epoch {
                0 => new_epoch(),
                epoch => epoch,
            },
        }
    }

    /// What the append's first insert checks of the rows where this tail is not proved yet:
    /// what the position says of them. `None` where it is proved (and where it names no
    /// open block's first part id, which [`append_in`] does not take unproved).
    fn check(&self) -> Option<TailCheck> {
        if !self.unproved {
            return None;
        }
        Some(TailCheck {
            last_seq: self.last_seq,
            parts_max: self.parts_max,
            block_after: self.block_after?,
            block_parts: self.block_parts,
            version: self.version,
        })
    }

    /// The seq and turn of the next message, of `role`, which the position then ends at.
    fn advance(&mut self, role: Role) -> (i64, i64) {
        self.last_seq += 1;
        let turn_index = next_turn_index(self.last_user_turn, role);
        if role == Role::User {
            self.last_user_turn = Some(turn_index);
        }
        if matches!(role, Role::User | Role::Assistant) {
            // The message opens the block: the parts inserted from here on are its.
            self.block_after = Some(self.parts_max);
        }
        (self.last_seq, turn_index)
    }

    /// The tail state after `appended` went in: `self` advanced past them (its seq and user
    /// turn), and `walk`, which checked them.
    pub(crate) fn after(&self, walk: &Walk, appended: &[NewMessage]) -> TailState {
        let block_parts = block_parts_after(
            self.block_parts,
            appended.iter().map(|m| (m.role, m.parts.len())),
        );
        // `parts_max` went up to the largest id the appended parts took ([`insert_next`]).
        TailState::after(
            walk,
            self.last_seq,
            self.last_user_turn,
            (block_parts, self.block_after),
            (self.epoch, self.parts_max),
        )
    }
}

/// Also counts the appended messages: no trigger counts inserts (V14, on both engines).
const TOUCH_WITH_TAIL: &str = "
    UPDATE sessions SET updated_at = ?2, tail_state = ?3, message_count = message_count + ?4
    WHERE id = ?1";

const RECOUNT: &str = "
    UPDATE sessions SET message_count = (SELECT COUNT(*) FROM messages WHERE session_id = ?1)
    WHERE id = ?1";

/// Sets the session's `message_count` from its rows, on either engine: for the writes that
/// insert messages other than by an append (an undo, a mend, a fork, a copy), which are
/// rare and already touch every row they count.
pub(crate) fn recount_messages(db: &mut impl Sql, session: &SessionId) -> Result<()> {
    db.run(RECOUNT, &values![session.as_str()])?;
    Ok(())
}

/// A tail an engine has without reading the session's rows ([`Sql::remembered_tail`]).
#[derive(Debug)]
pub(crate) struct Remembered {
    /// The tail an append wrote.
    pub(crate) tail: TailState,
    /// Which of the new append's call ids the session uses (none asked when `unproved`: the
    /// check asks).
    pub(crate) taken: Vec<String>,
    /// Whether nothing proves the tail current yet (PostgreSQL: the state the session row
    /// keeps, read with its lock): the append's first insert checks what it says of the rows
    /// ([`TailCheck`]) before it writes. It writes nothing when the check fails, and the
    /// append runs again on the tail read from the rows.
    pub(crate) unproved: bool,
    /// The session row's version (PostgreSQL's `xmin`) the append that wrote the tail left,
    /// where the engine remembers it: the check then also holds only while the row is still
    /// that version, so the one statement that checks may also be the append's lock
    /// (`store/pg/mod.rs`).
    pub(crate) version: Option<i64>,
}

/// What an unproved tail says of the session's rows, checked in the statement that
/// inserts an append's first message, after the session's lock (PostgreSQL): what
/// [`position_of`] checks of a stored state, each by a key of the session's. The session's
/// last seq and its largest part id are the tail's, no message of it is open, its open
/// block holds the tail's count of parts (the parts above `block_after`, each message's
/// parts in order of insert), and none of the append's call ids is used.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TailCheck {
    /// The session's last seq.
    pub(crate) last_seq: i64,
    /// The session's largest part id.
    pub(crate) parts_max: i64,
    /// The session's largest part id before its open block's first message went in.
    pub(crate) block_after: i64,
    /// The parts of the open block: the session's parts above `block_after`.
    pub(crate) block_parts: i64,
    /// The session row's version the tail was remembered at ([`Remembered::version`]).
    pub(crate) version: Option<i64>,
}

/// What [`Sql::tail_row`] reads of a session: the tail state its row keeps, with what that
/// state must match to be current.
#[derive(Debug)]
pub(crate) struct TailRow {
    /// `sessions.tail_state` (NULL: unknown).
    pub(crate) state: Option<String>,
    /// The session's largest `seq` (0 when it has no message).
    pub(crate) last_seq: i64,
    /// The largest part id that proves no part went in since the state was written: on
    /// SQLite, whose writers take turns, the largest in the database; on PostgreSQL, the
    /// largest of the session's own parts (each session's writers take turns on its row
    /// lock, and sequences only grow), read by the session's key with no read outside it.
    /// `None`: not read (a state whose last seq is the session's is then trusted).
    pub(crate) parts_max: Option<i64>,
    /// The number of parts in the session's open block, read with the state where no
    /// trigger clears it on an insert (PostgreSQL): the state is current only when both this
    /// and [`TailRow::parts_max`] match it. `None` (SQLite): counted only when the largest
    /// part id moved.
    pub(crate) block_parts: Option<i64>,
    /// Whether a message of the session is still streaming (`state = 'open'`).
    pub(crate) open_messages: bool,
    /// Which of an append's call ids the session already uses, read in the same statement
    /// ([`Sql::tail_row_for_append`] on PostgreSQL); `None`: not read.
    pub(crate) taken: Option<Vec<String>>,
}

/// The row's tail state with what it must match: the session's last seq, and the largest
/// part id in the database; and whether a message is open.
const TAIL_ROW: &str = "
    SELECT tail_state, (SELECT COALESCE(MAX(seq), 0) FROM messages WHERE session_id = ?1),
           (SELECT COALESCE(MAX(id), 0) FROM parts),
           EXISTS (SELECT 1 FROM messages WHERE session_id = ?1 AND state = 'open')
    FROM sessions WHERE id = ?1";

/// [`Sql::tail_row`] on SQLite ([`TAIL_ROW`]).
pub(crate) fn sqlite_tail_row(conn: &Connection, session: &SessionId) -> Result<Option<TailRow>> {
    Ok(conn
        .prepare_cached(TAIL_ROW)?
        .query_row([session.as_str()], |r| {
            Ok(TailRow {
                state: r.get(0)?,
                last_seq: r.get(1)?,
                parts_max: Some(r.get(2)?),
                block_parts: None,
                open_messages: r.get(3)?,
                taken: None,
            })
        })
        .optional()?)
}

/// The call ids of the session's messages from seq `?2` on, with their message's seq:
/// SQLite's catch-up of the ids its write connection keeps ([`sqlite_calls_used`]). Each
/// message is looked up in `parts_calls` (the calls by message, whose new entries go at
/// its end), none of the session's other parts read.
const SESSION_CALLS_FROM: &str = "
    SELECT m.seq, p.tool_use_id FROM messages m JOIN parts p ON p.message_id = m.id
    WHERE m.session_id = ?1 AND m.seq >= ?2
      AND p.kind = 'tool_use' AND p.tool_use_id IS NOT NULL";

/// Where an SQLite write asks which of its call ids its session uses
/// ([`Sql::calls_used`]): the session's run of appends and last seq, as the write knows
/// them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Run {
    /// The run ([`TailState::epoch`]); `None`: not known (the state the row keeps is gone),
    /// so the ids are read and not kept.
    pub(crate) epoch: Option<i64>,
    /// The session's last seq.
    pub(crate) last_seq: i64,
    /// A message whose calls do not count (the streamed message a part goes into).
    pub(crate) except_seq: Option<i64>,
    /// Whether the write is an append on the tail its connection remembers: nothing wrote
    /// the database since this connection's last append to the session, so ids kept up to
    /// that append's last message ([`AppendedCalls`]) are every id of the session.
    pub(crate) remembered: bool,
}

/// What an append wrote, for the call ids an engine keeps ([`Sql::remember_calls`]).
#[derive(Debug)]
pub(crate) struct AppendedCalls<'a> {
    /// The run of appends ([`TailState::epoch`]).
    pub(crate) epoch: i64,
    /// The session's last seq before the append, and after it.
    pub(crate) seqs: (i64, i64),
    /// Each call id the append wrote, with its message's seq.
    pub(crate) added: &'a [(&'a str, i64)],
    /// Whether the append asked [`Sql::calls_used`], which caught the kept ids up to the
    /// last seq before it in the same transaction.
    pub(crate) checked: bool,
    /// Whether the append went on the tail its connection remembers ([`Run::remembered`]).
    pub(crate) remembered: bool,
}

/// Which of `calls` the session uses in a message other than `run.except_seq`, from the ids
/// `memory` keeps for it under `run.epoch`, caught up from the rows first (every id read
/// when none are kept, and then kept). No rows are read only on a tail the connection
/// remembers whose kept ids reach its last seq: they were kept up to the connection's last
/// append to the session, and nothing wrote since ([`Run::remembered`]).
pub(crate) fn sqlite_calls_used(
    conn: &Connection,
    memory: Option<&mut CallMemory>,
    session: &SessionId,
    run: &Run,
    calls: &[&str],
) -> Result<Vec<String>> {
    // With no run known the ids are read and not kept.
    let mut memory = memory.zip(run.epoch);
    let kept = memory
        .as_mut()
        .and_then(|(memory, epoch)| memory.take(session, *epoch));
    let current = kept
        .as_ref()
        .is_some_and(|ids| run.remembered && ids.through_seq() == run.last_seq);
    let from = kept.as_ref().map_or(i64::MIN, Calls::through_seq);
    let mut ids = kept.unwrap_or_else(|| Calls::of_run(run.epoch.unwrap_or(0)));
    if !current {
        let mut statement = conn.prepare_cached(SESSION_CALLS_FROM)?;
        let mut rows = statement.query(rusqlite::params![session.as_str(), from])?;
        while let Some(row) = rows.next()? {
            if let Some(id) = row.get::<_, Option<String>>(1)? {
                ids.add(id, row.get(0)?);
            }
        }
        ids.caught_up_to(run.last_seq);
    }
    let used = calls
        .iter()
        .filter(|id| ids.uses(id, run.except_seq))
        .map(|id| (*id).to_owned())
        .collect();
    if let Some((memory, _)) = memory {
        memory.keep(session, ids);
    }
    Ok(used)
}

/// Adds the call ids an append wrote to what `memory` keeps for its session, when the kept
/// ids held every id of the session before it: caught up in the same transaction
/// ([`AppendedCalls::checked`]), or reaching the last seq of a remembered tail. Every id up
/// to the append's last message is then in; otherwise the next check catches up.
pub(crate) fn sqlite_remember_calls(
    memory: &mut CallMemory,
    session: &SessionId,
    appended: &AppendedCalls<'_>,
) {
    let Some(mut ids) = memory.take(session, appended.epoch) else {
        return;
    };
    let (before, after) = appended.seqs;
    if appended.checked || (appended.remembered && ids.through_seq() == before) {
        for (id, seq) in appended.added {
            ids.add((*id).to_owned(), *seq);
        }
        ids.caught_up_to(after);
    }
    memory.keep(session, ids);
}

/// The number of parts in the session's open block: the messages from the last user or
/// assistant message on (from seq 0, every message, when there is none). Read on SQLite
/// only: PostgreSQL's tail row brings the count (`session_store_tail`); its spelling would
/// join along the session anyway (`pg_statement`).
const BLOCK_PARTS: &str = "
    SELECT COUNT(*) FROM messages m JOIN parts p ON p.message_id = m.id
    WHERE m.session_id = ?1 AND m.seq >= COALESCE(
        (SELECT seq FROM messages WHERE session_id = ?1 AND role IN ('user', 'assistant')
         ORDER BY seq DESC LIMIT 1), 0)";

/// The end of a session, for every reader and the write path alike (the pending calls of
/// `pending_tool_uses` and of the session listings, `cancel`, a fork's cut, an append's
/// check; [`Error::UnknownSession`] unless it exists), on either engine: the tail state its
/// row keeps when that is current, else the grammar's walk over the rows of its open block
/// ([`walk_open_block`]; a session written before V14, or changed by other code; an append
/// writes the state back). Both are the walk's decision: the state is the
/// [`Walk::resume_point`] of the walk that checked the last append.
///
/// The state is current when its last seq is the session's (a message appended by anyone
/// changes that) and no part went into the session's open block since it was written
/// (changed or deleted rows clear it: SQLite's triggers, PostgreSQL's own statements of the
/// store, which has no trigger there). That second fact is read cheaply: on SQLite, no part
/// was inserted since (the database's largest part id is still the one the state names),
/// else the block's parts are counted; on PostgreSQL, the session's largest part id and its
/// block's part count, read in the same statement as the state, both match it
/// ([`TailRow::parts_max`], [`TailRow::block_parts`]).
pub(crate) fn stored_tail(db: &mut impl Sql, session: &SessionId) -> Result<Position> {
    let row = db
        .tail_row(session, false)?
        .ok_or_else(|| Error::UnknownSession(session.clone()))?;
    position_of(db, session, row)
}

/// [`stored_tail`] from the session's [`TailRow`], read already.
fn position_of(db: &mut impl Sql, session: &SessionId, row: TailRow) -> Result<Position> {
    let TailRow {
        state,
        last_seq,
        parts_max,
        block_parts: row_block_parts,
        ..
    } = row;
    let decoded = state.as_deref().and_then(TailState::decode);
    // A stale state still names its run: only additions made it stale (whatever removes or
    // rewrites a call clears it), so the run goes on past the rows read below.
    let epoch = decoded
        .as_ref()
        .map(|tail| tail.epoch)
        .filter(|epoch| *epoch != 0)
        .unwrap_or_else(new_epoch);
    let tail = decoded.filter(|tail| tail.last_seq == last_seq);
    if let Some(tail) = tail {
        let current = match (parts_max, row_block_parts) {
            (Some(max), Some(count)) => tail.parts_through == max && tail.block_parts == count,
            (Some(max), None) => {
                tail.parts_through == max || tail.block_parts == block_parts(db, session)?
            }
            (None, _) => true,
        };
        if current {
            return Ok(Position {
                parts_max: parts_max.unwrap_or(0),
                ..Position::stored(tail)
            });
        }
    }
    let (resume, block_parts) = walk_open_block(db, session, last_seq)?;
    Ok(Position {
        resume,
        last_seq,
        last_user_turn: db.optional_int(LAST_USER_TURN, &values![session.as_str()])?,
        block_parts,
        parts_max: parts_max.unwrap_or(0),
        from_stored_state: false,
        block_after: None,
        unproved: false,
        version: None,
        epoch,
    })
}

/// The number of parts in the session's open block (see [`BLOCK_PARTS`]).
fn block_parts(db: &mut impl Sql, session: &SessionId) -> Result<i64> {
    Ok(db
        .optional_int(BLOCK_PARTS, &values![session.as_str()])?
        .unwrap_or(0))
}

const LAST_USER_TURN: &str =
    "SELECT turn_index FROM messages WHERE session_id = ?1 AND role = 'user' ORDER BY seq DESC LIMIT 1";
const LAST_SPEAKER_SEQ: &str = "
    SELECT seq FROM messages
    WHERE session_id = ?1 AND role IN ('user', 'assistant')
    ORDER BY seq DESC LIMIT 1";

/// Where a walk of the session resumes, read by the walk itself: the session's open block
/// (the messages from its last user or assistant message on, every message when there is
/// none) loaded through the one row decoder and fed to a [`Walk`], whose
/// [`Walk::resume_point`] is the end of the whole session (nothing before the block decides
/// what is pending or what may come next), with the block's part count. `last_seq` is the
/// session's last seq (what the resumed walk counts as walked).
fn walk_open_block(db: &mut impl Sql, session: &SessionId, last_seq: i64) -> Result<(Resume, i64)> {
    let from = db
        .optional_int(LAST_SPEAKER_SEQ, &values![session.as_str()])?
        .unwrap_or(i64::MIN);
    let block = db.load_messages(session, Range::Seqs(from, i64::MAX))?;
    let mut walk = Walk::default();
    for message in &block {
        walk.feed(message.role, &message.parts);
    }
    let parts: usize = block.iter().map(|m| m.parts.len()).sum();
    let resume = Resume {
        messages: usize::try_from(last_seq).unwrap_or_default(),
        ..walk.resume_point()
    };
    Ok((resume, i64::try_from(parts).unwrap_or(i64::MAX)))
}

/// The non-NULL texts of a query's first column.
fn texts(db: &mut impl Sql, sql: &str, params: &[Value<'_>]) -> Result<Vec<String>> {
    let mut found = Vec::new();
    db.each_row(sql, params, &mut |r| {
        found.extend(text_at(r, 0)?);
        Ok(())
    })?;
    Ok(found)
}

/// Which of the call ids `?2` to `?33` the session uses, on PostgreSQL (SQLite's write
/// connection keeps the ids, [`sqlite_calls_used`]): the parts' own index, no join.
const TOOL_USE_IDS_TAKEN: &str = "
    SELECT DISTINCT p.tool_use_id FROM parts p
    WHERE p.session_id = ?1 AND p.tool_use_id IN (?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
        ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31, ?32, ?33)
      AND p.kind = 'tool_use'";

/// How many ids [`TOOL_USE_IDS_TAKEN`] asks about at once (the unused ones bound to NULL,
/// which matches nothing), so that a batch of many calls (an import) costs one statement per
/// this many, and the statement's text stays one.
const IDS_AT_ONCE: usize = 32;

/// Which of `calls` the session already uses, in their order, asked of the rows in groups
/// of [`IDS_AT_ONCE`] where the engine keeps no call ids ([`Sql::calls_used`]).
fn used_tool_use_ids(
    db: &mut impl Sql,
    session: &SessionId,
    calls: &[&str],
) -> Result<Vec<String>> {
    let mut taken = std::collections::HashSet::new();
    for group in calls.chunks(IDS_AT_ONCE) {
        let mut params = [Value::Text(None); IDS_AT_ONCE + 1];
        params[0] = Value::from(session.as_str());
        for (param, id) in params[1..].iter_mut().zip(group) {
            *param = Value::from(*id);
        }
        taken.extend(texts(db, TOOL_USE_IDS_TAKEN, &params)?);
    }
    Ok(calls
        .iter()
        .filter(|id| taken.contains(**id))
        .map(|id| (*id).to_owned())
        .collect())
}

const FORGET_REVERTS: &str = "DELETE FROM reverts WHERE session_id = ?1";

/// Deletes for good what earlier reverts of the session set aside; the write path calls it
/// on every append, which ends the chance to undo them.
/// On either engine.
pub(crate) fn forget_reverts(db: &mut impl Sql, session: &SessionId) -> Result<()> {
    db.run(FORGET_REVERTS, &values![session.as_str()])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plan of `sql` on the migrated schema: each step an index search, nothing
    /// scanned nor sorted, and the parts read from `parts_calls` alone.
    fn searched_by_keys(sql: &str) -> Vec<String> {
        let mut conn = Connection::open_in_memory().expect("open");
        crate::store::schema::migrate(&mut conn).expect("migrate");
        let steps = crate::store::sql::sqlite_plan(&conn, sql);
        assert!(
            steps
                .iter()
                .all(|step| step.starts_with("SEARCH") && !step.contains("TEMP B-TREE")),
            "{sql}: {steps:?}"
        );
        assert!(
            steps
                .iter()
                .any(|step| step.contains("USING COVERING INDEX parts_calls")),
            "{sql}: {steps:?}"
        );
        steps
    }

    /// The catch-up of the call ids an SQLite write connection keeps reads the session's
    /// messages from a seq on by their key and each one's calls from `parts_calls`, no part's
    /// row: reading every part of the session (or of the database) on an append would be
    /// quadratic in its length.
    #[test]
    fn the_catch_up_of_kept_call_ids_reads_the_calls_index_by_message() {
        let steps = searched_by_keys(SESSION_CALLS_FROM);
        assert!(
            steps[0].contains("messages") && steps[0].contains("session_id=? AND seq>?"),
            "{steps:?}"
        );
    }

    /// The tail statement of every append is index searches only.
    #[test]
    fn the_tail_statement_reads_by_keys() {
        let mut conn = Connection::open_in_memory().expect("open");
        crate::store::schema::migrate(&mut conn).expect("migrate");
        let steps = crate::store::sql::sqlite_plan(&conn, TAIL_ROW);
        assert!(
            steps
                .iter()
                .all(|step| !step.contains("SCAN ") || step.contains("CONSTANT ROW")),
            "{steps:?}"
        );
        assert!(
            steps.iter().any(|step| step.contains("messages_open")),
            "{steps:?}"
        );
    }
}
