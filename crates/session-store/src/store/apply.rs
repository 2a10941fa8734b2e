//! Applying a mend plan: the rows `store-repair` changes, and the repair log.
//!
//! [`crate::history::mend`] decides what the session should be; this module writes it in
//! the caller's transaction, in three steps: messages (seq, turn, role, compacted, new
//! ones), parts (moves and new ones, renumbered), then part contents with one log row per
//! change. Compaction summaries follow the messages they cover. One copy for both engines
//! ([`Sql`]).

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::encode::insert_part;
use serde::Serialize;
use serde_json::Value;

use super::rows::Loaded;
use super::sql::{keyed, values, Sql};
use super::time::format_time;
use crate::error::Result;
use crate::history::mend::{summary_moves, Action, MendPlan, MessageRef, PartRef};
use crate::history::rules::HealthRule;
use crate::model::{Message, Part, SessionId};

/// One row of the repair log, as written.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LoggedChange {
    /// The rule the change mends.
    pub rule: HealthRule,
    /// What it did (`uncompact`, `tombstone`, `result_to_text`, ...).
    pub action: &'static str,
    /// `messages.id` of the message changed or added.
    pub message_id: i64,
    /// That message's `seq` once the change is made, where the change names a message: with
    /// the session, the message's address within it (which a store sharded by session
    /// reaches on one shard; `message_id` and `part_id` name no session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<i64>,
    /// `parts.id` of the part changed or added, if any.
    pub part_id: Option<i64>,
    /// The values before, as JSON.
    pub before: Option<Value>,
    /// The values after, as JSON.
    pub after: Value,
}

/// Temporary `seq` / `ordinal` values while rows are renumbered: `UNIQUE(session_id, seq)`
/// and `UNIQUE(message_id, ordinal)` hold after every statement, so rows move in two steps.
const PARKED: i64 = -(1 << 40);

/// The session is `?1` of every statement below: each names the row it writes by the
/// session's key, `(session_id, id)`, which routes it to the session's shard where tables
/// are distributed by session (`migrations-postgres/V18`).
const PARK_MESSAGE: &str = "UPDATE messages SET seq = ?3 WHERE session_id = ?1 AND id = ?2";
const INSERT_MESSAGE: &str = "
    INSERT INTO messages (session_id, seq, turn_index, role, compacted, created_at)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
const UPDATE_MESSAGE: &str = "
    UPDATE messages SET seq = ?3, turn_index = ?4, role = ?5, compacted = ?6
    WHERE session_id = ?1 AND id = ?2";

/// An update of one part by its row id, `?2` (`?1` the session), with `set`: SQLite's parts
/// name their message only ([`Sql::rows_carry_session`]), the other engine's are keyed by
/// their session too. Pick one with [`by_part`].
macro_rules! part_update {
    ($name:ident, $set:literal) => {
        const $name: [&str; 2] = [
            concat!("UPDATE parts SET ", $set, " WHERE id = ?2"),
            concat!(
                "UPDATE parts SET ",
                $set,
                " WHERE session_id = ?1 AND id = ?2"
            ),
        ];
    };
}
part_update!(PARK_PART, "message_id = ?3, ordinal = ?4");
part_update!(PLACE_PART, "ordinal = ?3");
part_update!(
    RESULT_TO_TEXT,
    "kind = 'text', text = ?3, tool_use_id = NULL, is_error = 0"
);
part_update!(
    USE_TO_TEXT,
    "kind = 'text', text = ?3, tool_use_id = NULL, tool_name = NULL, input = NULL"
);
part_update!(RENAME_TOOL_USE_ID, "tool_use_id = ?3");

/// The engine's statement of a [`part_update`].
fn by_part<'s>(db: &impl Sql, statement: &[&'s str; 2]) -> &'s str {
    keyed(db, statement[0], statement[1])
}

/// One `repair_log` row; also written by `orphans.rs`.
pub(crate) const INSERT_LOG: &str = "
    INSERT INTO repair_log (session_id, rule, action, message_id, part_id, before_json, after_json, repaired_at)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";
/// A mend rewrites the session's rows: the tail state the row kept is read again.
const TOUCH_SESSION: &str = "UPDATE sessions SET updated_at = ?2, tail_state = NULL WHERE id = ?1";

