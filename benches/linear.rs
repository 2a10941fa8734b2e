//! Linear time for what a hostile input controls: the words of a search query and the
//! parallel calls of one imported message. Each case runs at n and 8n; a linear path takes
//! about 8x as long at 8n, a quadratic one about 64x. The ratios are printed at the end (see
//! BENCHMARKS.md). Quick by design: small samples, short measurement.
//!
//! - `search_repeated`: a query of n copies of one word (each distinct term counts once);
//! - `search_distinct`: a query of n distinct words (refused past `MAX_SEARCH_TERMS`,
//!   after one pass over the query);
//! - `openai_parallel`: a Chat Completions body whose assistant message holds n
//!   `tool_calls`, answered by n `tool` messages;
//! - `claude_code_streamed`: a Claude Code log writing one line per tool_use block of one
//!   message, each followed by its result line.
#![allow(clippy::unwrap_used)] // a benchmark that fails to set up should stop loudly

mod common;

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use serde_json::json;
use session_store::import::{import as import_transcript, Format};
use session_store::{NewMessage, SearchOptions, Store};

const GROUP: &str = "linear_growth";

fn openai_body(n: usize) -> String {
    let calls: Vec<_> = (0..n)
        .map(|i| {
            json!({"id": format!("call_{i}"), "type": "function",
                   "function": {"name": "bash", "arguments": "{}"}})
        })
        .collect();
    let mut messages = vec![
        json!({"role": "user", "content": "run everything"}),
        json!({"role": "assistant", "content": null, "tool_calls": calls}),
    ];
    messages
        .extend((0..n).map(
            |i| json!({"role": "tool", "tool_call_id": format!("call_{i}"), "content": "ok"}),
        ));
    json!({"messages": messages}).to_string()
}

fn claude_code_log(n: usize) -> String {
    let line = |uuid: String, kind: &str, message: serde_json::Value| {
        json!({"type": kind, "uuid": uuid, "sessionId": "s",
               "timestamp": "2026-01-01T00:00:00Z", "message": message})
        .to_string()
    };
    let mut lines = vec![line(
        "u0".into(),
        "user",
        json!({"role": "user", "content": "run everything"}),
    )];
    for i in 0..n {
        lines.push(line(
            format!("a{i}"),
            "assistant",
            json!({"id": "msg_1", "role": "assistant", "model": "claude-sonnet-4-5",
                   "content": [{"type": "tool_use", "id": format!("toolu_{i}"), "name": "bash", "input": {}}]}),
        ));
        lines.push(line(
            format!("r{i}"),
            "user",
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": format!("toolu_{i}"), "content": "ok"}]}),
        ));
    }
    lines.join("\n") + "\n"
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("search.db")).unwrap();
    let session = store.create_session().unwrap();
    for k in 0..200 {
        store
            .append(
                &session,
                NewMessage::user(format!("deploy the staging cluster w{k} and w{}", k + 1)),
            )
            .unwrap();
    }
    let options = SearchOptions::default();
    let mut group = c.benchmark_group(GROUP);
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(2));
    for n in [1_000, 8_000] {
        let repeated = "deploy ".repeat(n);
        group.bench_with_input(BenchmarkId::new("search_repeated", n), &n, |b, _| {
            b.iter(|| store.search(&repeated, &options).unwrap());
        });
        let distinct: Vec<String> = (0..n).map(|k| format!("w{k}")).collect();
        let distinct = distinct.join(" ");
        group.bench_with_input(BenchmarkId::new("search_distinct", n), &n, |b, _| {
            b.iter(|| store.search(&distinct, &options).is_err());
        });
    }
    for n in [1_000, 8_000] {
        let body = openai_body(n);
        group.bench_with_input(BenchmarkId::new("openai_parallel", n), &n, |b, _| {
            b.iter(|| import_transcript(Format::OpenAi, &body).unwrap());
        });
        let log = claude_code_log(n);
        group.bench_with_input(BenchmarkId::new("claude_code_streamed", n), &n, |b, _| {
            b.iter(|| import_transcript(Format::ClaudeCode, &log).unwrap());
        });
    }
    group.finish();
    println!("\n== {GROUP}: time at 8n / time at n (linear: ~8x; quadratic: ~64x) ==");
    for case in [
        "search_repeated",
        "search_distinct",
        "openai_parallel",
        "claude_code_streamed",
    ] {
        let small = common::median_ns(GROUP, &format!("{case}/1000"));
        let large = common::median_ns(GROUP, &format!("{case}/8000"));
        match (small, large) {
            (Some(s), Some(l)) => println!(
                "{case}: {:.2} ms -> {:.2} ms = {:.1}x",
                s / 1e6,
                l / 1e6,
                l / s
            ),
            _ => println!("{case}: not measured in this run"),
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
