//! Search and listing at two sizes, 10,000 and 1,000,000 messages: how their cost grows with
//! the data. `Store::search` over every session (FTS5, bm25, top 20 with snippets) for a rare
//! term (the same 10 hits at both sizes), a vocabulary word and two words together (hits grow
//! with the data), a word in one part of ten (hits grow with the data, 20 returned), and one
//! session's search; the session list (`Store::sessions`) and the fork tree
//! (`Store::lineage`). The ratios 1M / 10k are printed at the end (see BENCHMARKS.md).
//!
//! The fixtures (sessions of 100 messages, one text part each, words drawn from a 5,000-word
//! vocabulary) are built once with raw SQL under Cargo's target tmpdir and reused by later
//! runs; the index is filled by the V8 triggers as the rows go in, as for any writer.
#![allow(clippy::unwrap_used)] // a benchmark that fails to set up should stop loudly

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use rusqlite::{params, Connection, TransactionBehavior};
use session_store::{SearchOptions, SessionId, Store};

const PER_SESSION: usize = 100;
const VOCABULARY: u64 = 5_000;
/// Parts holding the rare word, at every size.
const RARE_HITS: usize = 10;

/// Word `k` of the vocabulary: letters only, so the tokenizer keeps it whole.
fn word(mut k: u64) -> String {
    let mut out = String::from("w");
    loop {
        out.push((b'a' + (k % 26) as u8) as char);
        k /= 26;
        if k == 0 {
            return out;
        }
    }
}

/// The text of message `n`: 12 vocabulary words, `common` in one message of ten, the rare
/// word in `RARE_HITS` messages spread over the database.
fn text(n: u64, total: u64) -> String {
    let mut x = n.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut words: Vec<String> = (0..12)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            word(x % VOCABULARY)
        })
        .collect();
    if n % 10 == 3 {
        words.push("common".into());
    }
    if n % (total / RARE_HITS as u64) == 7 {
        words.push("zanzibar".into());
    }
    words.join(" ")
}

fn fixture(messages: usize) -> PathBuf {
    let path =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("search-{messages}-messages.db"));
    if path.exists() && Store::open(&path).is_ok() {
        return path;
    }
    let _ = std::fs::remove_file(&path);
    let partial = path.with_extension("partial");
    let _ = std::fs::remove_file(&partial);
    drop(Store::open(&partial).unwrap());
    let started = Instant::now();
    let mut conn = Connection::open(&partial).unwrap();
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .unwrap();
    {
        let mut session = tx
            .prepare("INSERT INTO sessions (id, created_at, updated_at) VALUES (?1, ?2, ?2)")
            .unwrap();
        let mut message = tx
            .prepare(
                "INSERT INTO messages (session_id, seq, turn_index, role, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .unwrap();
        let mut part = tx
            .prepare(
                "INSERT INTO parts (message_id, ordinal, kind, text) VALUES (?1, 0, 'text', ?2)",
            )
            .unwrap();
        let at = "2026-01-01T00:00:00.000000Z";
        let total = messages as u64;
        for s in 0..messages / PER_SESSION {
            let id = format!("session-{s:05}");
            session.execute(params![id, at]).unwrap();
            for i in 0..PER_SESSION {
                let role = if i % 2 == 0 { "user" } else { "assistant" };
                let turn = (i / 2) as i64;
                message
                    .execute(params![id, i as i64 + 1, turn, role, at])
                    .unwrap();
                let n = (s * PER_SESSION + i) as u64;
                part.execute(params![tx.last_insert_rowid(), text(n, total)])
                    .unwrap();
            }
        }
    }
    tx.commit().unwrap();
    drop(conn);
    std::fs::rename(&partial, &path).unwrap();
    eprintln!(
        "built {} ({messages} messages, index by the V8 triggers) in {:.1?}",
        path.display(),
        started.elapsed()
    );
    path
}

/// The queries, by name.
fn queries() -> Vec<(&'static str, String)> {
    vec![
        ("rare_word", "zanzibar".to_owned()),
        ("vocabulary_word", word(1_234)),
        ("two_words", format!("{} {}", word(17), word(4_321))),
        ("common_word_top20", "common".to_owned()),
    ]
}

fn bench(c: &mut Criterion) {
    let mut medians: BTreeMap<(String, usize), Duration> = BTreeMap::new();
    for messages in [10_000, 1_000_000] {
        let path = fixture(messages);
        let store = Store::open(&path).unwrap();
        let sessions = messages / PER_SESSION;
        assert_eq!(
            store
                .search("zanzibar", &SearchOptions::default())
                .unwrap()
                .len(),
            RARE_HITS
        );
        let one_session = SearchOptions {
            session: Some(SessionId::new(format!("session-{:05}", sessions / 2))),
            ..SearchOptions::default()
        };
        let mut group = c.benchmark_group(format!("search_{messages}_messages"));
        group.sample_size(20);
        group.measurement_time(Duration::from_secs(3));
        let mut timed = |name: &str, f: &mut dyn FnMut() -> usize| {
            // One timed round outside criterion too, median of 9, for the printed ratios.
            let mut rounds: Vec<Duration> = (0..9)
                .map(|_| {
                    let start = Instant::now();
                    std::hint::black_box(f());
                    start.elapsed()
                })
                .collect();
            rounds.sort();
            medians.insert((name.to_owned(), messages), rounds[4]);
            group.bench_function(name, |b| b.iter(|| std::hint::black_box(f())));
        };
        for (name, query) in queries() {
            let hits = store
                .search(&query, &SearchOptions::default())
                .unwrap()
                .len();
            eprintln!("{messages} messages, {name} ({query}): {hits} hits returned");
            timed(name, &mut || {
                store
                    .search(&query, &SearchOptions::default())
                    .unwrap()
                    .len()
            });
        }
        timed("one_session_common_word", &mut || {
            store.search("common", &one_session).unwrap().len()
        });
        timed("list_sessions", &mut || store.sessions().unwrap().len());
        timed("lineage_tree", &mut || store.lineage().unwrap().len());
        group.finish();
        let matches: i64 = Connection::open(&path)
            .unwrap()
            .query_row(
                "SELECT COUNT(*) FROM parts_fts WHERE parts_fts MATCH 'common'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        eprintln!("{messages} messages: 'common' matches {matches} parts");
    }
    eprintln!("\nmedian of 9 rounds; ratio = 1,000,000 messages / 10,000 messages (data x100)");
    let names: Vec<String> = medians.keys().map(|(n, _)| n.clone()).collect();
    let mut seen = std::collections::BTreeSet::new();
    for name in names {
        if !seen.insert(name.clone()) {
            continue;
        }
        let small = medians[&(name.clone(), 10_000)];
        let large = medians[&(name.clone(), 1_000_000)];
        eprintln!(
            "{name:>26}: 10k {small:>10.1?}  1M {large:>10.1?}  ratio {:>7.1}x",
            large.as_secs_f64() / small.as_secs_f64()
        );
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
