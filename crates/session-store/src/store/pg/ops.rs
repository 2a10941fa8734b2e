//! PostgreSQL compaction, revert and the export's inputs: the SQL of
//! `store/compaction.rs`, `store/revert.rs` and `store/export.rs` in
//! PostgreSQL's dialect, planned by the same pure functions.

use postgres::Row;

use super::Tx;

use super::rows::{load_messages, Range};
use super::{lock_session, require_session, PgStore};
use crate::error::{Error, Result};
use crate::history::compaction::{plan_compaction, CompactionPlan, ProviderHistory, Summary};
use crate::history::thinking::ThinkingState;
use crate::model::{Message, Role, SessionId};
use crate::store::{format_time, now, parse_time, CompactionOutcome, Reverted};

/// The latest summary's text with the visible messages, and the thinking state.
pub(crate) type ExportInputs = ((Option<String>, Vec<Message>), ThinkingState);

const SUMMARY_COLUMNS: &str =
    "SELECT id, first_turn, last_turn, compacted_from_turn, through_seq, text, created_at FROM summaries";

fn summary_from_row(row: &Row) -> Result<Summary> {
    let id: i64 = row.try_get(0)?;
    let created_at: String = row.try_get(6)?;
    let Some(created_at) = parse_time(&created_at) else {
        return Err(Error::CorruptRow {
            table: "summaries",
            row_id: id,
            detail: format!("created_at {created_at:?} is not RFC 3339"),
        });
    };
    Ok(Summary {
        id,
        first_turn: row.try_get(1)?,
        last_turn: row.try_get(2)?,
        compacted_from_turn: row.try_get(3)?,
        through_seq: row.try_get(4)?,
        text: row.try_get(5)?,
        created_at,
    })
}

/// The latest live summary and every message not compacted.
fn provider_history_in(tx: &mut Tx<'_>, session: &SessionId) -> Result<ProviderHistory> {
    let summary = tx
        .query_opt(
            &format!("{SUMMARY_COLUMNS} WHERE session_id = $1 AND reverted_by IS NULL ORDER BY id DESC LIMIT 1"),
            &[&session.as_str()],
        )?
        .map(|row| summary_from_row(&row))
        .transpose()?;
    Ok(ProviderHistory {
        summary,
        messages: load_messages(tx, session, Range::Visible)?,
    })
}

fn touch(tx: &mut Tx<'_>, session: &SessionId, at: &str) -> Result<()> {
    tx.execute(
        "UPDATE sessions SET updated_at = $2 WHERE id = $1",
        &[&session.as_str(), &at],
    )?;
    Ok(())
}

impl PgStore {
    pub(crate) fn compact(
        &self,
        session: &SessionId,
        min_keep_tail: usize,
        summary: &str,
    ) -> Result<CompactionOutcome> {
        self.write(|tx| {
            lock_session(tx, session)?;
            let rows = tx.query(
                "SELECT seq, role, compacted, id FROM messages WHERE session_id = $1 ORDER BY seq",
                &[&session.as_str()],
            )?;
            let (mut seqs, mut items) = (Vec::with_capacity(rows.len()), Vec::new());
            for row in &rows {
                let role: String = row.try_get(1)?;
                let role = role.parse::<Role>().map_err(|e| Error::CorruptRow {
                    table: "messages",
                    row_id: row.try_get(3).unwrap_or(0),
                    detail: e.to_string(),
                })?;
                seqs.push(row.try_get::<_, i64>(0)?);
                items.push((role, row.try_get::<_, i64>(2)? != 0));
            }
            let cut = match plan_compaction(&items, min_keep_tail) {
                CompactionPlan::Nothing { reason } => {
                    return Ok(CompactionOutcome::NothingToCompact { reason })
                }
                CompactionPlan::Compact(cut) => cut,
            };
            let (cut_seq, through_seq) = (seqs[cut.cut], seqs[cut.cut - 1]);
            let newly_compacted = tx.execute(
                "UPDATE messages SET compacted = 1 WHERE session_id = $1 AND seq < $2 AND compacted = 0",
                &[&session.as_str(), &cut_seq],
            )?;
            let created_at = now();
            let stamp = format_time(created_at);
            let id: i64 = tx
                .query_one(
                    "INSERT INTO summaries
                        (session_id, first_turn, last_turn, compacted_from_turn, through_seq, text, created_at)
                     VALUES ($1, 0, $2, $3, $4, $5, $6) RETURNING id",
                    &[
                        &session.as_str(),
                        &cut.last_compacted_turn(),
                        &cut.first_new_turn,
                        &through_seq,
                        &summary,
                        &stamp,
                    ],
                )?
                .try_get(0)?;
            touch(tx, session, &stamp)?;
            Ok(CompactionOutcome::Compacted {
                summary: Summary {
                    id,
                    first_turn: 0,
                    last_turn: cut.last_compacted_turn(),
                    compacted_from_turn: cut.first_new_turn,
                    through_seq,
                    text: summary.to_owned(),
                    created_at,
                },
                newly_compacted: usize::try_from(newly_compacted).unwrap_or(usize::MAX),
                kept: seqs.len() - cut.cut,
            })
        })
    }