/// Writes the plan over the loaded session; the caller owns the transaction.
pub(crate) fn apply(
    db: &mut impl Sql,
    session: &SessionId,
    loaded: &Loaded,
    plan: &MendPlan,
    now: DateTime<Utc>,
) -> Result<Vec<LoggedChange>> {
    let stamp = format_time(now);
    let original: HashMap<i64, &Message> = loaded.messages.iter().map(|m| (m.id, m)).collect();
    let mut part_rows: HashMap<PartRef, i64> = HashMap::new();
    for (message, ids) in loaded.messages.iter().zip(&loaded.part_ids) {
        for (index, id) in ids.iter().enumerate() {
            part_rows.insert(
                PartRef::Existing {
                    message_id: message.id,
                    index,
                },
                *id,
            );
        }
    }
    let message_rows = apply_messages(db, session, &original, plan)?;
    let final_parts = apply_parts(db, session, &original, plan, &message_rows, &mut part_rows)?;
    let mut logged = apply_changes(
        db,
        session,
        plan,
        &message_rows,
        &part_rows,
        &final_parts,
        &stamp,
    )?;
    logged.extend(follow_summaries(db, session, loaded, plan, &stamp)?);
    db.run(TOUCH_SESSION, &values![session.as_str(), stamp.as_str()])?;
    super::write::recount_messages(db, session)?;
    Ok(logged)
}

/// Messages: parks those whose seq changes, inserts the new ones, then sets the final values.
/// Returns the row id of every planned message.
fn apply_messages(
    db: &mut impl Sql,
    session: &SessionId,
    original: &HashMap<i64, &Message>,
    plan: &MendPlan,
) -> Result<HashMap<MessageRef, i64>> {
    for planned in &plan.messages {
        if let MessageRef::Existing(id) = planned.origin {
            if original.get(&id).is_some_and(|m| m.seq != planned.seq) {
                db.run(PARK_MESSAGE, &values![session.as_str(), id, PARKED - id])?;
            }
        }
    }
    let mut message_rows: HashMap<MessageRef, i64> = HashMap::new();
    for planned in &plan.messages {
        match planned.origin {
            MessageRef::New(_) => {
                let created_at = format_time(planned.created_at);
                let id = db.insert(
                    INSERT_MESSAGE,
                    &values![
                        session.as_str(),
                        planned.seq,
                        planned.turn_index,
                        planned.role.as_str(),
                        planned.compacted,
                        created_at.as_str(),
                    ],
                )?;
                message_rows.insert(planned.origin, id);
            }
            MessageRef::Existing(id) => {
                message_rows.insert(planned.origin, id);
                let Some(before) = original.get(&id) else {
                    continue;
                };
                if before.seq != planned.seq
                    || before.turn_index != planned.turn_index
                    || before.role != planned.role
                    || before.compacted != planned.compacted
                {
                    db.run(
                        UPDATE_MESSAGE,
                        &values![
                            session.as_str(),
                            id,
                            planned.seq,
                            planned.turn_index,
                            planned.role.as_str(),
                            planned.compacted,
                        ],
                    )?;
                }
            }
        }
    }

    Ok(message_rows)
}

/// Parts: a message whose part list changed gets its parts renumbered 0... Every moving
/// part is parked before any is placed, since a part may leave the message another part
/// moves into. Returns the final content of every planned part.
fn apply_parts<'p>(
    db: &mut impl Sql,
    session: &SessionId,
    original: &HashMap<i64, &Message>,
    plan: &'p MendPlan,
    message_rows: &HashMap<MessageRef, i64>,
    part_rows: &mut HashMap<PartRef, i64>,
) -> Result<HashMap<PartRef, &'p Part>> {
    let mut final_parts: HashMap<PartRef, &Part> = HashMap::new();
    let mut renumbered = Vec::new();
    for planned in &plan.messages {
        for part in &planned.parts {
            final_parts.insert(part.origin, &part.part);
        }
        let unchanged = match planned.origin {
            MessageRef::Existing(id) => {
                original.get(&id).map(|m| m.parts.len()) == Some(planned.parts.len())
                    && planned.parts.iter().enumerate().all(|(index, p)| {
                        p.origin
                            == PartRef::Existing {
                                message_id: id,
                                index,
                            }
                    })
            }
            MessageRef::New(_) => false,
        };
        if unchanged {
            continue;
        }
        let row = message_rows[&planned.origin];
        for part in &planned.parts {
            if let Some(&id) = part_rows.get(&part.origin) {
                db.run(
                    by_part(db, &PARK_PART),
                    &values![session.as_str(), id, row, PARKED - id],
                )?;
            }
        }
        renumbered.push((row, planned));
    }
    for (row, planned) in renumbered {
        for (ordinal, part) in planned.parts.iter().enumerate() {
            match part_rows.get(&part.origin) {
                Some(&id) => {
                    db.run(
                        by_part(db, &PLACE_PART),
                        &values![session.as_str(), id, ordinal as i64],
                    )?;
                }
                None => {
                    let id = insert_part(db, session, row, ordinal as i64, &part.part)?;
                    part_rows.insert(part.origin, id);
                }
            }
        }
    }

    Ok(final_parts)
}

