//! Hostile input and hostile environments, attacked from outside the way a black-box search
//! did: a `--db` naming a FIFO blocked `store-repair` forever; `/dev/null`, `/proc` files,
//! `:memory:` and `file:` URIs were taken for databases (stores that keep nothing, locking
//! turned off, a `/dev/null-journal` left behind); a missing folder or a full disk stalled
//! 35 s and left a 0-byte or half-migrated file; backups were world-readable, left temp files
//! after a kill, and could be named after the database's own `-journal` (which SQLite then
//! deleted); one session with a row outside the contract stopped `sessions` and the whole
//! `store-repair` run; input errors did not say where, and duplicate JSON keys were accepted.
//!
//! Every test asserts the exit code, a generous timeout where the failure was a hang or a
//! stall, and that nothing was written or left behind.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde_json::Value;
use session_store::repair::{backup_database, RepairOptions};
use session_store::{Error, NewMessage, OpenError, Part, SessionId, Store, StoreOptions};

use crate::util::dump;

const STORE: &str = env!("CARGO_BIN_EXE_session-store");
const REPAIR: &str = env!("CARGO_BIN_EXE_store-repair");

/// Far beyond what any of these commands needs, far below the 35 s pool stall they had.
const LIMIT: Duration = Duration::from_secs(20);

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs `command` in `dir`, killing it and failing the test if it outlives [`LIMIT`].
fn run_in(dir: &Path, mut command: Command) -> Run {
    let mut child = command
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            break;
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{command:?} still running after {LIMIT:?}: it hangs");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().expect("output");
    Run {
        code: output.status.code().expect("exit code"),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn cmd(bin: &str, args: &[&str]) -> Command {
    let mut command = Command::new(bin);
    command.args(args);
    command
}

/// The names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

const TRANSCRIPT: &str = r#"{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}"#;

fn transcript(dir: &Path) -> PathBuf {
    let path = dir.join("t.json");
    std::fs::write(&path, TRANSCRIPT).expect("write transcript");
    path
}

/// A FIFO in `dir` (through `mkfifo`, which every Unix has).
fn fifo(dir: &Path) -> PathBuf {
    let path = dir.join("fifo");
    let status = Command::new("mkfifo").arg(&path).status().expect("mkfifo");
    assert!(status.success());
    path
}

#[test]
fn a_fifo_as_database_is_refused_at_once_by_every_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = fifo(dir.path());
    let fifo = fifo.to_str().expect("utf-8");
    let input = transcript(dir.path());
    let input = input.to_str().expect("utf-8");
    let before = listing(dir.path());
    for command in [
        cmd(REPAIR, &["--db", fifo]),
        cmd(REPAIR, &["--db", fifo, "--dry-run"]),
        cmd(STORE, &["--db", fifo, "sessions"]),
        cmd(
            STORE,
            &["--db", fifo, "import", "--format", "openai", input],
        ),
    ] {
        let run = run_in(dir.path(), command);
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert!(run.stderr.contains("FIFO"), "{}", run.stderr);
    }
    // A FIFO as the transcript to import is refused too, not read until a writer comes.
    let db = dir.path().join("s.db");
    let run = run_in(
        dir.path(),
        cmd(
            STORE,
            &[
                "--db",
                db.to_str().expect("utf-8"),
                "import",
                "--format",
                "openai",
                fifo,
            ],
        ),
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("not a regular file"), "{}", run.stderr);
    assert_eq!(listing(dir.path()), before);
}

#[test]
fn devices_and_proc_files_are_not_databases() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = transcript(dir.path());
    let input = input.to_str().expect("utf-8");
    let journal_before = Path::new("/dev/null-journal").exists();
    for path in ["/dev/null", "/proc/self/status"] {
        for command in [
            cmd(REPAIR, &["--db", path, "--dry-run"]),
            cmd(REPAIR, &["--db", path]),
            cmd(STORE, &["--db", path, "sessions"]),
            cmd(
                STORE,
                &["--db", path, "import", "--format", "openai", input],
            ),
        ] {
            let run = run_in(dir.path(), command);
            assert_eq!(run.code, 2, "{path}: {}{}", run.stdout, run.stderr);
            assert!(!run.stdout.contains("would apply"), "{}", run.stdout);
        }
    }
    if !journal_before {
        assert!(!Path::new("/dev/null-journal").exists());
    }
}