    pub(crate) fn provider_history(&self, session: &SessionId) -> Result<ProviderHistory> {
        self.read(|tx| {
            require_session(tx, session)?;
            provider_history_in(tx, session)
        })
    }

    pub(crate) fn summaries(&self, session: &SessionId) -> Result<Vec<Summary>> {
        self.read(|tx| {
            require_session(tx, session)?;
            tx.query(
                &format!(
                    "{SUMMARY_COLUMNS} WHERE session_id = $1 AND reverted_by IS NULL ORDER BY id"
                ),
                &[&session.as_str()],
            )?
            .iter()
            .map(summary_from_row)
            .collect()
        })
    }

    pub(crate) fn revert_to_turn(&self, session: &SessionId, turn: i64) -> Result<Reverted> {
        self.write(|tx| {
            lock_session(tx, session)?;
            let from_seq: Option<i64> = tx
                .query_one(
                    "SELECT MIN(seq) FROM messages WHERE session_id = $1 AND turn_index >= $2",
                    &[&session.as_str(), &turn],
                )?
                .try_get(0)?;
            let Some(from_seq) = from_seq else {
                return Ok(Reverted {
                    from_turn: turn,
                    messages: 0,
                    summaries: 0,
                });
            };
            let now = format_time(now());
            let revert_id: i64 = tx
                .query_one(
                    "INSERT INTO reverts (session_id, from_turn, from_seq, created_at) VALUES ($1, $2, $3, $4) RETURNING id",
                    &[&session.as_str(), &turn, &from_seq, &now],
                )?
                .try_get(0)?;
            let messages = tx.execute(
                "INSERT INTO reverted_messages
                    (revert_id, original_id, session_id, seq, turn_index, role, compacted, created_at, model)
                 SELECT $3, id, session_id, seq, turn_index, role, compacted, created_at, model
                 FROM messages WHERE session_id = $1 AND seq >= $2 ORDER BY seq",
                &[&session.as_str(), &from_seq, &revert_id],
            )?;
            tx.execute(
                "INSERT INTO reverted_parts
                    (reverted_message_id, ordinal, kind, text, tool_use_id, tool_name, input, is_error, provider_metadata)
                 SELECT r.id, p.ordinal, p.kind, p.text, p.tool_use_id, p.tool_name, p.input, p.is_error, p.provider_metadata
                 FROM reverted_messages r JOIN parts p ON p.message_id = r.original_id
                 WHERE r.revert_id = $1",
                &[&revert_id],
            )?;
            // Usage rows would go with their messages (ON DELETE CASCADE): they move aside too.
            tx.execute(
                "INSERT INTO reverted_usage
                    (reverted_message_id, model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)
                 SELECT r.id, u.model, u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens
                 FROM reverted_messages r JOIN usage u ON u.message_id = r.original_id
                 WHERE r.revert_id = $1",
                &[&revert_id],
            )?;
            tx.execute(
                "DELETE FROM messages WHERE session_id = $1 AND seq >= $2",
                &[&session.as_str(), &from_seq],
            )?;
            let summaries = tx.execute(
                "UPDATE summaries SET reverted_by = $3
                 WHERE session_id = $1 AND reverted_by IS NULL AND last_turn >= $2",
                &[&session.as_str(), &turn, &revert_id],
            )?;
            let moved_compacted: bool = tx
                .query_one(
                    "SELECT EXISTS (SELECT 1 FROM reverted_messages WHERE revert_id = $1 AND compacted = 1)",
                    &[&revert_id],
                )?
                .try_get(0)?;
            if summaries > 0 || moved_compacted {
                let row = tx.query_one(
                    "SELECT (SELECT MAX(turn_index) FROM messages WHERE session_id = $1 AND compacted = 1),
                            (SELECT last_turn FROM summaries WHERE session_id = $1 AND reverted_by IS NULL
                             ORDER BY id DESC LIMIT 1)",
                    &[&session.as_str()],
                )?;
                let (head, cover): (Option<i64>, Option<i64>) = (row.try_get(0)?, row.try_get(1)?);
                if let Some(head) = head {
                    if cover.is_none_or(|cover| cover < head) {
                        return Err(Error::RevertSplitsCompaction {
                            session: session.clone(),
                            turn,
                            summarised_through: cover,
                        });
                    }
                }
            }
            touch(tx, session, &now)?;
            Ok(Reverted {
                from_turn: turn,
                messages: usize::try_from(messages).unwrap_or(usize::MAX),
                summaries: usize::try_from(summaries).unwrap_or(usize::MAX),
            })
        })
    }

