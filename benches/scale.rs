//! Scale: 1, 4 and 16 concurrent writer *processes*, each on its own session and all on one
//! session, SQLite against PostgreSQL. Each writer appends `TURNS` tool turns (user,
//! assistant with a call, its result, final answer: 4 messages per batch) through the public
//! `Store` API; the figure is messages committed per second of wall time over all writers,
//! and the errors any writer saw (expected: none; a busy database is waited for, never
//! surfaced). Afterwards the store's own check must find every session healthy and each
//! session's `seq` must run 1..=n without a gap.
//!
//! `cargo bench --bench scale` (PostgreSQL from `SESSION_STORE_TEST_PG`, e.g. the URL
//! `.ci/postgres` prints; without it only SQLite runs). The child processes are this binary
//! again, started with `SCALE_WRITER` set.
//!
//! `SCALE_SEARCH=10000,100000 cargo bench --bench scale` instead times `Store::search` on
//! PostgreSQL over `benches/search.rs`' fixture shape (sessions of 100 messages, one text part
//! of 12 words from a 5,000-word vocabulary each, `common` in one part of ten, `zanzibar` in
//! 10 parts), built with SQL into the schema `bench_search_{n}` and kept for the next run:
//! the median of 9 calls of each query, as `benches/search.rs` reports SQLite's.
#![allow(clippy::unwrap_used)] // a benchmark that fails to set up should stop loudly

use std::process::Command;
use std::time::Instant;

use serde_json::json;
use session_store::repair::RepairOptions;
use session_store::{NewMessage, Part, SearchOptions, SessionId, Store};

const TURNS: usize = 100;
const MESSAGES_PER_TURN: usize = 4;

fn turn(writer: usize, i: usize) -> Vec<NewMessage> {
    let id = format!("w{writer}_t{i}");
    vec![
        NewMessage::user(format!("writer {writer}, turn {i}: read the file")),
        NewMessage::assistant(vec![Part::tool_use(
            &id,
            "read_file",
            json!({"path": format!("/src/{i}.rs")}),
        )]),
        NewMessage::tool(vec![Part::tool_result(&id, "fn main() {}\n".repeat(8))]),
        NewMessage::assistant(vec![Part::text("It is a small program.")]),
    ]
}

/// Child mode: append `TURNS` turns to one session, print `ok errors` on stdout.
fn writer(location: &str, session: &str, index: usize) {
    let store = Store::open(location).unwrap();
    let session = SessionId::new(session);
    let mut errors = 0;
    for i in 0..TURNS {
        if let Err(error) = store.append_batch(&session, turn(index, i)) {
            eprintln!("writer {index}: {error:?}");
            errors += 1;
        }
    }
    println!("{} {errors}", TURNS - errors);
}

struct Run {
    backend: &'static str,
    writers: usize,
    shared: bool,
    seconds: f64,
    messages: usize,
    errors: usize,
}

fn run(backend: &'static str, location: &str, writers: usize, shared: bool) -> Run {
    let store = Store::open(location).unwrap();
    let sessions: Vec<SessionId> = if shared {
        vec![store.create_session().unwrap(); writers]
    } else {
        (0..writers)
            .map(|_| store.create_session().unwrap())
            .collect()
    };
    let exe = std::env::current_exe().unwrap();
    let started = Instant::now();
    let children: Vec<_> = sessions
        .iter()
        .enumerate()
        .map(|(index, session)| {
            Command::new(&exe)
                .env("SCALE_WRITER", format!("{location}\n{session}\n{index}"))
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut ok = 0;
    let mut errors = 0;
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "writer failed");
        let text = String::from_utf8_lossy(&output.stdout);
        let mut fields = text.split_whitespace().map(|f| f.parse::<usize>().unwrap());
        ok += fields.next().unwrap();
        errors += fields.next().unwrap();
    }
    let seconds = started.elapsed().as_secs_f64();
    let mut distinct = sessions.clone();
    distinct.dedup();
    let report = store.check(&distinct, &RepairOptions::default()).unwrap();
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    for session in &distinct {
        let seqs: Vec<i64> = store
            .messages(session)
            .unwrap()
            .iter()
            .map(|m| m.seq)
            .collect();
        assert_eq!(
            seqs,
            (1..=seqs.len() as i64).collect::<Vec<_>>(),
            "seq gap or collision"
        );
    }
    Run {
        backend,
        writers,
        shared,
        seconds,
        messages: ok * MESSAGES_PER_TURN,
        errors,
    }
}

/// A fresh schema in the PostgreSQL database, and the URL that uses it.
fn pg_schema(base: &str) -> (String, String) {
    let name = format!("bench_scale_{}", std::process::id());
    let mut client = postgres::Client::connect(base, postgres::NoTls).unwrap();
    client
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {name} CASCADE; CREATE SCHEMA {name}"
        ))
        .unwrap();
    let sep = if base.contains('?') { '&' } else { '?' };
    (
        name.clone(),
        format!("{base}{sep}options=-c%20search_path%3D{name}"),
    )
}

