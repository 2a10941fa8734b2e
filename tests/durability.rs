//! Durability: `Durability::Full` syncs every commit to disk (SQLite `synchronous=FULL`),
//! `Durability::Normal` does not (the WAL is synced at checkpoints only). Counted from the
//! outside: a child process (this test binary re-run) appends messages under `strace`, and
//! the `fsync`/`fdatasync` calls it made are counted for 0 and for [`APPENDS`] appends, so
//! what opening and closing cost cancels out.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use session_store::{Durability, NewMessage, SessionId, Store, StoreOptions};

use crate::fault_support::child;

const DB_ENV: &str = "PROOF_DURABILITY_DB";
const SESSION_ENV: &str = "PROOF_DURABILITY_SESSION";
const MODE_ENV: &str = "PROOF_DURABILITY_MODE";
const COUNT_ENV: &str = "PROOF_DURABILITY_APPENDS";

/// Appends (each its own commit) in the measured run.
const APPENDS: usize = 20;

/// The child: opens the store with the durability asked for and appends that many messages.
#[test]
#[ignore = "child process of the durability test: does nothing unless spawned by it"]
fn durability_appender_child() {
    let (Some(db), Ok(session), Ok(mode), Ok(count)) = (
        std::env::var_os(DB_ENV),
        std::env::var(SESSION_ENV),
        std::env::var(MODE_ENV),
        std::env::var(COUNT_ENV),
    ) else {
        return;
    };
    let options = StoreOptions {
        durability: mode.parse().expect("mode"),
        ..StoreOptions::default()
    };
    let store = Store::open_with(PathBuf::from(db), &options).expect("child opens");
    let session = SessionId::new(session);
    for i in 0..count.parse::<usize>().expect("count") {
        let role = if i % 2 == 0 {
            NewMessage::user(format!("message {i}"))
        } else {
            NewMessage::assistant(vec![session_store::Part::text(format!("answer {i}"))])
        };
        store.append(&session, role).expect("append");
    }
}

/// `strace` when this machine has it (CI installs it; see `.ci/run`).
fn strace() -> Option<PathBuf> {
    let found = std::process::Command::new("strace")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    found.then(|| PathBuf::from("strace"))
}

