//! PostgreSQL's one-statement append (`PgStore::append`): a store remembers the tail its
//! last append to a session wrote and the session row's version it left, and its next
//! append to that session is one statement outside a transaction that writes only while the
//! row is still that version. These tests hold it to the rule it rests on: whatever another
//! writer did to the session since (another store's append, a cancel, a revert and its
//! undo, a compaction, a stream, a raw update of the row), the remembered tail is not
//! trusted, and the append lands on the session as that writer left it. Skipped, with a
//! note, when `SESSION_STORE_TEST_PG` is unset.

use std::thread;

use serde_json::json;
use session_store::{Error, NewMessage, Part, Role, SessionId, Store};

use crate::backends::PgSchema;

fn assistant_calling(ids: &[&str]) -> NewMessage {
    let mut parts = vec![Part::text("Let me look.")];
    parts.extend(
        ids.iter()
            .map(|id| Part::tool_use(*id, "bash", json!({"cmd": "ls"}))),
    );
    NewMessage::assistant(parts)
}

fn results(ids: &[&str]) -> NewMessage {
    NewMessage::tool(
        ids.iter()
            .map(|id| Part::tool_result(*id, "done"))
            .collect(),
    )
}

/// The session's messages have the seqs 1..=n, and each turn (from 0) starts at a user
/// message.
fn assert_well_formed(store: &Store, session: &SessionId) -> Vec<session_store::Message> {
    let messages = store.messages(session).expect("read the session");
    let seqs: Vec<i64> = messages.iter().map(|m| m.seq).collect();
    let expected: Vec<i64> = (1..=messages.len() as i64).collect();
    assert_eq!(seqs, expected, "seqs of the live history");
    let mut turn = -1;
    for message in &messages {
        if message.role == Role::User {
            turn += 1;
        }
        assert_eq!(
            message.turn_index,
            turn.max(0),
            "turn of seq {}",
            message.seq
        );
    }
    messages
}

/// Two stores on one schema, and a session the first has appended a turn to (so it
/// remembers the session's tail).
fn two_stores(schema: &PgSchema) -> (Store, Store, SessionId) {
    let remembering = Store::open(schema.url()).expect("open");
    let other = Store::open(schema.url()).expect("open the other");
    let session = remembering.create_session().expect("session");
    remembering
        .append(&session, NewMessage::user("first question"))
        .expect("append");
    remembering
        .append(&session, assistant_calling(&["toolu_a"]))
        .expect("append");
    (remembering, other, session)
}

/// [`two_stores`] with the call answered by the remembering store.
fn two_stores_after_a_tool_step(schema: &PgSchema) -> (Store, Store, SessionId) {
    let (remembering, other, session) = two_stores(schema);
    remembering
        .append(&session, results(&["toolu_a"]))
        .expect("append");
    (remembering, other, session)
}

#[test]
fn a_call_another_store_cancelled_cannot_be_answered_from_a_remembered_tail() {
    let Some(schema) = PgSchema::create() else {
        return;
    };
    let (remembering, other, session) = two_stores(&schema);
    let cancelled = other
        .cancel_pending(&session, "interrupted")
        .expect("cancel");
    assert_eq!(cancelled, ["toolu_a"]);
    // The remembered tail still has toolu_a pending: trusted, it would write a second result.
    let error = remembering
        .append(&session, results(&["toolu_a"]))
        .expect_err("the call is answered already");
    assert!(matches!(error, Error::Refused { .. }), "{error:?}");
    remembering
        .append(&session, NewMessage::user("next question"))
        .expect("the session goes on");
    let messages = assert_well_formed(&remembering, &session);
    assert_eq!(messages.len(), 4, "question, call, tombstone, question");
}

#[test]
fn an_append_after_another_store_s_revert_and_undo_lands_where_they_left_the_session() {
    let Some(schema) = PgSchema::create() else {
        return;
    };
    let (remembering, other, session) = two_stores_after_a_tool_step(&schema);
    remembering
        .append(&session, NewMessage::user("second question"))
        .expect("append");
    let reverted = other.revert_to_turn(&session, 1).expect("revert");
    assert_eq!(reverted.messages, 1);
    // Remembered: seq 4, turn 1. The session now ends at seq 3, in turn 0.
    remembering
        .append(&session, NewMessage::user("asked again"))
        .expect("append after the revert");
    let messages = assert_well_formed(&remembering, &session);
    assert_eq!(messages.len(), 4);
    assert_eq!(messages[3].parts, vec![Part::text("asked again")]);

    // An undo by the other store: the remembering one appended since, so there is none to
    // undo; an append of its own after a revert and an undo of the other's.
    remembering
        .append(&session, NewMessage::assistant(vec![Part::text("answer")]))
        .expect("append");
    other.revert_to_turn(&session, 1).expect("revert again");
    assert!(other.undo_revert(&session).expect("undo").is_some());
    remembering
        .append(&session, NewMessage::user("third question"))
        .expect("append after the undo");
    let messages = assert_well_formed(&remembering, &session);
    assert_eq!(messages.len(), 6);
}

