//! Append benchmarks: one realistic tool turn (6 messages, 10 parts) stored message by message
//! and as one batch, against raw rusqlite inserting the same rows in the same transaction
//! shape, and the two peers; then one small message per commit, as messages per second.
//! Ratios are printed at the end (see BENCHMARKS.md).
#![allow(clippy::unwrap_used)] // a benchmark that fails to set up should stop loudly

mod common;

use std::cell::{Cell, RefCell};
use std::hint::black_box;

use criterion::{Criterion, Throughput};
use session_store::{NewMessage, Store};

use common::{agent_turns, print_ratios, rounds_of, tool_turn, Blob, Jsonl, Raw, TURN_LEN};

fn turn(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store.db")).unwrap();
    let session = store.create_session().unwrap();
    let raw_db = dir.path().join("raw.db");
    drop(Store::open(&raw_db).unwrap());
    let mut raw = Raw::open(&raw_db);
    let mut floor = Raw::floor(&dir.path().join("floor.db"));
    let mut jsonl = Jsonl::open(&dir.path().join("peer.jsonl"));
    let mut blob = Blob::open(&dir.path().join("peer-blob.db"));

    let mut group = c.benchmark_group("append_turn");
    group.throughput(Throughput::Elements(TURN_LEN as u64));
    let mut n = 0u64;
    let mut next = move || {
        n += 1;
        tool_turn(n)
    };
    group.bench_function("store_by_message", |b| {
        b.iter_batched(
            &mut next,
            |turn| {
                for message in turn {
                    black_box(store.append(&session, message).unwrap());
                }
            },
            criterion::BatchSize::SmallInput,
        )
    });
    group.bench_function("raw_by_message", |b| {
        b.iter_batched(
            &mut next,
            |turn| {
                for message in turn {
                    raw.append(std::slice::from_ref(&message));
                }
            },
            criterion::BatchSize::SmallInput,
        )
    });
    group.bench_function("floor_by_message", |b| {
        b.iter_batched(
            &mut next,
            |turn| {
                for message in turn {
                    floor.append(std::slice::from_ref(&message));
                }
            },
            criterion::BatchSize::SmallInput,
        )
    });
    group.bench_function("store_batch", |b| {
        b.iter_batched(
            &mut next,
            |turn| black_box(store.append_batch(&session, turn).unwrap()),
            criterion::BatchSize::SmallInput,
        )
    });
    group.bench_function("raw_batch", |b| {
        b.iter_batched(
            &mut next,
            |turn| raw.append(&turn),
            criterion::BatchSize::SmallInput,
        )
    });
    group.bench_function("floor_batch", |b| {
        b.iter_batched(
            &mut next,
            |turn| floor.append(&turn),
            criterion::BatchSize::SmallInput,
        )
    });
    group.bench_function("jsonl_by_message", |b| {
        b.iter_batched(
            &mut next,
            |turn| jsonl.append(&turn),
            criterion::BatchSize::SmallInput,
        )
    });
    group.bench_function("blob_by_message", |b| {
        b.iter_batched(
            &mut next,
            |turn| {
                for message in &turn {
                    blob.append(std::slice::from_ref(message));
                }
            },
            criterion::BatchSize::SmallInput,
        )
    });
    group.bench_function("blob_batch", |b| {
        b.iter_batched(
            &mut next,
            |turn| blob.append(&turn),
            criterion::BatchSize::SmallInput,
        )
    });
    group.finish();
}

/// One short user message per commit: the per-commit cost, as messages per second. With WAL
/// and `synchronous=NORMAL` a commit appends to the WAL without fsync (fsync happens at
/// checkpoints), for the store and the baseline alike; `raw_sync_full` shows the same raw
/// commit with an fsync each, the truly fsync-bound case.
fn single(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store.db")).unwrap();
    let session = store.create_session().unwrap();
    let raw_db = dir.path().join("raw.db");
    drop(Store::open(&raw_db).unwrap());
    let mut raw = Raw::open(&raw_db);
    let full_db = dir.path().join("raw-full.db");
    drop(Store::open(&full_db).unwrap());
    let mut raw_full = Raw::open(&full_db);
    let mut floor = Raw::floor(&dir.path().join("floor.db"));
    raw_full.synchronous("FULL");
    let mut jsonl = Jsonl::open(&dir.path().join("peer.jsonl"));
    let mut blob = Blob::open(&dir.path().join("peer-blob.db"));
    let message = NewMessage::user("run the tests again, please");

    let mut group = c.benchmark_group("append_single");
    group.throughput(Throughput::Elements(1));
    group.bench_function("store", |b| {
        b.iter(|| black_box(store.append(&session, message.clone()).unwrap()))
    });
    group.bench_function("raw", |b| {
        b.iter(|| raw.append(std::slice::from_ref(&message)))
    });
    group.bench_function("floor", |b| {
        b.iter(|| floor.append(std::slice::from_ref(&message)))
    });
    // What the store's durability choice saves: the same raw commit with an fsync each.
    group.bench_function("raw_sync_full", |b| {
        b.iter(|| raw_full.append(std::slice::from_ref(&message)))
    });
    group.bench_function("jsonl", |b| {
        b.iter(|| jsonl.append(std::slice::from_ref(&message)))
    });
    group.bench_function("blob", |b| {
        b.iter(|| blob.append(std::slice::from_ref(&message)))
    });
    group.finish();
}

