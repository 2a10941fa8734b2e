//! SQLite's write connection keeps each session's call ids (`store/memory.rs`) instead of an
//! index of every call id, so an append's check that its calls are new in the session
//! (PROVIDER_RULES.md rule 6) asks that memory. These tests hold the memory to the rows:
//! whoever else writes the session (another store on the file, a streamed message, a revert
//! and its undo, rows other code appends with SQL), an id is refused exactly when the
//! session's rows hold it, and the rows never hold an id twice.

use std::path::Path;

use proptest::prelude::*;
use rusqlite::Connection;
use serde_json::json;
use session_store::{Error, NewMessage, Part, Refusal, Role, SessionId, Store};

use crate::util::temp_store;

fn call(id: &str) -> Part {
    Part::tool_use(id, "bash", json!({"cmd": "ls"}))
}

/// A whole turn calling `id`.
fn turn(id: &str) -> Vec<NewMessage> {
    vec![
        NewMessage::user("go"),
        NewMessage::assistant(vec![call(id)]),
        NewMessage::tool(vec![Part::tool_result(id, "ok")]),
        NewMessage::assistant(vec![Part::text("done")]),
    ]
}

/// How many of the session's stored tool_uses carry `id`, read with SQL.
fn stored(path: &Path, session: &SessionId, id: &str) -> i64 {
    Connection::open(path)
        .expect("raw")
        .query_row(
            "SELECT COUNT(*) FROM parts p JOIN messages m ON m.id = p.message_id
             WHERE m.session_id = ?1 AND p.kind = 'tool_use' AND p.tool_use_id = ?2",
            [session.as_str(), id],
            |r| r.get(0),
        )
        .expect("count")
}

/// No tool_use id is stored twice in the session.
fn assert_no_id_twice(path: &Path, session: &SessionId) {
    let twice: i64 = Connection::open(path)
        .expect("raw")
        .query_row(
            "SELECT COUNT(*) FROM (SELECT p.tool_use_id FROM parts p JOIN messages m
                 ON m.id = p.message_id
             WHERE m.session_id = ?1 AND p.kind = 'tool_use'
             GROUP BY p.tool_use_id HAVING COUNT(*) > 1)",
            [session.as_str()],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(twice, 0, "a call id is stored twice");
}

fn is_reused(result: &session_store::Result<Vec<session_store::Appended>>, id: &str) -> bool {
    matches!(result, Err(Error::Refused {
        reason: Refusal::DuplicateToolUseId { id: reused },
        ..
    }) if reused == id)
}

/// Another store on the same file (another process, for the file) appends a call: this
/// store, which kept the session's ids from its own appends, refuses that id, and the other
/// refuses this one's.
#[test]
fn a_call_id_another_store_appended_is_refused_by_this_one() {
    let (_dir, mine, path) = temp_store();
    let theirs = Store::open(&path).expect("a second store");
    let session = mine.create_session().expect("session");
    mine.append_batch(&session, turn("a")).expect("mine");
    theirs.append_batch(&session, turn("b")).expect("theirs");
    assert!(is_reused(&mine.append_batch(&session, turn("b")), "b"));
    mine.append_batch(&session, turn("c")).expect("a new id");
    assert!(is_reused(&theirs.append_batch(&session, turn("c")), "c"));
    assert!(is_reused(&theirs.append_batch(&session, turn("a")), "a"));
    assert_no_id_twice(&path, &session);
}

/// A revert takes calls out of the session: their ids may be used again, though the store
/// kept them; its undo brings them back, and they are refused again.
#[test]
fn a_call_id_freed_by_a_revert_may_be_used_again_and_not_after_its_undo() {
    let (_dir, store, path) = temp_store();
    let session = store.create_session().expect("session");
    store.append_batch(&session, turn("a")).expect("a");
    store.append_batch(&session, turn("b")).expect("b");
    store.revert_to_turn(&session, 1).expect("revert b");
    store
        .append_batch(&session, turn("b"))
        .expect("b is free after the revert");
    assert_eq!(stored(&path, &session, "b"), 1);
    store.revert_to_turn(&session, 1).expect("revert b again");
    store.undo_revert(&session).expect("undo").expect("undone");
    assert!(is_reused(&store.append_batch(&session, turn("b")), "b"));
    assert_no_id_twice(&path, &session);
}

