//! PostgreSQL compaction (written once, over `store/sql.rs`, in `store/compaction.rs`) and
//! the export's inputs: the SQL of `store/export.rs` in PostgreSQL's dialect, planned by the
//! same pure functions.

use postgres::Row;

use super::Tx;

use super::rows::{load_messages, Range};
use super::{lock_session, require_session, PgStore};
use crate::error::{Error, Result};
use crate::history::compaction::{ProviderHistory, Summary};
use crate::history::thinking::ThinkingState;
use crate::model::{Message, SessionId};
use crate::store::{parse_time, CompactionOutcome};

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

impl PgStore {
    pub(crate) fn compact(
        &self,
        session: &SessionId,
        min_keep_tail: usize,
        summary: &str,
    ) -> Result<CompactionOutcome> {
        self.write(|tx| {
            lock_session(tx, session)?;
            crate::store::compaction::compact_in(tx, session, min_keep_tail, summary)
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
