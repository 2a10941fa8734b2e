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

/// Makes a folder and the files in it unwritable for this process, the way a read-only mount
/// or another user's folder is: mode bits, and for a privileged user (who ignores them) the
/// immutable attribute, which stops root too. Undone on drop. `None` when neither works here
/// (a file system without `chattr` support, as root).
struct Unwritable {
    paths: Vec<std::path::PathBuf>,
}

impl Unwritable {
    fn folder(dir: &std::path::Path) -> Option<Self> {
        let mut paths: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
            .expect("read_dir")
            .map(|e| e.expect("entry").path())
            .collect();
        paths.push(dir.to_path_buf());
        Self::these(paths)
    }

    fn these(paths: Vec<std::path::PathBuf>) -> Option<Self> {
        let guard = Unwritable { paths };
        for path in &guard.paths {
            let mode = if path.is_dir() { 0o555 } else { 0o444 };
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        }
        if guard.writable() {
            for path in &guard.paths {
                let _ = std::process::Command::new("chattr")
                    .arg("+i")
                    .arg(path)
                    .status();
            }
        }
        (!guard.writable()).then_some(guard)
    }

    /// True while this process can still write one of the paths.
    fn writable(&self) -> bool {
        self.paths.iter().any(|path| {
            if path.is_dir() {
                let probe = path.join(".probe");
                let made = std::fs::write(&probe, b"x").is_ok();
                let _ = std::fs::remove_file(&probe);
                made
            } else {
                OpenOptions::new().write(true).open(path).is_ok()
            }
        })
    }
}

impl Drop for Unwritable {
    fn drop(&mut self) {
        for path in &self.paths {
            let _ = std::process::Command::new("chattr")
                .arg("-i")
                .arg(path)
                .status();
            let mode = if path.is_dir() { 0o755 } else { 0o644 };
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode));
        }
    }
}

const STORE: &str = env!("CARGO_BIN_EXE_session-store");

/// A command's exit code, stdout and stderr.
fn cli(db: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let output = std::process::Command::new(STORE)
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .expect("run");
    (
        output.status.code().expect("exit code"),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The read commands a person runs, each with what it printed and its exit code.
fn read_commands(db: &std::path::Path, session: &SessionId) -> Vec<(String, i32, String)> {
    let id = session.as_str();
    let commands: [&[&str]; 5] = [
        &["sessions", "--json"],
        &["show", id],
        &["export", id, "--format", "anthropic"],
        &["search", "hello"],
        &["usage", id],
    ];
    commands
        .iter()
        .map(|args| {
            let (code, stdout, _) = cli(db, args);
            (args.join(" "), code, stdout)
        })
        .collect()
}

fn names_and_bytes(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut all: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| {
            let path = e.expect("entry").path();
            let name = path
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            (name, std::fs::read(&path).expect("read"))
        })
        .collect();
    all.sort();
    all
}

/// A database in `dir` with a tool turn and a "hello", its search index up to date.
fn database_in(dir: &std::path::Path) -> (std::path::PathBuf, SessionId) {
    let db = dir.join("sessions.db");
    let store = Store::open(&db).expect("open");
    let session = store.create_session().expect("session");
    store
        .append(&session, NewMessage::user("hello there"))
        .expect("append");
    store.append_batch(&session, tool_turn("a")).expect("turn");
    store
        .search("hello", &session_store::SearchOptions::default())
        .expect("search");
    (db, session)
}

/// Read commands on a database this process may not write (simulated: the folder and its
/// files made unwritable, which stops root too through the immutable attribute), with and
/// without the WAL side files, print what they print on a writable copy, exit 0, and change
/// no byte of any file there.
#[test]
fn read_commands_work_on_a_database_they_may_not_write_wal_side_files_or_not() {
    // The cases: a closed database (no side files) in an unwritable folder; the same with
    // only the file unwritable; a live database's three files (a -wal holding commits, its
    // -shm) in an unwritable folder.
    for case in [
        "closed, folder",
        "closed, file only",
        "with -wal and -shm, folder",
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let (db, session) = database_in(dir.path());
        let writer = Store::open(&db).expect("keep it open");
        let copy_dir = tempfile::tempdir().expect("tempdir");
        let ro_dir = tempfile::tempdir().expect("tempdir");
        let writer = if case.starts_with("closed") {
            drop(writer);
            crate::util::settle(&db);
            None
        } else {
            writer
                .append(&session, NewMessage::user("hello again"))
                .expect("append");
            writer
                .search("hello", &session_store::SearchOptions::default())
                .expect("search");
            assert!(dir.path().join("sessions.db-wal").exists());
            Some(writer)
        };
        // Copied while the writer (if any) still has the database open: its -wal and -shm.
        for (name, bytes) in names_and_bytes(dir.path()) {
            std::fs::write(copy_dir.path().join(&name), &bytes).expect("copy");
            std::fs::write(ro_dir.path().join(&name), &bytes).expect("copy");
        }
        drop(writer);
        let expected = read_commands(&copy_dir.path().join("sessions.db"), &session);
        let ro_db = ro_dir.path().join("sessions.db");
        let guard = if case.ends_with("file only") {
            Unwritable::these(vec![ro_db.clone()])
        } else {
            Unwritable::folder(ro_dir.path())
        };
        let Some(_guard) = guard else {
            eprintln!("read_commands: cannot make a folder unwritable here; skipped");
            return;
        };
        let before = names_and_bytes(ro_dir.path());
        let got = read_commands(&ro_db, &session);
        for ((command, code, stdout), (_, want_code, want)) in got.iter().zip(&expected) {
            assert_eq!(*want_code, 0, "{case}: {command} on the writable copy");
            assert_eq!(*code, 0, "{case}: {command}: {stdout}");
            assert_eq!(stdout, want, "{case}: {command}");
        }
        assert!(got
            .iter()
            .any(|(c, _, out)| c.starts_with("search") && out.contains("hello")));
        if case.ends_with("folder") {
            assert_eq!(
                names_and_bytes(ro_dir.path()),
                before,
                "{case}: a file changed"
            );
        }
    }
}

/// A read-only copy whose search index is behind (parts appended after its last search)
/// cannot bring it up to date: `search` says so on stderr instead of silently finding
/// nothing, exits 0; the writable copy finds them, and says nothing.
#[test]
fn a_search_on_a_database_it_may_not_write_says_when_its_index_is_behind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, session) = database_in(dir.path());
    let store = Store::open(&db).expect("open");
    store
        .append(&session, NewMessage::user("zebra crossing"))
        .expect("append");
    drop(store);
    crate::util::settle(&db);
    let copy_dir = tempfile::tempdir().expect("tempdir");
    let copy = copy_dir.path().join("sessions.db");
    std::fs::copy(&db, &copy).expect("copy");
    let Some(_guard) = Unwritable::folder(dir.path()) else {
        eprintln!("a_search_on_a_database_it_may_not_write: cannot make a folder unwritable here; skipped");
        return;
    };
    for (query, indexed) in [("zebra", false), ("hello", true), ("crossing", false)] {
        let (code, stdout, stderr) = cli(&db, &["search", query]);
        assert_eq!(code, 0, "{stderr}");
        assert!(
            stderr.contains("misses parts written since"),
            "{query}: {stderr}"
        );
        assert_eq!(stdout.contains(query), indexed, "{query}: {stdout}");
        let (code, stdout, stderr) = cli(&copy, &["search", query]);
        assert_eq!(code, 0, "{stderr}");
        assert!(
            stdout.contains(query),
            "{query} on the writable copy: {stdout}"
        );
        assert!(!stderr.contains("misses parts"), "{stderr}");
    }
}

