//! The PostgreSQL half of `store/copy.rs`: a session's rows read in one snapshot and written
//! in one transaction (under the new session's row lock), with the same table list.

use postgres::types::ToSql;

use super::PgStore;
use crate::error::Result;
use crate::model::SessionId;
use crate::store::copy::{forget_parent, lineage_parent, IdMap, Kind, TABLES};
use crate::store::reports::{Cell, SessionRows};

/// A cell as a typed PostgreSQL parameter of a column of `kind`.
fn param(cell: Cell, kind: Kind) -> Box<dyn ToSql + Sync> {
    match (cell, kind) {
        (Cell::Null, Kind::Int) => Box::new(None::<i64>),
        (Cell::Null, Kind::Text) => Box::new(None::<String>),
        (Cell::Int(n), Kind::Int) => Box::new(n),
        (Cell::Int(n), Kind::Text) => Box::new(n.to_string()),
        (Cell::Text(t), Kind::Text) => Box::new(t),
        // `Cell::Text` only ever comes from a text column, so an integer column never gets
        // one; should it, it goes as text and PostgreSQL refuses it with a typed error.
        (Cell::Text(t), Kind::Int) => Box::new(t),
    }
}

impl PgStore {
    pub(crate) fn read_session_rows(&self, session: &SessionId) -> Result<SessionRows> {
        self.read(|tx| {
            super::require_session(tx, session)?;
            let mut all = Vec::with_capacity(TABLES.len());
            for table in TABLES {
                let rows = tx.query(&table.select("$1"), &[&session.as_str()])?;
                let mut out = Vec::with_capacity(rows.len());
                for row in &rows {
                    let mut cells = Vec::with_capacity(table.columns.len());
                    for (i, (_, kind)) in table.columns.iter().enumerate() {
                        cells.push(match kind {
                            Kind::Int => row
                                .try_get::<_, Option<i64>>(i)?
                                .map_or(Cell::Null, Cell::Int),
                            Kind::Text => row
                                .try_get::<_, Option<String>>(i)?
                                .map_or(Cell::Null, Cell::Text),
                        });
                    }
                    out.push(cells);
                }
                all.push(out);
            }
            Ok(all)
        })
    }

    /// Writes `session`'s rows and counts its messages (no trigger counts inserts: V14).
    pub(crate) fn write_session_rows(&self, session: &SessionId, rows: &SessionRows) -> Result<()> {
        self.write(|tx| {
            let mut ids = IdMap::default();
            for (table, table_rows) in TABLES.iter().zip(rows) {
                let mut sql = table.insert(|n| format!("${n}"));
                if table.generates_id() {
                    sql.push_str(" RETURNING id");
                }
                for row in table_rows {
                    let mut row = row.clone();
                    if let Some(parent) = lineage_parent(table, &mut row) {
                        if tx
                            .query_opt("SELECT 1 FROM sessions WHERE id = $1", &[&parent])?
                            .is_none()
                        {
                            forget_parent(&mut row);
                        }
                    }
                    let row = &row;
                    let values: Vec<Box<dyn ToSql + Sync>> = ids
                        .values(table, row)
                        .into_iter()
                        .zip(table.inserted())
                        .map(|(cell, (_, kind))| param(cell, *kind))
                        .collect();
                    let refs: Vec<&(dyn ToSql + Sync)> = values.iter().map(|v| &**v).collect();
                    if !table.generates_id() {
                        tx.execute(&sql, &refs)?;
                    } else {
                        let id: i64 = tx.query_one(&sql, &refs)?.try_get(0)?;
                        ids.record(table, row, id);
                    }
                }
            }
            crate::store::write::recount_messages(tx, session)
        })
    }
}
