//! A process killed while it compacts a long session must leave the history wholly as it was
//! (nothing compacted, no summary) or wholly compacted (the planned head marked, its summary
//! stored), never a split turn or a marked head without its summary; the session must then
//! read, compact and append as usual.
//!
//! The session is 60,000 messages of short user/assistant turns, written with raw SQL so the
//! fixture is quick to build, and checked healthy before the kills. Marking its head takes
//! long enough in a debug build for a random SIGKILL to land inside the transaction.

use std::path::Path;
use std::time::Duration;

use session_store::{NewMessage, SessionId, Store};

use crate::fault_support::{
    assert_dense, assert_integrity, assert_invariants, child, kill_after_ready, marked_work, raw,
    timed_work, Rng,
};

const DB_ENV: &str = "PROOF_COMPACTION_DB";
const SESSION_ENV: &str = "PROOF_COMPACTION_SESSION";
const ROUNDS: usize = 8;
const MESSAGES: i64 = 60_000;
const KEEP: usize = 10;
const SUMMARY: &str = "The user and the assistant talked for a long time.";

/// The child: compacts the session, then exits.
#[test]
#[ignore = "child process of the compaction-kill test: does nothing unless spawned by it"]
fn compacting_child() {
    let (Some(db), Ok(session)) = (std::env::var_os(DB_ENV), std::env::var(SESSION_ENV)) else {
        return;
    };
    let store = Store::open(std::path::PathBuf::from(db)).expect("child opens store");
    let session = SessionId::new(session);
    marked_work(|| {
        store
            .compact(&session, KEEP, SUMMARY)
            .expect("child compacts");
    });
}

/// A healthy session of `MESSAGES` messages: user and assistant text turns.
fn long_session(path: &Path) -> SessionId {
    let store = Store::open(path).expect("open");
    let session = store.create_session().expect("session");
    drop(store);
    let mut conn = raw(path);
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .expect("begin");
    tx.execute(
        "INSERT INTO messages (session_id, seq, turn_index, role, created_at)
             WITH RECURSIVE n(seq) AS (SELECT 1 UNION ALL SELECT seq + 1 FROM n WHERE seq < ?2)
             SELECT ?1, seq, (seq - 1) / 2, CASE seq % 2 WHEN 1 THEN 'user' ELSE 'assistant' END,
                    '2026-01-01T00:00:00.000000Z'
             FROM n",
        rusqlite::params![session.as_str(), MESSAGES],
    )
    .expect("messages");
    tx.execute(
        "INSERT INTO parts (message_id, ordinal, kind, text)
             SELECT id, 0, 'text', 'message ' || seq FROM messages WHERE session_id = ?1",
        [session.as_str()],
    )
    .expect("parts");
    tx.commit().expect("commit");
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .expect("checkpoint");
    session
}

/// (compacted messages, summaries) of the database.
fn compaction_state(path: &Path) -> (i64, i64) {
    raw(path)
        .query_row(
            "SELECT (SELECT COUNT(*) FROM messages WHERE compacted = 1), (SELECT COUNT(*) FROM summaries)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("compaction state")
}

fn copy_db(from: &Path, to: &Path) {
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", to.display()));
    }
    std::fs::copy(from, to).expect("copy db");
}

#[test]
fn kill_during_compaction_leaves_the_history_wholly_before_or_after() {
    let mut rng = Rng::from_env("compaction_kill");
    let dir = tempfile::tempdir().expect("tempdir");
    let pristine = dir.path().join("pristine.db");
    let session = long_session(&pristine);
    {
        let conn = raw(&pristine);
        assert_invariants(&conn);
        assert_dense(&conn);
    }

    // The finished compaction, and how long a child takes to do it (only to aim the kills).
    let done = dir.path().join("done.db");
    copy_db(&pristine, &done);
    let full = timed_work(
        child("compaction_kill::compacting_child")
            .env(DB_ENV, &done)
            .env(SESSION_ENV, session.as_str()),
    );
    let after_state = compaction_state(&done);
    assert_eq!(after_state, (MESSAGES - KEEP as i64, 1));

    let (mut before, mut after) = (0, 0);
    let db = dir.path().join("victim.db");
    for round in 0..ROUNDS {
        copy_db(&pristine, &db);
        // Anywhere in the compaction, or just after it.
        let at = Duration::from_micros(rng.below(full.as_micros() as u64 * 5 / 4 + 1));
        kill_after_ready(
            child("compaction_kill::compacting_child")
                .env(DB_ENV, &db)
                .env(SESSION_ENV, session.as_str()),
            at,
        );

        {
            let conn = raw(&db);
            assert_integrity(&conn);
            assert_invariants(&conn);
            assert_dense(&conn);
        }
        let state = compaction_state(&db);
        if state == (0, 0) {
            before += 1;
        } else {
            assert_eq!(state, after_state, "round {round}: compaction half done");
            after += 1;
        }
        let store = Store::open(&db).expect("reopen");
        let view = store.provider_history(&session).expect("provider view");
        assert_eq!(view.summary.is_some(), state.1 == 1);
        store
            .compact(&session, KEEP, SUMMARY)
            .expect("compaction after the kill");
        assert_eq!(compaction_state(&db).0, after_state.0);
        store
            .append(&session, NewMessage::user("still here"))
            .expect("append after the kill");
        assert_invariants(&raw(&db));
    }
    eprintln!(
        "compaction_kill: {ROUNDS} kills over a {full:?} compaction: {before} before, {after} after"
    );
}
