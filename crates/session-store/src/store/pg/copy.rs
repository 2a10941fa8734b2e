//! The PostgreSQL half of `store/copy.rs`: a session's rows read in one snapshot and written
//! in one transaction (under the new session's row lock), with the same table list, each
//! table's rows in one `COPY ... FROM STDIN`.

use super::{PgStore, Tx};
use crate::error::Result;
use crate::model::SessionId;
use crate::store::copy::{forget_parent, lineage_parent, IdMap, Kind, TABLES};
use crate::store::reports::{Cell, SessionRows};

impl PgStore {
    pub(crate) fn read_session_rows(&self, session: &SessionId) -> Result<SessionRows> {
        self.read(|tx| {
            super::require_session(tx, session)?;
            let mut all = Vec::with_capacity(TABLES.len());
            for table in TABLES {
                let rows = tx.query(&table.session_select("$1", true), &[&session.as_str()])?;
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

    /// Writes `session`'s rows and counts its messages (no trigger counts inserts: V14):
    /// each table's rows in one `COPY ... FROM STDIN`, with ids drawn from the table's
    /// sequence beforehand (one statement for all of them) where the destination makes its
    /// own, so references follow them without a round trip per row.
    pub(crate) fn write_session_rows(&self, session: &SessionId, rows: &SessionRows) -> Result<()> {
        self.write(|tx| {
            let mut ids = IdMap::default();
            for (table, table_rows) in TABLES.iter().zip(rows) {
                if table_rows.is_empty() {
                    continue;
                }
                let mut table_rows = table_rows.clone();
                for row in &mut table_rows {
                    if let Some(parent) = lineage_parent(table, row) {
                        if tx
                            .query_opt("SELECT 1 FROM sessions WHERE id = $1", &[&parent])?
                            .is_none()
                        {
                            forget_parent(row);
                        }
                    }
                }
                let new_ids = if table.generates_id() {
                    draw_ids(tx, table.name, table_rows.len())?
                } else {
                    Vec::new()
                };
                // The tables whose rows name their message only in the copy's list (SQLite's
                // shape) carry their session here (V18).
                let add_session = !table.carries_session();
                let mut data = String::new();
                for (at, row) in table_rows.iter().enumerate() {
                    let mut values = ids.values(table, row);
                    if let Some(&id) = new_ids.get(at) {
                        values.insert(0, Cell::Int(id));
                        ids.record(table, row, id);
                    }
                    if add_session {
                        values.push(Cell::Text(session.as_str().to_owned()));
                    }
                    copy_line(&values, &mut data);
                }
                let mut columns: Vec<&str> = table.inserted().iter().map(|(n, _)| *n).collect();
                if table.generates_id() {
                    columns.insert(0, "id");
                }
                if add_session {
                    columns.push("session_id");
                }
                let sql = format!("COPY {} ({}) FROM STDIN", table.name, columns.join(", "));
                tx.copy_in(&sql, data.as_bytes())?;
            }
            crate::store::write::recount_messages(tx, session)
        })
    }
}

/// `count` new ids of `table`'s `id` sequence, ascending (the rows keep their order).
pub(crate) fn draw_ids(tx: &mut Tx<'_>, table: &str, count: usize) -> Result<Vec<i64>> {
    let count = i64::try_from(count).unwrap_or(i64::MAX);
    let mut ids = tx
        .query(
            "SELECT nextval(pg_get_serial_sequence($1, 'id')) FROM generate_series(1, $2::BIGINT)",
            &[&table, &count],
        )?
        .iter()
        .map(|row| row.try_get(0))
        .collect::<std::result::Result<Vec<i64>, _>>()?;
    ids.sort_unstable();
    Ok(ids)
}

/// One row in `COPY`'s text format: tab-separated, `\N` for NULL, a backslash, tab,
/// newline or carriage return in a text escaped.
pub(crate) fn copy_line(values: &[Cell], out: &mut String) {
    for (at, cell) in values.iter().enumerate() {
        if at > 0 {
            out.push('\t');
        }
        match cell {
            Cell::Null => out.push_str("\\N"),
            Cell::Int(n) => out.push_str(&n.to_string()),
            Cell::Text(text) => {
                for c in text.chars() {
                    match c {
                        '\\' => out.push_str("\\\\"),
                        '\t' => out.push_str("\\t"),
                        '\n' => out.push_str("\\n"),
                        '\r' => out.push_str("\\r"),
                        c => out.push(c),
                    }
                }
            }
        }
    }
    out.push('\n');
}
