//! Crash consistency: a writer killed with SIGKILL at a random moment, mid-append, must leave
//! a database that passes `integrity_check`, still holds every message whose commit returned
//! (with all its parts), breaks none of the contract's invariants (a pending turn is allowed),
//! and accepts the next append once `cancel_pending` has answered the interrupted calls.
//!
//! The writer is this test binary re-run as a child process (`crash_writer_child`). After
//! each append returns it writes the acknowledged message ids and part counts to a side file
//! and fsyncs it, so the parent knows exactly what the store promised before the kill.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use session_store::{NewMessage, SessionId, Store};

use crate::fault_support::{
    assert_dense, assert_integrity, assert_invariants, child, raw, tool_turn, Rng,
};

const DB_ENV: &str = "PROOF_CRASH_DB";
const ACK_ENV: &str = "PROOF_CRASH_ACKS";
const SESSION_ENV: &str = "PROOF_CRASH_SESSION";
const ROUND_ENV: &str = "PROOF_CRASH_ROUND";
const KILLS: usize = 32;

/// The child: appends tool turns until killed, half as whole batches and half message by
/// message (so kills land inside turns too), acknowledging each commit in the side file.
#[test]
#[ignore = "child process of the crash test: does nothing unless spawned by it"]
fn crash_writer_child() {
    let (Some(db), Some(acks), Some(session), Some(round)) = (
        std::env::var_os(DB_ENV),
        std::env::var_os(ACK_ENV),
        std::env::var(SESSION_ENV).ok(),
        std::env::var(ROUND_ENV).ok(),
    ) else {
        return;
    };
    let store = Store::open(PathBuf::from(db)).expect("child opens store");
    let session = SessionId::new(session);
    let mut acks = OpenOptions::new()
        .append(true)
        .create(true)
        .open(acks)
        .expect("ack file");
    let mut rng = Rng::new(round.parse::<u64>().unwrap_or(1) * 7919);
    for turn in 0.. {
        let messages = tool_turn(&format!("r{round}t{turn}"));
        let appended = if rng.below(2) == 0 {
            let counts: Vec<usize> = messages.iter().map(|m| m.parts.len()).collect();
            let done = store
                .append_batch(&session, messages)
                .expect("batch append");
            done.into_iter().zip(counts).collect::<Vec<_>>()
        } else {
            for message in messages {
                let parts = message.parts.len();
                let one = store.append(&session, message).expect("append");
                acknowledge(&mut acks, &[(one, parts)]);
            }
            Vec::new()
        };
        acknowledge(&mut acks, &appended);
    }
}

fn acknowledge(acks: &mut File, appended: &[(session_store::Appended, usize)]) {
    if appended.is_empty() {
        return;
    }
    let mut line = String::new();
    for (a, parts) in appended {
        line.push_str(&format!("{} {} {}\n", a.id, a.seq, parts));
    }
    acks.write_all(line.as_bytes()).expect("ack write");
    acks.sync_data().expect("ack fsync");
}

/// `message id -> (seq, part count)` for every complete line of the side file; a torn last
/// line was never fully acknowledged and is skipped.
fn read_acks(path: &Path) -> BTreeMap<i64, (i64, i64)> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let complete = match text.rfind('\n') {
        Some(end) => &text[..=end],
        None => "",
    };
    complete
        .lines()
        .map(|line| {
            let fields: Vec<i64> = line
                .split(' ')
                .map(|f| f.parse().expect("ack field"))
                .collect();
            (fields[0], (fields[1], fields[2]))
        })
        .collect()
}

#[test]
fn acknowledged_messages_survive_sigkill_mid_append() {
    let mut rng = Rng::from_env("crash");
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("crash.db");
    let acks = dir.path().join("acks");
    let session = {
        let store = Store::open(&db).expect("open");
        store.create_session().expect("session")
    };
    let mut kills_mid_turn = 0;
    for round in 0..KILLS {
        let before = read_acks(&acks).len();
        let mut writer = child("crash::crash_writer_child")
            .env(DB_ENV, &db)
            .env(ACK_ENV, &acks)
            .env(SESSION_ENV, session.as_str())
            .env(ROUND_ENV, (round + 1).to_string())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn writer");
        // Kill only once the writer is committing, at a random point after that.
        let started = Instant::now();
        while read_acks(&acks).len() == before {
            if let Some(status) = writer.try_wait().expect("wait") {
                panic!("writer exited before writing anything: {status}");
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "writer never acknowledged"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        std::thread::sleep(Duration::from_micros(rng.below(40_000)));
        writer.kill().expect("SIGKILL");
        let status = writer.wait().expect("reap");
        assert!(!status.success(), "writer ended on its own: {status}");

        let acked = read_acks(&acks);
        {
            let conn = raw(&db);
            assert_integrity(&conn);
            assert_invariants(&conn);
            assert_dense(&conn);
            let mut stmt = conn
                .prepare(
                    "SELECT m.seq, (SELECT COUNT(*) FROM parts p WHERE p.message_id = m.id)
                     FROM messages m WHERE m.id = ?1",
                )
                .expect("prepare");
            for (id, (seq, parts)) in &acked {
                let found: (i64, i64) = stmt
                    .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
                    .unwrap_or_else(|e| panic!("acknowledged message {id} lost: {e}"));
                assert_eq!(found, (*seq, *parts), "message {id} changed");
            }
        }
        let store = Store::open(&db).expect("reopen after kill");
        if !store
            .pending_tool_uses(&session)
            .expect("pending")
            .is_empty()
        {
            kills_mid_turn += 1;
        }
        store
            .cancel_pending(&session, "writer was killed")
            .expect("cancel_pending");
        store
            .append(
                &session,
                NewMessage::user(format!("resumed after kill {round}")),
            )
            .expect("append after cancel_pending");
        assert_invariants(&raw(&db));
    }
    eprintln!("crash: {KILLS} kills, {kills_mid_turn} left a pending tool turn");
    let total = read_acks(&acks).len();
    assert!(total >= KILLS, "only {total} messages acknowledged");
}
