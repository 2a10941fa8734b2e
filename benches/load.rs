//! Load benchmark: a 10,002-message session (1,667 tool turns, none compacted) read whole: the
//! provider view (`Store::provider_history`: latest summary and every message not compacted)
//! and the whole stored history (`Store::messages`), beside a raw `SELECT` of the same rows
//! decoded into the same `Message` values, and the two peers reading the same messages back.
//! `Store::export` (the view rendered as an Anthropic request body) is measured too, to show
//! what rendering adds. Ratios are printed at the end (see BENCHMARKS.md).
#![allow(clippy::unwrap_used)] // a benchmark that fails to set up should stop loudly

mod common;

use std::hint::black_box;

use criterion::{Criterion, Throughput};
use session_store::{ExportOptions, Provider, Store};

use common::{paired, print_ratios, raw_load, tool_turn, Blob, Jsonl, TURN_LEN};

/// Tool turns in the loaded session: 1,667 x 6 = 10,002 messages.
const TURNS: u64 = 1_667;

fn load(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store.db");
    let store = Store::open(&db).unwrap();
    let session = store.create_session().unwrap();
    let mut jsonl = Jsonl::open(&dir.path().join("peer.jsonl"));
    let mut blob = Blob::open(&dir.path().join("peer-blob.db"));
    for n in 0..TURNS {
        let turn = tool_turn(n);
        jsonl.append(&turn);
        blob.append(&turn);
        store.append_batch(&session, turn).unwrap();
    }
    // Every reader starts from the main file, not from whatever the WAL holds after setup, and
    // the baseline on a connection that did nothing else.
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .unwrap();
    let raw = rusqlite::Connection::open(&db).unwrap();
    common::configure(&raw);
    let expected = TURNS as usize * TURN_LEN;
    assert_eq!(store.messages(&session).unwrap().len(), expected);
    assert_eq!(
        raw_load(&raw, session.as_str()),
        store.messages(&session).unwrap()
    );
    assert_eq!(
        raw_load(&raw, session.as_str()),
        store.provider_history(&session).unwrap().messages
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
        b.iter(|| black_box(store.provider_history(&session).unwrap()))
    });
    group.bench_function("store_messages", |b| {
        b.iter(|| black_box(store.messages(&session).unwrap()))
    });
    group.bench_function("raw_select", |b| {
        b.iter(|| black_box(raw_load(&raw, session.as_str())))
    });
    group.bench_function("store_export_anthropic", |b| {
        b.iter(|| {
            black_box(
                store
                    .export_now(&session, Provider::Anthropic, &export)
                    .unwrap(),
            )
        })
    });
    group.bench_function("jsonl", |b| b.iter(|| black_box(jsonl.load())));
    group.bench_function("blob", |b| b.iter(|| black_box(blob.load())));
    group.finish();
    if std::env::args().any(|a| a == "--list" || a == "--test" || a == "--profile-time") {
        return;
    }
    println!();
    paired(
        "load_10k store_provider_history / raw_select",
        30,
        || {
            black_box(store.provider_history(&session).unwrap());
        },
        || {
            black_box(raw_load(&raw, session.as_str()));
        },
    );
    // The same with a fresh connection on each side every round, so neither side's page
    // cache or connection history favours it.
    paired(
        "load_10k (open + load) store_provider_history / raw_select",
        30,
        || {
            let store = Store::open(&db).unwrap();
            black_box(store.provider_history(&session).unwrap());
        },
        || {
            let raw = rusqlite::Connection::open(&db).unwrap();
            common::configure(&raw);
            black_box(raw_load(&raw, session.as_str()));
        },
    );
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    load(&mut c);
    c.final_summary();
    print_ratios(
        "load_10k",
        &[
            ("store_provider_history", "raw_select", Some(1.5)),
            ("store_messages", "raw_select", Some(1.5)),
            ("store_export_anthropic", "raw_select", None),
            ("store_provider_history", "jsonl", None),
            ("store_provider_history", "blob", None),
        ],
    );
}