#[test]
fn an_append_after_another_store_s_compaction_and_stream_lands_after_them() {
    let Some(schema) = PgSchema::create() else {
        return;
    };
    let (remembering, other, session) = two_stores_after_a_tool_step(&schema);
    for turn in 0..4 {
        remembering
            .append(&session, NewMessage::user(format!("question {turn}")))
            .expect("append");
        remembering
            .append(
                &session,
                NewMessage::assistant(vec![Part::text(format!("answer {turn}"))]),
            )
            .expect("append");
    }
    other
        .compact(&session, 2, "what happened so far")
        .expect("compact");
    remembering
        .append(&session, NewMessage::user("after the compaction"))
        .expect("append after the compaction");
    assert_well_formed(&remembering, &session);

    // A message another store streamed in, finished: the next seq is after it.
    let mut stream = other
        .begin_message(&session, Role::Assistant)
        .expect("stream");
    stream.push(Part::text("streamed")).expect("push");
    stream.push(Part::text("answer")).expect("push");
    stream.finish().expect("finish");
    remembering
        .append(&session, NewMessage::user("after the stream"))
        .expect("append after the stream");
    let messages = assert_well_formed(&remembering, &session);
    assert_eq!(
        messages.last().map(|m| m.parts.clone()),
        Some(vec![Part::text("after the stream")])
    );
}

#[test]
fn a_call_a_hand_edit_deleted_cannot_be_answered_from_a_remembered_tail() {
    let Some(schema) = PgSchema::create() else {
        return;
    };
    let (remembering, _other, session) = two_stores(&schema);
    // A person mends the session by hand: drops the call and clears the state (any update
    // of the row writes a new version of it).
    let mut client = schema.client();
    client
        .batch_execute(&format!(
            "DELETE FROM parts WHERE session_id = '{session}' AND kind = 'tool_use';
             UPDATE sessions SET tail_state = NULL WHERE id = '{session}';"
        ))
        .expect("hand mend");
    let error = remembering
        .append(&session, results(&["toolu_a"]))
        .expect_err("the call is gone");
    assert!(matches!(error, Error::Refused { .. }), "{error:?}");
}

/// A schema, a store on it and a session the store created (`None`, the test skipped: no
/// server).
fn a_store_with_a_session() -> Option<(PgSchema, Store, SessionId)> {
    let schema = PgSchema::create()?;
    let store = Store::open(schema.url()).expect("open");
    let session = store.create_session().expect("session");
    Some((schema, store, session))
}

#[test]
fn stores_writing_one_session_together_lose_no_message_and_share_no_seq() {
    let Some((schema, store, session)) = a_store_with_a_session() else {
        return;
    };
    let url = schema.url();
    const WRITERS: usize = 4;
    const EACH: usize = 60;
    thread::scope(|scope| {
        for writer in 0..WRITERS {
            let (url, session) = (&url, &session);
            scope.spawn(move || {
                let store = Store::open(url).expect("open");
                for index in 0..EACH {
                    store
                        .append(session, NewMessage::user(format!("{writer}:{index}")))
                        .expect("append");
                }
            });
        }
    });
    let messages = assert_well_formed(&store, &session);
    assert_eq!(messages.len(), WRITERS * EACH);
    // Each writer's messages, in the order it appended them.
    for writer in 0..WRITERS {
        let own: Vec<String> = messages
            .iter()
            .filter_map(|m| match m.parts.as_slice() {
                [Part::Text { text, .. }] if text.starts_with(&format!("{writer}:")) => {
                    Some(text.clone())
                }
                _ => None,
            })
            .collect();
        let expected: Vec<String> = (0..EACH).map(|i| format!("{writer}:{i}")).collect();
        assert_eq!(own, expected, "writer {writer}");
    }
}