#[test]
fn memory_and_uri_paths_are_refused_and_nothing_is_created() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = transcript(dir.path());
    let input = input.to_str().expect("utf-8");
    let before = listing(dir.path());
    for db in [":memory:", "file:x.db?nolock=1", "file:x.db", ""] {
        for command in [
            cmd(STORE, &["--db", db, "import", "--format", "openai", input]),
            cmd(REPAIR, &["--db", db]),
        ] {
            let run = run_in(dir.path(), command);
            assert_eq!(run.code, 2, "{db:?}: {}{}", run.stdout, run.stderr);
            assert!(run.stdout.is_empty(), "{db:?} printed {}", run.stdout);
        }
        assert_eq!(listing(dir.path()), before, "{db:?} created a file");
    }
    for db in [":memory:", "file:x.db?nolock=1"] {
        let err = Store::open(db).expect_err(db);
        assert!(
            matches!(err, OpenError::InvalidPath { .. }),
            "{db}: {err:?}"
        );
    }
}

#[test]
fn a_missing_folder_fails_fast_with_its_cause_and_creates_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = transcript(dir.path());
    let db = dir.path().join("no/such/folder/s.db");
    let run = run_in(
        dir.path(),
        cmd(
            STORE,
            &[
                "--db",
                db.to_str().expect("utf-8"),
                "import",
                "--format",
                "openai",
                input.to_str().expect("utf-8"),
            ],
        ),
    );
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("does not exist"), "{}", run.stderr);
    assert!(!dir.path().join("no").exists());
    let err = Store::open(&db).expect_err("missing folder");
    assert!(matches!(err, OpenError::InvalidPath { .. }), "{err:?}");
}

/// A new database on a full disk: `StoreOptions::max_page_count` is the disk the library
/// sees; the migration cannot finish, and no file (nor a temporary one) is left.
#[test]
fn creating_a_database_on_a_full_disk_leaves_no_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("s.db");
    let options = StoreOptions {
        max_page_count: Some(4),
        ..StoreOptions::default()
    };
    let err = Store::open_with(&db, &options).expect_err("full");
    assert!(err.is_full(), "{err:?}");
    assert!(listing(dir.path()).is_empty(), "{:?}", listing(dir.path()));
}

/// The same through the CLI with a real write limit (`ulimit -f 4`: 4 KiB, and SIGXFSZ
/// ignored so that writes fail with an error instead of killing the process).
#[test]
fn commands_with_four_kib_of_room_fail_fast_and_leave_nothing_behind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = transcript(dir.path());
    let limited = |args: &[&str]| {
        let mut command = Command::new("bash");
        command
            .arg("-c")
            .arg("trap '' XFSZ; ulimit -f 4; exec \"$@\"")
            .arg("limited")
            .args(args);
        command
    };
    let db = dir.path().join("new.db");
    let run = run_in(
        dir.path(),
        limited(&[
            STORE,
            "--db",
            db.to_str().expect("utf-8"),
            "import",
            "--format",
            "openai",
            input.to_str().expect("utf-8"),
        ]),
    );
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert_eq!(listing(dir.path()), ["t.json"]);

    // store-repair on an existing, empty database file: migrating needs more than 4 KiB.
    let empty = dir.path().join("empty.db");
    std::fs::File::create(&empty).expect("create");
    let run = run_in(
        dir.path(),
        limited(&[
            REPAIR,
            "--db",
            empty.to_str().expect("utf-8"),
            "--no-backup",
        ]),
    );
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    let mut left = listing(dir.path());
    left.retain(|n| n.starts_with('.'));
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

fn store_with_session(dir: &Path) -> (PathBuf, Store, SessionId) {
    let db = dir.join("s.db");
    let store = Store::open(&db).expect("open");
    let session = store.create_session().expect("session");
    store
        .append(&session, NewMessage::user("hello"))
        .expect("append");
    (db, store, session)
}

#[cfg(unix)]
#[test]
fn a_backup_keeps_the_database_permission_bits() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, store, _) = store_with_session(dir.path());
    for mode in [0o600, 0o640] {
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(mode)).expect("chmod");
        let copy = dir.path().join(format!("copy-{mode:o}.db"));
        store.backup_to(&copy).expect("backup");
        let got = std::fs::metadata(&copy).expect("meta").permissions().mode() & 0o777;
        assert_eq!(got, mode);
        assert_eq!(dump(&copy), dump(&db));
    }
}

#[test]
fn a_temporary_file_left_by_a_killed_backup_is_removed_by_the_next() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, store, _) = store_with_session(dir.path());
    // A process that has exited: its pid names no live process now.
    let mut gone = Command::new("true").spawn().expect("spawn");
    let pid = gone.id();
    gone.wait().expect("wait");
    let stale = dir.path().join(format!(".copy.db.tmp-{pid}-0"));
    let stale_journal = dir.path().join(format!(".copy.db.tmp-{pid}-0-journal"));
    std::fs::write(&stale, b"half a backup").expect("write");
    std::fs::write(&stale_journal, b"journal").expect("write");
    store
        .backup_to(&dir.path().join("copy.db"))
        .expect("backup");
    assert!(!stale.exists() && !stale_journal.exists());
    // A file that merely looks alike is not ours and stays.
    let foreign = dir.path().join(".copy2.db.tmp-notapid");
    std::fs::write(&foreign, b"x").expect("write");
    store
        .backup_to(&dir.path().join("copy2.db"))
        .expect("backup");
    assert!(foreign.exists());
    let mut names = listing(dir.path());
    names.retain(|n| n.contains(".tmp-") && !n.contains("notapid"));
    assert!(names.is_empty(), "{names:?}");
    drop(db);
}

