//! Fork and lineage on PostgreSQL: the twin of `store/fork.rs`, running its statements (the
//! same SQL text, `?N` read as `$N`) and its decisions (`cut_bound`, `copy_sql`, `tree`).
//! Column lists come from `pg_attribute` for the table the search path finds, as SQLite's come
//! from `pragma_table_info`, so columns later migrations add are copied too; generated
//! columns (V11's `parts.search_document`) are left out, the server computes them.

use super::write::{append_in, tail_of};
use super::{lock_session, PgStore, Tx};
use crate::error::Result;
use crate::history::grammar::Walk;
use crate::history::{pairing, texts};
use crate::model::{Part, SessionId};
use crate::store::fork::{
    copy_sql, cut_bound, tree, CopyMessages, CopyParts, CopySpec, CopySummaries, CopyUsage,
    LATEST_COPIED_COVER, TURN_START_SEQ, UNCOMPACT_UNCOVERED, USER_COUNT_AND_ANY,
};
use crate::store::{format_time, now, Forked, Lineage};

/// SQLite's numbered placeholders (`?1`) as PostgreSQL's (`$1`). The shared statements hold
/// no other `?`.
fn dollars(sql: &str) -> String {
    sql.replace('?', "$")
}

const INSERT_FORK: &str = "
    INSERT INTO sessions (id, created_at, updated_at, parent_id, forked_at_turn, thinking_latched, last_completion_at)
    SELECT $1::TEXT, $3::TEXT, $3::TEXT, id, $4::BIGINT, thinking_latched, last_completion_at FROM sessions WHERE id = $2";

/// `store/fork.rs`'s order, ids compared as SQLite compares them (bytes).
const LINEAGE: &str = "SELECT id, parent_id, forked_at_turn FROM sessions
    ORDER BY created_at COLLATE \"C\", id COLLATE \"C\"";

const COLUMNS: &str = "
    SELECT attname::TEXT FROM pg_attribute
    WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped AND attgenerated = ''
    ORDER BY attnum";

impl PgStore {
    /// `Store::fork` on PostgreSQL: one transaction that holds the source's row lock (no
    /// append to it runs meanwhile) and the new session's.
    pub(crate) fn fork(&self, source: &SessionId, at_turn: i64) -> Result<Forked> {
        self.write(|tx| fork_in(tx, source, at_turn))
    }

    /// `Store::lineage` on PostgreSQL (ids ordered as SQLite's bytes).
    pub(crate) fn lineage(&self) -> Result<Vec<Lineage>> {
        let rows = self.read(|tx| {
            tx.query(LINEAGE, &[])?
                .iter()
                .map(|row| Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)))
                .collect::<Result<Vec<_>>>()
        })?;
        Ok(tree(rows))
    }
}

fn fork_in(tx: &mut Tx<'_>, source: &SessionId, at_turn: i64) -> Result<Forked> {
    lock_session(tx, source)?;
    let cut = cut_seq(tx, source, at_turn)?;
    let id = SessionId::random();
    tx.execute(
        INSERT_FORK,
        &[
            &id.as_str(),
            &source.as_str(),
            &format_time(now()),
            &at_turn,
        ],
    )?;
    lock_session(tx, &id)?;
    let messages = copy_rows::<CopyMessages>(tx, &id, source, cut)?;
    copy_rows::<CopyParts>(tx, &id, source, cut)?;
    copy_rows::<CopyUsage>(tx, &id, source, cut)?;
    let summaries = copy_rows::<CopySummaries>(tx, &id, source, at_turn)?;
    let cover: Option<i64> = tx
        .query_opt(&dollars(LATEST_COPIED_COVER), &[&id.as_str()])?
        .map(|row| row.try_get(0))
        .transpose()?;
    let uncompacted = tx.execute(
        &dollars(UNCOMPACT_UNCOVERED),
        &[&id.as_str(), &cover.unwrap_or(i64::MIN)],
    )?;
    let walk = Walk::resume(tail_of(tx, &id)?.resume);
    let mut tombstoned = Vec::new();
    if let Some(message) = pairing::tombstones(&walk, texts::FORK_REASON) {
        tombstoned = message
            .parts
            .iter()
            .filter_map(Part::answers)
            .map(str::to_owned)
            .collect();
        append_in(tx, &id, &[message])?;
    }
    Ok(Forked {
        id,
        parent: source.clone(),
        at_turn,
        messages,
        summaries,
        uncompacted: usize::try_from(uncompacted).unwrap_or(usize::MAX),
        tombstoned,
    })
}

/// The seq before which the fork copies (see `store/fork.rs`).
fn cut_seq(tx: &mut Tx<'_>, session: &SessionId, at_turn: i64) -> Result<i64> {
    let row = tx.query_one(&dollars(USER_COUNT_AND_ANY), &[&session.as_str()])?;
    match cut_bound(session, row.try_get(0)?, row.try_get(1)?, at_turn)? {
        Some(bound) => Ok(bound),
        None => Ok(tx
            .query_one(&dollars(TURN_START_SEQ), &[&session.as_str(), &at_turn])?
            .try_get(0)?),
    }
}

fn copy_rows<S: CopySpec>(
    tx: &mut Tx<'_>,
    fork: &SessionId,
    source: &SessionId,
    bound: i64,
) -> Result<usize> {
    let columns = tx
        .query(COLUMNS, &[&S::TABLE])?
        .iter()
        .map(|row| row.try_get(0))
        .collect::<std::result::Result<Vec<String>, _>>()?;
    let sql = dollars(&copy_sql::<S>(columns));
    let copied = tx.execute(&sql, &[&fork.as_str(), &source.as_str(), &bound])?;
    Ok(usize::try_from(copied).unwrap_or(usize::MAX))
}
