//! Load benchmark: a 10,002-message session (1,667 tool turns, none compacted) read whole: the
//! provider view (`Store::provider_history`: latest summary and every message not compacted)
//! and the whole stored history (`Store::messages`), beside a raw `SELECT` of the same rows
//! decoded into the same `Message` values, and the two peers reading the same messages back.
//! `Store::export` (the view rendered as an Anthropic request body) is measured too, to show
//! what rendering adds. Ratios are printed at the end (see BENCHMARKS.md).
#![allow(clippy::unwrap_used)] // a benchmark that fails to set up should stop loudly

mod common;

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{Criterion, Throughput};
use session_store::{ExportOptions, Provider, SessionId, Store};

use common::{
    print_ratios, raw_load, raw_load_all, raw_load_strings, rounds_of, tool_turn, Blob, Jsonl, Raw,
    TURN_LEN,
};

/// Tool turns in the loaded session: 1,667 x 6 = 10,002 messages.
const TURNS: u64 = 1_667;

fn load(c: &mut Criterion, fixture: &Fixture) {
    let Fixture {
        db,
        store,
        session,
        jsonl,
        blob,
        floor,
        ..
    } = fixture;
    let raw = rusqlite::Connection::open(db).unwrap();
    common::configure(&raw);
    let expected = TURNS as usize * TURN_LEN;
    assert_eq!(store.messages(session).unwrap().len(), expected);
    assert_eq!(
        raw_load(&raw, session.as_str()),
        store.messages(session).unwrap()
    );
    assert_eq!(
        raw_load(&raw, session.as_str()),
        store.provider_history(session).unwrap().messages
    );
    // A read-only export: the thinking latch is not written back while measuring.
    let export = ExportOptions {
        persist_latch: false,
        ..ExportOptions::default()
    };
    assert_eq!(jsonl.load().len(), expected);
    assert_eq!(blob.load().len(), expected);

    let mut group = c.benchmark_group("load_10k");
    group.throughput(Throughput::Elements(expected as u64));
    group.sample_size(20);
    group.bench_function("store_provider_history", |b| {
        b.iter(|| black_box(store.provider_history(session).unwrap()))
    });
    group.bench_function("store_messages", |b| {
        b.iter(|| black_box(store.messages(session).unwrap()))
    });
    group.bench_function("raw_select", |b| {
        b.iter(|| black_box(raw_load(&raw, session.as_str())))
    });
    group.bench_function("store_export_anthropic", |b| {
        b.iter(|| {
            black_box(
                store
                    .export_now(session, Provider::Anthropic, &export)
                    .unwrap(),
            )
        })
    });
    group.bench_function("floor_select", |b| {
        b.iter(|| black_box(raw_load(&floor.conn, floor.session())))
    });
    group.bench_function("jsonl", |b| b.iter(|| black_box(jsonl.load())));
    group.bench_function("blob", |b| b.iter(|| black_box(blob.load())));
    group.finish();
}

/// The stores the load benchmarks read: the store's file, the floor's, and the peers, all
/// holding the same 10,002 messages.
struct Fixture {
    dir: tempfile::TempDir,
    db: PathBuf,
    store: Store,
    session: SessionId,
    floor: Raw,
    jsonl: Jsonl,
    blob: Blob,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store.db");
    let store = Store::open(&db).unwrap();
    let session = store.create_session().unwrap();
    let mut floor = Raw::floor(&dir.path().join("floor.db"));
    let mut jsonl = Jsonl::open(&dir.path().join("peer.jsonl"));
    let mut blob = Blob::open(&dir.path().join("peer-blob.db"));
    for n in 0..TURNS {
        let turn = tool_turn(n);
        jsonl.append(&turn);
        blob.append(&turn);
        floor.append(&turn);
        store.append_batch(&session, turn).unwrap();
    }
    // Every reader starts from the main file, not from whatever the WAL holds after setup.
    for file in ["store.db", "floor.db", "peer-blob.db"] {
        rusqlite::Connection::open(dir.path().join(file))
            .unwrap()
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .unwrap();
    }
    Fixture {
        dir,
        db,
        store,
        session,
        floor,
        jsonl,
        blob,
    }
}

/// Disk per message: each file's size after a checkpoint, over the messages it holds.
fn disk(f: &Fixture) {
    let messages = (TURNS as usize * TURN_LEN) as f64;
    let size = |name: &str| std::fs::metadata(f.dir.path().join(name)).unwrap().len() as f64;
    let (store, floor) = (size("store.db"), size("floor.db"));
    println!("\n== disk per message ({messages} messages, after a checkpoint) ==");
    for (name, bytes) in [
        ("store", store),
        ("floor", floor),
        ("blob peer", size("peer-blob.db")),
        ("jsonl peer", size("peer.jsonl")),
    ] {
        println!(
            "  {name:<12} {:>10.0} B/message   store / this = {:.3}x",
            bytes / messages,
            store / bytes
        );
    }
}