/// The targeted ratios again, timed in rounds (see `common::rounds_of`): the store against
/// the raw baseline on the store's own schema, the floor (the contract's tables alone) and the
/// JSON-blob peer, all in the same rounds.
fn paired_ratios() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store.db")).unwrap();
    let session = store.create_session().unwrap();
    let raw_db = dir.path().join("raw.db");
    drop(Store::open(&raw_db).unwrap());
    // `STORE_SQL=...` runs on the store's file and the raw baseline's before the rounds: what
    // a piece of the schema costs (e.g. `DROP TRIGGER parts_fts_after_insert`).
    if let Ok(sql) = std::env::var("STORE_SQL") {
        for path in [store.path(), raw_db.as_path()] {
            rusqlite::Connection::open(path)
                .unwrap()
                .execute_batch(&sql)
                .unwrap();
        }
    }
    let raw = RefCell::new(Raw::open(&raw_db));
    let floor = RefCell::new(Raw::floor(&dir.path().join("floor.db")));
    let blob = RefCell::new(Blob::open(&dir.path().join("peer-blob.db")));
    let n = Cell::new(1_000_000u64);
    let next = || {
        n.set(n.get() + 1);
        tool_turn(n.get())
    };
    println!();
    agent_rounds();
    let by_message = |append: &mut dyn FnMut(&[NewMessage])| {
        for message in next() {
            append(std::slice::from_ref(&message));
        }
    };
    rounds_of(
        "append_turn by message (6 commits)",
        300,
        &mut || {},
        &mut [
            ("store", &mut || {
                by_message(&mut |m| {
                    store.append(&session, m[0].clone()).unwrap();
                })
            }),
            ("raw on the store's schema", &mut || {
                by_message(&mut |m| raw.borrow_mut().append(m))
            }),
            ("floor", &mut || {
                by_message(&mut |m| floor.borrow_mut().append(m))
            }),
            ("blob peer", &mut || {
                by_message(&mut |m| blob.borrow_mut().append(m))
            }),
        ],
    );
    rounds_of(
        "append_turn batch (1 commit)",
        300,
        &mut || {},
        &mut [
            ("store", &mut || {
                store.append_batch(&session, next()).unwrap();
            }),
            ("raw on the store's schema", &mut || {
                raw.borrow_mut().append(&next())
            }),
            ("floor", &mut || floor.borrow_mut().append(&next())),
            ("blob peer", &mut || blob.borrow_mut().append(&next())),
        ],
    );
    let message = NewMessage::user("run the tests again, please");
    let one = std::slice::from_ref(&message);
    let key = Cell::new(0u64);
    rounds_of(
        "append_single (1 commit)",
        2_000,
        &mut || {},
        &mut [
            ("store", &mut || {
                store.append(&session, message.clone()).unwrap();
            }),
            ("store with an idempotency key", &mut || {
                key.set(key.get() + 1);
                let keyed = message
                    .clone()
                    .with_idempotency_key(format!("request-{}", key.get()));
                store.append(&session, keyed).unwrap();
            }),
            ("raw on the store's schema", &mut || {
                raw.borrow_mut().append(one)
            }),
            ("floor", &mut || floor.borrow_mut().append(one)),
            ("blob peer", &mut || blob.borrow_mut().append(one)),
        ],
    );
}

