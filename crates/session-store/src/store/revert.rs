//! Revert: take a turn and everything after it out of the live history, undoably until the
//! next append.
//!
//! A revert is addressed by turn, never by message or timestamp, so it always lands on a turn
//! start and never leaves a tool_use without its result. The reverted rows move to the
//! `reverted_messages` / `reverted_parts` side tables (migration V2) under one `reverts` row,
//! so `messages` stays exactly the live history and the contract's invariants keep holding
//! for every reader. Reverts stack: [`Store::undo_revert`] restores the latest one. The next
//! append to the session forgets them all (`write::forget_reverts`, called from the write path).
//!
//! The messages' `usage` rows move with them (`reverted_usage`, migration V8). Their
//! search-index entries need no copy: deleting the live parts drops them (the index triggers
//! fire on the cascade) and an undo's insert adds them again, so only live rows are found.

use serde::{Deserialize, Serialize};

use super::handle::Store;
use super::sql::{keyed, values, Sql};
use super::time::{format_time, now};
use super::write::forget_reverts;
use crate::error::{Error, Result};
use crate::model::{Appended, Message, NewMessage, Part, SessionId};

/// What a revert (or its undo) moved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reverted {
    /// The turn asked for: it and every later turn left (or, on undo, came back to) the live
    /// history.
    pub from_turn: i64,
    /// How many messages moved; 0 when the turn was past the end of the session.
    pub messages: usize,
    /// How many summaries moved with them (those that covered a reverted turn).
    pub summaries: usize,
}

const FIRST_SEQ_OF_TURN: &str =
    "SELECT MIN(seq) FROM messages WHERE session_id = ?1 AND turn_index >= ?2";

const INSERT_REVERT: &str =
    "INSERT INTO reverts (session_id, from_turn, from_seq, created_at) VALUES (?1, ?2, ?3, ?4)";

const MOVE_MESSAGES_OUT: &str = "
    INSERT INTO reverted_messages
        (revert_id, original_id, session_id, seq, turn_index, role, compacted, created_at, model,
         state, writer)
    SELECT ?3, id, session_id, seq, turn_index, role, compacted, created_at, model, state, writer
    FROM messages WHERE session_id = ?1 AND seq >= ?2 ORDER BY seq";

/// Binds ?1 the session, ?2 the revert, as every statement of a revert's rows below (SQLite
/// leaves ?1 unbound where its rows name no session: a numbered placeholder may go unused).
const MOVE_PARTS_OUT: &str = "
    INSERT INTO reverted_parts
        (reverted_message_id, ordinal, kind, text, tool_use_id, tool_name, input, is_error, provider_metadata)
    SELECT r.id, p.ordinal, p.kind, p.text, p.tool_use_id, p.tool_name, p.input, p.is_error, p.provider_metadata
    FROM reverted_messages r JOIN parts p ON p.message_id = r.original_id
    WHERE r.revert_id = ?2";

/// [`MOVE_PARTS_OUT`] where rows carry their session ([`Sql::rows_carry_session`]).
const MOVE_PARTS_OUT_KEYED: &str = "
    INSERT INTO reverted_parts
        (session_id, reverted_message_id, ordinal, kind, text, tool_use_id, tool_name, input, is_error, provider_metadata)
    SELECT r.session_id, r.id, p.ordinal, p.kind, p.text, p.tool_use_id, p.tool_name, p.input, p.is_error, p.provider_metadata
    FROM reverted_messages r JOIN parts p ON p.session_id = r.session_id AND p.message_id = r.original_id
    WHERE r.session_id = ?1 AND r.revert_id = ?2";

/// Usage rows would go with their messages (ON DELETE CASCADE): they move aside too.
const MOVE_USAGE_OUT: &str = "
    INSERT INTO reverted_usage
        (reverted_message_id, model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)
    SELECT r.id, u.model, u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens
    FROM reverted_messages r JOIN usage u ON u.message_id = r.original_id
    WHERE r.revert_id = ?2";

