//! `store-repair` as a process, as users run it: detection per rule with `--dry-run --json`
//! (exit 1, file bytes untouched even for an old schema), mending (exit 0, backup that equals
//! the original, clean re-check, nothing changed by a second run), refused files (missing,
//! directory, not SQLite, future schema: exit 2 and nothing created or changed), and a
//! `kill -9` in the middle of a run that leaves no session half mended.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use rusqlite::Connection;
use serde_json::Value;

use crate::broken_db::{self, dump, dump_session, Raw, P};

const BIN: &str = env!("CARGO_BIN_EXE_store-repair");

fn repair(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("run store-repair")
}

fn code(output: &Output) -> i32 {
    output.status.code().expect("exit code")
}

fn json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

fn problems(report: &Value) -> BTreeSet<(String, String)> {
    report["problems"]
        .as_array()
        .expect("problems list")
        .iter()
        .map(|p| {
            (
                p["session_id"].as_str().expect("session_id").to_owned(),
                p["rule"].as_str().expect("rule").to_owned(),
            )
        })
        .collect()
}

fn broken(dir: &Path) -> PathBuf {
    let path = dir.join("sessions.db");
    broken_db::build(&path);
    path
}

fn listing(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect()
}

fn s(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

#[test]
fn dry_run_reports_every_rule_exits_1_and_leaves_the_bytes_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = broken(dir.path());
    let bytes = std::fs::read(&db).expect("read");
    let files = listing(dir.path());
    let out = repair(&["--db", s(&db), "--dry-run", "--json"]);
    assert_eq!(code(&out), 1, "{}", String::from_utf8_lossy(&out.stderr));
    let report = json(&out);
    assert_eq!(problems(&report), broken_db::expected());
    assert_eq!(report["sessions_checked"], broken_db::CASES.len());
    // Found, would do, done: three sets of fields, never one number for two meanings.
    assert_eq!(report["dry_run"], true);
    assert_eq!(report["repaired"], 0);
    assert_eq!(report["changes"], 0);
    assert_eq!(report["sessions_repaired"], 0);
    assert_eq!(report["migrations_applied"], 0);
    assert!(report["would_change"].as_u64().expect("would_change") > 0);
    assert_eq!(
        report["would_repair"].as_u64(),
        Some(report["problems"].as_array().expect("list").len() as u64)
    );
    let broken_sessions: BTreeSet<String> =
        broken_db::expected().into_iter().map(|(s, _)| s).collect();
    assert_eq!(
        report["sessions_would_repair"].as_u64(),
        Some(broken_sessions.len() as u64)
    );
    let listed: BTreeSet<String> = report["broken_sessions"]
        .as_array()
        .expect("broken_sessions")
        .iter()
        .map(|b| b["session_id"].as_str().expect("id").to_owned())
        .collect();
    assert_eq!(listed, broken_sessions);
    assert_eq!(std::fs::read(&db).expect("read"), bytes);
    assert_eq!(listing(dir.path()), files);
}

#[test]
fn dry_run_on_an_old_schema_migrates_a_copy_not_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("old.db");
    // A database written by other code: the contract's tables, no migration history, and
    // rollback journal mode (opening it with the store would switch it to WAL).
    {
        let conn = Connection::open(&db).expect("create");
        conn.execute_batch(include_str!("../migrations/V1__initial_schema.sql"))
            .expect("schema");
        broken_db::write_cases(&conn);
    }
    let bytes = std::fs::read(&db).expect("read");
    let files = listing(dir.path());
    let out = repair(&["--db", s(&db), "--dry-run", "--json"]);
    assert_eq!(code(&out), 1, "{}", String::from_utf8_lossy(&out.stderr));
    let report = json(&out);
    assert!(
        report["migrations_pending"]
            .as_u64()
            .expect("migrations_pending")
            > 0
    );
    assert_eq!(
        report["migrations_applied"], 0,
        "a dry run migrates a copy only"
    );
    assert_eq!(problems(&report), broken_db::expected());
    assert_eq!(std::fs::read(&db).expect("read"), bytes);
    assert_eq!(listing(dir.path()), files);
}

