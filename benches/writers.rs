//! Writers on SQLite: 1, 4 and 16 threads appending whole tool turns (`common::tool_turn`,
//! one transaction per turn), each on its own session and all on one session, through one
//! `Store` (a pool of as many connections as writers) beside the floor (hand-written
//! rusqlite on the contract's minimum schema, one connection per writer; on one session each
//! append reads the session's end first, as any correct writer sharing it must). The figure
//! is messages committed per second of wall time over all writers; the ratio is store /
//! floor. Rounds alternate the two arms (store first in odd rounds), each on its own files,
//! and the ratio is the median over the rounds of store / floor.
//!
//! ```sh
//! cargo bench --bench writers            # WRITER_TURNS=20 WRITER_ROUNDS=5 by default
//! ```
#![allow(clippy::unwrap_used)] // a benchmark that fails to set up should stop loudly

mod common;

use std::path::Path;
use std::time::Instant;

use session_store::{SessionId, Store, StoreOptions};

use common::{tool_turn, Raw, TURN_LEN};

/// A number from the environment, or `default`.
fn setting(name: &str, default: usize) -> usize {
    std::env::var(name).map_or(default, |n| n.parse().unwrap())
}

/// The turn `i` of writer `writer` (tool_use ids unique across writers and rounds).
fn turn_of(round: usize, writer: usize, i: usize) -> Vec<session_store::NewMessage> {
    tool_turn(((round * 64 + writer) * 100_000 + i) as u64)
}

/// `writers` threads through one store, `turns` turns each; messages per second.
fn store_arm(dir: &Path, round: usize, writers: usize, shared: bool, turns: usize) -> f64 {
    let options = StoreOptions {
        max_connections: u32::try_from(writers).unwrap(),
        ..StoreOptions::default()
    };
    let store = Store::open_with(dir.join(format!("store-{round}.db")), &options).unwrap();
    let one = store.create_session().unwrap();
    let sessions: Vec<SessionId> = (0..writers)
        .map(|_| {
            if shared {
                one.clone()
            } else {
                store.create_session().unwrap()
            }
        })
        .collect();
    let start = Instant::now();
    std::thread::scope(|scope| {
        for (writer, session) in sessions.iter().enumerate() {
            let store = store.clone();
            scope.spawn(move || {
                for i in 0..turns {
                    store
                        .append_batch(session, turn_of(round, writer, i))
                        .unwrap();
                }
            });
        }
    });
    let seconds = start.elapsed().as_secs_f64();
    let stored: usize = sessions
        .iter()
        .take(if shared { 1 } else { writers })
        .map(|s| store.messages(s).unwrap().len())
        .sum();
    assert_eq!(stored, writers * turns * TURN_LEN);
    stored as f64 / seconds
}

/// `writers` floor connections, `turns` turns each; messages per second.
fn floor_arm(dir: &Path, round: usize, writers: usize, shared: bool, turns: usize) -> f64 {
    let path = dir.join(format!("floor-{round}.db"));
    let first = Raw::floor(&path);
    let mut raws: Vec<Raw> = (0..writers)
        .map(|_| {
            if shared {
                Raw::join(&path, first.session())
            } else {
                Raw::floor_session(&path)
            }
        })
        .collect();
    let start = Instant::now();
    std::thread::scope(|scope| {
        for (writer, raw) in raws.iter_mut().enumerate() {
            scope.spawn(move || {
                for i in 0..turns {
                    raw.append(&turn_of(round, writer, i));
                }
            });
        }
    });
    let seconds = start.elapsed().as_secs_f64();
    let stored: i64 = first
        .conn
        .query_row("SELECT COUNT(*) FROM messages", [], |row| row.get(0))
        .unwrap();
    assert_eq!(stored as usize, writers * turns * TURN_LEN);
    stored as f64 / seconds
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let turns = setting("WRITER_TURNS", 20);
    let rounds = setting("WRITER_ROUNDS", 5);
    println!("\n== SQLite writers: whole tool turns ({TURN_LEN} messages) per transaction, {turns} turns per writer, {rounds} rounds ==");
    println!(
        "{:>7}  {:<13} {:>12} {:>12} {:>13}",
        "writers", "sessions", "store msg/s", "floor msg/s", "store / floor"
    );
    for shared in [false, true] {
        for writers in [1, 4, 16] {
            let dir = tempfile::tempdir().unwrap();
            let (mut store, mut floor, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
            for round in 0..rounds {
                let (s, f) = if round % 2 == 0 {
                    let s = store_arm(dir.path(), round, writers, shared, turns);
                    (s, floor_arm(dir.path(), round, writers, shared, turns))
                } else {
                    let f = floor_arm(dir.path(), round, writers, shared, turns);
                    (store_arm(dir.path(), round, writers, shared, turns), f)
                };
                store.push(s);
                floor.push(f);
                ratios.push(s / f);
            }
            println!(
                "{writers:>7}  {:<13} {:>12.0} {:>12.0} {:>12.2}x",
                if shared { "one shared" } else { "one each" },
                median(store),
                median(floor),
                median(ratios)
            );
        }
    }
}