/// [`MOVE_USAGE_OUT`] where rows carry their session.
const MOVE_USAGE_OUT_KEYED: &str = "
    INSERT INTO reverted_usage
        (session_id, reverted_message_id, model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)
    SELECT r.session_id, r.id, u.model, u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens
    FROM reverted_messages r JOIN usage u ON u.session_id = r.session_id AND u.message_id = r.original_id
    WHERE r.session_id = ?1 AND r.revert_id = ?2";

/// Parts go with their messages (ON DELETE CASCADE).
const DELETE_LIVE: &str = "DELETE FROM messages WHERE session_id = ?1 AND seq >= ?2";

const SET_ASIDE_SUMMARIES: &str = "
    UPDATE summaries SET reverted_by = ?3
    WHERE session_id = ?1 AND reverted_by IS NULL AND last_turn >= ?2";

/// The last turn of the live compacted head, and the last turn the latest live summary covers.
const COMPACTED_HEAD: &str =
    "SELECT MAX(turn_index) FROM messages WHERE session_id = ?1 AND compacted = 1";

const LATEST_COVER: &str = "
    SELECT last_turn FROM summaries WHERE session_id = ?1 AND reverted_by IS NULL
    ORDER BY id DESC LIMIT 1";

const LATEST_REVERT: &str =
    "SELECT id, from_turn FROM reverts WHERE session_id = ?1 ORDER BY id DESC LIMIT 1";

/// A live message of the session at or after the first seq the revert set aside.
const GROWN_SINCE_REVERT: &str = "
    SELECT 1 FROM messages
    WHERE session_id = ?1
      AND seq >= (SELECT MIN(seq) FROM reverted_messages WHERE session_id = ?1 AND revert_id = ?2)
    LIMIT 1";

/// Keeps the original id unless another message took it meanwhile (ids are rowids and may be
/// reused once the rows with the largest ids are gone).
const MOVE_MESSAGES_BACK: &str = "
    INSERT INTO messages (id, session_id, seq, turn_index, role, compacted, created_at, model,
        state, writer)
    SELECT r.original_id, r.session_id, r.seq, r.turn_index, r.role, r.compacted, r.created_at, r.model,
        r.state, r.writer
    FROM reverted_messages r
    WHERE r.session_id = ?1 AND r.revert_id = ?2
      AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = r.original_id)
    ORDER BY r.seq";

/// [`MOVE_MESSAGES_BACK`] where rows carry their session (PostgreSQL): the probe of the old
/// id stays in the session's shard. Ids there come from a sequence, never handed out twice,
/// so no other session's row holds it; the key is `(session_id, id)`.
const MOVE_MESSAGES_BACK_KEYED: &str = "
    INSERT INTO messages (id, session_id, seq, turn_index, role, compacted, created_at, model,
        state, writer)
    SELECT r.original_id, r.session_id, r.seq, r.turn_index, r.role, r.compacted, r.created_at, r.model,
        r.state, r.writer
    FROM reverted_messages r
    WHERE r.session_id = ?1 AND r.revert_id = ?2
      AND NOT EXISTS (SELECT 1 FROM messages m
                      WHERE m.session_id = r.session_id AND m.id = r.original_id)
    ORDER BY r.seq";

/// Then the messages whose old id another row took meanwhile (those not back yet) come back
/// under a new one.
const MOVE_MESSAGES_BACK_RENUMBERED: &str = "
    INSERT INTO messages (session_id, seq, turn_index, role, compacted, created_at, model,
        state, writer)
    SELECT r.session_id, r.seq, r.turn_index, r.role, r.compacted, r.created_at, r.model,
        r.state, r.writer
    FROM reverted_messages r
    WHERE r.session_id = ?1 AND r.revert_id = ?2
      AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.session_id = r.session_id AND m.seq = r.seq)
    ORDER BY r.seq";

/// Matched on `(session_id, seq)`, which is unique, since a message id may have changed.
const MOVE_PARTS_BACK: &str = "
    INSERT INTO parts
        (message_id, ordinal, kind, text, tool_use_id, tool_name, input, is_error, provider_metadata)
    SELECT m.id, p.ordinal, p.kind, p.text, p.tool_use_id, p.tool_name, p.input, p.is_error, p.provider_metadata
    FROM reverted_parts p
    JOIN reverted_messages r ON r.id = p.reverted_message_id
    JOIN messages m ON m.session_id = r.session_id AND m.seq = r.seq
    WHERE r.revert_id = ?2 ORDER BY r.seq, p.ordinal";