/// A WAL database whose -wal holds commits but whose -shm is missing, in a folder nobody
/// here may write: SQLite cannot read those commits, and the file alone would miss them.
/// A read command either reads them all (the same answers as a writable copy) or refuses
/// saying why; it never answers from the file without them.
#[test]
fn a_wal_with_commits_but_no_shm_is_read_whole_or_refused_saying_why() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, session) = database_in(dir.path());
    let writer = Store::open(&db).expect("open");
    writer
        .append(&session, NewMessage::user("hello from the wal"))
        .expect("append");
    let ro_dir = tempfile::tempdir().expect("tempdir");
    let copy_dir = tempfile::tempdir().expect("tempdir");
    for (name, bytes) in names_and_bytes(dir.path()) {
        std::fs::write(copy_dir.path().join(&name), &bytes).expect("copy");
        if !name.ends_with("-shm") {
            std::fs::write(ro_dir.path().join(&name), &bytes).expect("copy");
        }
    }
    drop(writer);
    let wal = ro_dir.path().join("sessions.db-wal");
    assert!(std::fs::metadata(&wal).expect("wal").len() > 0);
    let expected = read_commands(&copy_dir.path().join("sessions.db"), &session);
    let Some(_guard) = Unwritable::folder(ro_dir.path()) else {
        eprintln!("a_wal_with_commits_but_no_shm: cannot make a folder unwritable here; skipped");
        return;
    };
    let ro_db = ro_dir.path().join("sessions.db");
    for ((command, code, stdout), (_, _, want)) in
        read_commands(&ro_db, &session).iter().zip(&expected)
    {
        eprintln!("{command}: exit {code}");
        if *code == 0 {
            assert_eq!(
                stdout, want,
                "{command}: answered without the -wal's commits"
            );
        } else {
            let (_, _, stderr) = cli(&ro_db, &command.split(' ').collect::<Vec<_>>());
            assert!(stderr.contains("-wal holds commits"), "{command}: {stderr}");
        }
    }
}
