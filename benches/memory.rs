//! Peak resident memory of loading the 10,002-message session (the `load` benchmark's
//! workload): the provider view, the whole history and the rendered Anthropic body, beside
//! the raw baseline and the peers, each in a fresh child process so that one
//! variant's allocations do not hide another's. Reads `VmHWM` (peak resident set) from
//! `/proc/self/status` after opening and after loading; the difference is what the load cost.
//!
//! Last, the peak of importing large Anthropic request bodies (`session-store import`'s work:
//! `Store::import_reader` streams the file into the store), against the size of the file, at
//! two sizes so that peak / file is seen to stay flat; and once the whole-file path (read,
//! parse, store) beside it.
//!
//! Run with `cargo bench --bench memory` (`IMPORT_ONLY=1` for the imports alone,
//! `IMPORT_TURNS=5000,20000` for other sizes); criterion is not involved.
#![allow(clippy::unwrap_used)] // a benchmark that fails to set up should stop loudly

mod common;

use std::hint::black_box;
use std::path::Path;
use std::process::Command;

use session_store::import::Format;
use session_store::{ExportOptions, Provider, SessionId, Store};

use common::{raw_load, tool_turn, Blob, Jsonl};

const TURNS: u64 = 1_667;
const VARIANT: &str = "PROOF_MEM_VARIANT";
const DIR: &str = "PROOF_MEM_DIR";
const VARIANTS: &[&str] = &[
    "raw_select",
    "store_provider_history",
    "store_messages",
    "store_export_anthropic",
    "jsonl",
    "blob",
];

/// `VmHWM` in KiB.
fn peak_kib() -> u64 {
    status_kib("VmHWM:")
}

/// A `/proc/self/status` field in KiB.
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// The part of the resident set that is mapped file pages (`RssFile`): the store reads through
/// a memory map, and the pages of the database file it touched count in `VmHWM` although they
/// are the OS's page cache (shared, reclaimable), not the process's own memory.
static MAPPED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn note_mapped() {
    MAPPED.store(status_kib("RssFile:"), std::sync::atomic::Ordering::Relaxed);
}