/// `benches/search.rs`' queries on a PostgreSQL fixture of `messages` messages.
fn search(base: &str, messages: i64) {
    let schema = format!("bench_search_{messages}");
    let mut client = postgres::Client::connect(base, postgres::NoTls).unwrap();
    let fresh: bool = client
        .query_one("SELECT to_regnamespace($1) IS NULL", &[&schema])
        .unwrap()
        .get(0);
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
    if fresh {
        client
            .batch_execute(&format!("CREATE SCHEMA {schema}"))
            .unwrap();
        drop(Store::open(&url).unwrap());
        let started = Instant::now();
        let sessions = messages / 100;
        postgres::Client::connect(&url, postgres::NoTls)
            .unwrap()
            .batch_execute(&format!(
                "INSERT INTO sessions (id, created_at, updated_at)
                   SELECT 's' || lpad(g::text, 7, '0'), '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z'
                   FROM generate_series(1, {sessions}) g;
                 INSERT INTO messages (session_id, seq, turn_index, role, compacted, created_at)
                   SELECT 's' || lpad((1 + (g - 1) / 100)::text, 7, '0'), 1 + (g - 1) % 100, ((g - 1) % 100) / 2,
                          CASE WHEN (g - 1) % 2 = 0 THEN 'user' ELSE 'assistant' END, 0, '2026-01-01T00:00:00Z'
                   FROM generate_series(1, {messages}) g;
                 INSERT INTO parts (message_id, ordinal, kind, text, is_error)
                   SELECT m.id, 0, 'text',
                          (SELECT string_agg('w' || floor(random() * 5000)::int, ' ')
                           FROM generate_series(1, 12) k WHERE m.id > 0)
                          || CASE WHEN m.id % 10 = 0 THEN ' common' ELSE '' END
                          || CASE WHEN m.id % ({messages} / 10) = 7 THEN ' zanzibar' ELSE '' END, 0
                   FROM messages m;
                 ANALYZE;"
            ))
            .unwrap();
        eprintln!("built {messages} messages in {:?}", started.elapsed());
    }
    let store = Store::open(&url).unwrap();
    let time = |name: &str, query: &str, options: &SearchOptions| {
        let mut times = Vec::new();
        let mut hits = 0;
        for _ in 0..9 {
            let started = Instant::now();
            hits = store.search(query, options).unwrap().len();
            times.push(started.elapsed());
        }
        times.sort();
        println!(
            "postgres {messages:>8} {name:<24} {hits:>3} hits  median {:?}",
            times[4]
        );
    };
    let all = SearchOptions::default();
    time("rare_word", "zanzibar", &all);
    time("two_words", "w17 w4242", &all);
    time("vocabulary_word", "w123", &all);
    time("common_word_top20", "common", &all);
    let one = SearchOptions {
        session: Some(SessionId::new("s0000042")),
        ..SearchOptions::default()
    };
    time("one_session_common_word", "common", &one);
    let size = store.size_report(1).unwrap();
    println!(
        "postgres {messages:>8} relations {} bytes, search index {} bytes",
        size.file_bytes, size.search_index_bytes
    );
}

fn main() {
    if let Ok(sizes) = std::env::var("SCALE_SEARCH") {
        let base = std::env::var("SESSION_STORE_TEST_PG").expect("SESSION_STORE_TEST_PG");
        for size in sizes.split(',') {
            search(&base, size.trim().parse().unwrap());
        }
        return;
    }
    if let Ok(spec) = std::env::var("SCALE_WRITER") {
        let mut lines = spec.lines();
        let (location, session, index) = (
            lines.next().unwrap().to_owned(),
            lines.next().unwrap().to_owned(),
            lines.next().unwrap().parse().unwrap(),
        );
        writer(&location, &session, index);
        return;
    }
    // `cargo bench` passes `--bench`; a filter argument is not used.
    let dir = tempfile::tempdir().unwrap();
    let pg = std::env::var("SESSION_STORE_TEST_PG")
        .ok()
        .filter(|u| !u.is_empty());
    if pg.is_none() {
        eprintln!("note: SESSION_STORE_TEST_PG is unset: PostgreSQL is not measured");
    }
    let mut runs = Vec::new();
    for &shared in &[false, true] {
        for &writers in &[1usize, 4, 16] {
            let file = dir.path().join(format!("scale-{writers}-{shared}.db"));
            runs.push(run("sqlite", &file.display().to_string(), writers, shared));
            if let Some(base) = &pg {
                let (name, url) = pg_schema(base);
                runs.push(run("postgres", &url, writers, shared));
                let mut client = postgres::Client::connect(base, postgres::NoTls).unwrap();
                client
                    .batch_execute(&format!("DROP SCHEMA {name} CASCADE"))
                    .unwrap();
            }
        }
    }
    println!(
        "\n{:<9} {:>7} {:<13} {:>9} {:>10} {:>12} {:>7}",
        "backend", "writers", "sessions", "messages", "seconds", "messages/s", "errors"
    );
    for r in &runs {
        println!(
            "{:<9} {:>7} {:<13} {:>9} {:>10.2} {:>12.0} {:>7}",
            r.backend,
            r.writers,
            if r.shared { "one shared" } else { "one each" },
            r.messages,
            r.seconds,
            r.messages as f64 / r.seconds.max(f64::EPSILON),
            r.errors
        );
    }
}
