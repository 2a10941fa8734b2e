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
#![allow(clippy::unwrap_used)] // a benchmark that fails to set up should stop loudly

use std::process::Command;
use std::time::Instant;

use serde_json::json;
use session_store::RepairOptions;
use session_store::{NewMessage, Part, SessionId, Store};

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

fn main() {
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
