//! Checking a database of 1,000,000 messages against the contract's rules, beside a baseline
//! full scan of the same tables (the same rows and columns, read once, nothing else done).
//! The target is a check within 5x of the scan; the figure lives in BENCHMARKS.md.
//!
//! The fixture (10,000 sessions of 100 messages, tool-heavy, with a compacted head) is built
//! once with raw inserts under Cargo's target tmpdir and reused by later runs.

mod common;

use std::time::{Duration, Instant};

use common::million::{fixture, PER_SESSION, SESSIONS};
use criterion::{criterion_group, criterion_main, Criterion};
use rusqlite::Connection;
use session_store::repair::RepairOptions;
use session_store::Store;

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