/// The targeted ratios, timed in rounds (see `common::rounds_of`).
fn paired_ratios(f: &Fixture) {
    let export = ExportOptions {
        persist_latch: false,
        ..ExportOptions::default()
    };
    let (store, session) = (&f.store, &f.session);
    // The baseline on the store's own file and schema, on a connection that did nothing else.
    let raw = rusqlite::Connection::open(&f.db).unwrap();
    common::configure(&raw);
    let floor = (&f.floor.conn, f.floor.session());
    let expected = TURNS as usize * TURN_LEN;
    assert_eq!(raw_load_all(floor.0, floor.1).len(), expected);
    assert_eq!(
        raw_load_all(&raw, session.as_str()),
        store.messages(session).unwrap()
    );
    println!();
    rounds_of(
        "load all 10k messages",
        30,
        &mut || {},
        &mut [
            ("store messages", &mut || {
                black_box(store.messages(session).unwrap());
            }),
            ("raw on the store's schema", &mut || {
                black_box(raw_load_all(&raw, session.as_str()));
            }),
            ("floor", &mut || {
                black_box(raw_load_all(floor.0, floor.1));
            }),
            ("floor, rows as strings", &mut || {
                black_box(raw_load_strings(floor.0, floor.1));
            }),
            ("jsonl peer", &mut || {
                black_box(f.jsonl.load());
            }),
            ("blob peer", &mut || {
                black_box(f.blob.load());
            }),
        ],
    );
    rounds_of(
        "provider view of 10k (vs raw compacted = 0)",
        30,
        &mut || {},
        &mut [
            ("store provider_history", &mut || {
                black_box(store.provider_history(session).unwrap());
            }),
            ("raw on the store's schema", &mut || {
                black_box(raw_load(&raw, session.as_str()));
            }),
            ("floor", &mut || {
                black_box(raw_load(floor.0, floor.1));
            }),
        ],
    );
    // A fresh connection on each side every round, so neither side's page cache or
    // connection history favours it.
    let floor_db = f.dir.path().join("floor.db");
    rounds_of(
        "provider view, open + load",
        30,
        &mut || {},
        &mut [
            ("store open + provider_history", &mut || {
                let store = Store::open(&f.db).unwrap();
                black_box(store.provider_history(session).unwrap());
            }),
            ("floor open + load", &mut || {
                let conn = rusqlite::Connection::open(&floor_db).unwrap();
                common::configure_floor(&conn);
                black_box(raw_load(&conn, floor.1));
            }),
        ],
    );
    rounds_of(
        "Anthropic export of 10k (vs raw load)",
        20,
        &mut || {},
        &mut [
            ("store export", &mut || {
                black_box(
                    store
                        .export_now(session, Provider::Anthropic, &export)
                        .unwrap(),
                );
            }),
            ("floor load", &mut || {
                black_box(raw_load_all(floor.0, floor.1));
            }),
            ("store messages", &mut || {
                black_box(store.messages(session).unwrap());
            }),
        ],
    );
}

/// `PROFILE_ARM=messages|provider_history|export|floor` runs that arm 20 times
/// (`PROFILE_N` times) and nothing
/// else, for `perf record` or `valgrind --tool=callgrind`.
fn profile(f: &Fixture, arm: &str) {
    let export = ExportOptions {
        persist_latch: false,
        ..ExportOptions::default()
    };
    let times = std::env::var("PROFILE_N").map_or(20, |n| n.parse().unwrap());
    for _ in 0..times {
        match arm {
            "messages" => drop(black_box(f.store.messages(&f.session).unwrap())),
            "provider_history" => drop(black_box(f.store.provider_history(&f.session).unwrap())),
            "export" => drop(black_box(
                f.store
                    .export_now(&f.session, Provider::Anthropic, &export)
                    .unwrap(),
            )),
            "floor" => drop(black_box(raw_load_all(&f.floor.conn, f.floor.session()))),
            other => panic!("unknown arm {other}"),
        }
    }
}

fn main() {
    let fixture = fixture();
    if let Ok(arm) = std::env::var("PROFILE_ARM") {
        profile(&fixture, &arm);
        return;
    }
    disk(&fixture);
    paired_ratios(&fixture);
    if std::env::var_os("PAIRED_ONLY").is_some() {
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    load(&mut c, &fixture);
    c.final_summary();
    print_ratios(
        "load_10k",
        &[
            ("store_provider_history", "raw_select", Some(1.5)),
            ("store_messages", "raw_select", Some(1.5)),
            ("store_provider_history", "floor_select", Some(1.2)),
            ("store_export_anthropic", "raw_select", None),
            ("store_provider_history", "jsonl", None),
            ("store_provider_history", "blob", None),
        ],
    );
}