#[test]
fn a_backup_named_after_the_database_or_its_side_files_is_refused_and_nothing_is_mended() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, store, session) = store_with_session(dir.path());
    // A broken session for store-repair to mend: its user message answers nothing.
    store
        .append(&session, NewMessage::assistant(vec![Part::text("ok")]))
        .expect("append");
    drop(store);
    let conn = Connection::open(&db).expect("raw");
    conn.execute("UPDATE messages SET turn_index = 7", [])
        .expect("break turns");
    drop(conn);
    let before = dump(&db);
    let db_text = db.to_str().expect("utf-8").to_owned();
    for suffix in ["", "-journal", "-wal", "-shm"] {
        let backup = format!("{db_text}{suffix}");
        let existed = Path::new(&backup).exists();
        let run = run_in(
            dir.path(),
            cmd(REPAIR, &["--db", &db_text, "--backup", &backup]),
        );
        assert_eq!(run.code, 2, "{suffix}: {}{}", run.stdout, run.stderr);
        assert_eq!(dump(&db), before, "{suffix}: mended without a backup");
        if !existed {
            assert!(!Path::new(&backup).exists(), "{suffix}");
        }
        let err = backup_database(&db, Path::new(&backup)).expect_err(suffix);
        assert!(
            matches!(err, Error::InvalidPath { .. } | Error::Io { .. }),
            "{err:?}"
        );
    }
    // A path beside it is fine, and the run mends.
    let backup = dir.path().join("fine.bak");
    let run = run_in(
        dir.path(),
        cmd(
            REPAIR,
            &[
                "--db",
                &db_text,
                "--backup",
                backup.to_str().expect("utf-8"),
            ],
        ),
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(dump(&backup), before);
}

/// Sessions A, B and C each hold one row outside the contract; D is broken but readable;
/// E is healthy.
fn database_with_unreadable_rows(dir: &Path) -> (PathBuf, [SessionId; 5]) {
    let db = dir.join("s.db");
    let store = Store::open(&db).expect("open");
    let ids: Vec<SessionId> = (0..5)
        .map(|_| {
            let session = store.create_session().expect("session");
            store
                .append(&session, NewMessage::user("hello"))
                .expect("append");
            store
                .append(&session, NewMessage::assistant(vec![Part::text("hi")]))
                .expect("append");
            session
        })
        .collect();
    drop(store);
    let conn = Connection::open(&db).expect("raw");
    conn.execute_batch("PRAGMA ignore_check_constraints = ON")
        .expect("pragma");
    let first_message = |session: &SessionId| -> i64 {
        conn.query_row(
            "SELECT id FROM messages WHERE session_id = ?1 ORDER BY seq LIMIT 1",
            [session.as_str()],
            |r| r.get(0),
        )
        .expect("message")
    };
    conn.execute(
        "UPDATE messages SET role = 'robot' WHERE id = ?1",
        [first_message(&ids[0])],
    )
    .expect("robot");
    conn.execute(
        "UPDATE parts SET kind = 'hologram' WHERE message_id = ?1",
        [first_message(&ids[1])],
    )
    .expect("kind");
    conn.execute(
        "UPDATE messages SET created_at = 'yesterday' WHERE id = ?1",
        [first_message(&ids[2])],
    )
    .expect("time");
    conn.execute(
        "UPDATE messages SET turn_index = 9 WHERE session_id = ?1",
        [ids[3].as_str()],
    )
    .expect("turns");
    drop(conn);
    let ids: [SessionId; 5] = ids.try_into().expect("five");
    (db, ids)
}

fn session_dump(db: &Path, session: &SessionId) -> String {
    let conn = Connection::open(db).expect("raw");
    let mut stmt = conn
        .prepare(
            "SELECT m.id, m.seq, m.turn_index, m.role, m.compacted, m.created_at,
                    p.id, p.ordinal, p.kind, p.text
             FROM messages m LEFT JOIN parts p ON p.message_id = m.id
             WHERE m.session_id = ?1 ORDER BY m.seq, p.ordinal",
        )
        .expect("prepare");
    let rows = stmt
        .query_map([session.as_str()], |r| {
            Ok((0..10)
                .map(|i| format!("{:?}", r.get_ref(i).expect("value")))
                .collect::<Vec<_>>()
                .join("|"))
        })
        .expect("query");
    rows.collect::<rusqlite::Result<Vec<_>>>()
        .expect("rows")
        .join("\n")
}