/// [`MOVE_PARTS_BACK`] where rows carry their session.
const MOVE_PARTS_BACK_KEYED: &str = "
    INSERT INTO parts
        (session_id, message_id, ordinal, kind, text, tool_use_id, tool_name, input, is_error, provider_metadata)
    SELECT m.session_id, m.id, p.ordinal, p.kind, p.text, p.tool_use_id, p.tool_name, p.input, p.is_error, p.provider_metadata
    FROM reverted_parts p
    JOIN reverted_messages r ON r.session_id = p.session_id AND r.id = p.reverted_message_id
    JOIN messages m ON m.session_id = r.session_id AND m.seq = r.seq
    WHERE p.session_id = ?1 AND r.revert_id = ?2 ORDER BY r.seq, p.ordinal";

/// Matched on `(session_id, seq)`, like the parts.
const MOVE_USAGE_BACK: &str = "
    INSERT INTO usage
        (message_id, model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)
    SELECT m.id, u.model, u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens
    FROM reverted_usage u
    JOIN reverted_messages r ON r.id = u.reverted_message_id
    JOIN messages m ON m.session_id = r.session_id AND m.seq = r.seq
    WHERE r.revert_id = ?2 ORDER BY r.seq";

/// [`MOVE_USAGE_BACK`] where rows carry their session.
const MOVE_USAGE_BACK_KEYED: &str = "
    INSERT INTO usage
        (session_id, message_id, model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)
    SELECT m.session_id, m.id, u.model, u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens
    FROM reverted_usage u
    JOIN reverted_messages r ON r.session_id = u.session_id AND r.id = u.reverted_message_id
    JOIN messages m ON m.session_id = r.session_id AND m.seq = r.seq
    WHERE u.session_id = ?1 AND r.revert_id = ?2 ORDER BY r.seq";

const RESTORE_SUMMARIES: &str =
    "UPDATE summaries SET reverted_by = NULL WHERE session_id = ?1 AND reverted_by = ?2";

/// Deleting the `reverts` row takes its reverted_* rows (and its set-aside summaries) along.
const DELETE_REVERT: &str = "DELETE FROM reverts WHERE session_id = ?1 AND id = ?2";

/// Also clears the session's tail state: the append trusts a kept state to mean that no
/// revert waits for an undo (`write::Position::from_stored_state`), whatever triggers the
/// moved rows fire.
const TOUCH_SESSION: &str = "UPDATE sessions SET updated_at = ?2, tail_state = NULL WHERE id = ?1";

impl Store {
    /// Takes turn `turn` and every later turn out of the live history, in one transaction.
    ///
    /// The messages move aside and [`Store::undo_revert`] can bring them back until the next
    /// append to the session, which deletes them for good. Turn 0 (or any turn at or below
    /// 0) reverts the whole session; a turn past the end reverts nothing (`messages == 0`)
    /// and leaves nothing to undo.
    ///
    /// A revert may reach into the compacted head only where a compaction ended: the summaries
    /// that covered reverted turns move aside with them, and the latest remaining summary must
    /// still cover every remaining compacted turn. Otherwise the live head would be hidden
    /// behind a summary of turns that are gone, and the revert is refused with
    /// [`Error::RevertSplitsCompaction`].
    pub fn revert_to_turn(&self, session: &SessionId, turn: i64) -> Result<Reverted> {
        self.write(|tx| revert_in(tx, session, turn))
    }

    /// Brings back what the latest revert of the session took out, in one transaction.
    ///
    /// Returns `None` when there is nothing to undo: no revert, or an append since (which
    /// deleted the reverted messages for good; rows other code wrote with SQL after the
    /// revert count as one, and the store's next append deletes them). Call it again to undo
    /// the revert before.
    pub fn undo_revert(&self, session: &SessionId) -> Result<Option<Reverted>> {
        self.write(|tx| undo_in(tx, session))
    }
}

