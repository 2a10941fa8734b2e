//! Linear time everywhere: the grammar walk behind the write path, the importer, the health
//! check, the mend planner and the loader, on one assistant message of n parallel calls, and
//! on n calls sharing one id or having none. n grows 8x (2,500 to 20,000); a linear path
//! takes about 8x as long, a quadratic one 64x. The growth ratios are printed at the end and
//! recorded in BENCHMARKS.md.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use rusqlite::{params, Connection};
use serde_json::json;
use session_store::import::{import as import_transcript, Format};
use session_store::repair::RepairOptions;
use session_store::{ExportOptions, NewMessage, Part, Provider, SessionId, Store};

const SIZES: [usize; 2] = [2_500, 20_000];
const GROUP: &str = "grammar_growth";

fn parallel_turn(n: usize) -> Vec<NewMessage> {
    let calls = (0..n)
        .map(|i| Part::tool_use(format!("call_{i}"), "bash", json!({"cmd": "ls"})))
        .collect();
    let results = (0..n)
        .map(|i| Part::tool_result(format!("call_{i}"), "ok"))
        .collect();
    vec![
        NewMessage::user("run everything"),
        NewMessage::assistant(calls),
        NewMessage::tool(results),
    ]
}

fn anthropic_body(n: usize) -> String {
    let calls: Vec<_> = (0..n)
        .map(|i| json!({"type": "tool_use", "id": format!("toolu_{i}"), "name": "bash", "input": {}}))
        .collect();
    let results: Vec<_> = (0..n)
        .map(|i| json!({"type": "tool_result", "tool_use_id": format!("toolu_{i}"), "content": "ok"}))
        .collect();
    json!({"messages": [
        {"role": "user", "content": "run everything"},
        {"role": "assistant", "content": calls},
        {"role": "user", "content": results},
    ]})
    .to_string()
}

/// A database holding one broken session written with raw SQL: n calls in one assistant
/// message, each answered, all with the id `id` (`None`: no id at all).
fn broken_db(dir: &Path, n: usize, id: Option<&str>) -> PathBuf {
    let path = dir.join(format!("broken-{n}-{}.db", id.unwrap_or("none")));
    drop(Store::open(&path).expect("create"));
    let mut conn = Connection::open(&path).expect("open");
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .expect("tx");
    tx.execute_batch(
        "INSERT INTO sessions (id, created_at, updated_at) VALUES ('s', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z');
         INSERT INTO messages (id, session_id, seq, turn_index, role, created_at) VALUES
           (1, 's', 1, 0, 'user', '2026-01-01T00:00:00Z'),
           (2, 's', 2, 0, 'assistant', '2026-01-01T00:00:00Z'),
           (3, 's', 3, 0, 'tool', '2026-01-01T00:00:00Z');
         INSERT INTO parts (message_id, ordinal, kind, text) VALUES (1, 0, 'text', 'go');",
    )
    .expect("rows");
    {
        let mut part = tx
            .prepare(
                "INSERT INTO parts (message_id, ordinal, kind, text, tool_use_id, tool_name, input)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .expect("prepare");
        for i in 0..n as i64 {
            part.execute(params![2, i, "tool_use", None::<String>, id, "bash", "{}"])
                .expect("call");
            part.execute(params![
                3,
                i,
                "tool_result",
                "ok",
                id,
                None::<String>,
                None::<String>
            ])
            .expect("result");
        }
    }
    tx.commit().expect("commit");
    path
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut group = c.benchmark_group(GROUP);
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(8));
    group.warm_up_time(Duration::from_secs(1));
    for n in SIZES {
        group.bench_with_input(BenchmarkId::new("append", n), &n, |b, &n| {
            b.iter_batched(
                || {
                    let path = dir.path().join(format!("append-{}.db", rand_suffix()));
                    let store = Store::open(&path).expect("open");
                    let session = store.create_session().expect("session");
                    (store, session, parallel_turn(n))
                },
                |(store, session, turn)| store.append_batch(&session, turn).expect("append"),
                BatchSize::PerIteration,
            );
        });
        let body = anthropic_body(n);
        group.bench_with_input(BenchmarkId::new("import", n), &n, |b, _| {
            b.iter(|| import_transcript(Format::Anthropic, &body).expect("import"));
        });
        for (case, id) in [("same_id", Some("same")), ("no_id", None)] {
            let template = broken_db(dir.path(), n, id);
            let store = Store::open(&template).expect("open");
            let session = SessionId::new("s");
            group.bench_with_input(BenchmarkId::new(format!("check_{case}"), n), &n, |b, _| {
                b.iter(|| {
                    store
                        .check(std::slice::from_ref(&session), &RepairOptions::default())
                        .expect("check")
                });
            });
            group.bench_with_input(BenchmarkId::new(format!("export_{case}"), n), &n, |b, _| {
                b.iter(|| {
                    store
                        .export_now(&session, Provider::Anthropic, &ExportOptions::default())
                        .expect("export")
                });
            });
            group.bench_with_input(BenchmarkId::new(format!("repair_{case}"), n), &n, |b, _| {
                b.iter_batched(
                    || {
                        let copy = dir.path().join(format!("repair-{}.db", rand_suffix()));
                        std::fs::copy(&template, &copy).expect("copy");
                        Store::open(&copy).expect("open copy")
                    },
                    |copy| {
                        copy.repair_session(&session, &RepairOptions::default())
                            .expect("repair")
                    },
                    BatchSize::PerIteration,
                );
            });
        }
    }
    group.finish();
    println!(
        "\n== {GROUP}: time at n = 20,000 / time at n = 2,500 (linear: ~8x; quadratic: ~64x) =="
    );
    for case in [
        "append",
        "import",
        "check_same_id",
        "export_same_id",
        "repair_same_id",
        "check_no_id",
        "export_no_id",
        "repair_no_id",
    ] {
        let small = common::median_ns(GROUP, &format!("{case}/{}", SIZES[0]));
        let large = common::median_ns(GROUP, &format!("{case}/{}", SIZES[1]));
        match (small, large) {
            (Some(s), Some(l)) => println!(
                "{case}: {:.1} ms -> {:.1} ms = {:.1}x",
                s / 1e6,
                l / 1e6,
                l / s
            ),
            _ => println!("{case}: not measured in this run"),
        }
    }
}

fn rand_suffix() -> String {
    SessionId::random().to_string()
}

criterion_group!(benches, bench);
criterion_main!(benches);
