//! Fork and lineage on PostgreSQL. The fork is `store/fork.rs`'s `fork_in`, written once
//! over the engine seam (`Sql`); here are only what PostgreSQL does its own way: the copy of
//! the source's rows ([`copy_fork`]: read by the source's key, written by the fork's), the column
//! lists (`pg_attribute` for the table the search path finds, as SQLite's come from
//! `pragma_table_info`, so columns later migrations add are copied too; generated columns
//! and `parts.search_document`, the full-text index's own, are left out: a copied part is
//! indexed at the next catch-up), and the lineage
//! query (ids ordered as bytes).

use std::collections::HashMap;

use super::copy::{copy_line, draw_ids};
use super::{PgStore, Tx};
use crate::error::Result;
use crate::model::SessionId;
use crate::store::fork::tree;
use crate::store::reports::{Cell, Lineage};

/// `store/fork.rs`'s order, ids compared as SQLite compares them (bytes).
const LINEAGE: &str = "SELECT id, parent_id, forked_at_turn FROM sessions
    ORDER BY created_at COLLATE \"C\", id COLLATE \"C\"";

const COLUMNS: &str = "
    SELECT attname::TEXT FROM pg_attribute
    WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped AND attgenerated = ''
      AND NOT (attrelid = to_regclass('parts') AND attname = 'search_document')
    ORDER BY attnum";

impl PgStore {
    /// `Store::lineage` on PostgreSQL.
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

/// The columns of `table` the store writes, in schema order.
pub(crate) fn columns(tx: &mut Tx<'_>, table: &str) -> Result<Vec<String>> {
    tx.query(COLUMNS, &[&table])?
        .iter()
        .map(|row| Ok(row.try_get(0)?))
        .collect()
}

/// One table a fork copies on PostgreSQL: which of its columns the copy sets itself, which
/// rows of the source it reads (`src`, `$1` the source, `$2` the bound) and in what order.
struct ForkTable {
    name: &'static str,
    skip: &'static [&'static str],
    /// Whether its rows belong to a message (`message_id`, mapped to the fork's).
    by_message: bool,
    filter: &'static str,
}

const FORK_TABLES: [ForkTable; 3] = [
    ForkTable {
        name: "parts",
        skip: &["id", "message_id", "session_id"],
        by_message: true,
        filter: "JOIN messages o ON o.session_id = src.session_id AND o.id = src.message_id
                 WHERE src.session_id = $1 AND o.seq < $2 ORDER BY o.seq, src.ordinal",
    },
    ForkTable {
        name: "usage",
        skip: &["message_id", "session_id"],
        by_message: true,
        filter: "JOIN messages o ON o.session_id = src.session_id AND o.id = src.message_id
                 WHERE src.session_id = $1 AND o.seq < $2 ORDER BY o.seq",
    },
    ForkTable {
        name: "summaries",
        skip: &["id", "session_id", "reverted_by"],
        by_message: false,
        filter: "WHERE src.session_id = $1 AND src.reverted_by IS NULL AND src.last_turn < $2
                 ORDER BY src.id",
    },
];

/// `Sql::copy_fork` on PostgreSQL: each table's rows of the source read by the source's key,
/// then written under the fork's in one `COPY ... FROM STDIN` (the messages with ids drawn
/// beforehand, so their parts and usage rows name them without a round trip per row). Every
/// statement names one session, so a distributed engine runs it on one shard (an
/// `INSERT ... SELECT` from one session into another is a repartitioned insert there). Values
/// travel as text, as `COPY` reads them: every column's type reads its own text back.
pub(crate) fn copy_fork(
    tx: &mut Tx<'_>,
    fork: &SessionId,
    source: &SessionId,
    cut: i64,
    at_turn: i64,
) -> Result<[usize; 2]> {
    let columns = copied(tx, "messages", &["id", "session_id"])?;
    let rows = tx.query(
        &format!(
            "SELECT src.id, {} FROM messages src WHERE src.session_id = $1 AND src.seq < $2
             ORDER BY src.seq",
            as_text(&columns)
        ),
        &[&source.as_str(), &cut],
    )?;
    let ids = draw_ids(tx, "messages", rows.len())?;
    let mut fork_ids = HashMap::with_capacity(rows.len());
    let mut data = String::new();
    for (row, id) in rows.iter().zip(&ids) {
        fork_ids.insert(row.try_get::<_, i64>(0)?, *id);
        let mut values = vec![Cell::Int(*id), Cell::Text(fork.as_str().to_owned())];
        values.extend(text_cells(row, 1, columns.len())?);
        copy_line(&values, &mut data);
    }
    write(tx, "messages", &["id", "session_id"], &columns, &data)?;
    let mut summaries = 0;
    for table in &FORK_TABLES {
        let columns = copied(tx, table.name, table.skip)?;
        let bound = if table.by_message { cut } else { at_turn };
        let message = if table.by_message {
            "src.message_id"
        } else {
            "NULL::BIGINT"
        };
        let rows = tx.query(
            &format!(
                "SELECT {message}, {} FROM {} src {}",
                as_text(&columns),
                table.name,
                table.filter
            ),
            &[&source.as_str(), &bound],
        )?;
        let mut data = String::new();
        for row in &rows {
            let mut values = vec![Cell::Text(fork.as_str().to_owned())];
            if table.by_message {
                let of = row.try_get::<_, i64>(0)?;
                values.push(fork_ids.get(&of).map_or(Cell::Null, |id| Cell::Int(*id)));
            }
            values.extend(text_cells(row, 1, columns.len())?);
            copy_line(&values, &mut data);
        }
        let keys: &[&str] = if table.by_message {
            &["session_id", "message_id"]
        } else {
            &["session_id"]
        };
        write(tx, table.name, keys, &columns, &data)?;
        if !table.by_message {
            summaries = rows.len();
        }
    }
    Ok([ids.len(), summaries])
}

/// The columns of `table` a fork copies as they are: all but `skip`, quoted.
fn copied(tx: &mut Tx<'_>, table: &str, skip: &[&str]) -> Result<Vec<String>> {
    Ok(columns(tx, table)?
        .into_iter()
        .filter(|c| !skip.contains(&c.as_str()))
        .map(|c| format!("\"{}\"", c.replace('"', "\"\"")))
        .collect())
}

/// `src."a"::TEXT, src."b"::TEXT, ...`: each value in the text `COPY` reads back.
fn as_text(columns: &[String]) -> String {
    columns
        .iter()
        .map(|c| format!("src.{c}::TEXT"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `count` text cells of `row` from `from` on.
fn text_cells(row: &postgres::Row, from: usize, count: usize) -> Result<Vec<Cell>> {
    (from..from + count)
        .map(|at| {
            Ok(row
                .try_get::<_, Option<String>>(at)?
                .map_or(Cell::Null, Cell::Text))
        })
        .collect()
}

/// `COPY table (keys..., columns...) FROM STDIN` of `data`, when there is any.
fn write(
    tx: &mut Tx<'_>,
    table: &str,
    keys: &[&str],
    columns: &[String],
    data: &str,
) -> Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    let mut names: Vec<&str> = keys.to_vec();
    names.extend(columns.iter().map(String::as_str));
    tx.copy_in(
        &format!("COPY {table} ({}) FROM STDIN", names.join(", ")),
        data.as_bytes(),
    )?;
    Ok(())
}