fn child(variant: &str, dir: &Path) {
    let session = SessionId::new(std::fs::read_to_string(dir.join("session")).unwrap_or_default());
    let (opened, messages) = match variant {
        "store_provider_history" => {
            let store = Store::open(dir.join("store.db")).unwrap();
            let opened = peak_kib();
            let view = black_box(store.provider_history(&session).unwrap());
            note_mapped();
            (opened, view.messages.len())
        }
        "store_export_anthropic" => {
            let store = Store::open(dir.join("store.db")).unwrap();
            let options = ExportOptions {
                persist_latch: false,
                ..ExportOptions::default()
            };
            let opened = peak_kib();
            let body = black_box(
                store
                    .export_now(&session, Provider::Anthropic, &options)
                    .unwrap(),
            );
            (opened, body["messages"].as_array().map_or(0, Vec::len))
        }
        "store_messages" => {
            let store = Store::open(dir.join("store.db")).unwrap();
            let opened = peak_kib();
            let messages = black_box(store.messages(&session).unwrap());
            note_mapped();
            (opened, messages.len())
        }
        "raw_select" => {
            let conn = rusqlite::Connection::open(dir.join("store.db")).unwrap();
            common::configure(&conn);
            let opened = peak_kib();
            let messages = black_box(raw_load(&conn, session.as_str()));
            note_mapped();
            (opened, messages.len())
        }
        "jsonl" => {
            let jsonl = Jsonl::open(&dir.join("peer.jsonl"));
            let opened = peak_kib();
            (opened, black_box(jsonl.load()).len())
        }
        "import_anthropic" => {
            // What `session-store import` does: stream the file into one session.
            let store = Store::open(dir.join("import.db")).unwrap();
            let opened = peak_kib();
            let file = std::fs::File::open(dir.join("transcript.json")).unwrap();
            let stored = black_box(store.import_reader(Format::Anthropic, file).unwrap());
            note_mapped();
            (opened, stored.messages)
        }
        "import_claude_code" => {
            // The same conversation as a Claude Code log, streamed a line at a time.
            let store = Store::open(dir.join("import.db")).unwrap();
            let opened = peak_kib();
            let file = std::fs::File::open(dir.join("transcript.jsonl")).unwrap();
            let stored = black_box(store.import_reader(Format::ClaudeCode, file).unwrap());
            note_mapped();
            (opened, stored.messages)
        }
        "parse_anthropic" => {
            // Reading alone, no store: the streamed importer (`validate_transcript`) against
            // parsing the text into one `Value` as the whole-file importer once did; the time
            // goes to stderr.
            let opened = peak_kib();
            let started = std::time::Instant::now();
            let file = std::fs::File::open(dir.join("transcript.json")).unwrap();
            let count = session_store::import::validate(Format::Anthropic, file).unwrap();
            let streamed = started.elapsed();
            let started = std::time::Instant::now();
            let text = std::fs::read_to_string(dir.join("transcript.json")).unwrap();
            let value: serde_json::Value = serde_json::from_str(&text).unwrap();
            black_box(&value);
            let whole = started.elapsed();
            eprintln!(
                "parse: streamed importer {:.2} s, whole text into one Value {:.2} s",
                streamed.as_secs_f64(),
                whole.as_secs_f64()
            );
            (opened, count)
        }
        "import_anthropic_whole" => {
            // The whole-file path, for comparison: read the file, parse it, store it.
            let store = Store::open(dir.join("import-whole.db")).unwrap();
            let opened = peak_kib();
            let text = std::fs::read_to_string(dir.join("transcript.json")).unwrap();
            let imported = session_store::import::import(Format::Anthropic, &text).unwrap();
            drop(text);
            let messages = imported.into_messages();
            let count = messages.len();
            black_box(store.import_session(messages).unwrap());
            note_mapped();
            (opened, count)
        }
        "blob" => {
            let blob = Blob::attach(&dir.join("peer-blob.db"));
            let opened = peak_kib();
            (opened, black_box(blob.load()).len())
        }
        other => panic!("unknown variant {other}"),
    };
    println!(
        "{opened} {} {messages} {}",
        peak_kib(),
        MAPPED.load(std::sync::atomic::Ordering::Relaxed)
    );
}

/// Tool turns in the transcripts imported by `import_peak` (`IMPORT_TURNS`, comma-separated,
/// to change; the defaults make Anthropic bodies of ~46 and ~92 MB).
const IMPORT_TURNS: &str = "5000,10000";

/// Peak memory of importing large Anthropic request bodies, against the file's size: the
/// streamed import (`Store::import_reader`) at each size, and the whole-file path (read,
/// parse, store) at the first size, for comparison.
fn import_peak(dir: &Path) {
    let sizes = std::env::var("IMPORT_TURNS").unwrap_or_else(|_| IMPORT_TURNS.to_owned());
    let sizes: Vec<u64> = sizes
        .split(',')
        .map(|n| n.trim().parse().unwrap())
        .collect();
    for (round, turns) in sizes.into_iter().enumerate() {
        write_transcript(dir, turns);
        let size_of = |name: &str| std::fs::metadata(dir.join(name)).unwrap().len() as f64 / 1024.0;
        let variants: &[&str] = if round == 0 {
            &[
                "import_anthropic",
                "import_claude_code",
                "import_anthropic_whole",
            ]
        } else {
            &["import_anthropic", "import_claude_code"]
        };
        for variant in variants {
            let (size, what) = if *variant == "import_claude_code" {
                (size_of("transcript.jsonl"), "a Claude Code log")
            } else {
                (size_of("transcript.json"), "an Anthropic body")
            };
            let _ = std::fs::remove_file(dir.join("import.db"));
            let _ = std::fs::remove_file(dir.join("import-whole.db"));
            let started = std::time::Instant::now();
            let out = Command::new(std::env::current_exe().unwrap())
                .env(VARIANT, variant)
                .env(DIR, dir)
                .output()
                .unwrap();
            let took = started.elapsed();
            assert!(out.status.success(), "import failed: {out:?}");
            let fields: Vec<u64> = String::from_utf8(out.stdout)
                .unwrap()
                .split_whitespace()
                .map(|f| f.parse().unwrap())
                .collect();
            let (opened, peak, count, mapped) = (fields[0], fields[1], fields[2], fields[3]);
            println!(
                "== {variant}: {what} of {:.1} MiB ({count} messages): peak {:.1} MiB, of which the import {:.1} MiB = {:.2}x the file (mapped file pages resident after it {:.1} MiB); process {:.1} s ==",
                size / 1024.0,
                peak as f64 / 1024.0,
                (peak - opened) as f64 / 1024.0,
                (peak - opened) as f64 / size,
                mapped as f64 / 1024.0,
                took.as_secs_f64()
            );
        }
    }
}