#[test]
fn a_session_with_rows_outside_the_contract_stops_nothing_else() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, ids) = database_with_unreadable_rows(dir.path());
    let unreadable = &ids[..3];

    // The rule has its contract name both ways.
    assert_eq!(
        "unreadable_row"
            .parse::<session_store::repair::HealthRule>()
            .ok(),
        Some(session_store::repair::HealthRule::UnreadableRow)
    );
    // The library's check: every session checked, A-C unreadable, D broken, E healthy.
    let store = Store::open(&db).expect("open");
    let report = store.check(&[], &RepairOptions::default()).expect("check");
    assert_eq!(report.sessions_checked, 5);
    for session in unreadable {
        let rules: Vec<_> = report
            .violations
            .iter()
            .filter(|v| &v.session_id == session)
            .map(|v| v.rule.as_str())
            .collect();
        assert_eq!(rules, ["unreadable_row"], "{session}");
    }
    assert!(report
        .violations
        .iter()
        .any(|v| v.session_id == ids[3] && v.rule.as_str() == "turn_index_mismatch"));
    assert!(!report.violations.iter().any(|v| v.session_id == ids[4]));
    drop(store);

    // `sessions` lists all five and exits 0.
    let db_text = db.to_str().expect("utf-8");
    let run = run_in(dir.path(), cmd(STORE, &["--db", db_text, "sessions"]));
    assert_eq!(run.code, 0, "{}", run.stderr);
    for session in &ids {
        assert!(
            run.stdout.lines().any(|l| l.starts_with(session.as_str())),
            "{session} not listed: {}",
            run.stdout
        );
    }
    for session in unreadable {
        assert!(
            run.stdout
                .lines()
                .any(|l| l.starts_with(session.as_str()) && l.contains("unreadable_row")),
            "{}",
            run.stdout
        );
    }

    // Export: exit 2 for an unreadable session only.
    for (session, code) in [(&ids[0], 2), (&ids[1], 2), (&ids[2], 2), (&ids[4], 0)] {
        let run = run_in(
            dir.path(),
            cmd(
                STORE,
                &[
                    "--db",
                    db_text,
                    "export",
                    session.as_str(),
                    "--format",
                    "anthropic",
                ],
            ),
        );
        assert_eq!(run.code, code, "{session}: {}", run.stderr);
    }

    // store-repair: dry run exits 1; a real run mends D, leaves A-C as they were, exits 3
    // listing them.
    let run = run_in(
        dir.path(),
        cmd(REPAIR, &["--db", db_text, "--dry-run", "--json"]),
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    let before: Vec<String> = unreadable.iter().map(|s| session_dump(&db, s)).collect();
    let run = run_in(
        dir.path(),
        cmd(REPAIR, &["--db", db_text, "--json", "--no-backup"]),
    );
    assert_eq!(run.code, 3, "{}{}", run.stdout, run.stderr);
    let report: Value = serde_json::from_str(&run.stdout).expect("json");
    assert_eq!(report["sessions_checked"], 5);
    let unmended: Vec<&str> = report["unmended"]
        .as_array()
        .expect("unmended")
        .iter()
        .map(|v| v.as_str().expect("id"))
        .collect();
    let mut expected: Vec<&str> = unreadable.iter().map(SessionId::as_str).collect();
    expected.sort_unstable();
    assert_eq!(unmended, expected);
    let after: Vec<String> = unreadable.iter().map(|s| session_dump(&db, s)).collect();
    assert_eq!(after, before, "an unreadable session was changed");
    let store = Store::open(&db).expect("open");
    let report = store.check(&[], &RepairOptions::default()).expect("check");
    assert!(report
        .violations
        .iter()
        .all(|v| v.rule.as_str() == "unreadable_row"));
    drop(store);

    // The human report names them too, and the exit is still 3.
    let run = run_in(dir.path(), cmd(REPAIR, &["--db", db_text, "--no-backup"]));
    assert_eq!(run.code, 3);
    for session in unreadable {
        assert!(run.stdout.contains(session.as_str()), "{}", run.stdout);
    }
}

