//! A value edited by hand into a column the store reads as a number (`usage` counts holding
//! text, a real, a BLOB) fails the commands that read it with exit 2 and an error that names
//! the column, not a position in one of the store's own statements.

use std::path::{Path, PathBuf};

use session_store::SessionId;

use crate::util::{one_exchange, session_store, store_repair};

/// A database in `dir` with one exchange whose assistant message has a usage row (every count
/// 1), then `column` set to the SQL `value` by hand.
fn exchange_with_usage_cell(dir: &Path, column: &str, value: &str) -> (PathBuf, SessionId) {
    let db = dir.join("s.db");
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
    (db, session)
}

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
        let (db, session) = exchange_with_usage_cell(dir.path(), column, value);
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

/// What fails those commands is what `store-repair` reports: the session's usage row is
/// outside the contract (`unreadable_row`, naming the column and the message's seq), and the
/// session is left as it is (exit 3), where the check used to call it healthy. A count below
/// zero is no count of tokens either.
#[test]
fn store_repair_reports_a_usage_cell_no_reader_can_take_and_leaves_the_session() {
    let cases = [
        ("input_tokens", "'lots'", "is not an integer"),
        ("cache_read_tokens", "x'00ff'", "cache_read_tokens"),
        ("output_tokens", "-5", "-5 is not a count of tokens"),
    ];
    for (column, value, says) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        let (db, session) = exchange_with_usage_cell(dir.path(), column, value);
        let usage = session_store(&db, &["usage", session.as_str()]);
        assert_eq!(usage.status.code(), Some(2), "{column}={value}: {usage:?}");
        assert!(
            String::from_utf8_lossy(&usage.stderr).contains(&format!("column {column}")),
            "{column}={value}: {usage:?}"
        );
        let cell = |db: &Path| -> String {
            rusqlite::Connection::open(db)
                .and_then(|c| {
                    c.query_row(
                        &format!("SELECT typeof({column}) || ':' || quote({column}) FROM usage"),
                        [],
                        |r| r.get(0),
                    )
                })
                .expect("the cell")
        };
        let before = cell(&db);
        let out = store_repair(&db, &["--no-backup", "--json"]);
        assert_eq!(out.status.code(), Some(3), "{column}={value}: {out:?}");
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        let problem = &report["problems"][0];
        assert_eq!(problem["rule"], "unreadable_row", "{report}");
        assert_eq!(problem["session_id"], session.as_str());
        assert_eq!(problem["seq"], 2, "the assistant message's usage: {report}");
        let detail = problem["detail"].as_str().unwrap_or_default();
        assert!(detail.contains(says), "{column}={value}: {detail}");
        assert_eq!(report["unmended"][0], session.as_str());
        assert_eq!(cell(&db), before, "{column}={value}: the cell was changed");
    }
}
