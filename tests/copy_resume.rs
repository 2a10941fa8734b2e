//! `copy` that can be run again and refuses as a whole: a copy killed half-way failed on the
//! first session already copied when rerun; copying into a database that held one of the
//! sessions copied those before it and reported only a failure; a failed copy to a new path
//! left an empty migrated file. Now a session the destination holds with the same rows is
//! skipped and named, one it holds with other rows refuses the whole copy before anything is
//! written, and a copy to a new path leaves no file unless it succeeded.

use std::path::Path;
use std::process::{Command, Output};

use rusqlite::Connection;
use session_store::{Error, NewMessage, Part, SessionId, Store};

use crate::util::dump;

const TOOL: &str = env!("CARGO_BIN_EXE_session-store");

fn run(args: &[&str]) -> Output {
    Command::new(TOOL).args(args).output().expect("run")
}

fn code(output: &Output) -> i32 {
    output.status.code().expect("exit code")
}

/// A source with three sessions: a plain one, one with a compaction and a revert pending
/// undo, and a fork of the first.
fn source(dir: &Path) -> (Store, [SessionId; 3]) {
    let store = Store::open(dir.join("source.db")).expect("open");
    let plain = store.create_session().expect("session");
    for turn in 0..3 {
        store
            .append_batch(&plain, crate::conformance::turn_for_tests(turn))
            .expect("append");
    }
    let compacted = store.create_session().expect("session");
    for turn in 0..4 {
        store
            .append_batch(&compacted, crate::conformance::turn_for_tests(turn))
            .expect("append");
    }
    store.compact(&compacted, 2, "the start").expect("compact");
    store.revert_to_turn(&compacted, 3).expect("revert");
    let fork = store.fork(&plain, 2).expect("fork").id;
    (store, [plain, compacted, fork])
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A copy stopped after some sessions (each session is one transaction of the destination,
/// so a kill leaves whole sessions: here the first one, or the first two) finishes when it
/// is run again: those already there are skipped and named, the rest copied, and a third
/// run copies nothing and changes nothing.
#[test]
fn a_copy_run_again_skips_what_is_there_and_copies_the_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, ids) = source(dir.path());
    for done in 1..=ids.len() {
        let to = dir.path().join(format!("dest-{done}.db"));
        let first = store.copy_to_path(&to, &ids[..done]).expect("first part");
        assert_eq!((first.sessions, first.skipped.len()), (done, 0));
        let rest = store.copy_to_path(&to, &[]).expect("rerun");
        assert_eq!(rest.sessions, ids.len() - done, "{rest:?}");
        assert_eq!(rest.skipped, ids[..done].to_vec());
        let dest = Store::open(&to).expect("open");
        for id in &ids {
            let strip = |s: &Store| -> Vec<(i64, i64, Vec<Part>)> {
                s.messages(id)
                    .expect("messages")
                    .into_iter()
                    .map(|m| (m.seq, m.turn_index, m.parts))
                    .collect()
            };
            assert_eq!(strip(&store), strip(&dest), "{id}");
        }
        drop(dest);
        let before = dump(&to);
        let third = store.copy_to_path(&to, &[]).expect("third run");
        assert_eq!((third.sessions, third.skipped.len()), (0, ids.len()));
        assert_eq!(dump(&to), before, "a run with everything there wrote");
    }
}

/// Something done to a destination (its store and its path).
type Change<'a> = dyn Fn(&Store, &Path) + 'a;

/// When the destination holds one of the sessions with other rows (a message more, a part's
/// text changed, its revert undone there), the copy is refused naming it, and nothing at
/// all is written: not the sessions before it, not those after it.
#[test]
fn a_copy_onto_a_session_held_differently_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, ids) = source(dir.path());
    let changes: [(&str, &Change<'_>); 3] = [
        ("a message more", &|dest, _| {
            dest.append(&ids[1], NewMessage::user("more"))
                .expect("append");
        }),
        ("a part's text", &|_, path| {
            Connection::open(path)
                .expect("raw")
                .execute(
                    "UPDATE parts SET text = 'changed' WHERE id = (SELECT MIN(p.id) FROM parts p
                     JOIN messages m ON m.id = p.message_id WHERE m.session_id = ?1)",
                    [ids[1].as_str()],
                )
                .expect("update");
        }),
        ("its revert undone", &|dest, _| {
            dest.undo_revert(&ids[1]).expect("undo");
        }),
    ];
    for (what, change) in changes {
        let to = dir
            .path()
            .join(format!("dest-{}.db", what.replace(' ', "-")));
        // The destination holds the second session only, changed.
        store.copy_to_path(&to, &ids[1..2]).expect("copy one");
        let dest = Store::open(&to).expect("open");
        change(&dest, &to);
        drop(dest);
        let before = dump(&to);
        let refused = store.copy_to_path(&to, &[]);
        match &refused {
            Err(Error::CopyConflict {
                first, sessions, ..
            }) => {
                assert_eq!(first, &ids[1], "{what}");
                assert_eq!(sessions, &ids[1..2].to_vec(), "{what}");
            }
            other => panic!("{what}: {other:?}"),
        }
        let text = refused.expect_err("refused").to_string();
        assert!(text.contains("nothing was copied"), "{what}: {text}");
        assert_eq!(dump(&to), before, "{what}: a refused copy wrote");
        // The CLI says so, exit 2, and writes nothing either.
        let output = run(&[
            "copy",
            "--from",
            dir.path().join("source.db").to_str().expect("utf-8"),
            "--to",
            to.to_str().expect("utf-8"),
        ]);
        assert_eq!(code(&output), 2, "{what}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(&format!("holds session {} with other rows", ids[1]))
                && stderr.contains("nothing was copied"),
            "{what}: {stderr}"
        );
        assert_eq!(dump(&to), before, "{what}: a refused CLI copy wrote");
    }
}