/// Issue 9's parity: rows one command reads, every command reads. Rows written by other
/// code that differ harmlessly (BLOB or NULL text, a textual `is_error`, timestamps without
/// an offset) are read by export, `messages`, the check and the mend alike; a row outside
/// the contract is refused by all of them alike.
#[test]
fn rows_one_command_reads_every_command_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("s.db");
    let store = Store::open(&db).expect("open");
    let session = store.create_session().expect("session");
    store
        .append(&session, NewMessage::user("run it"))
        .expect("append");
    store
        .append(
            &session,
            NewMessage::assistant(vec![Part::tool_use(
                "c1",
                "bash",
                serde_json::json!({"cmd": "ls"}),
            )]),
        )
        .expect("append");
    store
        .append(
            &session,
            NewMessage::tool(vec![Part::tool_result("c1", "out")]),
        )
        .expect("append");
    store
        .append(&session, NewMessage::assistant(vec![Part::text("done")]))
        .expect("append");
    drop(store);
    let conn = Connection::open(&db).expect("raw");
    conn.execute_batch(
        "PRAGMA ignore_check_constraints = ON;
         UPDATE parts SET text = CAST('out' AS BLOB) WHERE kind = 'tool_result';
         UPDATE parts SET is_error = 'true' WHERE kind = 'tool_result';
         UPDATE parts SET text = NULL WHERE kind = 'text' AND text = 'run it';
         UPDATE messages SET created_at = '2026-01-02 03:04:05';
         UPDATE sessions SET created_at = '2026-01-02T03:04:05', updated_at = '2026-01-02T03:04:05';",
    )
    .expect("lenient rows");
    drop(conn);

    let every_read = |store: &Store| -> Vec<bool> {
        let messages = store.messages(&session).is_ok();
        let export = store
            .export_now(
                &session,
                session_store::Provider::Anthropic,
                &session_store::ExportOptions::default(),
            )
            .is_ok();
        let report = store
            .check(std::slice::from_ref(&session), &RepairOptions::default())
            .expect("check");
        let checked = !report
            .violations
            .iter()
            .any(|v| v.rule.as_str() == "unreadable_row");
        let repaired = store
            .repair_session(&session, &RepairOptions::default())
            .expect("repair")
            .found
            .iter()
            .all(|v| v.rule.as_str() != "unreadable_row");
        let listed = store.sessions().expect("list").len() == 1;
        vec![messages, export, checked, repaired, listed]
    };

    let store = Store::open(&db).expect("open");
    assert_eq!(every_read(&store), [true; 5]);
    let messages = store.messages(&session).expect("messages");
    assert!(matches!(
        &messages[2].parts[0],
        Part::ToolResult { content, is_error: true, .. } if content == "out"
    ));
    drop(store);
    let db_text = db.to_str().expect("utf-8");
    for args in [
        vec!["sessions"],
        vec!["show", session.as_str()],
        vec!["export", session.as_str(), "--format", "openai"],
    ] {
        let mut full = vec!["--db", db_text];
        full.extend(args);
        let run = run_in(dir.path(), cmd(STORE, &full));
        assert_eq!(run.code, 0, "{full:?}: {}", run.stderr);
    }
    let run = run_in(dir.path(), cmd(REPAIR, &["--db", db_text, "--dry-run"]));
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);

    // Now one row outside the contract: every read refuses it alike.
    let conn = Connection::open(&db).expect("raw");
    conn.execute_batch(
        "PRAGMA ignore_check_constraints = ON;
         UPDATE messages SET role = 'robot' WHERE seq = (SELECT MAX(seq) FROM messages);",
    )
    .expect("robot");
    drop(conn);
    let store = Store::open(&db).expect("open");
    assert_eq!(every_read(&store), [false, false, false, false, true]);
}

#[test]
fn invalid_utf8_is_refused_with_its_line_and_byte_and_nothing_is_created() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("bad.jsonl");
    let mut file = std::fs::File::create(&input).expect("create");
    file.write_all(b"{\"type\": \"user\"}\n{\"text\": \"caf\xe9\"}\n")
        .expect("write");
    drop(file);
    let db = dir.path().join("s.db");
    let run = run_in(
        dir.path(),
        cmd(
            STORE,
            &[
                "--db",
                db.to_str().expect("utf-8"),
                "import",
                "--format",
                "claude-code",
                input.to_str().expect("utf-8"),
            ],
        ),
    );
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("line 2") && run.stderr.contains("byte 30"),
        "{}",
        run.stderr
    );
    assert!(!db.exists());
}

