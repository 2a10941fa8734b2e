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
//! - Paired rounds (printed first; `PAIRED_ONLY=1` stops there): the last 5 turns of a
//!   100,002-message session of realistic tool turns, and compacting 9,996 of 10,002, against
//!   the floor (the contract's tables alone) and the raw baseline on the store's file; then
//!   the same two on the agent shape (`common::agent_turns`): the last 5 turns of about
//!   50,000 messages and compacting the head of about 10,000 (`AGENT_ONLY=1` runs only
//!   these).
//!
//! ```sh
//! cargo bench --bench turns -- --warm-up-time 1 --measurement-time 3
//! ```

#![allow(clippy::unwrap_used)] // a benchmark that fails to set up should stop loudly

mod common;

use std::hint::black_box;
use std::path::Path;

use criterion::{BatchSize, Criterion};
use rusqlite::{params, Connection, TransactionBehavior};
use serde_json::json;
use session_store::{NewMessage, Part, SessionId, Store, TurnCursor};

use common::{agent_turns, raw_last_turns, rounds_of, tool_turn, Raw, TURN_LEN};

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

/// Realistic tool turns (`common::tool_turn`) in the store and in the floor, appended in
/// the same batches of 100 turns.
fn realistic(dir: &Path, name: &str, turns: u64) -> (Store, SessionId, Raw) {
    let store = Store::open(dir.join(format!("{name}.db"))).expect("open");
    let session = store.create_session().expect("session");
    let mut floor = Raw::floor(&dir.join(format!("{name}-floor.db")));
    for first in (0..turns).step_by(100) {
        let batch: Vec<NewMessage> = (first..(first + 100).min(turns))
            .flat_map(tool_turn)
            .collect();
        floor.append(&batch);
        store.append_batch(&session, batch).expect("append");
    }
    (store, session, floor)
}

/// The last 5 turns of 100,002 messages, and compacting 9,996 of 10,002, in paired rounds
/// against the floor (the contract's tables alone) and the raw baseline on the store's file.
fn paired_ratios() {
    let dir = tempfile::tempdir().expect("tempdir");
    // `LAST_TURNS_N` shrinks the session (to profile the arms under callgrind).
    let turns: u64 = std::env::var("LAST_TURNS_N").map_or(16_667, |n| n.parse().unwrap());
    let (store, session, floor) = realistic(dir.path(), "last", turns);
    let raw = Connection::open(store.path()).expect("raw");
    common::configure(&raw);
    let expected = store.last_turns(&session, 5).expect("last turns");
    assert_eq!(expected.len(), 5 * TURN_LEN);
    assert_eq!(
        raw_last_turns(&floor.conn, floor.session(), 5).len(),
        expected.len()
    );
    assert_eq!(raw_last_turns(&raw, session.as_str(), 5), expected);
    println!();
    rounds_of(
        "last 5 turns of 100k messages",
        500,
        &mut || {},
        &mut [
            ("store last_turns", &mut || {
                black_box(store.last_turns(&session, 5).expect("last turns"));
            }),
            ("raw on the store's schema", &mut || {
                black_box(raw_last_turns(&raw, session.as_str(), 5));
            }),
            ("floor", &mut || {
                black_box(raw_last_turns(&floor.conn, floor.session(), 5));
            }),
            ("store turns(last-4..): no start query", &mut || {
                black_box(store.turns(&session, turns as i64 - 5..).expect("turns"));
            }),
            ("store has_session: pool + snapshot", &mut || {
                black_box(store.has_session(&session).expect("has"));
            }),
        ],
    );
    drop((store, raw, floor));

    let (store, session, mut floor) = realistic(dir.path(), "compact", 1_667);
    let mut raw = Connection::open(store.path()).expect("raw");
    common::configure(&raw);
    let messages = 1_667 * TURN_LEN as i64;
    let cut_seq = messages - TURN_LEN as i64 + 1;
    let floor_session = floor.session().to_owned();
    let resetter = Connection::open(store.path()).expect("reset connection");
    let floor_resetter = Connection::open(dir.path().join("compact-floor.db")).expect("reset");
    let mut reset = || {
        resetter.execute(RESET, [session.as_str()]).expect("reset");
        resetter
            .execute("DELETE FROM summaries", [])
            .expect("reset");
        floor_resetter
            .execute(RESET, [floor_session.as_str()])
            .expect("reset");
        // Both arms start from an empty WAL: a checkpoint falling into one arm's commit and
        // not the other's moved this ratio between 1.35x and 2.7x from run to run.
        for conn in [&resetter, &floor_resetter] {
            conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
                .expect("checkpoint");
        }
    };
    let mark = |conn: &mut Connection, session: &str| {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .expect("begin");
        let marked = tx
            .execute(RAW_COMPACT, params![session, cut_seq])
            .expect("update");
        tx.commit().expect("commit");
        assert_eq!(marked as i64, cut_seq - 1);
    };
    rounds_of(
        "compact 9,996 of 10,002 messages",
        20,
        &mut reset,
        &mut [
            ("store compact", &mut || {
                let outcome = store
                    .compact(&session, TURN_LEN, "summary of the head")
                    .expect("compact");
                assert!(!outcome.is_nothing());
            }),
            ("raw UPDATE on the store's schema", &mut || {
                mark(&mut raw, session.as_str())
            }),
            ("floor UPDATE", &mut || {
                mark(&mut floor.conn, &floor_session)
            }),
        ],
    );
}

