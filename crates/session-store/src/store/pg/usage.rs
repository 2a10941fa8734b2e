//! Token accounting on PostgreSQL: the twin of `store/usage.rs`'s usage per turn and in
//! total (the usage rows of a session's messages are read once, over the seam). Sums are cast back to BIGINT
//! (PostgreSQL sums BIGINT as NUMERIC); a sum over NULLs only stays `None`.

use postgres::Row;

use super::{require_session, PgStore};
use crate::error::Result;
use crate::model::SessionId;
use crate::store::{SessionUsage, TokenTotals, TurnUsage};

const USAGE_BY_TURN: &str = "
    SELECT m.turn_index, COUNT(*), SUM(u.input_tokens)::BIGINT, SUM(u.output_tokens)::BIGINT,
           SUM(u.cache_read_tokens)::BIGINT, SUM(u.cache_write_tokens)::BIGINT,
           (SELECT string_agg(x.model, E'\\n' ORDER BY x.first_seq) FROM (
                SELECT v.model, MIN(n.seq) AS first_seq FROM usage v JOIN messages n ON n.id = v.message_id
                WHERE n.session_id = $1 AND n.turn_index = m.turn_index AND v.model IS NOT NULL
                GROUP BY v.model) x)
    FROM usage u JOIN messages m ON m.id = u.message_id
    WHERE m.session_id = $1
    GROUP BY m.turn_index ORDER BY m.turn_index";

const USAGE_TOTAL: &str = "
    SELECT COUNT(u.message_id), SUM(u.input_tokens)::BIGINT, SUM(u.output_tokens)::BIGINT,
           SUM(u.cache_read_tokens)::BIGINT, SUM(u.cache_write_tokens)::BIGINT
    FROM usage u JOIN messages m ON m.id = u.message_id
    WHERE m.session_id = $1";

fn totals_from_row(row: &Row, at: usize) -> Result<TokenTotals> {
    Ok(TokenTotals {
        messages: row.try_get(at)?,
        input_tokens: row.try_get(at + 1)?,
        output_tokens: row.try_get(at + 2)?,
        cache_read_tokens: row.try_get(at + 3)?,
        cache_write_tokens: row.try_get(at + 4)?,
    })
}

impl PgStore {
    /// `Store::usage` on PostgreSQL, in one snapshot.
    pub(crate) fn usage(&self, session: &SessionId) -> Result<SessionUsage> {
        self.read(|tx| {
            require_session(tx, session)?;
            let turns = tx
                .query(USAGE_BY_TURN, &[&session.as_str()])?
                .iter()
                .map(|row| {
                    Ok(TurnUsage::from_row(
                        row.try_get(0)?,
                        row.try_get(6)?,
                        totals_from_row(row, 1)?,
                    ))
                })
                .collect::<Result<Vec<_>>>()?;
            let total = totals_from_row(&tx.query_one(USAGE_TOTAL, &[&session.as_str()])?, 0)?;
            Ok(SessionUsage {
                session: session.clone(),
                turns,
                total,
            })
        })
    }
}