#[test]
fn duplicate_keys_are_refused_with_their_json_path_and_nothing_is_created() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("s.db");
    let cases = [
        (
            "anthropic",
            r#"{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b", "role": "user"}]}"#,
            "messages[1].role",
        ),
        (
            "openai",
            r#"{"messages": [{"role": "user", "content": "a"}], "messages": []}"#,
            "messages",
        ),
        (
            "openai",
            r#"{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1, \"x\": 2}"}}]}]}"#,
            "messages[1].tool_calls[0].function.arguments.x",
        ),
        (
            "claude-code",
            "{\"type\": \"user\", \"uuid\": \"u1\", \"message\": {\"role\": \"user\", \"content\": \"a\", \"content\": \"b\"}}\n",
            "line 1, message.content",
        ),
    ];
    for (format, text, path) in cases {
        let input = dir.path().join("in.json");
        std::fs::write(&input, text).expect("write");
        let run = run_in(
            dir.path(),
            cmd(
                STORE,
                &[
                    "--db",
                    db.to_str().expect("utf-8"),
                    "import",
                    "--format",
                    format,
                    input.to_str().expect("utf-8"),
                ],
            ),
        );
        assert_eq!(run.code, 2, "{format}: {}", run.stderr);
        assert!(
            run.stderr.contains(path) && run.stderr.contains("duplicate key"),
            "{format}: {}",
            run.stderr
        );
        assert!(!db.exists());
    }
}

#[test]
fn a_json_lines_syntax_error_names_its_own_line_and_byte() {
    use session_store::import::{import as import_transcript, Format};
    let text = "{\"type\": \"user\"}\n{\"type\": \"assist\n{}\n";
    let err = import_transcript(Format::ClaudeCode, text).expect_err("cut short");
    let at = err.location().expect("location");
    assert_eq!(at.line, Some(2), "{err}");
    let byte = at.byte.expect("byte");
    assert!((17..=34).contains(&byte), "{byte}");
}

/// serde_json's `arbitrary_precision` is on: a number the source wrote is kept digit for
/// digit through import, storage and export (an f64 would round the first one).
#[test]
fn big_numbers_survive_import_storage_and_export_digit_for_digit() {
    use session_store::import::{import as import_transcript, Format};
    let text = r#"{"messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f",
            "input": {"big": 123456789012345678901234567890, "exact": 0.1000000000000000055511151231257827}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}]}"#;
    let imported = import_transcript(Format::Anthropic, text).expect("imports");
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("s.db")).expect("open");
    let session = store
        .import_session(imported.into_messages())
        .expect("stores");
    let body = store
        .export_now(
            &session,
            session_store::Provider::Anthropic,
            &session_store::ExportOptions::default(),
        )
        .expect("export");
    let printed = serde_json::to_string(&body).expect("json");
    assert!(
        printed.contains("123456789012345678901234567890")
            && printed.contains("0.1000000000000000055511151231257827"),
        "{printed}"
    );
}

