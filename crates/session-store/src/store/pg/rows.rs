//! Rows to values for PostgreSQL: the statements and the one decoder of `store/rows.rs`,
//! over PostgreSQL's typed columns (BIGINT and TEXT read as SQLite's integer and text
//! values), so both engines read a row the same way, leniency and `unreadable_row` included.

use postgres::types::Type;
use postgres::Row;
use rusqlite::types::ValueRef;

use super::Tx;
use crate::error::Result;
use crate::model::{Message, SessionId};
pub(crate) use crate::store::rows::Range;
use crate::store::rows::{
    select_for, session_row_problem, Cells, Columns, Decoder, Loaded, Unreadable, SELECT_FOR_CHECK,
    SESSION_ROW,
};

impl Cells for Row {
    fn cell(&self, at: usize) -> std::result::Result<ValueRef<'_>, String> {
        let column = self
            .columns()
            .get(at)
            .ok_or_else(|| format!("no column {at}"))?;
        let failed = |e: postgres::Error| e.to_string();
        let ty = column.type_();
        Ok(if *ty == Type::INT8 {
            self.try_get::<_, Option<i64>>(at)
                .map_err(failed)?
                .map_or(ValueRef::Null, ValueRef::Integer)
        } else if *ty == Type::INT4 {
            self.try_get::<_, Option<i32>>(at)
                .map_err(failed)?
                .map_or(ValueRef::Null, |n| ValueRef::Integer(n.into()))
        } else if *ty == Type::FLOAT8 {
            self.try_get::<_, Option<f64>>(at)
                .map_err(failed)?
                .map_or(ValueRef::Null, ValueRef::Real)
        } else if *ty == Type::BYTEA {
            self.try_get::<_, Option<&[u8]>>(at)
                .map_err(failed)?
                .map_or(ValueRef::Null, ValueRef::Blob)
        } else {
            self.try_get::<_, Option<&str>>(at)
                .map_err(failed)?
                .map_or(ValueRef::Null, |text| ValueRef::Text(text.as_bytes()))
        })
    }
}

/// Runs a load statement of `store/rows.rs` and decodes its rows.
fn decode(
    tx: &mut Tx<'_>,
    sql: &str,
    params: &[&(dyn postgres::types::ToSql + Sync)],
) -> Result<std::result::Result<Loaded, Unreadable>> {
    let rows = tx.query_shared(sql, params)?;
    let Some(first) = rows.first() else {
        return Ok(Ok(Loaded::default()));
    };
    let names = first.columns();
    let mut decoder = Decoder::new(Columns::find(|name| {
        names.iter().position(|column| column.name() == name)
    })?);
    for row in &rows {
        if let Err(unreadable) = decoder.push(row)? {
            return Ok(Err(unreadable));
        }
    }
    Ok(Ok(decoder.finish()))
}

/// Loads messages with their parts, in `seq` order, in one query; a row outside the contract
/// fails the load with [`crate::Error::CorruptRow`].
pub(crate) fn load_messages(
    tx: &mut Tx<'_>,
    session: &SessionId,
    range: Range,
) -> Result<Vec<Message>> {
    let (sql, first, last) = select_for(range);
    decode(tx, sql, &[&session.as_str(), &first, &last])?
        .map(|loaded| loaded.messages)
        .map_err(Unreadable::into_error)
}

/// The whole session for the check and the mend, with part ids; the inner `Err` is the first
/// row outside the contract (the session row's timestamps included).
pub(crate) fn load_for_check(
    tx: &mut Tx<'_>,
    session: &SessionId,
) -> Result<std::result::Result<Loaded, Unreadable>> {
    if let Some(row) = tx
        .query_shared(SESSION_ROW, &[&session.as_str()])?
        .into_iter()
        .next()
    {
        if let Some(unreadable) = session_row_problem(&row, 0, 1) {
            return Ok(Err(unreadable));
        }
    }
    decode(tx, SELECT_FOR_CHECK, &[&session.as_str()])
}

#[cfg(test)]
mod tests {
    use crate::store::pg::sql::pg_statement;
    use crate::store::rows::{
        SELECT_FOR_CHECK, SELECT_MESSAGES, SELECT_MESSAGES_BY_TURN, SELECT_VISIBLE_MESSAGES,
    };

    #[test]
    fn every_load_joins_its_parts_along_the_session() {
        for sql in [
            SELECT_MESSAGES,
            SELECT_MESSAGES_BY_TURN,
            SELECT_VISIBLE_MESSAGES,
            SELECT_FOR_CHECK,
        ] {
            let pg = pg_statement(sql);
            assert!(
                pg.contains(
                    "LEFT JOIN parts p ON p.session_id = m.session_id AND p.message_id = m.id"
                ),
                "{sql}"
            );
        }
    }
}