/// A call streamed part by part is known to the next append and to the next streamed part,
/// and a streamed part may not reuse an appended call's id.
#[test]
fn a_streamed_call_is_known_to_later_appends_and_parts() {
    let (_dir, store, path) = temp_store();
    let session = store.create_session().expect("session");
    store.append_batch(&session, turn("a")).expect("a");
    store.append(&session, NewMessage::user("go")).expect("go");
    let mut open = store
        .begin_message(&session, Role::Assistant)
        .expect("begin");
    open.push(Part::text("calling")).expect("text");
    match open.push(call("a")) {
        Err(Error::Refused {
            reason: Refusal::DuplicateToolUseId { id },
            ..
        }) => assert_eq!(id, "a"),
        other => panic!("a streamed reuse of a: {other:?}"),
    }
    open.push(call("s")).expect("a new id");
    open.finish().expect("finish");
    store
        .append(
            &session,
            NewMessage::tool(vec![Part::tool_result("s", "ok")]),
        )
        .expect("answered");
    store
        .append(&session, NewMessage::assistant(vec![Part::text("done")]))
        .expect("done");
    assert!(is_reused(&store.append_batch(&session, turn("s")), "s"));
    assert_no_id_twice(&path, &session);
}

/// Rows other code appends with SQL after the store's last message are read before the
/// next append: their call's id is refused.
#[test]
fn a_call_written_with_sql_after_the_store_is_refused_again() {
    let (_dir, store, path) = temp_store();
    let session = store.create_session().expect("session");
    store.append_batch(&session, turn("a")).expect("a");
    append_with_sql(&path, &session, "x");
    assert!(is_reused(&store.append_batch(&session, turn("x")), "x"));
    store.append_batch(&session, turn("y")).expect("a new id");
    assert_no_id_twice(&path, &session);
}

/// Appends a tool_use `id` and its result after the session's last message, with SQL.
fn append_with_sql(path: &Path, session: &SessionId, id: &str) {
    let conn = Connection::open(path).expect("raw");
    conn.execute_batch(&format!(
        "INSERT INTO messages (session_id, seq, turn_index, role, created_at)
             SELECT '{session}', COALESCE(MAX(seq), 0) + 1, COALESCE(MAX(turn_index), 0),
                    'assistant', '2026-01-01T00:00:00Z'
             FROM messages WHERE session_id = '{session}';
         INSERT INTO parts (message_id, ordinal, kind, tool_use_id, tool_name, input)
             VALUES (last_insert_rowid(), 0, 'tool_use', '{id}', 'bash', '{{}}');
         INSERT INTO messages (session_id, seq, turn_index, role, created_at)
             SELECT '{session}', MAX(seq) + 1, MAX(turn_index), 'tool', '2026-01-01T00:00:00Z'
             FROM messages WHERE session_id = '{session}';
         INSERT INTO parts (message_id, ordinal, kind, tool_use_id, text)
             VALUES (last_insert_rowid(), 0, 'tool_result', '{id}', 'ok');
         UPDATE sessions SET message_count = message_count + 2 WHERE id = '{session}';"
    ))
    .expect("rows of other code");
}

