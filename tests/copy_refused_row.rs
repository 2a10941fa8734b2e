//! `copy` of a database in which a person wrote a value outside the schema's constraints
//! (with `sqlite3` and `PRAGMA ignore_check_constraints`): the copy fails with exit 2 and
//! names the session whose row the destination refused, and what the destination said; a
//! new destination file is not left behind.

use session_store::{Error, NewMessage, Part, Store};

use crate::util::session_store;

#[test]
fn a_row_the_destination_refuses_names_its_session() {
    let edits = [
        ("messages", "state = 'weird'", "state"),
        ("messages", "compacted = 5", "compacted"),
        ("messages", "role = 'wizard'", "role"),
        ("parts", "is_error = 7", "is_error"),
    ];
    for (table, edit, words) in edits {
        let dir = tempfile::tempdir().expect("tempdir");
        let from = dir.path().join("from.db");
        let store = Store::open(&from).expect("open");
        let mut sessions = Vec::new();
        for n in 0..3 {
            let session = store.create_session().expect("session");
            store
                .append_batch(
                    &session,
                    vec![
                        NewMessage::user(format!("hello {n}")),
                        NewMessage::assistant(vec![Part::text("hi")]),
                    ],
                )
                .expect("append");
            sessions.push(session);
        }
        drop(store);
        let broken = &sessions[1];
        let conn = rusqlite::Connection::open(&from).expect("sqlite3");
        conn.execute_batch("PRAGMA ignore_check_constraints = ON")
            .expect("pragma");
        let target = if table == "parts" {
            "message_id IN (SELECT id FROM messages WHERE session_id = ?1)"
        } else {
            "session_id = ?1"
        };
        conn.execute(
            &format!("UPDATE {table} SET {edit} WHERE {target}"),
            [broken.as_str()],
        )
        .expect("edit");
        drop(conn);
        let to = dir.path().join("to.db");
        let out = session_store(
            &from,
            &[
                "copy",
                "--from",
                from.to_str().expect("utf-8"),
                "--to",
                to.to_str().expect("utf-8"),
            ],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{edit}: {stderr}");
        assert!(
            stderr.contains(broken.as_str()),
            "{edit}: the session is not named: {stderr}"
        );
        assert!(stderr.contains(words), "{edit}: no reason: {stderr}");
        assert!(!to.exists(), "{edit}: a failed copy left a new file");
        // Through the library, into an existing database: the typed error names the session.
        let dest_path = dir.path().join("dest.db");
        let dest = Store::open(&dest_path).expect("dest");
        let source = Store::open(&from).expect("source");
        match source.copy_to(&dest, std::slice::from_ref(broken)) {
            Err(Error::CopyRowRefused { session, detail }) => {
                assert_eq!(&session, broken, "{edit}");
                assert!(detail.contains(words), "{edit}: {detail}");
            }
            other => panic!("{edit}: {other:?}"),
        }
        assert!(dest.sessions().expect("list").is_empty(), "{edit}: written");
    }
}