impl Store {
    /// Replaces turn `turn` and every later turn with `messages`, in one transaction: what
    /// [`Store::revert_to_turn`] followed by [`Store::append_batch`] would do, except that
    /// nothing is written unless both succeed (a refused message leaves the session as it
    /// was), and nothing is left to undo. With no `messages` the turns are deleted.
    ///
    /// For writers that keep a session as a mirror of another record (the Python adapters):
    /// when the record's end is read differently as it grows, the mirror's end is rewritten.
    pub fn replace_from_turn(
        &self,
        session: &SessionId,
        turn: i64,
        messages: Vec<NewMessage>,
    ) -> Result<Vec<Appended>> {
        self.write(|db| replace_in(db, session, turn, &messages))
    }
}

impl Store {
    /// Removes the session's latest part that `matches`, the parts after it in its message
    /// and every later message, in one write transaction, and returns that part; `None`
    /// (nothing written) when no part matches. The turns from that message's on are
    /// rewritten as [`Store::replace_from_turn`] rewrites them (a message left without parts
    /// goes).
    ///
    /// For adapters whose protocol pops the latest item (the OpenAI Agents SDK's
    /// `Session.pop_item`): the read and the rewrite hold the session's write lock together,
    /// so two poppers never get the same part and none is lost between them.
    pub fn pop_part(
        &self,
        session: &SessionId,
        matches: impl Fn(&Part) -> bool,
    ) -> Result<Option<Part>> {
        self.write(|db| pop_part_in(db, session, &matches))
    }
}

/// [`Store::pop_part`] in the caller's write transaction, on either engine: the last turn is
/// searched first, then twice as many, up to the whole session.
fn pop_part_in(
    db: &mut impl Sql,
    session: &SessionId,
    matches: &dyn Fn(&Part) -> bool,
) -> Result<Option<Part>> {
    db.lock_session(session)?;
    let mut turns = 1usize;
    let (mut tail, message, part) = loop {
        let tail = super::turns::last_turns_in(db, session, turns)?;
        if let Some((message, part)) = latest_match(&tail, matches) {
            break (tail, message, part);
        }
        if tail.is_empty()
            || super::turns::distinct_turns(&tail) < i64::try_from(turns).unwrap_or(i64::MAX)
        {
            return Ok(None);
        }
        turns = turns.saturating_mul(2);
    };
    tail.truncate(message + 1);
    let Some(last) = tail.last_mut() else {
        return Ok(None);
    };
    let turn = last.turn_index;
    let Some(popped) = last.parts.drain(part..).next() else {
        return Ok(None);
    };
    let kept: Vec<NewMessage> = tail
        .into_iter()
        .filter(|m| m.turn_index >= turn && !m.parts.is_empty())
        .map(|m| {
            let mut new = NewMessage::new(m.role, m.parts).at(m.created_at);
            new.model = m.model;
            new
        })
        .collect();
    replace_in(db, session, turn, &kept)?;
    Ok(Some(popped))
}

/// Where the latest part of `messages` that `matches` is: (message index, part index).
fn latest_match(messages: &[Message], matches: &dyn Fn(&Part) -> bool) -> Option<(usize, usize)> {
    messages
        .iter()
        .enumerate()
        .rev()
        .find_map(|(index, message)| {
            let part = message.parts.iter().rposition(matches)?;
            Some((index, part))
        })
}

/// [`Store::replace_from_turn`] in the caller's write transaction, on either engine.
fn replace_in(
    db: &mut impl Sql,
    session: &SessionId,
    turn: i64,
    messages: &[NewMessage],
) -> Result<Vec<Appended>> {
    revert_in(db, session, turn)?;
    if messages.is_empty() {
        forget_reverts(db, session)?;
        return Ok(Vec::new());
    }
    super::write::append_in(db, session, messages)
}

