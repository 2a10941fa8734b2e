//! Fork and lineage on PostgreSQL. The fork is `store/fork.rs`'s `fork_in`, written once
//! over the engine seam (`Sql`); here are only what PostgreSQL says its own way: the column
//! lists (`pg_attribute` for the table the search path finds, as SQLite's come from
//! `pragma_table_info`, so columns later migrations add are copied too; generated columns
//! and `parts.search_document`, the full-text index's own, are left out: a copied part is
//! indexed at the next catch-up), and the lineage
//! query (ids ordered as bytes).

use super::{PgStore, Tx};
use crate::error::Result;
use crate::store::fork::tree;
use crate::store::reports::Lineage;

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
