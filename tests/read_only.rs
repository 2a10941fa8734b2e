//! Read-only access: a store opened read-only (`StoreOptions::read_only`, SQLite's
//! `SQLITE_OPEN_READ_ONLY`), or a database file the process may not write (mode 0444, plus
//! the immutable attribute when running as root, who ignores mode bits), must answer every
//! write with a typed error (`Error::is_read_only`) and change nothing, while reads keep
//! working and keep seeing what a writer commits meanwhile.

use std::fs::OpenOptions;
use std::os::unix::fs::PermissionsExt;

use session_store::{NewMessage, Part, SessionId, Store, StoreOptions};

use crate::fault_support::{assert_integrity, raw, tool_turn};

fn read_only() -> StoreOptions {
    StoreOptions {
        read_only: true,
        ..StoreOptions::default()
    }
}

fn file_bytes(db: &std::path::Path) -> Vec<u8> {
    std::fs::read(db).expect("read db file")
}

/// Every kind of write the store offers, each one valid for the session's state (so only
/// read-only access can refuse it), each expected to fail as read-only.
fn assert_every_write_refused(store: &Store, session: &SessionId) {
    let pending = store.pending_tool_uses(session).expect("pending");
    let mut attempts = vec![("create_session", store.create_session().map(|_| ()))];
    if pending.is_empty() {
        attempts.push((
            "append",
            store
                .append(session, NewMessage::user("hello?"))
                .map(|_| ()),
        ));
        attempts.push((
            "append_batch",
            store.append_batch(session, tool_turn("ro")).map(|_| ()),
        ));
        // Nothing to cancel: nothing to write, so no error either.
        assert_eq!(
            store.cancel_pending(session, "read-only").ok(),
            Some(vec![])
        );
    } else {
        let answer = |id: &String| NewMessage::tool(vec![Part::tool_result(id, "late")]);
        attempts.push((
            "append",
            store.append(session, answer(&pending[0])).map(|_| ()),
        ));
        attempts.push((
            "append_batch",
            store
                .append_batch(session, pending.iter().map(answer).collect())
                .map(|_| ()),
        ));
        attempts.push((
            "cancel_pending",
            store.cancel_pending(session, "read-only").map(|_| ()),
        ));
    }
    for (what, result) in attempts {
        let error = result.expect_err(what);
        assert!(
            error.is_read_only(),
            "{what}: not a read-only error: {error:?}"
        );
    }
}

#[test]
fn read_only_store_refuses_writes_with_a_typed_error_and_still_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("ro.db");
    let writer = Store::open(&db).expect("open");
    let session = writer.create_session().expect("session");
    writer
        .append_batch(&session, tool_turn("a"))
        .expect("turn a");
    let mut pending = tool_turn("b");
    pending.truncate(2);
    writer
        .append_batch(&session, pending)
        .expect("pending turn");

    let reader = Store::open_with(&db, &read_only()).expect("open read-only");
    let before = reader.messages(&session).expect("read");
    assert_eq!(before.len(), 8);
    assert_eq!(reader.sessions().expect("sessions").len(), 1);
    assert_eq!(
        reader.pending_tool_uses(&session).expect("pending").len(),
        3
    );
    assert_every_write_refused(&reader, &session);
    assert_eq!(reader.messages(&session).expect("read again"), before);

    // A writer beside it commits; the read-only store sees it.
    writer
        .cancel_pending(&session, "test")
        .expect("writer cancels");
    assert_eq!(reader.messages(&session).expect("fresh read").len(), 9);
    drop(writer);
    drop(reader);
    assert_integrity(&raw(&db));
}

#[test]
fn read_only_open_of_a_closed_database_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("closed.db");
    let session = {
        let store = Store::open(&db).expect("open");
        let session = store.create_session().expect("session");
        store.append_batch(&session, tool_turn("a")).expect("turn");
        session
    };
    crate::util::settle(&db);
    let bytes = file_bytes(&db);
    {
        let reader = Store::open_with(&db, &read_only()).expect("open read-only");
        assert_eq!(reader.messages(&session).expect("read").len(), 6);
        assert_every_write_refused(&reader, &session);
    }
    assert_eq!(file_bytes(&db), bytes, "a read-only store changed the file");
}

/// Clears the immutable attribute again, even when the test fails, so the tempdir goes away.
struct Immutable<'a>(&'a std::path::Path);

impl Drop for Immutable<'_> {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(self.0)
            .status();
    }
}

/// Makes `db` unwritable for this process: permission bits, and for a privileged user (who
/// ignores them) the immutable attribute. `None` when neither works here.
fn write_protect(db: &std::path::Path) -> Option<Option<Immutable<'_>>> {
    std::fs::set_permissions(db, std::fs::Permissions::from_mode(0o444)).expect("chmod");
    if OpenOptions::new().write(true).open(db).is_err() {
        return Some(None);
    }
    let set = std::process::Command::new("chattr")
        .arg("+i")
        .arg(db)
        .status()
        .is_ok_and(|s| s.success());
    let guard = Immutable(db);
    (set && OpenOptions::new().write(true).open(db).is_err()).then_some(Some(guard))
}

#[test]
fn write_protected_file_refuses_writes_with_a_typed_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("protected.db");
    let session = {
        let store = Store::open(&db).expect("open");
        let session = store.create_session().expect("session");
        store.append_batch(&session, tool_turn("a")).expect("turn");
        session
    };
    let Some(_guard) = write_protect(&db) else {
        // Root ignores permission bits and chattr is missing or unsupported on this file
        // system; the tests above cover the typed error through SQLITE_OPEN_READ_ONLY.
        eprintln!("write_protected_file: cannot write-protect a file here; skipped");
        return;
    };
    let bytes = file_bytes(&db);
    // Opened for writing, SQLite falls back to reading; opened read-only, it only reads.
    for options in [StoreOptions::default(), read_only()] {
        let store = Store::open_with(&db, &options).expect("open of a write-protected file");
        assert_eq!(store.messages(&session).expect("read").len(), 6);
        assert_every_write_refused(&store, &session);
    }
    assert_eq!(file_bytes(&db), bytes);
}
