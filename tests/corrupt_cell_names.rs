//! A value edited by hand into a column the store reads as a number (`usage` counts holding
//! text, a real, a BLOB) fails the commands that read it with exit 2 and an error that names
//! the column, not a position in one of the store's own statements.

use crate::util::{one_exchange, session_store};

#[test]
fn a_hand_edited_cell_the_store_cannot_read_is_named_by_its_column() {
    let cases = [
        ("input_tokens", "'lots'"),
        ("output_tokens", "1.5"),
        ("cache_read_tokens", "x'00ff'"),
        ("cache_write_tokens", "'12 tokens'"),
    ];
    for (column, value) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("s.db");
        let (store, session) = one_exchange(&db);
        drop(store);
        rusqlite::Connection::open(&db)
            .and_then(|c| {
                c.execute(
                    "INSERT INTO usage (message_id, input_tokens, output_tokens, \
                     cache_read_tokens, cache_write_tokens) \
                     SELECT id, 1, 1, 1, 1 FROM messages WHERE role = 'assistant'",
                    [],
                )?;
                c.execute(&format!("UPDATE usage SET {column} = {value}"), [])
            })
            .expect("sqlite3");
        let id = session.as_str();
        for args in [
            vec!["budget", id, "--limit", "10"],
            vec!["usage", id],
            vec!["export", id, "--format", "markdown"],
        ] {
            let out = session_store(&db, &args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(2),
                "{column}={value} {args:?}: {stderr}"
            );
            assert!(
                stderr.contains(&format!("column {column}")),
                "{column}={value} {args:?}: the column is not named: {stderr}"
            );
        }
    }
}
