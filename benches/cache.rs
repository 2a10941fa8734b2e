//! Prompt-cache stability: the share of consecutive requests whose earlier bytes are
//! unchanged. A provider's prompt cache only pays off when each request body starts with the
//! previous one byte for byte; this replays an agent session through `Store::export` (the
//! body the library would send at each step, with its real clock) and counts, for every pair
//! of consecutive requests, whether the later one keeps the earlier one's `system` and
//! messages as a prefix.
//!
//! The session: eight turns of a coding agent with signed reasoning on every assistant
//! message and one or two tool loops per turn (a request after the user message and after
//! each tool result), two idle periods longer than the cache's lifetime (the thinking latch
//! fires), and one compaction. An idle period or a compaction may break the prefix once (the
//! cache is cold then anyway, or the head is replaced by design); every other request must
//! keep it. Run with `cargo bench --bench cache` (no timing, criterion is not involved).
#![allow(clippy::unwrap_used)] // a benchmark that fails to set up should stop loudly

mod common;

use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::{json, Value};
use session_store::{ExportOptions, NewMessage, Part, Provider, SessionId, Store};

use common::{filler, tool_use_id};

/// Why the step before a request happened, to name the expected breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cause {
    /// An ordinary step: a new user message or a tool result.
    Step,
    /// The session sat idle past the cache's lifetime before this request.
    Idle,
    /// The session was compacted before this request.
    Compaction,
}

struct Replay {
    store: Store,
    session: SessionId,
    clock: DateTime<Utc>,
    requests: Vec<(String, Cause, Value)>,
    calls: u64,
}

impl Replay {
    fn append(&mut self, message: NewMessage) {
        self.clock += Duration::seconds(3);
        let assistant = message.role == session_store::Role::Assistant;
        self.store
            .append(&self.session, message.at(self.clock))
            .unwrap();
        if assistant {
            self.store
                .record_completion(&self.session, self.clock)
                .unwrap();
        }
    }

    fn request(&mut self, label: String, cause: Cause) {
        self.clock += Duration::seconds(1);
        let body = self
            .store
            .export(
                &self.session,
                Provider::Anthropic,
                self.clock,
                &ExportOptions::default(),
            )
            .unwrap();
        self.requests.push((label, cause, body));
    }

    fn thinking(&self, seed: u64) -> Part {
        Part::reasoning(
            filler(seed, 400),
            Some(json!({"anthropic": {"signature": filler(seed + 1, 200)}})),
        )
    }

    /// One turn: the user message, `loops` tool calls each answered, then the answer; a
    /// request before every assistant message.
    fn turn(&mut self, n: u64, loops: u64, cause: Cause) {
        self.append(NewMessage::user(filler(n * 100, 150)));
        self.request(format!("turn {n}: user message"), cause);
        for l in 0..loops {
            self.calls += 1;
            let id = tool_use_id(self.calls);
            self.append(NewMessage::assistant(vec![
                self.thinking(n * 100 + l * 10 + 1),
                Part::tool_use(&id, "bash", json!({"command": format!("step {n}.{l}")})),
            ]));
            self.append(NewMessage::tool(vec![Part::tool_result(
                &id,
                filler(n * 100 + l * 10 + 2, 800),
            )]));
            self.request(format!("turn {n}: tool result {}", l + 1), Cause::Step);
        }
        self.append(NewMessage::assistant(vec![
            self.thinking(n * 100 + 99),
            Part::text(filler(n * 100 + 98, 300)),
        ]));
    }
}

/// True when `later` keeps `earlier`'s system and messages as a byte prefix; otherwise the
/// first place where they differ.
fn prefix_kept(earlier: &Value, later: &Value) -> Result<(), String> {
    if earlier.get("system").map(Value::to_string) != later.get("system").map(Value::to_string) {
        return Err("system".to_owned());
    }
    let empty = Vec::new();
    let a = earlier["messages"].as_array().unwrap_or(&empty);
    let b = later["messages"].as_array().unwrap_or(&empty);
    for (i, message) in a.iter().enumerate() {
        if b.get(i).map(Value::to_string) != Some(message.to_string()) {
            return Err(format!("messages[{i}]"));
        }
    }
    Ok(())
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("cache.db")).unwrap();
    let session = store.create_session().unwrap();
    let start = Utc.with_ymd_and_hms(2026, 1, 2, 9, 0, 0).single().unwrap();
    let mut replay = Replay {
        store,
        session,
        clock: start,
        requests: Vec::new(),
        calls: 0,
    };
    let loops = [1, 2, 1, 1, 2, 1, 1, 2];
    for (n, &l) in loops.iter().enumerate() {
        let n = n as u64 + 1;
        let cause = match n {
            // Idle past the cache's lifetime (5 minutes) before turns 4 and 7.
            4 | 7 => {
                replay.clock += Duration::minutes(10);
                Cause::Idle
            }
            // Compacted before turn 6: the head is replaced by a summary.
            6 => {
                let outcome = replay
                    .store
                    .compact(&replay.session, 6, "Summary of turns 1 to 4.")
                    .unwrap();
                assert!(!outcome.is_nothing(), "{outcome:?}");
                Cause::Compaction
            }
            _ => Cause::Step,
        };
        replay.turn(n, l, cause);
    }

    let requests = &replay.requests;
    let pairs = requests.len() - 1;
    let mut kept = 0;
    let mut unexpected = 0;
    println!("== prompt-cache stability: {} requests ==", requests.len());
    for window in requests.windows(2) {
        let (_, _, earlier) = &window[0];
        let (label, cause, later) = &window[1];
        match prefix_kept(earlier, later) {
            Ok(()) => kept += 1,
            Err(at) => {
                let expected = *cause != Cause::Step;
                if !expected {
                    unexpected += 1;
                }
                println!(
                    "  broken before {label} ({cause:?}{}): first difference at {at}",
                    if expected {
                        ", expected"
                    } else {
                        ", UNEXPECTED"
                    }
                );
            }
        }
    }
    println!(
        "prefix kept: {kept} of {pairs} consecutive requests ({:.0}%), {} broken, of which {unexpected} outside an idle period or compaction",
        100.0 * kept as f64 / pairs as f64,
        pairs - kept
    );
}
