//! Listing sessions: `Store::sessions` over 10,000 sessions of 100 messages (the repair
//! benchmark's 1,000,000-message fixture), against the floor of a listing (the session rows
//! alone, read and decoded the same way) and the same listing with each session's message
//! count computed by an index-only `COUNT(*)`. A listing must cost O(sessions), not
//! O(messages): no message row is loaded. Paired rounds, see BENCHMARKS.md.
#![allow(clippy::unwrap_used)] // a benchmark that fails to set up should stop loudly

mod common;

use std::hint::black_box;

use chrono::{DateTime, Utc};
use rusqlite::Connection;
use session_store::Store;

use common::million::{fixture, SESSIONS};
use common::rounds_of;

/// The session rows alone, decoded as the store decodes them: the floor of any listing.
const SESSION_ROWS: &str =
    "SELECT id, created_at, updated_at FROM sessions ORDER BY created_at, id";

/// The same with each session's message count from the `(session_id, seq)` index.
const SESSION_ROWS_COUNTED: &str = "
    SELECT s.id, s.created_at, s.updated_at,
           (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id)
    FROM sessions s ORDER BY s.created_at, s.id";

fn list(
    conn: &Connection,
    sql: &str,
    counted: bool,
) -> Vec<(String, DateTime<Utc>, DateTime<Utc>, i64)> {
    let mut stmt = conn.prepare_cached(sql).unwrap();
    let mut rows = stmt.query([]).unwrap();
    let mut out = Vec::new();
    while let Some(row) = rows.next().unwrap() {
        let time = |at: usize| {
            DateTime::parse_from_rfc3339(&row.get::<_, String>(at).unwrap())
                .unwrap()
                .with_timezone(&Utc)
        };
        out.push((
            row.get(0).unwrap(),
            time(1),
            time(2),
            if counted { row.get(3).unwrap() } else { 0 },
        ));
    }
    out
}

fn main() {
    let path = fixture();
    let store = Store::open(&path).unwrap();
    let raw = Connection::open(&path).unwrap();
    common::configure(&raw);
    let listed = store.sessions().unwrap();
    assert_eq!(listed.len(), SESSIONS);
    assert_eq!(list(&raw, SESSION_ROWS_COUNTED, true).len(), SESSIONS);
    println!();
    rounds_of(
        "list 10,000 sessions of 100 messages",
        30,
        &mut || {},
        &mut [
            ("store sessions()", &mut || {
                black_box(store.sessions().unwrap());
            }),
            ("floor: session rows only", &mut || {
                black_box(list(&raw, SESSION_ROWS, false));
            }),
            ("raw: rows + index COUNT(*)", &mut || {
                black_box(list(&raw, SESSION_ROWS_COUNTED, true));
            }),
        ],
    );
}
