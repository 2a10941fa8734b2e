//! Token accounting: the `usage` rows (what one assistant message cost, as its provider
//! reported it) and a session's usage per turn and in total.
//!
//! The write path stores a row for every appended [`NewMessage`](crate::NewMessage) whose
//! `usage` is set; importers fill it where the source recorded it. Counts the source did not
//! report stay NULL, and a sum over NULLs only is `None`, never a made-up 0.

use rusqlite::Row;
use serde::{Deserialize, Serialize};

use super::sql::{int_at, text_at, values, Sql};
use super::write::require_session;
use super::{SqliteEngine, Store};
use crate::error::Result;
use crate::model::{SessionId, Usage};

const INSERT_USAGE: &str = "
    INSERT INTO usage (message_id, model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6)";

/// Stores what message `message_id` cost, on either engine; nothing for an empty [`Usage`].
pub(crate) fn insert_usage(db: &mut impl Sql, message_id: i64, usage: &Usage) -> Result<()> {
    if usage.is_empty() {
        return Ok(());
    }
    let count = |n: Option<u64>| n.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
    db.run(
        INSERT_USAGE,
        &values![
            message_id,
            usage.model.as_deref(),
            count(usage.input_tokens),
            count(usage.output_tokens),
            count(usage.cache_read_tokens),
            count(usage.cache_write_tokens),
        ],
    )?;
    Ok(())
}

/// Token sums over some usage rows; `None` where no row reported that count.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenTotals {
    /// How many messages reported usage.
    pub messages: i64,
    /// Input tokens.
    pub input_tokens: Option<i64>,
    /// Output tokens.
    pub output_tokens: Option<i64>,
    /// Input tokens read from the prompt cache.
    pub cache_read_tokens: Option<i64>,
    /// Input tokens written to the prompt cache.
    pub cache_write_tokens: Option<i64>,
}

/// One turn's usage.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnUsage {
    /// The turn (`messages.turn_index`).
    pub turn: i64,
    /// The models that answered in the turn, in order of first use.
    pub models: Vec<String>,
    /// Its sums.
    #[serde(flatten)]
    pub tokens: TokenTotals,
}

/// A session's usage: per turn (only turns with usage rows) and in total.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionUsage {
    /// The session.
    pub session: SessionId,
    /// Per turn, in turn order.
    pub turns: Vec<TurnUsage>,
    /// Sums over the whole session.
    pub total: TokenTotals,
}

const USAGE_BY_TURN: &str = "
    SELECT m.turn_index, COUNT(*), SUM(u.input_tokens), SUM(u.output_tokens),
           SUM(u.cache_read_tokens), SUM(u.cache_write_tokens),
           (SELECT group_concat(model, char(10)) FROM (
                SELECT v.model FROM usage v JOIN messages n ON n.id = v.message_id
                WHERE n.session_id = ?1 AND n.turn_index = m.turn_index AND v.model IS NOT NULL
                GROUP BY v.model ORDER BY MIN(n.seq)))
    FROM usage u JOIN messages m ON m.id = u.message_id
    WHERE m.session_id = ?1
    GROUP BY m.turn_index ORDER BY m.turn_index";

const USAGE_TOTAL: &str = "
    SELECT COUNT(u.message_id), SUM(u.input_tokens), SUM(u.output_tokens),
           SUM(u.cache_read_tokens), SUM(u.cache_write_tokens)
    FROM usage u JOIN messages m ON m.id = u.message_id
    WHERE m.session_id = ?1";

fn totals_from_row(row: &Row<'_>, at: usize) -> rusqlite::Result<TokenTotals> {
    Ok(TokenTotals {
        messages: row.get(at)?,
        input_tokens: row.get(at + 1)?,
        output_tokens: row.get(at + 2)?,
        cache_read_tokens: row.get(at + 3)?,
        cache_write_tokens: row.get(at + 4)?,
    })
}

impl TurnUsage {
    /// A row of the per-turn usage query (both backends): the turn, its models joined by
    /// newlines in order of first use (`None`: no row named one), its sums.
    pub(crate) fn from_row(turn: i64, models: Option<String>, tokens: TokenTotals) -> Self {
        Self {
            turn,
            models: models
                .map(|m| m.split('\n').map(str::to_owned).collect())
                .unwrap_or_default(),
            tokens,
        }
    }
}

impl Store {
    /// What the session cost: tokens per turn (turns whose messages reported usage) and in
    /// total, read in one snapshot. [`crate::Error::UnknownSession`] when it does not exist.
    pub fn usage(&self, session: &SessionId) -> Result<SessionUsage> {
        self.engine.usage(session)
    }

    /// The usage row of each message of the session that has one, as `(seq, usage)` in seq
    /// order.
    pub fn message_usage(&self, session: &SessionId) -> Result<Vec<(i64, Usage)>> {
        self.read(|db| {
            db.require_session(session)?;
            let count = |n: Option<i64>| n.map(|n| u64::try_from(n).unwrap_or(0));
            let mut found = Vec::new();
            db.each_row(
                "SELECT m.seq, u.model, u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens
                 FROM usage u JOIN messages m ON m.id = u.message_id
                 WHERE m.session_id = ?1 ORDER BY m.seq",
                &values![session.as_str()],
                &mut |row| {
                    found.push((
                        int_at(row, 0)?.unwrap_or_default(),
                        Usage {
                            model: text_at(row, 1)?,
                            input_tokens: count(int_at(row, 2)?),
                            output_tokens: count(int_at(row, 3)?),
                            cache_read_tokens: count(int_at(row, 4)?),
                            cache_write_tokens: count(int_at(row, 5)?),
                        },
                    ));
                    Ok(())
                },
            )?;
            Ok(found)
        })
    }
}

impl SqliteEngine {
    /// [`Store::usage`] on SQLite.
    pub(super) fn usage(&self, session: &SessionId) -> Result<SessionUsage> {
        self.read(|conn| {
            require_session(conn, session)?;
            let turns = conn
                .prepare_cached(USAGE_BY_TURN)?
                .query_map([session.as_str()], |row| {
                    Ok(TurnUsage::from_row(
                        row.get(0)?,
                        row.get(6)?,
                        totals_from_row(row, 1)?,
                    ))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let total = conn
                .prepare_cached(USAGE_TOTAL)?
                .query_row([session.as_str()], |row| totals_from_row(row, 0))?;
            Ok(SessionUsage {
                session: session.clone(),
                turns,
                total,
            })
        })
    }
}