/// The agent shape ([`agent_turns`]: one tool message holding all of a step's results,
/// parallel calls, multi-KB texts, signed reasoning), whole turns and one commit per message,
/// store against the floor, each round appending the same turn to both (171 turns, about
/// 2,000 messages, per pass).
fn agent_rounds() {
    let turns = agent_turns(7, 171);
    let arms = 2;
    for (name, by_message) in [
        ("agent turn batch (1 commit)", false),
        ("agent turn by message", true),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("store.db")).unwrap();
        let session = &store.create_session().unwrap();
        // `STORE_SQL=...` on the store's file first, as in `paired_ratios`.
        if let Ok(sql) = std::env::var("STORE_SQL") {
            rusqlite::Connection::open(store.path())
                .unwrap()
                .execute_batch(&sql)
                .unwrap();
        }
        let floor = RefCell::new(Raw::floor(&dir.path().join("floor.db")));
        let calls = Cell::new(0usize);
        let current = RefCell::new(Vec::new());
        rounds_of(
            name,
            turns.len(),
            &mut || {
                let turn = &turns[(calls.get() / arms) % turns.len()];
                *current.borrow_mut() = turn.clone();
                calls.set(calls.get() + 1);
            },
            &mut [
                ("store", &mut || {
                    let turn = std::mem::take(&mut *current.borrow_mut());
                    if by_message {
                        for message in turn {
                            store.append(session, message).unwrap();
                        }
                    } else {
                        store.append_batch(session, turn).unwrap();
                    }
                }),
                ("floor", &mut || {
                    let turn = std::mem::take(&mut *current.borrow_mut());
                    let mut floor = floor.borrow_mut();
                    if by_message {
                        for message in &turn {
                            floor.append(std::slice::from_ref(message));
                        }
                    } else {
                        floor.append(&turn);
                    }
                }),
            ],
        );
    }
}

/// Only the paired rounds (`PAIRED_ONLY=1`), skipping criterion's separate measurements.
fn paired_only() -> bool {
    std::env::var_os("PAIRED_ONLY").is_some()
}

/// `PROFILE_ARM=store_by_message|floor_by_message|store_batch|floor_batch` appends
/// `PROFILE_N` tool turns (default 200) through that arm and nothing else (the arms
/// `store_agent_*` and `floor_agent_*`: turns of [`agent_turns`]), inside
/// `profile_loop`, for `valgrind --tool=callgrind --collect-atstart=no
/// --toggle-collect='*profile_loop*'` (instruction counts, robust to the machine's load).
fn profile(arm: &str) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store.db")).unwrap();
    let session = store.create_session().unwrap();
    if let Ok(sql) = std::env::var("STORE_SQL") {
        rusqlite::Connection::open(store.path())
            .unwrap()
            .execute_batch(&sql)
            .unwrap();
    }
    let mut floor = Raw::floor(&dir.path().join("floor.db"));
    let times: u64 = std::env::var("PROFILE_N").map_or(200, |n| n.parse().unwrap());
    let turns: Vec<Vec<NewMessage>> = if arm.contains("agent") {
        agent_turns(7, times as usize)
    } else {
        (1..=times).map(tool_turn).collect()
    };
    profile_loop(turns, &mut |turn| match arm {
        "store_by_message" | "store_agent_by_message" => {
            for message in turn {
                black_box(store.append(&session, message).unwrap());
            }
        }
        "store_batch" | "store_agent_batch" => {
            drop(black_box(store.append_batch(&session, turn).unwrap()))
        }
        "floor_by_message" | "floor_agent_by_message" => {
            for message in turn {
                floor.append(std::slice::from_ref(&message));
            }
        }
        "floor_batch" | "floor_agent_batch" => floor.append(&turn),
        other => panic!("unknown arm {other}"),
    });
}

#[inline(never)]
fn profile_loop(turns: Vec<Vec<NewMessage>>, append: &mut dyn FnMut(Vec<NewMessage>)) {
    for turn in turns {
        append(turn);
    }
}

fn main() {
    if let Ok(arm) = std::env::var("PROFILE_ARM") {
        profile(&arm);
        return;
    }
    if paired_only() {
        paired_ratios();
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    turn(&mut c);
    single(&mut c);
    c.final_summary();
    if std::env::args().any(|a| a == "--list" || a == "--test" || a == "--profile-time") {
        return;
    }
    paired_ratios();
    print_ratios(
        "append_turn",
        &[
            ("store_by_message", "raw_by_message", Some(1.3)),
            ("store_batch", "raw_batch", Some(1.3)),
            ("store_by_message", "floor_by_message", Some(1.2)),
            ("store_batch", "floor_batch", Some(1.2)),
            ("store_by_message", "jsonl_by_message", None),
            ("store_by_message", "blob_by_message", None),
            ("store_batch", "blob_batch", None),
        ],
    );
    print_ratios(
        "append_single",
        &[
            ("store", "raw", Some(1.3)),
            ("store", "floor", Some(1.2)),
            ("store", "raw_sync_full", None),
            ("store", "jsonl", None),
            ("store", "blob", None),
        ],
    );
}