/// Writes one `repair_log` row for `change`, made at `stamp`: what every mend and every
/// settle of an open message records.
pub(crate) fn log_change(
    db: &mut impl Sql,
    session: &SessionId,
    change: &LoggedChange,
    stamp: &str,
) -> Result<()> {
    let before = change
        .before
        .as_ref()
        .map(serde_json::to_string)
        .transpose()?;
    let after = serde_json::to_string(&change.after)?;
    db.run(
        INSERT_LOG,
        &values![
            session.as_str(),
            change.rule.as_str(),
            change.action,
            change.message_id,
            change.part_id,
            before.as_deref(),
            after.as_str(),
            stamp,
        ],
    )?;
    Ok(())
}

/// Part contents, and one log row per change.
fn apply_changes(
    db: &mut impl Sql,
    session: &SessionId,
    plan: &MendPlan,
    message_rows: &HashMap<MessageRef, i64>,
    part_rows: &HashMap<PartRef, i64>,
    final_parts: &HashMap<PartRef, &Part>,
    stamp: &str,
) -> Result<Vec<LoggedChange>> {
    let mut logged = Vec::with_capacity(plan.changes.len());
    let mut rewritten = Vec::new();
    for change in &plan.changes {
        let part_id = change.part.and_then(|p| part_rows.get(&p).copied());
        let content = change.part.and_then(|p| final_parts.get(&p).copied());
        match (change.action, part_id, content) {
            (Action::ResultToText, Some(id), Some(Part::Text { text, .. })) => {
                db.run(
                    by_part(db, &RESULT_TO_TEXT),
                    &values![session.as_str(), id, text],
                )?;
                rewritten.push(id);
            }
            (Action::UseToText, Some(id), Some(Part::Text { text, .. })) => {
                db.run(
                    by_part(db, &USE_TO_TEXT),
                    &values![session.as_str(), id, text],
                )?;
                rewritten.push(id);
            }
            (Action::RenameToolUseId, Some(id), Some(part)) => {
                let new_id = part.tool_use_id();
                db.run(
                    by_part(db, &RENAME_TOOL_USE_ID),
                    &values![session.as_str(), id, new_id],
                )?;
            }
            _ => {}
        }
        let message_id = message_rows.get(&change.message).copied().unwrap_or(0);
        let change = LoggedChange {
            rule: change.rule,
            action: change.action.as_str(),
            message_id,
            seq: planned_seq(plan, change.message),
            part_id,
            before: change.before.clone(),
            after: change.after.clone(),
        };
        log_change(db, session, &change, stamp)?;
        logged.push(change);
    }
    db.parts_rewritten(session, &rewritten)?;
    Ok(logged)
}

/// The `seq` the plan gives `message`, when the plan holds it.
fn planned_seq(plan: &MendPlan, message: MessageRef) -> Option<i64> {
    plan.messages
        .iter()
        .find(|planned| planned.origin == message)
        .map(|planned| planned.seq)
}

const LIVE_SUMMARIES: &str = "
    SELECT id, last_turn, through_seq FROM summaries
    WHERE session_id = ?1 AND reverted_by IS NULL ORDER BY id";
const MOVE_SUMMARY: &str =
    "UPDATE summaries SET last_turn = ?3, through_seq = ?4 WHERE session_id = ?1 AND id = ?2";

/// Moves the compaction summaries (migration V2) with the messages they cover, as
/// [`summary_moves`] decides; one log row per summary moved.
fn follow_summaries(
    db: &mut impl Sql,
    session: &SessionId,
    loaded: &Loaded,
    plan: &MendPlan,
    stamp: &str,
) -> Result<Vec<LoggedChange>> {
    let summaries: Vec<(i64, i64, i64)> = db
        .int_rows(LIVE_SUMMARIES, &values![session.as_str()])?
        .into_iter()
        .map(|[id, last_turn, through_seq]| (id, last_turn, through_seq))
        .collect();
    let mut logged = Vec::new();
    for moved in summary_moves(&loaded.messages, plan, &summaries) {
        let (turn, through) = moved.after;
        db.run(
            MOVE_SUMMARY,
            &values![session.as_str(), moved.id, turn, through],
        )?;
        let (before, after) = moved.log_values();
        let change = LoggedChange {
            rule: moved.rule,
            action: "follow_summary",
            message_id: moved.message_id,
            seq: planned_seq(plan, MessageRef::Existing(moved.message_id)),
            part_id: None,
            before: Some(before),
            after,
        };
        log_change(db, session, &change, stamp)?;
        logged.push(change);
    }
    Ok(logged)
}
