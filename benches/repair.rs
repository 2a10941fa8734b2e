//! Checking a database of 1,000,000 messages against the contract's rules, beside a baseline
//! full scan of the same tables (the same rows and columns, read once, nothing else done).
//! The target is a check within 5x of the scan; the figure lives in BENCHMARKS.md.
//!
//! The fixture (10,000 sessions of 100 messages, tool-heavy, with a compacted head) is built
//! once with raw inserts under Cargo's target tmpdir and reused by later runs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use rusqlite::{params, Connection, TransactionBehavior};
use session_store::RepairOptions;
use session_store::Store;

const SESSIONS: usize = 10_000;
const PER_SESSION: usize = 100;
const COMPACTED: usize = 41;

fn fixture() -> PathBuf {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("repair-1m-messages.db");
    // Reuse the fixture unless this build's migrations no longer agree with it.
    if path.exists() && Store::open(&path).is_ok() {
        return path;
    }
    let _ = std::fs::remove_file(&path);
    let partial = path.with_extension("partial");
    let _ = std::fs::remove_file(&partial);
    drop(Store::open(&partial).expect("create fixture"));
    let mut conn = Connection::open(&partial).expect("open fixture");
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .expect("tx");
    {
        let mut session = tx
            .prepare("INSERT INTO sessions (id, created_at, updated_at) VALUES (?1, ?2, ?2)")
            .expect("prepare");
        let mut message = tx
            .prepare(
                "INSERT INTO messages (session_id, seq, turn_index, role, compacted, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .expect("prepare");
        let mut part = tx
            .prepare(
                "INSERT INTO parts (message_id, ordinal, kind, text, tool_use_id, tool_name, input)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .expect("prepare");
        let at = "2026-01-01T00:00:00.000000Z";
        for s in 0..SESSIONS {
            let id = format!("session-{s:05}");
            session.execute(params![id, at]).expect("session");
            let mut users = 0i64;
            for i in 0..PER_SESSION {
                let j = i.wrapping_sub(1);
                let role = match (i, j % 4) {
                    (0, _) => "system",
                    (_, 0) => "user",
                    (_, 2) => "tool",
                    _ => "assistant",
                };
                if role == "user" {
                    users += 1;
                }
                message
                    .execute(params![
                        id,
                        i as i64 + 1,
                        (users - 1).max(0),
                        role,
                        i < COMPACTED,
                        at
                    ])
                    .expect("message");
                let m = tx.last_insert_rowid();
                let call = format!("toolu_{s}_{j}");
                let answer = format!("toolu_{s}_{}", j.wrapping_sub(1));
                match (role, j % 4) {
                    ("assistant", 1) => {
                        part.execute(params![
                            m,
                            0,
                            "text",
                            "let me look",
                            None::<&str>,
                            None::<&str>,
                            None::<&str>
                        ])
                        .expect("part");
                        part.execute(params![
                            m,
                            1,
                            "tool_use",
                            None::<&str>,
                            call,
                            "bash",
                            "{\"cmd\":\"ls -la /tmp\"}"
                        ])
                        .expect("part");
                    }
                    ("tool", _) => {
                        part.execute(params![
                            m,
                            0,
                            "tool_result",
                            "total 0\ndrwxrwxrwt 2 root root",
                            answer,
                            None::<&str>,
                            None::<&str>
                        ])
                        .expect("part");
                    }
                    _ => {
                        part.execute(params![
                            m,
                            0,
                            "text",
                            "a sentence or two of conversation",
                            None::<&str>,
                            None::<&str>,
                            None::<&str>
                        ])
                        .expect("part");
                    }
                }
            }
        }
    }
    tx.commit().expect("commit");
    drop(conn);
    std::fs::rename(&partial, &path).expect("rename fixture");
    path
}

/// The baseline: every row of `messages` and `parts` read once in table order, every column
/// the check reads, no join and no work: the cheapest way to touch the same data.
fn full_scan(conn: &Connection) -> usize {
    let mut bytes = 0;
    for sql in [
        "SELECT id, session_id, seq, turn_index, role, compacted, created_at FROM messages",
        "SELECT id, message_id, ordinal, kind, text, tool_use_id, is_error FROM parts",
    ] {
        let mut stmt = conn.prepare_cached(sql).expect("prepare");
        let mut rows = stmt.query([]).expect("query");
        while let Some(row) = rows.next().expect("row") {
            for i in 0..7 {
                bytes += match row.get_ref(i).expect("cell") {
                    rusqlite::types::ValueRef::Text(t) => t.len(),
                    _ => 1,
                };
            }
        }
    }
    bytes
}

fn bench(c: &mut Criterion) {
    let path = fixture();
    let store = Store::open(&path).expect("open store");
    let conn = Connection::open(&path).expect("open scan connection");
    let options = RepairOptions::default();

    // One timed pass of each first, so the ratio is printed even with a short measurement.
    let start = Instant::now();
    std::hint::black_box(full_scan(&conn));
    let scan = start.elapsed();
    let start = Instant::now();
    let report = store.check(&[], &options).expect("check");
    let check = start.elapsed();
    assert_eq!(report.sessions_checked, SESSIONS);
    assert!(report.violations.is_empty(), "the fixture is healthy");
    eprintln!(
        "repair check of {} messages: scan {scan:?}, check {check:?}, ratio {:.2}x",
        SESSIONS * PER_SESSION,
        check.as_secs_f64() / scan.as_secs_f64()
    );

    let mut group = c.benchmark_group("repair_check_1m_messages");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(5));
    group.bench_function("baseline_full_scan", |b| {
        b.iter(|| std::hint::black_box(full_scan(&conn)))
    });
    group.bench_function("store_check", |b| {
        b.iter(|| std::hint::black_box(store.check(&[], &options).expect("check")))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
