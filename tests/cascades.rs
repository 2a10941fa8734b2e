//! Deletes cascade as the schema's foreign keys declare also where foreign keys are not
//! enforced: the stock `sqlite3` shell starts with `foreign_keys` off, and SQLite gives a
//! deleted row's id to the next row it inserts, so a part left behind by a deleted message
//! would belong to the next message the store writes (migration V21). Rows left pointing at
//! a missing row before that, or written so by hand, are found and mended by `store-repair`
//! (`store/orphans.rs`) without deleting a message or a part.

use rusqlite::Connection;
use serde_json::json;
use session_store::{NewMessage, Part, SessionId, Store, Usage};

use crate::util::{store_repair, temp_store};

/// A connection as the `sqlite3` shell opens one: foreign keys not enforced.
fn shell(store: &Store) -> Connection {
    let conn = Connection::open(store.path()).expect("open");
    conn.execute_batch("PRAGMA foreign_keys = OFF")
        .expect("as the shell starts");
    conn
}

/// Every row that points at a row that is not there, as `table rowid -> parent`.
fn dangling(conn: &Connection) -> Vec<String> {
    let mut statement = conn.prepare("PRAGMA foreign_key_check").expect("check");
    let rows = statement
        .query_map([], |r| {
            Ok(format!(
                "{} {:?} -> {}",
                r.get::<_, String>(0)?,
                r.get::<_, Option<i64>>(1)?,
                r.get::<_, String>(2)?
            ))
        })
        .expect("rows");
    rows.collect::<rusqlite::Result<_>>()
        .expect("dangling rows")
}

/// A session with a row in every table that points at a session or a message: messages
/// and parts, usage, an idempotency key, a revert (its messages, parts and usage set
/// aside), a compaction summary, and a fork whose parent it is.
fn session_in_every_table(store: &Store) -> SessionId {
    let session = store.create_session().expect("create");
    let usage = Usage {
        input_tokens: Some(10),
        output_tokens: Some(5),
        ..Usage::default()
    };
    for turn in 0..4 {
        let mut answer = NewMessage::assistant(vec![Part::text(format!("answer {turn}"))]);
        answer.usage = Some(usage.clone());
        let mut ask = NewMessage::user(format!("ask {turn}"));
        ask.idempotency_key = Some(format!("key {turn}"));
        store
            .append_batch(
                &session,
                vec![
                    ask,
                    NewMessage::assistant(vec![Part::tool_use(
                        format!("call{turn}"),
                        "bash",
                        json!({"cmd": "ls"}),
                    )]),
                    NewMessage::tool(vec![Part::tool_result(format!("call{turn}"), "ok")]),
                    answer,
                ],
            )
            .expect("a turn");
    }
    store
        .compact(&session, 1, "the first turns")
        .expect("compact");
    store
        .revert_to_turn(&session, 3)
        .expect("revert the last turn");
    store.fork(&session, 2).expect("fork");
    session
}

#[test]
fn every_foreign_key_cascades_where_foreign_keys_are_off() {
    let (_dir, store, _path) = temp_store();
    let conn = shell(&store);
    let keys: Vec<(String, String, String, String, String)> = conn
        .prepare(
            "SELECT m.name, f.\"from\", f.\"table\", f.\"to\", f.on_delete
             FROM sqlite_master m, pragma_foreign_key_list(m.name) f
             WHERE m.type = 'table' ORDER BY 1, 2",
        )
        .and_then(|mut s| {
            s.query_map([], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })?
            .collect()
        })
        .expect("foreign keys");
    assert!(keys.len() >= 12, "{keys:?}");
    for (child, column, parent, key, on_delete) in keys {
        let trigger: String = conn
            .query_row(
                "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?1",
                [format!("cascade_{parent}_delete")],
                |r| r.get(0),
            )
            .unwrap_or_else(|_| panic!("no cascade trigger on {parent} for {child}.{column}"));
        let sql = trigger.split_whitespace().collect::<Vec<_>>().join(" ");
        let action = match on_delete.as_str() {
            "CASCADE" => format!("DELETE FROM {child} WHERE {column} = OLD.{key};"),
            "SET NULL" => {
                format!("UPDATE {child} SET {column} = NULL WHERE {column} = OLD.{key};")
            }
            other => panic!("{child}.{column}: ON DELETE {other} has no cascade to repeat"),
        };
        assert!(
            sql.contains(&action),
            "{parent}'s trigger lacks `{action}`: {sql}"
        );
        assert!(
            sql.contains("WHEN (SELECT foreign_keys FROM pragma_foreign_keys) = 0"),
            "{sql}"
        );
    }
}