/// The CLI names each skipped session on stderr and counts them on stdout.
#[test]
fn a_copy_run_again_names_the_skipped_sessions_on_stderr() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, ids) = source(dir.path());
    drop(store);
    let from = dir.path().join("source.db");
    let to = dir.path().join("dest.db");
    let args = [
        "copy",
        "--from",
        from.to_str().expect("utf-8"),
        "--to",
        to.to_str().expect("utf-8"),
    ];
    let first = run(&args[..3]
        .iter()
        .copied()
        .chain(["--session", ids[0].as_str()])
        .chain(args[3..].iter().copied())
        .collect::<Vec<_>>());
    assert_eq!(code(&first), 0, "{first:?}");
    let again = run(&args);
    assert_eq!(code(&again), 0, "{again:?}");
    let stdout = String::from_utf8_lossy(&again.stdout);
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        stdout.contains("copied 2 sessions") && stdout.contains("1 session skipped"),
        "{stdout}"
    );
    assert!(
        stderr.contains(&format!("skipped session {}", ids[0])),
        "{stderr}"
    );
    for id in &ids[1..] {
        assert!(!stderr.contains(id.as_str()), "{stderr}");
    }
}

/// A copy to a path that does not exist yet and fails (a row the reader refuses, a row the
/// destination refuses) leaves no file there and no temporary file beside it; the CLI
/// exits 2.
#[test]
fn a_failed_copy_to_a_new_path_leaves_no_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, ids) = source(dir.path());
    drop(store);
    let from = dir.path().join("source.db");
    let damages = [
        // The reader refuses it: a seq that is not an integer.
        "UPDATE messages SET seq = 'first' WHERE id = (SELECT MAX(id) FROM messages)",
        // The destination refuses it: a role outside its CHECK.
        "UPDATE messages SET role = 'robot' WHERE id = (SELECT MAX(id) FROM messages)",
    ];
    for damage in damages {
        let copy = dir.path().join("damaged.db");
        std::fs::copy(&from, &copy).expect("copy");
        let conn = Connection::open(&copy).expect("raw");
        conn.execute_batch("PRAGMA ignore_check_constraints = ON")
            .expect("pragma");
        conn.execute(damage, []).expect("damage");
        drop(conn);
        let out = tempfile::tempdir().expect("tempdir");
        let to = out.path().join("new.db");
        let source = Store::open(&copy).expect("open");
        let failed = source.copy_to_path(&to, &[]);
        assert!(failed.is_err(), "{damage}: {failed:?}");
        assert_eq!(files_in(out.path()), Vec::<String>::new(), "{damage}");
        drop(source);
        let output = run(&[
            "copy",
            "--from",
            copy.to_str().expect("utf-8"),
            "--to",
            to.to_str().expect("utf-8"),
        ]);
        assert_eq!(code(&output), 2, "{damage}: {output:?}");
        assert_eq!(files_in(out.path()), Vec::<String>::new(), "{damage}");
        std::fs::remove_file(&copy).expect("remove");
    }
    // Undamaged, the same copy succeeds and the file appears.
    let out = tempfile::tempdir().expect("tempdir");
    let to = out.path().join("new.db");
    let report = Store::open(&from)
        .expect("open")
        .copy_to_path(&to, &[])
        .expect("copy");
    assert_eq!(report.sessions, ids.len());
    assert_eq!(files_in(out.path()), vec!["new.db".to_owned()]);
}

/// A real `kill -9` of `session-store copy` at several moments, each followed by a rerun:
/// the rerun exits 0 (sessions the killed run finished are skipped and named), and the
/// destination then holds every session exactly as the source does.
#[cfg(unix)]
#[test]
fn a_copy_killed_at_any_moment_finishes_when_run_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let from = dir.path().join("many.db");
    let store = Store::open(&from).expect("open");
    let mut ids = Vec::new();
    for _ in 0..120 {
        let session = store.create_session().expect("session");
        for turn in 0..3 {
            store
                .append_batch(&session, crate::conformance::turn_for_tests(turn))
                .expect("append");
        }
        ids.push(session);
    }
    let from_text = from.to_str().expect("utf-8");
    let mut resumed = 0;
    for (n, delay_ms) in [40u64, 150, 400, 900].into_iter().enumerate() {
        // Into an existing database (the new-file case leaves nothing to resume: see above).
        let to = dir.path().join(format!("dest-{n}.db"));
        drop(Store::open(&to).expect("create"));
        let to_text = to.to_str().expect("utf-8");
        let mut child = Command::new(TOOL)
            .args(["copy", "--from", from_text, "--to", to_text])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn");
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
        let output = run(&["copy", "--from", from_text, "--to", to_text]);
        assert_eq!(code(&output), 0, "killed at {delay_ms} ms: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        if stderr.contains("skipped session") {
            resumed += 1;
        }
        let dest = Store::open(&to).expect("open");
        assert_eq!(dest.sessions().expect("sessions").len(), ids.len());
        for id in &ids {
            let strip = |s: &Store| -> Vec<(i64, Vec<Part>)> {
                s.messages(id)
                    .expect("messages")
                    .into_iter()
                    .map(|m| (m.seq, m.parts))
                    .collect()
            };
            assert_eq!(strip(&store), strip(&dest), "killed at {delay_ms} ms: {id}");
        }
    }
    eprintln!("{resumed} of 4 reruns skipped sessions a killed run had copied");
}
