//! Contention: many writers and readers on one file must queue on SQLite's lock, not fail.
//! 8 writer threads on separate sessions beside 4 reader threads (whole reads and pages), and
//! 2 processes appending to the same session, must see zero busy errors (the busy timeout
//! absorbs the waits), end with exact message counts, and leave every session healthy; every
//! snapshot a reader takes shows whole messages in `seq` order with the turn indexes the
//! contract requires, and every page a reader pages through holds whole turns.

use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use session_store::{Message, Role, SessionId, Store};

use crate::fault_support::{
    assert_dense, assert_integrity, assert_invariants, child, raw, tool_turn, Rng, TURN_LEN,
};

const WRITERS: usize = 8;
const READERS: usize = 4;
const TURNS_PER_WRITER: usize = 12;

/// What a reader can check on one snapshot of a session without the database.
fn assert_snapshot_whole(messages: &[Message]) {
    let mut users = 0;
    for (i, message) in messages.iter().enumerate() {
        assert_eq!(message.seq, i as i64 + 1, "seq gap in a snapshot");
        assert!(
            !message.parts.is_empty(),
            "message {} without parts",
            message.id
        );
        if message.role == Role::User {
            users += 1;
        }
        assert_eq!(message.turn_index, (users - 1).max(0), "turn index");
    }
}

/// Pages through the session (at most 16 messages a page), checking that every page is whole
/// turns: it starts where a turn starts (a user message, or the session's first message).
fn read_by_pages(store: &Store, session: &SessionId) -> Vec<Message> {
    let mut all: Vec<Message> = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .page(session, after, 16)
            .expect("page under contention");
        if let Some(first) = page.messages.first() {
            assert!(
                first.seq == 1 || first.role == Role::User,
                "page starts inside a turn at seq {}",
                first.seq
            );
        }
        if let (Some(last), Some(next)) = (all.last(), page.messages.first()) {
            assert!(
                next.turn_index > last.turn_index,
                "a turn split across pages"
            );
        }
        all.extend(page.messages);
        match page.next {
            Some(next) => after = Some(next),
            None => return all,
        }
    }
}

#[test]
fn eight_writers_and_four_readers_never_see_busy() {
    let mut rng = Rng::from_env("contention");
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("contention.db");
    let store = Store::open(&db).expect("open");
    let sessions: Vec<SessionId> = (0..WRITERS)
        .map(|_| store.create_session().expect("session"))
        .collect();
    let done = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicUsize::new(0));
    std::thread::scope(|scope| {
        let writers: Vec<_> = sessions
            .iter()
            .enumerate()
            .map(|(w, session)| {
                let store = store.clone();
                let by_message = rng.next();
                scope.spawn(move || {
                    for t in 0..TURNS_PER_WRITER {
                        let turn = tool_turn(&format!("w{w}t{t}"));
                        // Alternate whole-turn batches and message-by-message appends, in a
                        // different pattern per writer.
                        if by_message >> (t % 64) & 1 == 1 {
                            for message in turn {
                                store.append(session, message).expect("append");
                            }
                        } else {
                            store.append_batch(session, turn).expect("append_batch");
                        }
                    }
                })
            })
            .collect();
        for r in 0..READERS {
            let store = store.clone();
            let sessions = sessions.clone();
            let done = Arc::clone(&done);
            let reads = Arc::clone(&reads);
            scope.spawn(move || {
                let mut i = r;
                // At least one pass over every session, then until the writers finish.
                while !done.load(Ordering::Acquire) || i < r + sessions.len() {
                    let session = &sessions[i % sessions.len()];
                    let messages = if i % 2 == 0 {
                        store.messages(session).expect("read under contention")
                    } else {
                        read_by_pages(&store, session)
                    };
                    assert_snapshot_whole(&messages);
                    store.sessions().expect("session list under contention");
                    reads.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            });
        }
        for writer in writers {
            writer.join().expect("writer thread");
        }
        done.store(true, Ordering::Release);
    });
    for session in &sessions {
        assert_eq!(
            store.messages(session).expect("final read").len(),
            TURNS_PER_WRITER * TURN_LEN
        );
    }
    eprintln!(
        "contention: {} reads beside the writers",
        reads.load(Ordering::Relaxed)
    );
    let conn = raw(&db);
    assert_integrity(&conn);
    assert_invariants(&conn);
    assert_dense(&conn);
}

const DB_ENV: &str = "PROOF_CONTENTION_DB";
const SESSION_ENV: &str = "PROOF_CONTENTION_SESSION";
const WRITER_ENV: &str = "PROOF_CONTENTION_WRITER";
const TURNS_PER_PROCESS: usize = 25;

/// The child: appends turns to a session another process appends to as well. Each turn is a
/// user message on its own, then the rest as one batch, so the two processes interleave at
/// every point the pairing rules allow.
#[test]
#[ignore = "child process of the contention test: does nothing unless spawned by it"]
fn same_session_writer_child() {
    let (Some(db), Ok(session), Ok(writer)) = (
        std::env::var_os(DB_ENV),
        std::env::var(SESSION_ENV),
        std::env::var(WRITER_ENV),
    ) else {
        return;
    };
    let store = Store::open(std::path::PathBuf::from(db)).expect("child opens store");
    let session = SessionId::new(session);
    for t in 0..TURNS_PER_PROCESS {
        let mut turn = tool_turn(&format!("p{writer}t{t}"));
        let rest = turn.split_off(1);
        store
            .append(&session, turn.remove(0))
            .unwrap_or_else(|e| panic!("writer {writer}: user message: {e:?}"));
        store
            .append_batch(&session, rest)
            .unwrap_or_else(|e| panic!("writer {writer}: turn batch: {e:?}"));
    }
}

#[test]
fn two_processes_appending_to_one_session_never_see_busy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("shared.db");
    let session = Store::open(&db)
        .expect("open")
        .create_session()
        .expect("session");
    let children: Vec<_> = (0..2)
        .map(|writer| {
            child("contention::same_session_writer_child")
                .env(DB_ENV, &db)
                .env(SESSION_ENV, session.as_str())
                .env(WRITER_ENV, writer.to_string())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn writer")
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().expect("wait");
        assert!(
            out.status.success(),
            "writer process failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let store = Store::open(&db).expect("reopen");
    let messages = store.messages(&session).expect("read");
    assert_eq!(messages.len(), 2 * TURNS_PER_PROCESS * TURN_LEN);
    assert_snapshot_whole(&messages);
    let conn = raw(&db);
    assert_integrity(&conn);
    assert_invariants(&conn);
    assert_dense(&conn);
}
