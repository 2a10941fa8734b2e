//! Token accounting: the `usage` rows (what one assistant message cost, as its provider
//! reported it) and a session's usage per turn and in total.
//!
//! The write path stores a row for every appended [`NewMessage`](crate::NewMessage) whose
//! `usage` is set; importers fill it where the source recorded it. Counts the source did not
//! report stay NULL, and a sum over NULLs only is `None`, never a made-up 0.

use serde::{Deserialize, Serialize};

use super::handle::Store;
use super::sql::{int_at, text_at, values, Sql, Value};
use crate::error::{Error, Result};
use crate::history::pairing::Refusal;
use crate::model::{SessionId, Usage};

const INSERT_USAGE: &str = "
    INSERT INTO usage (message_id, model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6)";

/// [`INSERT_USAGE`] where the row carries its session (`?7`, [`Sql::rows_carry_session`]).
const INSERT_USAGE_KEYED: &str = "
    INSERT INTO usage (message_id, model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, session_id)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

/// The values of `usage`'s row after its message's id, in [`INSERT_USAGE`]'s order (model,
/// input, output, cache read, cache write); `None` for an empty [`Usage`], which stores no
/// row. `append_in` refused counts above [`crate::MAX_TOKEN_COUNT`] before anything was
/// written ([`Refusal::TokenCountOutOfRange`]); `refused` says so again should one reach
/// here, so a count is stored exactly or not at all.
pub(crate) fn usage_values<'u>(
    usage: &'u Usage,
    refused: impl Fn(Refusal) -> Error,
) -> Result<Option<[Value<'u>; 5]>> {
    if usage.is_empty() {
        return Ok(None);
    }
    let count = |n: Option<u64>| {
        n.map(|value| i64::try_from(value).map_err(|_| value))
            .transpose()
    };
    let exact = |field: &'static str, n: Option<u64>| {
        count(n).map_err(|value| refused(Refusal::TokenCountOutOfRange { field, value }))
    };
    Ok(Some(values![
        usage.model.as_deref(),
        exact("input_tokens", usage.input_tokens)?,
        exact("output_tokens", usage.output_tokens)?,
        exact("cache_read_tokens", usage.cache_read_tokens)?,
        exact("cache_write_tokens", usage.cache_write_tokens)?,
    ]))
}