/// The agent shape ([`agent_turns`]) in the store and in the floor: `turns` turns appended
/// 100 per transaction, the same batches on both.
fn agent_session(dir: &Path, name: &str, turns: usize) -> (Store, SessionId, Raw, i64) {
    let store = Store::open(dir.join(format!("{name}.db"))).expect("open");
    let session = store.create_session().expect("session");
    let mut floor = Raw::floor(&dir.join(format!("{name}-floor.db")));
    let all = agent_turns(11, turns);
    let last_turn = all.last().map_or(0, Vec::len) as i64;
    for batch in all.chunks(100) {
        let batch: Vec<NewMessage> = batch.iter().flatten().cloned().collect();
        floor.append(&batch);
        store.append_batch(&session, batch).expect("append");
    }
    (store, session, floor, last_turn)
}

/// The last 5 turns of an agent-shaped session of about 50,000 messages, and compacting the
/// head of one of about 10,000 (all but its last turn), against the floor and the raw
/// baseline on the store's file, in paired rounds.
fn agent_paired_ratios() {
    let dir = tempfile::tempdir().expect("tempdir");
    // About 12.2 messages per turn: 4,100 turns are about 50,000 messages.
    let turns: usize = std::env::var("AGENT_TURNS").map_or(4_100, |n| n.parse().unwrap());
    let (store, session, floor, _) = agent_session(dir.path(), "agent-last", turns);
    let messages = store.messages(&session).expect("messages").len();
    let raw = Connection::open(store.path()).expect("raw");
    common::configure(&raw);
    let expected = store.last_turns(&session, 5).expect("last turns");
    assert_eq!(
        raw_last_turns(&floor.conn, floor.session(), 5).len(),
        expected.len()
    );
    assert_eq!(raw_last_turns(&raw, session.as_str(), 5), expected);
    println!();
    rounds_of(
        &format!("agent shape: last 5 turns of {messages} messages"),
        500,
        &mut || {},
        &mut [
            ("store last_turns", &mut || {
                black_box(store.last_turns(&session, 5).expect("last turns"));
            }),
            ("raw on the store's schema", &mut || {
                black_box(raw_last_turns(&raw, session.as_str(), 5));
            }),
            ("floor", &mut || {
                black_box(raw_last_turns(&floor.conn, floor.session(), 5));
            }),
        ],
    );
    drop((store, raw, floor));

    let (store, session, mut floor, last_turn) = agent_session(dir.path(), "agent-compact", 820);
    let messages = store.messages(&session).expect("messages").len() as i64;
    let cut_seq = messages - last_turn + 1;
    let floor_session = floor.session().to_owned();
    let resetter = Connection::open(store.path()).expect("reset connection");
    let floor_resetter =
        Connection::open(dir.path().join("agent-compact-floor.db")).expect("reset");
    let mut reset = || {
        resetter.execute(RESET, [session.as_str()]).expect("reset");
        resetter
            .execute("DELETE FROM summaries", [])
            .expect("reset");
        floor_resetter
            .execute(RESET, [floor_session.as_str()])
            .expect("reset");
        for conn in [&resetter, &floor_resetter] {
            conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
                .expect("checkpoint");
        }
    };
    // The store marks the same rows as the floor's UPDATE: everything before the last turn.
    store
        .compact(&session, last_turn as usize, "check")
        .expect("compact");
    let marked: i64 = resetter
        .query_row(
            "SELECT COUNT(*) FROM messages WHERE session_id = ?1 AND compacted = 1",
            [session.as_str()],
            |row| row.get(0),
        )
        .expect("count");
    assert_eq!(marked, cut_seq - 1);
    let mark = |conn: &mut Connection, session: &str| {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .expect("begin");
        let marked = tx
            .execute(RAW_COMPACT, params![session, cut_seq])
            .expect("update");
        tx.commit().expect("commit");
        assert_eq!(marked as i64, cut_seq - 1);
    };
    rounds_of(
        &format!(
            "agent shape: compact {} of {messages} messages",
            cut_seq - 1
        ),
        20,
        &mut reset,
        &mut [
            ("store compact", &mut || {
                let outcome = store
                    .compact(&session, last_turn as usize, "summary of the head")
                    .expect("compact");
                assert!(!outcome.is_nothing());
            }),
            ("floor UPDATE", &mut || {
                mark(&mut floor.conn, &floor_session)
            }),
        ],
    );
}

fn main() {
    if std::env::var_os("AGENT_ONLY").is_some() {
        agent_paired_ratios();
        return;
    }
    paired_ratios();
    agent_paired_ratios();
    if std::env::var_os("PAIRED_ONLY").is_some() {
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    pages(&mut c);
    compaction(&mut c);
    c.final_summary();
}