    pub(crate) fn undo_revert(&self, session: &SessionId) -> Result<Option<Reverted>> {
        self.write(|tx| {
            lock_session(tx, session)?;
            let Some(latest) = tx.query_opt(
                "SELECT id, from_turn FROM reverts WHERE session_id = $1 ORDER BY id DESC LIMIT 1",
                &[&session.as_str()],
            )?
            else {
                return Ok(None);
            };
            let (revert_id, from_turn): (i64, i64) = (latest.try_get(0)?, latest.try_get(1)?);
            let messages = tx.execute(
                "INSERT INTO messages (id, session_id, seq, turn_index, role, compacted, created_at, model)
                 SELECT CASE WHEN EXISTS (SELECT 1 FROM messages m WHERE m.id = r.original_id)
                             THEN nextval(pg_get_serial_sequence('messages', 'id')) ELSE r.original_id END,
                        r.session_id, r.seq, r.turn_index, r.role, r.compacted, r.created_at, r.model
                 FROM reverted_messages r WHERE r.revert_id = $1 ORDER BY r.seq",
                &[&revert_id],
            )?;
            tx.execute(
                "INSERT INTO parts
                    (message_id, ordinal, kind, text, tool_use_id, tool_name, input, is_error, provider_metadata)
                 SELECT m.id, p.ordinal, p.kind, p.text, p.tool_use_id, p.tool_name, p.input, p.is_error, p.provider_metadata
                 FROM reverted_parts p
                 JOIN reverted_messages r ON r.id = p.reverted_message_id
                 JOIN messages m ON m.session_id = r.session_id AND m.seq = r.seq
                 WHERE r.revert_id = $1 ORDER BY r.seq, p.ordinal",
                &[&revert_id],
            )?;
            tx.execute(
                "INSERT INTO usage
                    (message_id, model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)
                 SELECT m.id, u.model, u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens
                 FROM reverted_usage u
                 JOIN reverted_messages r ON r.id = u.reverted_message_id
                 JOIN messages m ON m.session_id = r.session_id AND m.seq = r.seq
                 WHERE r.revert_id = $1 ORDER BY r.seq",
                &[&revert_id],
            )?;
            let summaries = tx.execute(
                "UPDATE summaries SET reverted_by = NULL WHERE reverted_by = $1",
                &[&revert_id],
            )?;
            tx.execute("DELETE FROM reverts WHERE id = $1", &[&revert_id])?;
            touch(tx, session, &format_time(now()))?;
            Ok(Some(Reverted {
                from_turn,
                messages: usize::try_from(messages).unwrap_or(usize::MAX),
                summaries: usize::try_from(summaries).unwrap_or(usize::MAX),
            }))
        })
    }

    /// What an export reads, in one snapshot: the latest summary's text, the visible
    /// messages, and the thinking state.
    pub(crate) fn export_inputs(&self, session: &SessionId) -> Result<ExportInputs> {
        self.read(|tx| {
            require_session(tx, session)?;
            let history = provider_history_in(tx, session)?;
            let state = thinking_state_in(tx, session)?;
            Ok(((history.summary.map(|s| s.text), history.messages), state))
        })
    }

    pub(crate) fn thinking_state(&self, session: &SessionId) -> Result<ThinkingState> {
        self.read(|tx| thinking_state_in(tx, session))
    }

    /// Turns the thinking latch on, stripped through `through` (`$2`), under the session's lock.
    pub(crate) fn set_latched(
        &self,
        session: &SessionId,
        sql: &str,
        through: Option<i64>,
    ) -> Result<()> {
        self.write(|tx| {
            lock_session(tx, session)?;
            tx.execute(sql, &[&session.as_str(), &through])?;
            Ok(())
        })
    }

    /// Runs one `UPDATE sessions ... WHERE id = $1` under the session's lock.
    pub(crate) fn update_session(
        &self,
        session: &SessionId,
        sql: &str,
        at: Option<&str>,
    ) -> Result<()> {
        self.write(|tx| {
            lock_session(tx, session)?;
            match at {
                Some(at) => tx.execute(sql, &[&session.as_str(), &at])?,
                None => tx.execute(sql, &[&session.as_str()])?,
            };
            Ok(())
        })
    }
}

fn thinking_state_in(tx: &mut Tx<'_>, session: &SessionId) -> Result<ThinkingState> {
    let row = tx
        .query_opt(
            "SELECT thinking_latched, last_completion_at, thinking_stripped_through
             FROM sessions WHERE id = $1",
            &[&session.as_str()],
        )?
        .ok_or_else(|| Error::UnknownSession(session.clone()))?;
    let latched: i64 = row.try_get(0)?;
    let last: Option<String> = row.try_get(1)?;
    let stripped_through: Option<i64> = row.try_get(2)?;
    Ok(ThinkingState {
        latched: latched != 0,
        last_completion: last.as_deref().and_then(parse_time),
        stripped_through,
    })
}