#[test]
fn a_session_deleted_with_foreign_keys_off_leaves_no_row_behind() {
    let (_dir, store, _path) = temp_store();
    let session = session_in_every_table(&store);
    let other = store.create_session().expect("another");
    store
        .append(&other, NewMessage::user("untouched"))
        .expect("append");
    let conn = shell(&store);
    assert!(
        rows(&conn, "reverted_parts") > 0,
        "the revert set rows aside"
    );
    conn.execute("DELETE FROM sessions WHERE id = ?1", [session.as_str()])
        .expect("deleted as a person would");
    assert_eq!(dangling(&conn), Vec::<String>::new());
    for table in [
        "reverted_parts",
        "reverted_usage",
        "summaries",
        "idempotency_keys",
    ] {
        assert_eq!(rows(&conn, table), 0, "{table}");
    }
    let orphaned_forks: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM sessions WHERE parent_id IS NOT NULL",
            [],
            |r| r.get(0),
        )
        .expect("forks");
    assert_eq!(
        orphaned_forks, 0,
        "the fork's parent is set NULL, as the key says"
    );
    assert_eq!(store.messages(&other).expect("other").len(), 1);
}

#[test]
fn the_last_message_deleted_with_foreign_keys_off_gives_its_parts_to_no_later_message() {
    let (_dir, store, _path) = temp_store();
    let session = store.create_session().expect("create");
    store
        .append_batch(
            &session,
            vec![
                NewMessage::user("go"),
                NewMessage::assistant(vec![
                    Part::text("first"),
                    Part::text("second"),
                    Part::text("third"),
                ]),
            ],
        )
        .expect("append");
    shell(&store)
        .execute("DELETE FROM messages WHERE seq = 2", [])
        .expect("the last message deleted as a person would");
    // The next message takes the deleted one's id: it must hold its own part only.
    store
        .append(&session, NewMessage::assistant(vec![Part::text("instead")]))
        .expect("the append is accepted");
    let messages = store.messages(&session).expect("messages");
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[1].parts, vec![Part::text("instead")]);
    assert_eq!(dangling(&shell(&store)), Vec::<String>::new());
}

/// Rows that point at a row that is not there, as a person writing with foreign keys off
/// leaves them: a part of a message that never was, a message of a session that is gone (with
/// its part), an idempotency key of a missing message, and a fork whose parent is gone.
fn orphans(store: &Store) -> SessionId {
    let session = store.create_session().expect("create");
    store
        .append(&session, NewMessage::user("kept"))
        .expect("append");
    shell(store)
        .execute_batch(&format!(
            "INSERT INTO parts (message_id, ordinal, kind, text) VALUES (999, 0, 'text', 'stray');
             INSERT INTO messages (id, session_id, seq, turn_index, role, created_at)
                 VALUES (500, 'gone', 1, 0, 'user', '2026-01-01T00:00:00Z');
             INSERT INTO parts (message_id, ordinal, kind, text)
                 VALUES (500, 0, 'text', 'a part of the stray message');
             INSERT INTO idempotency_keys (session_id, key, message_id) VALUES ('{session}', 'k', 777);
             UPDATE sessions SET parent_id = 'gone' WHERE id = '{session}';"
        ))
        .expect("rows written with foreign keys off");
    session
}

/// How many rows `table` holds.
fn rows(conn: &Connection, table: &str) -> i64 {
    conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
        .expect("count")
}