#[test]
fn mending_takes_a_backup_equal_to_the_original_then_checks_clean() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = broken(dir.path());
    let original = dump(&db);
    let out = repair(&["--db", s(&db), "--json"]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let report = json(&out);
    assert_eq!(problems(&report), broken_db::expected());
    assert_eq!(
        report["repaired"].as_u64(),
        Some(report["problems"].as_array().expect("list").len() as u64)
    );
    let backup = PathBuf::from(report["backup"].as_str().expect("backup path"));
    assert_eq!(backup.parent(), db.parent());
    assert!(backup
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("sessions.db.") && n.ends_with(".bak")));
    assert_eq!(
        dump(&backup),
        original,
        "the backup equals the database before"
    );
    let check = repair(&["--db", s(&db), "--dry-run", "--json"]);
    assert_eq!(
        code(&check),
        0,
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    assert!(problems(&json(&check)).is_empty());
}

#[test]
fn a_second_run_changes_nothing_and_takes_no_backup() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = broken(dir.path());
    assert_eq!(code(&repair(&["--db", s(&db), "--no-backup"])), 0);
    let after_first = dump(&db);
    let files = listing(dir.path());
    let out = repair(&["--db", s(&db), "--json"]);
    assert_eq!(code(&out), 0);
    let report = json(&out);
    assert_eq!(report["repaired"], 0);
    assert_eq!(report["changes"], 0);
    assert!(report["backup"].is_null());
    assert_eq!(dump(&db), after_first);
    assert_eq!(listing(dir.path()), files);
}

#[test]
fn human_summary_names_rules_mends_and_backup() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = broken(dir.path());
    let backup = dir.path().join("chosen.bak");
    let out = repair(&["--db", s(&db), "--backup", s(&backup)]);
    assert_eq!(code(&out), 0);
    let text = String::from_utf8_lossy(&out.stdout);
    for rule in [
        "turn_index_mismatch",
        "split_turn_compaction",
        "compaction_gap",
        "dangling_tool_use",
        "orphan_tool_result",
        "duplicate_tool_use_id",
        "misplaced_tool_result",
    ] {
        assert!(text.contains(rule), "{rule} missing from:\n{text}");
    }
    assert!(text.contains("mended"), "{text}");
    assert!(text.contains(s(&backup)), "{text}");
    assert!(backup.exists());
}

/// The contract: "Without `--json` it names every broken session with its rules, one line
/// each". Counts per rule alone left a person to find the sessions with SQL.
#[test]
fn human_report_names_every_broken_session_with_its_rules() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = broken(dir.path());
    let bytes = std::fs::read(&db).expect("read");
    let out = repair(&["--db", s(&db), "--dry-run"]);
    assert_eq!(code(&out), 1);
    let text = String::from_utf8_lossy(&out.stdout);
    let mut expected: std::collections::BTreeMap<String, BTreeSet<String>> = Default::default();
    for (session, rule) in broken_db::expected() {
        expected.entry(session).or_default().insert(rule);
    }
    for (session, rules) in &expected {
        let prefix = format!("  {session} ");
        let line = text
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("{session} has no line in:\n{text}"));
        for rule in rules {
            assert!(
                line.contains(&format!("{rule} ×")),
                "{rule} of {session}: {line}"
            );
        }
    }
    for healthy in broken_db::CASES
        .iter()
        .map(|c| c.session)
        .filter(|n| !expected.contains_key(*n))
    {
        assert!(
            !text.contains(&format!("  {healthy} ")),
            "{healthy} listed:\n{text}"
        );
    }
    assert!(
        text.contains("dry run, nothing written; a real run would mend"),
        "{text}"
    );
    assert_eq!(
        std::fs::read(&db).expect("read"),
        bytes,
        "a dry run writes nothing"
    );
}