/// An Anthropic body of `turns` tool turns, exported by the store, at `transcript.json`.
fn write_transcript(dir: &Path, turns: u64) {
    let _ = std::fs::remove_file(dir.join("transcript-source.db"));
    let store = Store::open(dir.join("transcript-source.db")).unwrap();
    let session = store.create_session().unwrap();
    for first in (0..turns).step_by(100) {
        let batch = (first..(first + 100).min(turns))
            .flat_map(tool_turn)
            .collect();
        store.append_batch(&session, batch).unwrap();
    }
    let options = ExportOptions {
        persist_latch: false,
        ..ExportOptions::default()
    };
    let body = store
        .export_now(&session, Provider::Anthropic, &options)
        .unwrap();
    std::fs::write(
        dir.join("transcript.json"),
        serde_json::to_vec(&body).unwrap(),
    )
    .unwrap();
    // The same messages as a Claude Code log: one line per message.
    let mut log = Vec::new();
    for (n, message) in body["messages"].as_array().unwrap().iter().enumerate() {
        let role = message["role"].as_str().unwrap();
        let mut inner = message.clone();
        if role == "assistant" {
            inner["id"] = serde_json::json!(format!("msg_{n}"));
        }
        let line = serde_json::json!({"type": role, "uuid": format!("u{n}"), "message": inner});
        serde_json::to_writer(&mut log, &line).unwrap();
        log.push(b'\n');
    }
    std::fs::write(dir.join("transcript.jsonl"), log).unwrap();
}

fn main() {
    if let (Ok(variant), Some(dir)) = (std::env::var(VARIANT), std::env::var_os(DIR)) {
        child(&variant, Path::new(&dir));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    if std::env::var_os("IMPORT_ONLY").is_some() {
        import_peak(dir.path());
        return;
    }
    {
        let store = Store::open(dir.path().join("store.db")).unwrap();
        let session = store.create_session().unwrap();
        std::fs::write(dir.path().join("session"), session.as_str()).unwrap();
        let mut jsonl = Jsonl::open(&dir.path().join("peer.jsonl"));
        let mut blob = Blob::open(&dir.path().join("peer-blob.db"));
        for n in 0..TURNS {
            let turn = tool_turn(n);
            jsonl.append(&turn);
            blob.append(&turn);
            store.append_batch(&session, turn).unwrap();
        }
    }
    println!("== memory: peak RSS (VmHWM) loading the 10,002-message session ==");
    let mut results = Vec::new();
    for variant in VARIANTS {
        let out = Command::new(std::env::current_exe().unwrap())
            .env(VARIANT, variant)
            .env(DIR, dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{variant} failed: {out:?}");
        let fields: Vec<u64> = String::from_utf8(out.stdout)
            .unwrap()
            .split_whitespace()
            .map(|f| f.parse().unwrap())
            .collect();
        let (opened, peak, count, mapped) = (fields[0], fields[1], fields[2], fields[3]);
        println!(
            "{variant:>15}: peak {:>7.1} MiB, of which the load {:>7.1} MiB ({count} messages); mapped file pages resident after the load {:>6.1} MiB",
            peak as f64 / 1024.0,
            (peak - opened) as f64 / 1024.0,
            mapped as f64 / 1024.0
        );
        results.push((*variant, peak, peak - opened));
    }
    import_peak(dir.path());
    let (_, raw_peak, raw_load) = results[0];
    for (variant, peak, load) in &results {
        println!(
            "{variant:>15} / raw_select: peak {:.2}x, load {:.2}x",
            *peak as f64 / raw_peak as f64,
            *load as f64 / raw_load as f64
        );
    }
}
