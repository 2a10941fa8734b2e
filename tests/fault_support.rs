//! Shared by the fault tests (crash, contention, disk full, read-only, migration kill): a
//! realistic tool turn, the contract's invariants written as SQL, a small seeded random
//! source, and re-running this test binary as a child process. A fault test is only as good
//! as its checker, so the checker here reads the raw tables, not the library's own view.

use std::path::Path;
use std::process::Command;

use rusqlite::{Connection, OpenFlags};
use serde_json::json;
use session_store::{NewMessage, Part};

/// Messages in one [`tool_turn`].
pub const TURN_LEN: usize = 6;

/// One tool turn: the user asks, the assistant calls three tools, three tool messages answer,
/// the assistant answers. `tag` makes the tool_use ids unique within a session.
pub fn tool_turn(tag: &str) -> Vec<NewMessage> {
    let ids: Vec<String> = (0..3).map(|i| format!("call_{tag}_{i}")).collect();
    let mut turn = vec![
        NewMessage::user(format!(
            "turn {tag}: list the files and read the two biggest"
        )),
        NewMessage::assistant(vec![
            Part::reasoning(
                format!("I should look around first ({tag})"),
                Some(json!({"anthropic": {"signature": format!("sig-{tag}")}})),
            ),
            Part::tool_use(&ids[0], "bash", json!({"cmd": "ls -la"})),
            Part::tool_use(&ids[1], "read", json!({"path": "src/main.rs"})),
            Part::tool_use(&ids[2], "read", json!({"path": "Cargo.toml"})),
        ]),
    ];
    for (i, id) in ids.iter().enumerate() {
        turn.push(NewMessage::tool(vec![Part::tool_result(
            id,
            format!("result {i} of {tag}: {}", "x".repeat(200)),
        )]));
    }
    turn.push(NewMessage::assistant(vec![Part::text(format!(
        "done with {tag}"
    ))]));
    turn
}

/// Opens a raw connection for checking, bypassing the store.
pub fn raw(path: &Path) -> Connection {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE)
        .expect("raw connection");
    conn.busy_timeout(std::time::Duration::from_secs(30))
        .expect("busy timeout");
    conn
}

/// `PRAGMA integrity_check` says `ok`.
pub fn assert_integrity(conn: &Connection) {
    let rows: Vec<String> = conn
        .prepare("PRAGMA integrity_check")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .expect("integrity_check runs");
    assert_eq!(rows, ["ok"], "integrity_check");
}

/// Every violation of the contract's invariants (the one SQL statement of them, in
/// `util::INVARIANTS`), as `rule: session detail`.
pub fn violations(conn: &Connection) -> Vec<String> {
    crate::util::violations_in(conn)
}

/// Panics with every violation found.
pub fn assert_invariants(conn: &Connection) {
    let found = violations(conn);
    assert!(found.is_empty(), "contract violations: {found:#?}");
}

/// Every session's `seq` runs 1..=n without a gap, and every message has parts numbered
/// 0..k without a gap.
pub fn assert_dense(conn: &Connection) {
    let gaps: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM (SELECT session_id, MAX(seq) AS hi, COUNT(*) AS n
                                   FROM messages GROUP BY session_id) WHERE hi != n",
            [],
            |r| r.get(0),
        )
        .expect("seq gap query");
    assert_eq!(gaps, 0, "a session has a seq gap");
    let bad_parts: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM messages m WHERE NOT EXISTS (SELECT 1 FROM parts p WHERE p.message_id = m.id)
                OR (SELECT MAX(ordinal) + 1 FROM parts p WHERE p.message_id = m.id)
                   != (SELECT COUNT(*) FROM parts p WHERE p.message_id = m.id)",
            [],
            |r| r.get(0),
        )
        .expect("part gap query");
    assert_eq!(
        bad_parts, 0,
        "a message without parts or with an ordinal gap"
    );
}

/// A small deterministic random source (xorshift64*), seeded and printed by each test so a
/// failure can be replayed with `PROOF_SEED`.
pub struct Rng(u64);