/// A real kill during `store-repair`'s backup: whenever the SIGKILL lands, no file is
/// readable by others (the temporary copy is created 0600), nothing sits at the backup path
/// unless the backup finished, and the next backup in that folder removes what was left.
#[cfg(unix)]
#[test]
fn a_kill_during_the_backup_leaves_nothing_readable_and_nothing_for_long() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, store, session) = store_with_session(dir.path());
    // Big enough that the copy takes a while: 24 MiB of text.
    store
        .append(
            &session,
            NewMessage::assistant(vec![Part::text("x".repeat(24 << 20))]),
        )
        .expect("append");
    drop(store);
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    // A broken turn index, so that store-repair takes its backup before mending.
    let conn = Connection::open(&db).expect("raw");
    conn.execute("UPDATE messages SET turn_index = 5", [])
        .expect("break");
    drop(conn);
    let backup = dir.path().join("kill.bak");
    for delay_ms in [20, 100, 200, 300, 450, 700, 1000] {
        let mut child = Command::new(REPAIR)
            .args([
                "--db",
                db.to_str().expect("utf-8"),
                "--backup",
                backup.to_str().expect("utf-8"),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
        for entry in std::fs::read_dir(dir.path()).expect("read_dir") {
            let entry = entry.expect("entry");
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.contains(".tmp-") {
                let mode = entry.metadata().expect("meta").permissions().mode();
                assert_eq!(mode & 0o077, 0, "{name} is readable by others: {mode:o}");
            }
        }
        if backup.exists() {
            // The backup finished before the kill: complete, and as private as the database.
            let mode = std::fs::metadata(&backup)
                .expect("meta")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
            std::fs::remove_file(&backup).expect("remove");
        }
        // Put the database back the way it was, if the run got as far as mending it.
        let conn = Connection::open(&db).expect("raw");
        conn.execute("UPDATE messages SET turn_index = 5", [])
            .expect("break");
        drop(conn);
    }
    // The next backup there removes whatever the killed runs left.
    backup_database(&db, &dir.path().join("after.bak")).expect("backup");
    let left: Vec<String> = listing(dir.path())
        .into_iter()
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A `store-repair` killed during its backup leaves `.NAME.<time>.bak.tmp-PID-N` (and its
/// `-journal`); the rerun writes its backup under another time, and must still remove what
/// the killed run left, whatever name it was to become, while a live process's temporary
/// file and names that merely look alike stay.
#[test]
fn temporary_files_of_a_killed_repair_are_removed_by_the_rerun_whatever_their_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, store, _) = store_with_session(dir.path());
    drop(store);
    let name = db.file_name().expect("name").to_string_lossy().into_owned();
    let mut gone = Command::new("true").spawn().expect("spawn");
    let dead = gone.id();
    gone.wait().expect("wait");
    let stale: Vec<PathBuf> = [
        format!(".{name}.20260101T000000Z.bak.tmp-{dead}-0"),
        format!(".{name}.20260101T000000Z.bak.tmp-{dead}-0-journal"),
        format!(".{name}.20260101T000001Z-2.bak.tmp-{dead}-3-wal"),
        format!(".other.bak.tmp-{dead}-1"),
        format!(".{name}.tmp-{dead}-7-shm"),
    ]
    .iter()
    .map(|n| dir.path().join(n))
    .collect();
    let live = dir.path().join(format!(
        ".{name}.20260101T000000Z.bak.tmp-{}-0",
        std::process::id()
    ));
    let alike =
        [".x.bak.tmp-notapid", "x.bak.tmp-1-0", ".x.bak.tmp-1-2-3"].map(|n| dir.path().join(n));
    for path in stale.iter().chain([&live]).chain(&alike) {
        std::fs::write(path, b"half a backup").expect("write");
    }
    // A broken turn index, so that the run takes a backup before it mends.
    Connection::open(&db)
        .expect("raw")
        .execute("UPDATE messages SET turn_index = 5", [])
        .expect("break");
    let run = run_in(
        dir.path(),
        cmd(REPAIR, &["--db", db.to_str().expect("utf-8")]),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    for path in &stale {
        assert!(!path.exists(), "{} is still there", path.display());
    }
    assert!(live.exists(), "a live process's temporary file was removed");
    for path in &alike {
        assert!(
            path.exists(),
            "{} is not ours and was removed",
            path.display()
        );
    }
}

/// The `.bak` files beside `db`.
fn backups_beside(db: &Path) -> Vec<String> {
    let dir = db.parent().expect("folder");
    listing(dir)
        .into_iter()
        .filter(|n| n.ends_with(".bak"))
        .collect()
}

/// A database whose only findings are rows the mend leaves as they are: a real run changes
/// nothing, so it takes no backup, however often it runs; a run with something to mend
/// still takes one.
#[test]
fn a_run_that_can_only_leave_unreadable_rows_as_they_are_takes_no_backup() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, _) = database_with_unreadable_rows(dir.path());
    let db_text = db.to_str().expect("utf-8");
    // The first run mends D: one backup.
    let run = run_in(dir.path(), cmd(REPAIR, &["--db", db_text, "--json"]));
    assert_eq!(run.code, 3, "{}{}", run.stdout, run.stderr);
    let report: Value = serde_json::from_str(&run.stdout).expect("json");
    assert!(report["backup"].is_string(), "{report}");
    assert_eq!(backups_beside(&db).len(), 1);
    // Every later run finds only A-C: no new backup, whether --json or not.
    let before = dump(&db);
    for args in [vec!["--json"], vec![], vec!["--json"]] {
        let mut all = vec!["--db", db_text];
        all.extend(args);
        let run = run_in(dir.path(), cmd(REPAIR, &all));
        assert_eq!(run.code, 3, "{}{}", run.stdout, run.stderr);
        assert!(!run.stdout.contains("backup:"), "{}", run.stdout);
        if let Ok(report) = serde_json::from_str::<Value>(&run.stdout) {
            assert!(report["backup"].is_null(), "{report}");
            assert_eq!(report["changes"], 0);
        }
        assert_eq!(
            backups_beside(&db).len(),
            1,
            "a backup of a run that changed nothing"
        );
    }
    assert_eq!(
        dump(&db),
        before,
        "a run with nothing to mend changed the file"
    );
}