#[test]
fn session_filter_checks_only_the_named_sessions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = broken(dir.path());
    let out = repair(&[
        "--db",
        s(&db),
        "--dry-run",
        "--json",
        "--session",
        "compaction-gap",
        "--session",
        "healthy-plain",
    ]);
    assert_eq!(code(&out), 1);
    let report = json(&out);
    assert_eq!(report["sessions_checked"], 2);
    assert_eq!(
        problems(&report),
        BTreeSet::from([("compaction-gap".to_owned(), "compaction_gap".to_owned())])
    );
    let unknown = repair(&["--db", s(&db), "--dry-run", "--session", "no-such-session"]);
    assert_eq!(code(&unknown), 2);
}

#[test]
fn stale_after_turns_old_pending_calls_into_tombstones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = broken(dir.path());
    let out = repair(&["--db", s(&db), "--dry-run", "--json", "--stale-after", "1h"]);
    assert!(problems(&json(&out)).contains(&(
        "healthy-pending-at-end".to_owned(),
        "dangling_tool_use".to_owned()
    )));
    assert_eq!(
        code(&repair(&[
            "--db",
            s(&db),
            "--no-backup",
            "--stale-after",
            "1h"
        ])),
        0
    );
    let conn = Connection::open(&db).expect("open");
    let tombstoned: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM tombstones WHERE session_id = 'healthy-pending-at-end'",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(tombstoned, 1);
    assert_eq!(code(&repair(&["--db", s(&db), "--stale-after", "soon"])), 2);
}

#[test]
fn an_empty_file_is_a_database_with_no_tables() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("empty.db");
    std::fs::write(&db, b"").expect("create empty");
    let dry = repair(&["--db", s(&db), "--dry-run", "--json"]);
    assert_eq!(code(&dry), 0, "{}", String::from_utf8_lossy(&dry.stderr));
    assert_eq!(json(&dry)["sessions_checked"], 0);
    assert_eq!(std::fs::metadata(&db).expect("meta").len(), 0);
    let out = repair(&["--db", s(&db), "--no-backup", "--json"]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let conn = Connection::open(&db).expect("open");
    let tables: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE name IN ('sessions', 'messages', 'parts', 'repair_log')",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(tables, 4);
}

#[test]
fn unusable_paths_exit_2_and_nothing_is_created_or_changed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("missing.db");
    let not_sqlite = dir.path().join("notes.txt");
    std::fs::write(&not_sqlite, b"these are my notes, not a database\n").expect("write");
    let future = dir.path().join("future.db");
    drop(session_store::Store::open(&future).expect("create"));
    {
        let conn = Connection::open(&future).expect("open");
        conn.execute(
            "INSERT INTO refinery_schema_history (version, name, applied_on, checksum) VALUES (999, 'from_the_future', '2030-01-01', '1')",
            [],
        )
        .expect("future migration");
    }
    let files = listing(dir.path());
    let bytes = |p: &Path| std::fs::read(p).expect("read");
    let (text_before, future_before) = (bytes(&not_sqlite), bytes(&future));
    for target in [&missing, &dir.path().to_path_buf(), &not_sqlite, &future] {
        for extra in [&["--dry-run"][..], &[][..], &["--json"][..]] {
            let mut args = vec!["--db", s(target)];
            args.extend_from_slice(extra);
            let out = repair(&args);
            assert_eq!(code(&out), 2, "{target:?} {extra:?}");
            assert!(!out.stderr.is_empty(), "a reason is printed");
        }
    }
    assert_eq!(listing(dir.path()), files);
    assert_eq!(bytes(&not_sqlite), text_before);
    assert_eq!(bytes(&future), future_before);
    assert_eq!(code(&repair(&["--dry-run"])), 2, "--db is required");
    assert_eq!(
        code(&repair(&[
            "--db",
            s(&future),
            "--backup",
            "x",
            "--no-backup"
        ])),
        2
    );
}