/// [`Store::revert_to_turn`] in the caller's write transaction, on either engine.
fn revert_in(db: &mut impl Sql, session: &SessionId, turn: i64) -> Result<Reverted> {
    db.lock_session(session)?;
    let Some(from_seq) = db.optional_int(FIRST_SEQ_OF_TURN, &values![session.as_str(), turn])?
    else {
        return Ok(Reverted {
            from_turn: turn,
            messages: 0,
            summaries: 0,
        });
    };
    let now = format_time(now());
    let revert_id = db.insert(
        INSERT_REVERT,
        &values![session.as_str(), turn, from_seq, now.as_str()],
    )?;
    let messages = db.run(
        MOVE_MESSAGES_OUT,
        &values![session.as_str(), from_seq, revert_id],
    )?;
    let of_revert = values![session.as_str(), revert_id];
    db.run(keyed(db, MOVE_PARTS_OUT, MOVE_PARTS_OUT_KEYED), &of_revert)?;
    db.run(keyed(db, MOVE_USAGE_OUT, MOVE_USAGE_OUT_KEYED), &of_revert)?;
    db.run(DELETE_LIVE, &values![session.as_str(), from_seq])?;
    let summaries = db.run(
        SET_ASIDE_SUMMARIES,
        &values![session.as_str(), turn, revert_id],
    )?;
    let moved_compacted = db.optional_int(MOVED_COMPACTED, &of_revert)?.is_some();
    if summaries > 0 || moved_compacted {
        require_covered_head(db, session, turn)?;
    }
    db.run(TOUCH_SESSION, &values![session.as_str(), now.as_str()])?;
    // The deleted messages leave the count (no trigger counts them on PostgreSQL).
    super::write::recount_messages(db, session)?;
    Ok(Reverted {
        from_turn: turn,
        messages: count(messages),
        summaries: count(summaries),
    })
}

/// [`Store::undo_revert`] in the caller's write transaction, on either engine.
fn undo_in(db: &mut impl Sql, session: &SessionId) -> Result<Option<Reverted>> {
    db.lock_session(session)?;
    let Some([revert_id, from_turn]) = db
        .int_rows(LATEST_REVERT, &values![session.as_str()])?
        .into_iter()
        .next()
    else {
        return Ok(None);
    };
    let of_revert = values![session.as_str(), revert_id];
    // Messages written since by other code (SQL on the schema, which does not forget the
    // reverts as the store's appends do) hold the seqs the undo would put back: an append
    // since, and nothing to undo.
    if db.optional_int(GROWN_SINCE_REVERT, &of_revert)?.is_some() {
        return Ok(None);
    }
    let messages = db.run(
        keyed(db, MOVE_MESSAGES_BACK, MOVE_MESSAGES_BACK_KEYED),
        &of_revert,
    )? + db.run(MOVE_MESSAGES_BACK_RENUMBERED, &of_revert)?;
    db.run(
        keyed(db, MOVE_PARTS_BACK, MOVE_PARTS_BACK_KEYED),
        &of_revert,
    )?;
    db.run(
        keyed(db, MOVE_USAGE_BACK, MOVE_USAGE_BACK_KEYED),
        &of_revert,
    )?;
    let summaries = db.run(RESTORE_SUMMARIES, &of_revert)?;
    db.run(DELETE_REVERT, &of_revert)?;
    let now = format_time(now());
    db.run(TOUCH_SESSION, &values![session.as_str(), now.as_str()])?;
    super::write::recount_messages(db, session)?;
    Ok(Some(Reverted {
        from_turn,
        messages: count(messages),
        summaries: count(summaries),
    }))
}

fn count(rows: u64) -> usize {
    usize::try_from(rows).unwrap_or(usize::MAX)
}

const MOVED_COMPACTED: &str = "
    SELECT 1 FROM reverted_messages WHERE session_id = ?1 AND revert_id = ?2 AND compacted = 1
    LIMIT 1";

/// Refuses a revert that leaves compacted turns no live summary covers.
fn require_covered_head(db: &mut impl Sql, session: &SessionId, turn: i64) -> Result<()> {
    let head = db.optional_int(COMPACTED_HEAD, &values![session.as_str()])?;
    let cover = db.optional_int(LATEST_COVER, &values![session.as_str()])?;
    match (head, cover) {
        (Some(head), cover) if cover.is_none_or(|cover| cover < head) => {
            Err(Error::RevertSplitsCompaction {
                session: session.clone(),
                turn,
                summarised_through: cover,
            })
        }
        _ => Ok(()),
    }
}