/// One step of [`kept_ids_refuse_exactly_what_the_rows_hold`].
#[derive(Clone, Debug)]
enum Op {
    /// A whole turn calling the id, by store 0 or 1.
    Turn(usize, usize),
    /// A turn without a call, one message per append.
    Chat(usize),
    /// The same call streamed (a text part first, so a refused call leaves a message).
    Stream(usize, usize),
    /// The session's last turn reverted.
    RevertLast(usize),
    /// The last revert undone.
    Undo(usize),
    /// The title set: a write that adds no call.
    Title(usize),
    /// A call and its result appended with SQL, when the id is free.
    Sql(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let store = 0..2usize;
    let id = 0..6usize;
    prop_oneof![
        4 => (store.clone(), id.clone()).prop_map(|(s, i)| Op::Turn(s, i)),
        2 => store.clone().prop_map(Op::Chat),
        2 => (store.clone(), id.clone()).prop_map(|(s, i)| Op::Stream(s, i)),
        2 => store.clone().prop_map(Op::RevertLast),
        1 => store.clone().prop_map(Op::Undo),
        1 => store.prop_map(Op::Title),
        1 => id.prop_map(Op::Sql),
    ]
}

/// Runs `op` on `stores`, checking that an id is refused exactly when the rows hold it.
/// `undoable`: a revert may still be undone (rows of other code written then are an append
/// since, which leaves nothing to undo).
fn run(op: &Op, stores: &[Store], path: &Path, session: &SessionId, undoable: &mut bool) {
    let id_of = |i: &usize| format!("toolu_{i}");
    match op {
        Op::Turn(s, i) => {
            let id = id_of(i);
            let held = stored(path, session, &id) > 0;
            let result = stores[*s].append_batch(session, turn(&id));
            *undoable &= result.is_err();
            match held {
                true => assert!(is_reused(&result, &id), "{op:?}: {result:?}"),
                false => assert!(result.is_ok(), "{op:?}: {result:?}"),
            }
        }
        Op::Chat(s) => {
            stores[*s]
                .append(session, NewMessage::user("hi"))
                .expect("prompt");
            stores[*s]
                .append(session, NewMessage::assistant(vec![Part::text("hello")]))
                .expect("answer");
            *undoable = false;
        }
        Op::Stream(s, i) => {
            let id = id_of(i);
            let held = stored(path, session, &id) > 0;
            let store = &stores[*s];
            store
                .append(session, NewMessage::user("go"))
                .expect("prompt");
            *undoable = false;
            let mut open = store
                .begin_message(session, Role::Assistant)
                .expect("begin");
            open.push(Part::text("calling")).expect("text");
            let pushed = open.push(call(&id));
            match held {
                true => assert!(
                    matches!(&pushed, Err(Error::Refused {
                        reason: Refusal::DuplicateToolUseId { id: reused }, ..
                    }) if *reused == id),
                    "{op:?}: {pushed:?}"
                ),
                false => assert!(pushed.is_ok(), "{op:?}: {pushed:?}"),
            }
            open.finish().expect("finish");
            if !held {
                store
                    .append(
                        session,
                        NewMessage::tool(vec![Part::tool_result(&id, "ok")]),
                    )
                    .expect("answered");
            }
        }
        Op::RevertLast(s) => {
            let last = stores[*s]
                .messages(session)
                .expect("messages")
                .last()
                .map_or(0, |m| m.turn_index);
            *undoable |= stores[*s]
                .revert_to_turn(session, last)
                .expect("revert")
                .messages
                > 0;
        }
        Op::Undo(s) => {
            stores[*s].undo_revert(session).expect("undo");
            *undoable = false;
        }
        Op::Title(s) => stores[*s].set_title(session, Some("t")).expect("title"),
        Op::Sql(i) => {
            let id = id_of(i);
            let open = stores[0]
                .pending_tool_uses(session)
                .expect("pending")
                .is_empty();
            if stored(path, session, &id) == 0 && open {
                append_with_sql(path, session, &id);
                *undoable = false;
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Whatever two stores on one file, streamed messages, reverts and their undo, titles and
    /// rows of other code do to a session in any order, an append or a streamed part is
    /// refused for a reused call id exactly when the session's rows hold it, and no id is
    /// ever stored twice.
    #[test]
    fn kept_ids_refuse_exactly_what_the_rows_hold(ops in prop::collection::vec(op(), 1..24)) {
        let (_dir, first, path) = temp_store();
        let second = Store::open(&path).expect("a second store");
        let session = first.create_session().expect("session");
        let stores = [first, second];
        let mut undoable = false;
        for op in &ops {
            run(op, &stores, &path, &session, &mut undoable);
            assert_no_id_twice(&path, &session);
        }
    }
}
