//! `Store::budget`: the session's token budget (the pure estimate and plan are
//! [`crate::history::budget`]), read in one snapshot on either engine.

use super::handle::Store;
use super::rows::Range;
use super::sql::{int_at, text_at, values, Sql};
use super::time::parse_time;
use crate::error::{Error, Result};
use crate::history::budget::{plan_budget, Budget, Reported, SummaryNote};
use crate::model::SessionId;

/// The latest usage row of the session that reports any input count.
const LATEST_REPORT: &str = "
    SELECT m.seq, u.input_tokens, u.cache_read_tokens, u.cache_write_tokens, u.output_tokens
    FROM usage u JOIN messages m ON m.id = u.message_id
    WHERE m.session_id = ?1 AND (u.input_tokens IS NOT NULL OR u.cache_read_tokens IS NOT NULL
        OR u.cache_write_tokens IS NOT NULL)
    ORDER BY m.seq DESC LIMIT 1";

/// The latest summary still in force.
const LATEST_SUMMARY: &str = "
    SELECT text, created_at FROM summaries
    WHERE session_id = ?1 AND reverted_by IS NULL ORDER BY id DESC LIMIT 1";

impl Store {
    /// The session's token budget against `limit`: the size of the next request (the last
    /// prompt size a provider reported, plus an estimate of what came after it), whether it
    /// is over, and the smallest compaction on a turn boundary that brings it under
    /// ([`Budget`]; the estimate's method is documented in `history/budget.rs`).
    pub fn budget(&self, session: &SessionId, limit: u64) -> Result<Budget> {
        self.read(|tx| budget_in(tx, session, limit))
    }
}

/// [`Store::budget`] in the caller's read snapshot, on either engine.
fn budget_in(db: &mut impl Sql, session: &SessionId, limit: u64) -> Result<Budget> {
    db.require_session(session)?;
    let mut reported = None;
    db.each_row(LATEST_REPORT, &values![session.as_str()], &mut |r| {
        let count =
            |at| -> Result<u64> { Ok(int_at(r, at)?.map_or(0, |n| u64::try_from(n).unwrap_or(0))) };
        // Each count fits in 64 bits; their sum may not (a row edited by hand): refused
        // above `i64::MAX`, as `usage` refuses a sum it cannot hold, never wrapped.
        let (input, read, write) = (count(1)?, count(2)?, count(3)?);
        let input_tokens = input
            .checked_add(read)
            .and_then(|sum| sum.checked_add(write))
            .filter(|sum| i64::try_from(*sum).is_ok())
            .ok_or_else(|| Error::UsageOverflow {
                session: session.clone(),
                field: "input_tokens + cache_read_tokens + cache_write_tokens",
                over: "the latest report".to_owned(),
            })?;
        reported = Some(Reported {
            seq: int_at(r, 0)?.unwrap_or(0),
            input_tokens,
            output_tokens: int_at(r, 4)?.and_then(|n| u64::try_from(n).ok()),
        });
        Ok(())
    })?;
    let mut summary = None;
    db.each_row(LATEST_SUMMARY, &values![session.as_str()], &mut |r| {
        let created_at = text_at(r, 1)?.as_deref().and_then(parse_time);
        if let Some(created_at) = created_at {
            summary = Some(SummaryNote {
                text: text_at(r, 0)?.unwrap_or_default(),
                created_at,
            });
        }
        Ok(())
    })?;
    let messages = db.load_messages(session, Range::All)?;
    Ok(plan_budget(&messages, summary.as_ref(), reported, limit))
}
