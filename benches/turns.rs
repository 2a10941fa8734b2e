//! Turn-aligned reads and compaction at scale.
//!
//! - `page/start` vs `page/end`: one page of whole turns at the start and at the end of a
//!   100,000-message session. The cursor is a turn index sought on the
//!   `(session_id, turn_index, seq)` index, so the two should cost the same (target: within
//!   1.2x).
//! - `compact/store` vs `compact/raw_update`: compacting a 10,000-message session through
//!   `Store::compact` (plan over the roles, mark the head, store the summary, one
//!   transaction) beside a bare rusqlite `UPDATE ... SET compacted = 1` of the same rows in
//!   a `BEGIN IMMEDIATE` transaction (target: within 1.5x).
//!
//! The fixture databases are built once per run, through the store's own write path, in a
//! temporary directory.
//!
//! ```sh
//! cargo bench --bench turns -- --warm-up-time 1 --measurement-time 3
//! ```

use std::hint::black_box;
use std::path::Path;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use rusqlite::{params, Connection, TransactionBehavior};
use serde_json::json;
use session_store::{NewMessage, Part, SessionId, Store, TurnCursor};

/// Three tool calls per turn: 8 messages, the shape that broke naive cuts.
const TOOLS_PER_TURN: usize = 3;
const MESSAGES_PER_TURN: usize = 2 + 2 * TOOLS_PER_TURN;
const PAGE_MESSAGES: usize = 64;

fn turn(index: usize) -> Vec<NewMessage> {
    let mut messages = vec![NewMessage::user(format!("turn {index}: look around"))];
    for call in 0..TOOLS_PER_TURN {
        let id = format!("t{index}_c{call}");
        messages.push(NewMessage::assistant(vec![Part::tool_use(
            id.clone(),
            "bash",
            json!({"cmd": format!("ls /srv/{index}/{call}")}),
        )]));
        messages.push(NewMessage::tool(vec![Part::tool_result(
            id,
            "a.txt\nb.txt\nc.txt",
        )]));
    }
    messages.push(NewMessage::assistant(vec![Part::text(format!(
        "turn {index}: three files each time"
    ))]));
    messages
}

/// A session of `messages` messages (a multiple of 8), appended 100 turns per transaction.
fn fixture(path: &Path, messages: usize) -> (Store, SessionId, usize) {
    let store = Store::open(path).expect("open fixture store");
    let session = store.create_session().expect("create session");
    let turns = messages / MESSAGES_PER_TURN;
    for first in (0..turns).step_by(100) {
        let batch: Vec<NewMessage> = (first..(first + 100).min(turns)).flat_map(turn).collect();
        store
            .append_batch(&session, batch)
            .expect("append fixture turns");
    }
    (store, session, turns)
}

fn pages(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, session, turns) = fixture(&dir.path().join("pages.db"), 100_000);
    let turns_per_page = (PAGE_MESSAGES / MESSAGES_PER_TURN) as i64;
    let last_turn = turns as i64 - 1;
    let end = Some(TurnCursor::after(last_turn - turns_per_page));
    // Both pages hold the same number of whole turns.
    let first = store.page(&session, None, PAGE_MESSAGES).expect("page");
    let last = store.page(&session, end, PAGE_MESSAGES).expect("page");
    assert_eq!(first.messages.len(), PAGE_MESSAGES);
    assert_eq!(last.messages.len(), PAGE_MESSAGES);
    assert_eq!(last.next, None);

    let mut group = c.benchmark_group("page");
    group.bench_function("start", |b| {
        b.iter(|| store.page(black_box(&session), black_box(None), PAGE_MESSAGES))
    });
    group.bench_function("end", |b| {
        b.iter(|| store.page(black_box(&session), black_box(end), PAGE_MESSAGES))
    });
    group.finish();
}

const RESET: &str = "UPDATE messages SET compacted = 0 WHERE session_id = ?1";
const RAW_COMPACT: &str =
    "UPDATE messages SET compacted = 1 WHERE session_id = ?1 AND seq < ?2 AND compacted = 0";

fn compaction(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("compact.db");
    let (store, session, _) = fixture(&path, 10_000);
    let mut raw = Connection::open(&path).expect("raw connection");
    raw.pragma_update(None, "synchronous", "NORMAL")
        .expect("pragma");
    raw.pragma_update(None, "foreign_keys", true)
        .expect("pragma");
    let resetter = Connection::open(&path).expect("reset connection");
    let reset = || {
        resetter.execute(RESET, [session.as_str()]).expect("reset");
        resetter
            .execute("DELETE FROM summaries", [])
            .expect("reset");
    };
    // The store keeps the last turn visible: the same rows for both.
    let min_keep_tail = MESSAGES_PER_TURN;
    let cut_seq = (10_000 - MESSAGES_PER_TURN + 1) as i64;

    let mut group = c.benchmark_group("compact");
    group.bench_function("store", |b| {
        b.iter_batched(
            &reset,
            |()| {
                store
                    .compact(&session, min_keep_tail, "summary of the head")
                    .expect("compact")
            },
            BatchSize::PerIteration,
        )
    });
    group.bench_function("raw_update", |b| {
        b.iter_batched(
            &reset,
            |()| {
                let tx = raw
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .expect("begin");
                let marked = tx
                    .execute(RAW_COMPACT, params![session.as_str(), cut_seq])
                    .expect("update");
                tx.commit().expect("commit");
                marked
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();

    // Both arms marked the same rows.
    reset();
    let outcome = store
        .compact(&session, min_keep_tail, "check")
        .expect("compact");
    let marked: i64 = raw
        .query_row(
            "SELECT COUNT(*) FROM messages WHERE session_id = ?1 AND compacted = 1",
            [session.as_str()],
            |row| row.get(0),
        )
        .expect("count");
    assert_eq!(marked, cut_seq - 1, "{outcome:?}");
}

criterion_group!(benches, pages, compaction);
criterion_main!(benches);