/// The sync calls of one child run: `appends` appends on a fresh copy of the database.
fn syncs(strace: &Path, dir: &Path, durability: Durability, appends: usize) -> usize {
    let name = format!("{durability:?}-{appends}");
    let db = dir.join(format!("{name}.db"));
    let store = Store::open(&db).expect("parent creates");
    let session = store.create_session().expect("session");
    drop(store);
    let log = dir.join(format!("{name}.strace"));
    let me = child("durability::durability_appender_child");
    let mut command = std::process::Command::new(strace);
    command
        .args(["-f", "-qq", "-e", "trace=fsync,fdatasync", "-o"])
        .arg(&log)
        .arg(me.get_program())
        .args(me.get_args())
        .env(DB_ENV, &db)
        .env(SESSION_ENV, session.as_str())
        .env(
            MODE_ENV,
            if durability == Durability::Full {
                "full"
            } else {
                "normal"
            },
        )
        .env(COUNT_ENV, appends.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let status = command.status().expect("strace runs");
    assert!(status.success(), "child under strace failed: {status}");
    let text = std::fs::read_to_string(&log).expect("strace log");
    text.lines()
        .filter(|l| l.contains("fsync(") || l.contains("fdatasync("))
        .count()
}

#[test]
fn full_durability_syncs_every_commit_and_normal_does_not() {
    let Some(strace) = strace() else {
        eprintln!("durability: strace is not installed here; the fsync count is skipped");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let full = syncs(&strace, dir.path(), Durability::Full, APPENDS)
        - syncs(&strace, dir.path(), Durability::Full, 0);
    let normal = syncs(&strace, dir.path(), Durability::Normal, APPENDS).saturating_sub(syncs(
        &strace,
        dir.path(),
        Durability::Normal,
        0,
    ));
    eprintln!("durability: syncs for {APPENDS} commits: full {full}, normal {normal}");
    assert!(
        full >= APPENDS,
        "full made {full} syncs for {APPENDS} commits"
    );
    assert!(
        normal < APPENDS / 4,
        "normal made {normal} syncs for {APPENDS} commits"
    );
}

#[test]
fn durability_reaches_every_pooled_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (durability, expected) in [(Durability::Full, "2"), (Durability::Normal, "1")] {
        let options = StoreOptions {
            durability,
            ..StoreOptions::default()
        };
        let store = Store::open_with(dir.path().join("d.db"), &options).expect("open");
        assert_eq!(
            store.connection_settings().expect("settings").synchronous,
            expected
        );
    }
    for (text, parsed) in [
        ("full", Durability::Full),
        ("FULL", Durability::Full),
        ("normal", Durability::Normal),
    ] {
        assert_eq!(text.parse::<Durability>(), Ok(parsed));
    }
    assert!("fsync".parse::<Durability>().is_err());
}

/// The sync calls of `session-store --durability MODE import FILE` run `runs` times (each a
/// process and one commit) on a fresh database.
fn cli_syncs(strace: &Path, dir: &Path, mode: &str, runs: usize) -> usize {
    let db = dir.join(format!("cli-{mode}-{runs}.db"));
    drop(Store::open(&db).expect("parent creates"));
    let mut count = 0;
    for run in 0..runs {
        let log = dir.join(format!("cli-{mode}-{runs}-{run}.strace"));
        let status = std::process::Command::new(strace)
            .args(["-f", "-qq", "-e", "trace=fsync,fdatasync", "-o"])
            .arg(&log)
            .arg(env!("CARGO_BIN_EXE_session-store"))
            .arg("--db")
            .arg(&db)
            .args(["--durability", mode, "import", "--format", "codex"])
            .arg("tests/fixtures/codex_subagents/parent.jsonl")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("strace runs");
        assert!(
            status.success(),
            "session-store under strace failed: {status}"
        );
        let text = std::fs::read_to_string(&log).expect("strace log");
        count += text
            .lines()
            .filter(|l| l.contains("fsync(") || l.contains("fdatasync("))
            .count();
    }
    count
}

/// Both CLIs take `--durability full|normal` and refuse anything else before touching the
/// database; `session-store --durability full` syncs each import's commit, `normal` does not
/// (counted as above, the cost of a process's open and close cancelling out).
#[test]
fn the_clis_pass_durability_to_the_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("flags.db");
    drop(Store::open(&db).expect("create"));
    for bin in [
        env!("CARGO_BIN_EXE_session-store"),
        env!("CARGO_BIN_EXE_store-repair"),
    ] {
        let command = |mode: &str| {
            let mut command = std::process::Command::new(bin);
            command.arg("--db").arg(&db).args(["--durability", mode]);
            if bin.ends_with("session-store") {
                command.arg("sessions");
            } else {
                command.arg("--dry-run");
            }
            command.output().expect("runs")
        };
        for mode in ["full", "normal"] {
            let out = command(mode);
            assert!(
                out.status.success(),
                "{bin} --durability {mode}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let refused = command("fsync");
        assert_eq!(refused.status.code(), Some(2), "{bin}");
        assert!(String::from_utf8_lossy(&refused.stderr).contains("--durability"));
    }
    let Some(strace) = strace() else {
        eprintln!("durability: strace is not installed here; the CLI's fsync count is skipped");
        return;
    };
    const RUNS: usize = 3;
    let full = cli_syncs(&strace, dir.path(), "full", RUNS);
    let normal = cli_syncs(&strace, dir.path(), "normal", RUNS);
    eprintln!("durability: syncs for {RUNS} CLI imports: full {full}, normal {normal}");
    assert!(
        full >= normal + RUNS,
        "full made {full} syncs, normal {normal}, for {RUNS} imports"
    );
}