/// `--json` says where an unreadable row is as far as the row says (its message's id, seq
/// and turn), and null for what it cannot know: no made-up turn 0 / seq 0.
#[test]
fn unreadable_rows_are_reported_where_known_and_null_where_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, ids) = database_with_unreadable_rows(dir.path());
    // One more: a session whose own row has a time that is not one, and a message at seq 2.
    let store = Store::open(&db).expect("open");
    let f = store.create_session().expect("session");
    store.append(&f, NewMessage::user("hello")).expect("append");
    drop(store);
    let conn = Connection::open(&db).expect("raw");
    conn.execute(
        "UPDATE sessions SET updated_at = 'soon' WHERE id = ?1",
        [f.as_str()],
    )
    .expect("time");
    let message_of = |session: &SessionId| -> i64 {
        conn.query_row(
            "SELECT id FROM messages WHERE session_id = ?1 AND seq = 1",
            [session.as_str()],
            |r| r.get(0),
        )
        .expect("message")
    };
    // A: role 'robot' (turn unknown); B: a part of kind 'hologram' in its user message
    // (turn 0); C: a created_at that is not a time in its user message (turn 0); F: the
    // session row (nothing known).
    let expected = [
        (&ids[0], Some(message_of(&ids[0])), Some(1), None),
        (&ids[1], Some(message_of(&ids[1])), Some(1), Some(0)),
        (&ids[2], Some(message_of(&ids[2])), Some(1), Some(0)),
        (&f, None, None, None),
    ];
    drop(conn);
    let run = run_in(
        dir.path(),
        cmd(
            REPAIR,
            &["--db", db.to_str().expect("utf-8"), "--dry-run", "--json"],
        ),
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    let report: Value = serde_json::from_str(&run.stdout).expect("json");
    let problems = report["problems"].as_array().expect("problems");
    for (session, message_id, seq, turn) in expected {
        let found: Vec<&Value> = problems
            .iter()
            .filter(|p| p["session_id"] == session.as_str())
            .collect();
        assert_eq!(found.len(), 1, "{session}: {found:?}");
        let p = found[0];
        assert_eq!(p["rule"], "unreadable_row");
        assert_eq!(p["message_id"].as_i64(), message_id, "{session}: {p}");
        assert_eq!(p["seq"].as_i64(), seq, "{session}: {p}");
        assert_eq!(p["turn"].as_i64(), turn, "{session}: {p}");
        for field in ["message_id", "seq", "turn"] {
            assert!(p.get(field).is_some(), "{field} missing: {p}");
        }
    }
}

/// `show` of a session with a row outside the contract prints every row it can read, names
/// the one it cannot (where it is), and the commands that diagnose it and deal with it;
/// exit 0. A healthy session shows no such note.
#[test]
fn show_prints_what_it_can_read_and_names_the_unreadable_row() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, ids) = database_with_unreadable_rows(dir.path());
    let db_text = db.to_str().expect("utf-8");
    // A: the user message is unreadable; B: its part is; C: its time is. The assistant's
    // "hi" is readable in each.
    for (session, user_shown) in [(&ids[0], false), (&ids[1], true), (&ids[2], false)] {
        for turns in [None, Some("0"), Some("0..")] {
            let mut args = vec!["--db", db_text, "show", session.as_str()];
            args.extend(turns.iter().flat_map(|t| ["--turns", *t]));
            let run = run_in(dir.path(), cmd(STORE, &args));
            assert_eq!(run.code, 0, "{session} {turns:?}: {}", run.stderr);
            let out = &run.stdout;
            assert!(out.contains("hi"), "{session}: {out}");
            assert!(out.contains("!! unreadable_row"), "{session}: {out}");
            assert!(out.contains("not shown"), "{session}: {out}");
            assert!(
                out.contains(&format!(
                    "store-repair --db {db_text} --dry-run --session {session}"
                )),
                "{session}: {out}"
            );
            assert!(out.contains("delete"), "{session}: {out}");
            assert_eq!(out.contains("#1 user"), user_shown, "{session}: {out}");
        }
    }
    let run = run_in(
        dir.path(),
        cmd(STORE, &["--db", db_text, "show", ids[4].as_str()]),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stdout.contains("not shown"), "{}", run.stdout);
}

/// The issue's run, for real: `store-repair` with its default backup name (which carries the
/// time) killed with SIGKILL at several moments of the backup, each followed a second later
/// (another name) by a run that finishes: after every finished run, no temporary file is
/// left in the folder.
#[cfg(unix)]
#[test]
fn a_rerun_after_a_kill_during_the_default_backup_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, store, session) = store_with_session(dir.path());
    store
        .append(
            &session,
            NewMessage::assistant(vec![Part::text("x".repeat(16 << 20))]),
        )
        .expect("append");
    drop(store);
    let db_text = db.to_str().expect("utf-8");
    let break_it = || {
        Connection::open(&db)
            .expect("raw")
            .execute("UPDATE messages SET turn_index = 5", [])
            .expect("break");
    };
    for delay_ms in [30, 120, 300] {
        break_it();
        let mut child = Command::new(REPAIR)
            .args(["--db", db_text])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
        // The rerun's backup gets another name: the clock has moved on.
        std::thread::sleep(Duration::from_millis(1100));
        break_it();
        let run = run_in(dir.path(), cmd(REPAIR, &["--db", db_text]));
        assert_eq!(run.code, 0, "after a kill at {delay_ms} ms: {}", run.stderr);
        let left: Vec<String> = listing(dir.path())
            .into_iter()
            .filter(|n| n.contains(".tmp-"))
            .collect();
        assert!(left.is_empty(), "after a kill at {delay_ms} ms: {left:?}");
    }
}