impl Rng {
    /// Seeded from `PROOF_SEED` when set, else from the clock; prints the seed.
    pub fn from_env(test: &str) -> Self {
        let seed = std::env::var("PROOF_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
            });
        eprintln!("{test}: PROOF_SEED={seed}");
        Self(seed.max(1))
    }

    /// A fixed seed.
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    /// The next value.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A value in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// This test binary, re-run so that only the `#[ignore]`d test `name` (a path such as
/// `crash::crash_writer_child`) runs, in its own process.
pub fn child(name: &str) -> Command {
    let exe = std::env::current_exe().expect("test binary path");
    let mut command = Command::new(exe);
    command.args([
        "--exact",
        name,
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ]);
    command
}

/// The checker above is what every fault test trusts: each rule must fire on a session broken
/// in exactly its way, and stay quiet on a healthy one with a pending turn.
#[test]
fn invariant_checker_flags_each_broken_rule() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("check.db");
    let store = session_store::Store::open(&db).expect("open");
    let session = store.create_session().expect("session");
    store
        .append_batch(&session, tool_turn("a"))
        .expect("turn a");
    store
        .append_batch(&session, tool_turn("b"))
        .expect("turn b");
    let mut pending = tool_turn("c");
    pending.truncate(2);
    store.append_batch(&session, pending).expect("pending turn");
    let conn = raw(&db);
    assert_invariants(&conn);
    assert_dense(&conn);
    let cases = [
        ("turn_index_mismatch", "UPDATE messages SET turn_index = 7 WHERE seq = 3"),
        ("split_turn_compaction", "UPDATE messages SET compacted = 1 WHERE seq = 1"),
        ("compaction_gap", "UPDATE messages SET compacted = 1 WHERE turn_index = 1"),
        (
            "duplicate_tool_use_id",
            "UPDATE parts SET tool_use_id = 'call_a_0' WHERE tool_use_id = 'call_b_0' AND kind = 'tool_use'",
        ),
        ("misplaced_tool_result", "UPDATE messages SET role = 'user' WHERE seq = 3"),
        (
            "orphan_tool_result",
            "UPDATE parts SET tool_use_id = 'nope' WHERE tool_use_id = 'call_a_1' AND kind = 'tool_result'",
        ),
        (
            "dangling_tool_use",
            "DELETE FROM parts WHERE tool_use_id = 'call_b_2' AND kind = 'tool_result'",
        ),
    ];
    for (rule, break_it) in cases {
        conn.execute_batch("BEGIN").expect("begin");
        conn.execute_batch(break_it).expect(break_it);
        let found = violations(&conn);
        conn.execute_batch("ROLLBACK").expect("rollback");
        assert!(
            found.iter().any(|v| v.starts_with(rule)),
            "{rule} not flagged after `{break_it}`: {found:?}"
        );
    }
    assert_invariants(&conn);
}

/// Printed by a child right before the work a parent wants to interrupt.
pub const READY: &str = "PROOF_READY";
/// Printed by a child after that work, with how long it took in microseconds.
pub const DONE: &str = "PROOF_DONE";

/// Runs `work` between the [`READY`] and [`DONE`] markers on stdout (the markers share a line
/// with libtest's own output, so parents look for them anywhere in a line).
pub fn marked_work(work: impl FnOnce()) {
    use std::io::Write;
    println!("{READY}");
    std::io::stdout().flush().expect("flush");
    let started = std::time::Instant::now();
    work();
    println!("{DONE} {}", started.elapsed().as_micros());
}

/// Runs `command` to the end with its stdout piped; returns how long the marked work took.
pub fn timed_work(command: &mut Command) -> std::time::Duration {
    let out = command
        .stdout(std::process::Stdio::piped())
        .output()
        .expect("run child");
    assert!(
        out.status.success(),
        "child failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let micros = stdout
        .lines()
        .find_map(|l| l.split(DONE).nth(1))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("child printed no {DONE}: {stdout}"));
    std::time::Duration::from_micros(micros)
}

/// Spawns `command` with stdout piped, waits until it prints [`READY`], sleeps `delay` and
/// kills it with SIGKILL.
pub fn kill_after_ready(command: &mut Command, delay: std::time::Duration) {
    use std::io::BufRead;
    let mut running = command
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn child");
    let stdout = running.stdout.take().expect("piped stdout");
    let mut lines = std::io::BufReader::new(stdout).lines();
    let ready = lines.any(|l| l.is_ok_and(|l| l.contains(READY)));
    assert!(ready, "child ended before {READY}");
    std::thread::sleep(delay);
    let _ = running.kill();
    running.wait().expect("reap");
}