#[test]
fn a_failed_backup_mends_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = broken(dir.path());
    let before = dump(&db);
    let taken = dir.path().join("taken.bak");
    std::fs::write(&taken, b"something already here").expect("write");
    let out = repair(&["--db", s(&db), "--backup", s(&taken)]);
    assert_eq!(code(&out), 2);
    assert_eq!(dump(&db), before);
    let out = repair(&[
        "--db",
        s(&db),
        "--backup",
        s(&dir.path().join("no-such-dir").join("x.bak")),
    ]);
    assert_eq!(code(&out), 2);
    assert_eq!(dump(&db), before);
}

/// Many broken sessions, so that a run lasts long enough to be killed in the middle.
fn many_broken(path: &Path, sessions: usize) {
    drop(session_store::Store::open(path).expect("create"));
    let mut conn = Connection::open(path).expect("open");
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .expect("tx");
    for n in 0..sessions {
        let mut raw = Raw::new(&tx, &format!("many-{n:05}"));
        raw.msg("user", true, &[P::Text("start")]);
        for k in 0..4 {
            let id = format!("call-{n}-{k}");
            let again = format!("again-{n}");
            raw.msg("assistant", k < 2, &[P::Use(&id), P::Use(&again)]);
            raw.msg("user", false, &[P::Result(&id), P::Text("more")]);
        }
        raw.msg("assistant", false, &[P::Text("done")]);
    }
    tx.commit().expect("commit");
}

#[test]
fn kill_9_mid_run_leaves_no_session_half_mended_and_a_rerun_finishes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("many.db");
    let sessions = 400;
    many_broken(&db, sessions);
    let pristine = dir.path().join("pristine.db");
    std::fs::copy(&db, &pristine).expect("copy");
    let mut child = Command::new(BIN)
        .args(["--db", s(&db), "--no-backup"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    // Kill once the first sessions are mended (or when it is done already).
    let watcher = Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("watch");
    watcher
        .busy_timeout(Duration::from_secs(5))
        .expect("timeout");
    loop {
        let mended: i64 = watcher
            .query_row(
                "SELECT COUNT(DISTINCT session_id) FROM repair_log",
                [],
                |r| r.get(0),
            )
            .unwrap_or(0);
        if mended >= 20 || child.try_wait().expect("wait").is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let _ = child.kill();
    let _ = child.wait();
    drop(watcher);

    // Every session is exactly as it was, or healthy with its changes logged.
    let conn = Connection::open(&db).expect("open");
    let old = Connection::open_with_flags(&pristine, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("open pristine");
    let broken_now: BTreeSet<String> = {
        let mut stmt = conn
            .prepare("SELECT DISTINCT session_id FROM problems")
            .expect("prepare");
        let rows = stmt.query_map([], |r| r.get(0)).expect("query");
        rows.collect::<rusqlite::Result<_>>().expect("rows")
    };
    let logged: BTreeSet<String> = {
        let mut stmt = conn
            .prepare("SELECT DISTINCT session_id FROM repair_log")
            .expect("prepare");
        let rows = stmt.query_map([], |r| r.get(0)).expect("query");
        rows.collect::<rusqlite::Result<_>>().expect("rows")
    };
    let mut mended = 0;
    for n in 0..sessions {
        let id = format!("many-{n:05}");
        if broken_now.contains(&id) {
            assert_eq!(
                dump_session(&conn, &id),
                dump_session(&old, &id),
                "{id} is broken but not as it was"
            );
            assert!(!logged.contains(&id), "{id} has log rows but is not mended");
        } else {
            assert!(
                logged.contains(&id),
                "{id} is healthy but nothing was logged"
            );
            mended += 1;
        }
    }
    assert!(mended > 0, "the run was killed before it mended anything");

    let rerun = repair(&["--db", s(&db), "--no-backup", "--json"]);
    assert_eq!(
        code(&rerun),
        0,
        "{}",
        String::from_utf8_lossy(&rerun.stderr)
    );
    let report = json(&rerun);
    assert_eq!(
        report["sessions_repaired"].as_u64(),
        Some((sessions - mended) as u64)
    );
    let check = repair(&["--db", s(&db), "--dry-run", "--json"]);
    assert_eq!(code(&check), 0);
}