#[test]
fn orphan_rows_are_mended_without_deleting_a_message_or_part_and_every_change_is_logged() {
    let (_dir, store, _path) = temp_store();
    let session = orphans(&store);
    let found = store.orphan_rows().expect("orphan rows");
    let mut tables: Vec<(&str, &str)> = found
        .iter()
        .map(|o| (o.table.as_str(), o.parent.as_str()))
        .collect();
    tables.sort_unstable();
    assert_eq!(
        tables,
        [
            ("idempotency_keys", "messages"),
            ("messages", "sessions"),
            ("parts", "messages"),
            ("sessions", "sessions")
        ]
    );
    let conn = shell(&store);
    let (messages, parts) = (rows(&conn, "messages"), rows(&conn, "parts"));
    let mended = store.mend_orphan_rows().expect("mend");
    let actions: Vec<&str> = mended.iter().map(|m| m.action).collect();
    // The session `gone` comes back (which its fork's parent names too), the stray part's
    // message comes back in a session of its own, and the key of a message that never was
    // goes.
    assert_eq!(
        actions,
        [
            "session_recreated",
            "session_recreated",
            "message_recreated",
            "deleted"
        ],
        "{mended:?}"
    );
    assert_eq!(
        rows(&conn, "messages"),
        messages + 1,
        "one message made again"
    );
    assert_eq!(rows(&conn, "parts"), parts, "no part deleted");
    assert_eq!(store.orphan_rows().expect("again"), Vec::new());
    assert_eq!(dangling(&conn), Vec::<String>::new());
    let logged: Vec<(String, String)> = conn
        .prepare("SELECT action, before_json FROM repair_log WHERE rule = 'orphan_row' ORDER BY id")
        .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
        .expect("log");
    assert_eq!(logged.len(), 4);
    assert!(
        logged[3].1.contains("\"key\":\"k\""),
        "the key's content is logged: {logged:?}"
    );
    // The stray rows are sessions a reader sees, and pass the check once mended.
    let gone = SessionId::new("gone");
    assert_eq!(store.messages(&gone).expect("gone is back").len(), 1);
    let recovered = store
        .session_ids()
        .expect("ids")
        .into_iter()
        .find(|id| id.as_str().starts_with("recovered-rows-"))
        .expect("a session of the recovered rows");
    let messages = store.messages(&recovered).expect("recovered");
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].parts, vec![Part::text("stray")]);
    // The session's own rows are as they were, and it writes on.
    assert_eq!(store.messages(&session).expect("messages").len(), 1);
    store
        .append(&session, NewMessage::assistant(vec![Part::text("on")]))
        .expect("append");
    assert_eq!(store.mend_orphan_rows().expect("nothing left"), Vec::new());
}

#[test]
fn store_repair_reports_orphan_rows_in_a_dry_run_and_mends_them_in_a_real_one() {
    let (_dir, store, path) = temp_store();
    orphans(&store);
    drop(store);
    let bytes = std::fs::read(&path).expect("read");
    let dry = store_repair(&path, &["--dry-run", "--json"]);
    assert_eq!(dry.status.code(), Some(1), "{dry:?}");
    let report: serde_json::Value = serde_json::from_slice(&dry.stdout).expect("json");
    assert_eq!(
        report["orphan_rows"].as_array().map(Vec::len),
        Some(4),
        "{report}"
    );
    assert_eq!(report["would_change_orphan_rows"], 4);
    assert_eq!(
        std::fs::read(&path).expect("read"),
        bytes,
        "a dry run writes nothing"
    );
    let real = store_repair(&path, &["--no-backup", "--json"]);
    assert_eq!(real.status.code(), Some(0), "{real:?}");
    let report: serde_json::Value = serde_json::from_slice(&real.stdout).expect("json");
    assert_eq!(report["orphan_rows_changed"], 4, "{report}");
    // The sessions made again were checked like any other.
    assert!(report["sessions_checked"].as_u64() >= Some(3), "{report}");
    let again = store_repair(&path, &["--no-backup"]);
    assert_eq!(again.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("healthy: nothing to mend"),
        "{again:?}"
    );
}
