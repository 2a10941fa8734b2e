//! PostgreSQL twins of the second release's operations that are built here so far:
//! deleting a session (`store/retention.rs`) and reading its usage rows (`store/usage.rs`).
//! Fork, prune, search, the usage report and the size report are SQLite-only for now
//! ([`crate::Error::Unsupported`] on a PostgreSQL store).

use super::{lock_session, require_session, PgStore};
use crate::error::Result;
use crate::model::{SessionId, Usage};
use crate::store::Deleted;

impl PgStore {
    /// Deletes the session and every row of it (the cascade), and its repair log.
    pub(crate) fn delete_session(&self, session: &SessionId) -> Result<Deleted> {
        self.write(|tx| {
            lock_session(tx, session)?;
            let updated_at: String = tx
                .query_one(
                    "SELECT updated_at FROM sessions WHERE id = $1",
                    &[&session.as_str()],
                )?
                .try_get(0)?;
            let messages: i64 = tx
                .query_one(
                    "SELECT COUNT(*) FROM messages WHERE session_id = $1",
                    &[&session.as_str()],
                )?
                .try_get(0)?;
            tx.execute(
                "DELETE FROM repair_log WHERE session_id = $1",
                &[&session.as_str()],
            )?;
            tx.execute("DELETE FROM sessions WHERE id = $1", &[&session.as_str()])?;
            Ok(Deleted {
                session: session.clone(),
                updated_at,
                messages,
            })
        })
    }

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
