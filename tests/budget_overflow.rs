//! `budget` over a usage ledger edited by hand (the contract lets a person write rows with
//! `sqlite3`): a report whose input counts (input, cache read, cache write) sum past 64-bit
//! integers is refused with `Error::UsageOverflow`, never a panic or a wrapped number; a sum
//! that fits is reported exactly.

use session_store::{Error, Store};

use crate::util::{one_exchange, session_store};

/// A session whose last assistant message has a usage row with the three input counts.
fn ledger(
    counts: [i64; 3],
) -> (
    tempfile::TempDir,
    std::path::PathBuf,
    session_store::SessionId,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("s.db");
    let (store, session) = one_exchange(&db);
    drop(store);
    rusqlite::Connection::open(&db)
        .expect("sqlite3")
        .execute(
            "INSERT INTO usage (message_id, model, input_tokens, cache_read_tokens, cache_write_tokens)
             SELECT id, 'anthropic/x', ?1, ?2, ?3 FROM messages
             WHERE session_id = ?4 AND role = 'assistant'",
            rusqlite::params![counts[0], counts[1], counts[2], session.as_str()],
        )
        .expect("usage row");
    (dir, db, session)
}

#[test]
fn a_report_summing_past_64_bits_is_refused_not_a_panic() {
    let max = i64::MAX;
    for counts in [
        [max, max, max],
        [max, 1, 0],
        [0, max, 1],
        [1, 0, max],
        [1 << 62, 1 << 62, 1 << 62],
    ] {
        let (_dir, db, session) = ledger(counts);
        let store = Store::open(&db).expect("open");
        match store.budget(&session, 1000) {
            Err(Error::UsageOverflow { over, .. }) => {
                assert!(over.contains("latest report"), "{over}")
            }
            other => panic!("{counts:?}: not refused: {other:?}"),
        }
        drop(store);
        let out = session_store(
            &db,
            &["budget", session.as_str(), "--limit", "1000", "--json"],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{counts:?}: {stderr}");
        assert!(stderr.contains("above"), "{counts:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{counts:?}");
    }
}

#[test]
fn a_report_that_fits_is_reported_exactly() {
    let max = i64::MAX;
    for counts in [
        [max, 0, 0],
        [max - 2, 1, 1],
        [1 << 61, 1 << 61, 1 << 61],
        [7, 0, 0],
    ] {
        let (_dir, db, session) = ledger(counts);
        let store = Store::open(&db).expect("open");
        let budget = store.budget(&session, 1000).expect("budget");
        let sum: u64 = counts.iter().map(|&c| c as u64).sum();
        assert_eq!(budget.reported_input_tokens, Some(sum), "{counts:?}");
        assert!(budget.estimate >= sum, "{counts:?}");
        assert_eq!(budget.over, budget.estimate > 1000, "{counts:?}");
    }
}
