//! `Store::last_turns` reads the last turns by one probe of the highest turn index, which
//! assumes the turn indexes are dense (as the contract makes them). The failure covered: a
//! session another writer left with gaps in its turn indexes, or with fewer turns than asked
//! for, returning fewer turns than it holds.

use rusqlite::params;
use session_store::{NewMessage, SessionId, Store};

use crate::util::temp_store;

#[test]
fn last_turns_with_gaps_in_the_turn_indexes_still_returns_k_turns() {
    let (_dir, store, path) = temp_store();
    drop(store);
    let conn = rusqlite::Connection::open(&path).expect("raw");
    conn.execute(
        "INSERT INTO sessions (id, created_at, updated_at) VALUES ('g', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')",
        [],
    )
    .expect("session");
    // Turns 0, 3, 7 and 8: gaps another writer left.
    for (seq, turn) in [(1, 0), (2, 3), (3, 7), (4, 8)] {
        conn.execute(
            "INSERT INTO messages (session_id, seq, turn_index, role, created_at)
             VALUES ('g', ?1, ?2, 'user', '2026-01-01T00:00:00Z')",
            params![seq, turn],
        )
        .expect("message");
    }
    drop(conn);
    let store = Store::open(&path).expect("open");
    let session = SessionId::new("g");
    let turns = |k| -> Vec<i64> {
        store
            .last_turns(&session, k)
            .expect("last turns")
            .iter()
            .map(|m| m.turn_index)
            .collect()
    };
    assert_eq!(turns(2), vec![7, 8]);
    assert_eq!(turns(3), vec![3, 7, 8]);
    assert_eq!(turns(10), vec![0, 3, 7, 8]);
}

#[test]
fn last_turns_of_a_short_session_is_the_whole_session() {
    let (_dir, store, _path) = temp_store();
    let session = store.create_session().expect("session");
    store
        .append(&session, NewMessage::user("only turn"))
        .expect("append");
    assert_eq!(store.last_turns(&session, 5).expect("last").len(), 1);
    assert_eq!(store.last_turns(&session, 0).expect("none").len(), 0);
}
