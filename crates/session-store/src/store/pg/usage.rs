//! Token accounting on PostgreSQL: the usage rows of a session's messages (its usage per
//! turn and in total is `store/usage.rs`' `usage_in`, written once for both engines).

use super::{require_session, PgStore};
use crate::error::Result;
use crate::model::{SessionId, Usage};

impl PgStore {
    /// The usage row of each message that has one, as `(seq, usage)` in seq order.
    pub(crate) fn message_usage(&self, session: &SessionId) -> Result<Vec<(i64, Usage)>> {
        self.read(|tx| {
            require_session(tx, session)?;
            let count = |n: Option<i64>| n.map(|n| u64::try_from(n).unwrap_or(0));
            tx.query(
                "SELECT m.seq, u.model, u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens
                 FROM usage u JOIN messages m ON m.id = u.message_id
                 WHERE m.session_id = $1 ORDER BY m.seq",
                &[&session.as_str()],
            )?
            .iter()
            .map(|row| {
                Ok((
                    row.try_get(0)?,
                    Usage {
                        model: row.try_get(1)?,
                        input_tokens: count(row.try_get(2)?),
                        output_tokens: count(row.try_get(3)?),
                        cache_read_tokens: count(row.try_get(4)?),
                        cache_write_tokens: count(row.try_get(5)?),
                    },
                ))
            })
            .collect()
        })
    }
}