/// Stores the usage row of message `message_id`, its values from [`usage_values`], on either
/// engine.
pub(crate) fn insert_usage(
    db: &mut impl Sql,
    session: &SessionId,
    message_id: i64,
    usage: &[Value<'_>; 5],
) -> Result<()> {
    let mut params = Vec::with_capacity(7);
    params.extend(values![message_id]);
    params.extend_from_slice(usage);
    let sql = if db.rows_carry_session() {
        params.extend(values![session.as_str()]);
        INSERT_USAGE_KEYED
    } else {
        INSERT_USAGE
    };
    db.run(sql, &params)?;
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

/// Every usage row of a session with its message's turn, in turn and seq order: the sums
/// are made in Rust with checked arithmetic ([`Totals::add`]), as an engine's `SUM` fails
/// with a bare error (SQLite) or a NUMERIC that does not fit back (PostgreSQL).
const USAGE_ROWS: &str = "
    SELECT m.turn_index, u.input_tokens, u.output_tokens, u.cache_read_tokens,
           u.cache_write_tokens, u.model
    FROM usage u JOIN messages m ON m.id = u.message_id
    WHERE m.session_id = ?1
    ORDER BY m.turn_index, m.seq";

/// The names of [`TokenTotals`]' counts, in the order [`USAGE_ROWS`] selects them.
const COUNT_FIELDS: [&str; 4] = [
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
];

impl TokenTotals {
    /// Adds one usage row's counts; the name of the first count whose sum would pass
    /// `i64::MAX` when it does (nothing is added then).
    fn add(&mut self, counts: [Option<i64>; 4]) -> std::result::Result<(), &'static str> {
        let mut sums = [
            self.input_tokens,
            self.output_tokens,
            self.cache_read_tokens,
            self.cache_write_tokens,
        ];
        for ((sum, count), field) in sums.iter_mut().zip(counts).zip(COUNT_FIELDS) {
            if let Some(count) = count {
                *sum = Some(sum.unwrap_or(0).checked_add(count).ok_or(field)?);
            }
        }
        [
            self.input_tokens,
            self.output_tokens,
            self.cache_read_tokens,
            self.cache_write_tokens,
        ] = sums;
        self.messages += 1;
        Ok(())
    }
}

/// [`Store::usage`] in the caller's read snapshot, on either engine.
pub(crate) fn usage_in(db: &mut impl Sql, session: &SessionId) -> Result<SessionUsage> {
    db.require_session(session)?;
    let overflow = |field, over: String| Error::UsageOverflow {
        session: session.clone(),
        field,
        over,
    };
    let mut turns: Vec<TurnUsage> = Vec::new();
    let mut total = TokenTotals::default();
    db.each_row(USAGE_ROWS, &values![session.as_str()], &mut |row| {
        let turn = int_at(row, 0)?.unwrap_or_default();
        let mut counts = [None; 4];
        for ((at, count), field) in counts.iter_mut().enumerate().zip(COUNT_FIELDS) {
            *count = token_count(row, at + 1, field)?;
        }
        if turns.last().is_none_or(|last| last.turn != turn) {
            turns.push(TurnUsage {
                turn,
                models: Vec::new(),
                tokens: TokenTotals::default(),
            });
        }
        let Some(this) = turns.last_mut() else {
            return Ok(());
        };
        if let Some(model) = text_at(row, 5)? {
            if !this.models.contains(&model) {
                this.models.push(model);
            }
        }
        this.tokens
            .add(counts)
            .map_err(|field| overflow(field, format!("turn {turn}")))?;
        total
            .add(counts)
            .map_err(|field| overflow(field, "the whole session".to_owned()))
    })?;
    Ok(SessionUsage {
        session: session.clone(),
        turns,
        total,
    })
}

/// The count of tokens in `row`'s column `at`, named `field`: a whole number from zero up,
/// or NULL; anything else is a row outside the contract ([`Error::CorruptRow`], naming the
/// column), for every reader of usage alike.
fn token_count(
    row: &(impl super::rows::Cells + ?Sized),
    at: usize,
    field: &str,
) -> Result<Option<i64>> {
    match int_at(row, at)? {
        Some(count) if count < 0 => Err(Error::CorruptRow {
            table: "usage",
            row_id: 0,
            detail: format!("column {field}: {count} is not a count of tokens"),
        }),
        count => Ok(count),
    }
}

/// Each usage row of a session with its message's id and seq, its counts first.
const USAGE_CELLS: &str = "
    SELECT u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens,
           u.model, m.id, m.seq
    FROM usage u JOIN messages m ON m.id = u.message_id
    WHERE m.session_id = ?1
    ORDER BY m.seq";

/// The first usage row of the session whose cells no reader of usage could take (a count
/// that is not a whole number of tokens, a model that is not text), as the check's
/// `unreadable_row`: the usage report, a bundle and a transcript of the session fail on it.
pub(crate) fn unreadable_usage(
    db: &mut impl Sql,
    session: &SessionId,
) -> Result<Option<super::rows::Unreadable>> {
    let mut found = None;
    db.each_row(USAGE_CELLS, &values![session.as_str()], &mut |row| {
        if found.is_some() {
            return Ok(());
        }
        let message_id = int_at(row, 5)?.unwrap_or_default();
        let seq = int_at(row, 6)?;
        let mut wrong = None;
        for (at, field) in COUNT_FIELDS.iter().enumerate() {
            match token_count(row, at, field) {
                Ok(_) => {}
                Err(Error::CorruptRow { detail, .. }) => wrong = Some(detail),
                Err(other) => return Err(other),
            }
            if wrong.is_some() {
                break;
            }
        }
        if wrong.is_none() {
            match text_at(row, 4) {
                Ok(_) => {}
                Err(Error::CorruptRow { detail, .. }) => wrong = Some(detail),
                Err(other) => return Err(other),
            }
        }
        // A usage row has no id of its own: it is named by its message's.
        found = wrong.map(|detail| super::rows::Unreadable {
            table: "usage",
            row_id: message_id,
            message_id: Some(message_id),
            seq,
            turn: None,
            detail,
        });
        Ok(())
    })?;
    Ok(found)
}

impl Store {
    /// What the session cost: tokens per turn (turns whose messages reported usage) and in
    /// total, read in one snapshot. [`crate::Error::UnknownSession`] when it does not exist;
    /// [`crate::Error::UsageOverflow`] when a sum is above `i64::MAX`.
    pub fn usage(&self, session: &SessionId) -> Result<SessionUsage> {
        self.read(|db| usage_in(db, session))
    }

    /// The usage row of each message of the session that has one, as `(seq, usage)` in seq
    /// order.
    pub fn message_usage(&self, session: &SessionId) -> Result<Vec<(i64, Usage)>> {
        self.read(|db| {
            db.require_session(session)?;
            // `token_count` refused a negative count: each fits a u64.
            let count = |n: Option<i64>| n.and_then(|n| u64::try_from(n).ok());
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
                            input_tokens: count(token_count(row, 2, COUNT_FIELDS[0])?),
                            output_tokens: count(token_count(row, 3, COUNT_FIELDS[1])?),
                            cache_read_tokens: count(token_count(row, 4, COUNT_FIELDS[2])?),
                            cache_write_tokens: count(token_count(row, 5, COUNT_FIELDS[3])?),
                        },
                    ));
                    Ok(())
                },
            )?;
            Ok(found)
        })
    }
}