/// A server that fails the one statement but takes the same append as a transaction (a
/// distributed engine may not route it): simulated by a trigger that refuses an insert from
/// the one statement (the client's query text says what it is). The append still goes in,
/// once, and the store's later appends are transactions.
#[test]
fn a_server_that_fails_the_one_statement_gets_transactions_instead() {
    let Some((schema, store, session)) = a_store_with_a_session() else {
        return;
    };
    store
        .append(&session, NewMessage::user("first"))
        .expect("append in a transaction");
    schema
        .client()
        .batch_execute(
            "CREATE FUNCTION refuse_alone() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 IF current_query() LIKE '/* one-statement append */%' THEN
                     RAISE EXCEPTION 'not outside a transaction' USING ERRCODE = '0A000';
                 END IF;
                 RETURN NEW;
             END $$;
             CREATE TRIGGER refuse_alone BEFORE INSERT ON messages
                 FOR EACH ROW EXECUTE FUNCTION refuse_alone();",
        )
        .expect("the trigger");
    for number in 0..5 {
        store
            .append(
                &session,
                NewMessage::assistant(vec![Part::text(format!("answer {number}"))]),
            )
            .expect("an append the server takes as a transaction");
    }
    let messages = assert_well_formed(&store, &session);
    assert_eq!(messages.len(), 6);
}

/// A keyed append from a remembered tail reads nothing before its one statement, which
/// writes only where the session stores none of its key: a retry of the last append, made
/// from the tail that append left, comes back as stored and stores nothing; so does a retry
/// of an older one; a key naming other content is refused with nothing written; the next
/// new key is appended as usual.
#[test]
fn a_retried_key_from_a_remembered_tail_comes_back_as_stored() {
    let Some((_schema, store, session)) = a_store_with_a_session() else {
        return;
    };
    let keyed = |text: &str, key: &str| NewMessage::user(text).with_idempotency_key(key);
    let first = store.append(&session, keyed("q1", "k1")).expect("append");
    // Appended by the one statement, then retried from the tail it left.
    let second = store.append(&session, keyed("q2", "k2")).expect("append");
    assert_eq!(
        store.append(&session, keyed("q2", "k2")).expect("retry"),
        second
    );
    assert_eq!(
        store.append(&session, keyed("q1", "k1")).expect("retry"),
        first
    );
    match store.append(&session, keyed("other", "k2")) {
        Err(Error::IdempotencyConflict { key, .. }) => assert_eq!(key, "k2"),
        other => panic!("a key naming other content: {other:?}"),
    }
    assert_eq!(assert_well_formed(&store, &session).len(), 2);
    // Past the appends a missed one statement sits out, and again from the one statement.
    for number in 3..=6 {
        let text = format!("q{number}");
        let key = format!("k{number}");
        let appended = store.append(&session, keyed(&text, &key)).expect("append");
        assert_eq!(appended.seq, number);
        assert_eq!(
            store.append(&session, keyed(&text, &key)).expect("retry"),
            appended
        );
    }
    assert_eq!(assert_well_formed(&store, &session).len(), 6);
}

/// Stores retrying the same keyed appends on one session at once (each store appends keys
/// 0..n in order, the content the same for a key): each key is stored once, in key order.
#[test]
fn stores_racing_the_same_keys_store_each_message_once() {
    let Some((schema, store, session)) = a_store_with_a_session() else {
        return;
    };
    let url = schema.url();
    const WRITERS: usize = 4;
    const KEYS: usize = 40;
    let appended: Vec<Vec<session_store::Appended>> = thread::scope(|scope| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|_| {
                let (url, session) = (&url, &session);
                scope.spawn(move || {
                    let store = Store::open(url).expect("open");
                    (0..KEYS)
                        .map(|key| {
                            let message = NewMessage::user(format!("message {key}"))
                                .with_idempotency_key(format!("key-{key}"));
                            store.append(session, message).expect("append")
                        })
                        .collect()
                })
            })
            .collect();
        writers
            .into_iter()
            .map(|writer| writer.join().expect("writer"))
            .collect()
    });
    let messages = assert_well_formed(&store, &session);
    let texts: Vec<String> = messages
        .iter()
        .map(|m| match m.parts.as_slice() {
            [Part::Text { text, .. }] => text.clone(),
            other => panic!("parts {other:?}"),
        })
        .collect();
    let expected: Vec<String> = (0..KEYS).map(|key| format!("message {key}")).collect();
    assert_eq!(texts, expected);
    // Every store was told the same message for each key.
    for other in &appended[1..] {
        assert_eq!(other, &appended[0]);
    }
}
