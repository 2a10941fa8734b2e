//! The tail state a session row keeps (`sessions.tail_state`, V10) is a cache the append's
//! pairing check trusts: a stale one would let a broken pair in, or refuse a valid message.
//! These tests hold it to the rows: after any sequence of appends, cancels, reverts and their
//! undo, compactions, forks and imports, a stored state equals the end of the session read
//! from its messages by this suite's own reading of the contract ([`end_of`], independent of
//! the store's walk and of its queries); and rows written straight with
//! SQL, by code that bypasses the store, never make the check wrong.

use proptest::prelude::*;
use rusqlite::Connection;
use serde_json::{json, Value};
use session_store::{Error, Message, NewMessage, Part, Refusal, Role, SessionId, Store};

use crate::backends::PgSchema;
use crate::tail_walk::end_of;
use crate::util::{raw, session_with, temp_store};

fn call(id: &str) -> Part {
    Part::tool_use(id, "bash", json!({"cmd": "ls"}))
}

fn result(id: &str) -> Part {
    Part::tool_result(id, "ok")
}

/// The stored state of a session, parsed (`None` when NULL).
fn stored(conn: &Connection, session: &str) -> Option<Value> {
    let text: Option<String> = conn
        .query_row(
            "SELECT tail_state FROM sessions WHERE id = ?1",
            [session],
            |r| r.get(0),
        )
        .expect("tail_state");
    text.map(|t| serde_json::from_str(&t).expect("stored tail state is JSON"))
}

/// Every session's `message_count` column is its number of messages: the store keeps it on
/// every write (no trigger counts inserts since V14).
fn assert_message_counts_true(conn: &Connection) {
    let wrong: Vec<(String, i64, i64)> = conn
        .prepare(
            "SELECT s.id, s.message_count, (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id)
             FROM sessions s",
        )
        .and_then(|mut s| {
            s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .expect("counts")
        .into_iter()
        .filter(|(_, kept, real)| kept != real)
        .collect();
    assert!(wrong.is_empty(), "message_count off: {wrong:?}");
}

/// [`assert_message_counts_true`] on PostgreSQL, whose count has no INSERT trigger either
/// since V14: the one append counts its messages on both engines.
fn assert_message_counts_true_on_postgres(client: &mut postgres::Client) {
    let wrong: Vec<(String, i64, i64)> = client
        .query(
            "SELECT s.id, s.message_count, (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id)
             FROM sessions s",
            &[],
        )
        .expect("counts")
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .filter(|(_, kept, real)| kept != real)
        .collect();
    assert!(
        wrong.is_empty(),
        "message_count off on PostgreSQL: {wrong:?}"
    );
}

/// A stored state without its last three elements, what the rows do not say (the largest
/// part id before the open block's first message, where known; the run of appends, never 0;
/// and the largest part id when the state was written: at most today's largest id), and the
/// last.
fn split_parts_through(mut state: Value) -> (Value, i64) {
    let items = state.as_array_mut().expect("a stored state is an array");
    let parts_through = items
        .pop()
        .and_then(|v| v.as_i64())
        .expect("a stored state ends with parts_through");
    let epoch = items.pop().and_then(|v| v.as_i64());
    assert!(
        epoch.is_some_and(|epoch| epoch > 0),
        "a stored state names its run: {epoch:?}"
    );
    let block_after = items.pop().expect("a stored state names block_after");
    assert!(
        block_after.is_null() || block_after.as_i64().is_some_and(|id| id <= parts_through),
        "block_after {block_after} against parts_through {parts_through}"
    );
    (state, parts_through)
}

/// Every session's stored state, where there is one, equals its rows' state.
fn assert_tail_states_true(store: &Store, conn: &Connection) {
    let sessions: Vec<String> = conn
        .prepare("SELECT id FROM sessions ORDER BY id")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .expect("sessions");
    let parts_max: i64 = conn
        .query_row("SELECT COALESCE(MAX(id), 0) FROM parts", [], |r| r.get(0))
        .expect("max part id");
    for session in sessions {
        if let Some(state) = stored(conn, &session) {
            let (state, parts_through) = split_parts_through(state);
            let messages = store
                .messages(&SessionId::new(session.clone()))
                .expect("messages");
            assert_eq!(state, expected_from(&messages), "session {session}");
            assert!(parts_through <= parts_max, "session {session}");
        }
    }
}

/// A store in a temporary directory with the session `s` holding `messages`, appended in
/// one batch.
fn session_s(
    messages: Vec<NewMessage>,
) -> (tempfile::TempDir, Store, std::path::PathBuf, SessionId) {
    let (dir, store, path) = temp_store();
    let session = SessionId::from("s");
    store.create_session_with_id(&session).expect("create");
    store.append_batch(&session, messages).expect("append");
    (dir, store, path, session)
}

fn refusal(result: session_store::Result<impl std::fmt::Debug>) -> Refusal {
    match result {
        Err(Error::Refused { reason, .. }) => reason,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// The rows other code writes: a session whose last assistant message calls `c2`, unanswered.
/// `parts_name_session`: as on PostgreSQL, where a part names its session too
/// (`migrations-postgres/V18`).
fn foreign_rows(parts_name_session: bool) -> String {
    let (column, value) = if parts_name_session {
        ("session_id, ", "'s', ")
    } else {
        ("", "")
    };
    format!(
        "INSERT INTO sessions (id, created_at, updated_at) VALUES ('s', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z');
         INSERT INTO messages (id, session_id, seq, turn_index, role, created_at) VALUES
             (1001, 's', 1, 0, 'user', '2026-01-01T00:00:00Z'),
             (1002, 's', 2, 0, 'assistant', '2026-01-01T00:00:00Z'),
             (1003, 's', 3, 0, 'tool', '2026-01-01T00:00:00Z'),
             (1004, 's', 4, 0, 'assistant', '2026-01-01T00:00:00Z');
         INSERT INTO parts (id, {column}message_id, ordinal, kind, text, tool_use_id, tool_name, input) VALUES
             (1001, {value}1001, 0, 'text', 'go', NULL, NULL, NULL),
             (1002, {value}1002, 0, 'tool_use', NULL, 'c1', 'bash', '{{}}'),
             (1003, {value}1003, 0, 'tool_result', 'ok', 'c1', NULL, NULL),
             (1004, {value}1004, 0, 'tool_use', NULL, 'c2', 'bash', '{{}}');"
    )
}

/// The refusals and acceptances a session with `c2` pending must give, whatever its tail state.
fn assert_checked_from_the_rows(store: &Store, session: &SessionId) {
    match refusal(store.append(session, NewMessage::user("next"))) {
        Refusal::PendingToolUses { ids, .. } => assert_eq!(ids, ["c2"]),
        other => panic!("expected c2 pending, got {other:?}"),
    }
    // c1 was answered before c2 was called: a result for it answers nothing now.
    refusal(store.append(session, NewMessage::tool(vec![result("c1")])));
    store
        .append(session, NewMessage::tool(vec![result("c2")]))
        .expect("the answer to the pending call is accepted");
    store
        .append(session, NewMessage::user("next"))
        .expect("then a user message is");
}

#[test]
fn rows_written_with_sql_are_checked_from_the_rows() {
    let (_dir, store, path) = temp_store();
    let conn = Connection::open(&path).expect("raw");
    conn.execute_batch(&foreign_rows(false))
        .expect("foreign rows");
    let session = SessionId::from("s");
    assert_eq!(stored(&conn, "s"), None);
    let count = |store: &Store| {
        store
            .session(&session)
            .expect("session")
            .expect("listed")
            .message_count
    };
    assert_eq!(count(&store), 4, "messages other code inserted are counted");
    assert_checked_from_the_rows(&store, &session);
    assert_eq!(count(&store), 6);
    assert_tail_states_true(&store, &conn);
    assert!(
        stored(&conn, "s").is_some(),
        "the append wrote the state back"
    );
}

/// Since V14 no trigger clears the state on an insert: the state stays, but its last seq is
/// no longer the session's, so the store reads the rows.
#[test]
fn rows_written_with_sql_after_the_store_are_checked_from_the_rows() {
    let (_dir, store, path, session) = session_s(vec![
        NewMessage::user("go"),
        NewMessage::assistant(vec![call("c1")]),
        NewMessage::tool(vec![result("c1")]),
    ]);
    let conn = Connection::open(&path).expect("raw");
    assert!(stored(&conn, "s").is_some());
    // Other code appends an assistant message calling c2.
    conn.execute_batch(
        "INSERT INTO messages (id, session_id, seq, turn_index, role, created_at)
             VALUES (100, 's', 4, 0, 'assistant', '2026-01-01T00:00:00Z');
         INSERT INTO parts (message_id, ordinal, kind, tool_use_id, tool_name, input)
             VALUES (100, 0, 'tool_use', 'c2', 'bash', '{}');",
    )
    .expect("foreign append");
    assert_checked_from_the_rows(&store, &session);
    assert_tail_states_true(&store, &conn);
}

/// A part another writer adds to the open block leaves the row's state as it was (no
/// trigger on part inserts since V14, issue 16), but the state no longer matches the block's
/// part count, so the store reads the rows.
#[test]
fn a_call_added_to_a_stored_message_with_sql_is_not_trusted_past() {
    let (_dir, store, path, session) = session_s(vec![
        NewMessage::user("go"),
        NewMessage::assistant(vec![call("c1")]),
    ]);
    store
        .append(&session, NewMessage::tool(vec![result("c1")]))
        .expect("answer");
    let conn = Connection::open(&path).expect("raw");
    // A streaming writer adds a second call to the assistant message, touching no message.
    conn.execute(
        "INSERT INTO parts (message_id, ordinal, kind, tool_use_id, tool_name, input)
         SELECT id, 1, 'tool_use', 'c2', 'bash', '{}' FROM messages WHERE session_id = 's' AND seq = 2",
        [],
    )
    .expect("foreign part");
    assert!(
        stored(&conn, "s").is_some(),
        "no trigger clears the state on a part insert"
    );
    assert_checked_from_the_rows(&store, &session);
    assert_tail_states_true(&store, &conn);
}

/// The state names the largest part id when it was written, the id of its append's last
/// part: that id only comes back for another part once that part is gone, and deleting a
/// part of any kind clears the state. Here the session's last part (a text part, so the
/// block's part count stays the same) is replaced by a call that takes its id.
#[test]
fn a_deleted_last_part_whose_id_comes_back_is_seen() {
    let (_dir, store, path, session) = session_s(vec![
        NewMessage::user("go"),
        NewMessage::assistant(vec![Part::text("let me think")]),
    ]);
    let conn = Connection::open(&path).expect("raw");
    let last: i64 = conn
        .query_row("SELECT MAX(id) FROM parts", [], |r| r.get(0))
        .expect("last part");
    conn.execute_batch(
        "DELETE FROM parts WHERE id = (SELECT MAX(id) FROM parts);
         INSERT INTO parts (message_id, ordinal, kind, tool_use_id, tool_name, input)
         SELECT id, 0, 'tool_use', 'c2', 'bash', '{}' FROM messages WHERE session_id = 's' AND seq = 2;",
    )
    .expect("foreign delete and insert");
    let reused: i64 = conn
        .query_row("SELECT MAX(id) FROM parts", [], |r| r.get(0))
        .expect("reused id");
    assert_eq!(reused, last, "SQLite handed out the deleted id again");
    match refusal(store.append(&session, NewMessage::user("next"))) {
        Refusal::PendingToolUses { ids, .. } => assert_eq!(ids, ["c2"]),
        other => panic!("expected c2 pending, got {other:?}"),
    }
    assert_tail_states_true(&store, &conn);
}

/// The same for a result another writer adds to a tool message of the block, and for a part
/// added to a message before the block (which the check does not read: the state stays
/// trusted, and right).
#[test]
fn parts_added_with_sql_inside_and_before_the_open_block() {
    let (_dir, store, path, session) = session_s(vec![
        NewMessage::user("go"),
        NewMessage::assistant(vec![call("c1"), call("c2")]),
        NewMessage::tool(vec![result("c1")]),
    ]);
    let conn = Connection::open(&path).expect("raw");
    // Before the block: a text part on the user message. Nothing the check reads changed.
    conn.execute(
        "INSERT INTO parts (message_id, ordinal, kind, text)
         SELECT id, 1, 'text', 'more' FROM messages WHERE session_id = 's' AND seq = 1",
        [],
    )
    .expect("part before the block");
    assert!(matches!(
        refusal(store.append(&session, NewMessage::user("next"))),
        Refusal::PendingToolUses { .. }
    ));
    // Inside the block: the answer to c2, added to the tool message. The state the row keeps
    // says c2 is open; the rows say it is answered.
    conn.execute(
        "INSERT INTO parts (message_id, ordinal, kind, text, tool_use_id)
         SELECT id, 1, 'tool_result', 'ok', 'c2' FROM messages WHERE session_id = 's' AND seq = 3",
        [],
    )
    .expect("part in the block");
    store
        .append(&session, NewMessage::user("next"))
        .expect("c2 is answered in the rows, so a user message is accepted");
    assert_tail_states_true(&store, &conn);
}

#[test]
fn a_stale_state_is_not_trusted() {
    // A state left from before other code's rows (its triggers dropped, or a restored row):
    // its last seq is not the session's, so the store reads the rows.
    let (_dir, store, path, session) = session_s(vec![
        NewMessage::user("go"),
        NewMessage::assistant(vec![call("c1")]),
        NewMessage::tool(vec![result("c1")]),
    ]);
    let conn = Connection::open(&path).expect("raw");
    let old: String = conn
        .query_row("SELECT tail_state FROM sessions WHERE id = 's'", [], |r| {
            r.get(0)
        })
        .expect("state");
    conn.execute_batch(
        "INSERT INTO messages (id, session_id, seq, turn_index, role, created_at)
             VALUES (100, 's', 4, 0, 'assistant', '2026-01-01T00:00:00Z');
         INSERT INTO parts (message_id, ordinal, kind, tool_use_id, tool_name, input)
             VALUES (100, 0, 'tool_use', 'c2', 'bash', '{}');",
    )
    .expect("foreign append");
    conn.execute("UPDATE sessions SET tail_state = ?1 WHERE id = 's'", [&old])
        .expect("stale state");
    assert_checked_from_the_rows(&store, &session);
    // A state that is not ours is not trusted either.
    conn.execute(
        "UPDATE sessions SET tail_state = 'not a state' WHERE id = 's'",
        [],
    )
    .expect("garbage");
    store
        .append(&session, NewMessage::assistant(vec![Part::text("done")]))
        .expect("append after garbage");
    assert_tail_states_true(&store, &conn);
}

#[test]
fn rows_written_with_sql_on_postgres_are_checked_from_the_rows() {
    let Some(schema) = PgSchema::create() else {
        return;
    };
    let store = Store::open(schema.url()).expect("open");
    let mut client = schema.client();
    client
        .batch_execute(&foreign_rows(true))
        .expect("foreign rows");
    let session = SessionId::from("s");
    assert_checked_from_the_rows(&store, &session);
    assert!(
        pg_state(&mut client, &session).is_some(),
        "the append wrote the state back"
    );
    // Other code answers nothing and calls c3 in a message of its own: no trigger clears the
    // state on PostgreSQL (V18), the session's last seq and largest part id moved.
    client
        .batch_execute(
            "INSERT INTO messages (id, session_id, seq, turn_index, role, created_at)
                 VALUES (2000, 's', 7, 1, 'assistant', '2026-01-01T00:00:00Z');
             INSERT INTO parts (id, session_id, message_id, ordinal, kind, tool_use_id, tool_name, input)
                 VALUES (2000, 's', 2000, 0, 'tool_use', 'c3', 'bash', '{}');",
        )
        .expect("foreign append");
    match refusal(store.append(&session, NewMessage::user("again"))) {
        Refusal::PendingToolUses { ids, .. } => assert!(ids.contains(&"c3".to_owned()), "{ids:?}"),
        other => panic!("expected c3 pending, got {other:?}"),
    }
    // Then a call added to that same message (the last seq stays): the session's largest
    // part id moved, and the state is not trusted.
    store
        .append_batch(
            &session,
            vec![
                NewMessage::tool(vec![result("c3")]),
                NewMessage::assistant(vec![Part::text("thinking")]),
            ],
        )
        .expect("c3 answered");
    assert!(
        pg_state(&mut client, &session).is_some(),
        "the append wrote the state back"
    );
    client
        .batch_execute(
            "INSERT INTO parts (session_id, message_id, ordinal, kind, tool_use_id, tool_name, input)
                 SELECT 's', id, 1, 'tool_use', 'c4', 'bash', '{}'
                 FROM messages WHERE session_id = 's' ORDER BY seq DESC LIMIT 1",
        )
        .expect("a call added to the last message");
    assert!(
        store
            .pending_tool_uses(&session)
            .expect("pending")
            .contains(&"c4".to_owned()),
        "a part inserted into the last message is read from the rows"
    );
}

/// The tail state of a session from its messages loaded plainly (any backend), in the
/// stored encoding without its last element: [`end_of`]'s reading of the contract, which
/// shares nothing with the store's walk or its tail queries.
fn expected_from(messages: &[Message]) -> Value {
    let end = end_of(messages);
    let last_seq = messages.iter().map(|m| m.seq).max().unwrap_or(0);
    let last_user_turn = messages
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .map(|m| m.turn_index);
    let block_parts: usize = messages[end.speaker.unwrap_or(0)..]
        .iter()
        .map(|m| m.parts.len())
        .sum();
    json!([
        4,
        last_seq,
        last_user_turn,
        end.message.map(|m| m.role.as_str()),
        end.pending_ids(),
        end.answered,
        block_parts
    ])
}

/// A fresh PostgreSQL schema (dropped with the first value) with a store on it, a client and
/// a new session; `None` when no test database is configured.
fn pg_session() -> Option<(PgSchema, Store, postgres::Client, SessionId)> {
    let schema = PgSchema::create()?;
    let store = Store::open(schema.url()).expect("open");
    let client = schema.client();
    let session = store.create_session().expect("create");
    Some((schema, store, client, session))
}

/// The state `session`'s row keeps on PostgreSQL.
fn pg_state(client: &mut postgres::Client, session: &SessionId) -> Option<String> {
    client
        .query_one(
            "SELECT tail_state FROM sessions WHERE id = $1",
            &[&session.as_str()],
        )
        .and_then(|row| row.try_get(0))
        .expect("state")
}

/// The state the session row keeps on PostgreSQL, where it keeps one, is its rows' state.
fn assert_pg_state_true(client: &mut postgres::Client, store: &Store, session: &SessionId) {
    let state = pg_state(client, session);
    if let Some(state) = state {
        let (state, _) = split_parts_through(serde_json::from_str(&state).expect("JSON"));
        let messages = store.messages(session).expect("messages");
        assert_eq!(state, expected_from(&messages), "session {session}");
    }
}

#[test]
fn the_stored_tail_state_is_the_rows_state_on_postgres() {
    let Some((_schema, store, mut client, session)) = pg_session() else {
        return;
    };
    let mut check = |store: &Store| {
        assert_message_counts_true_on_postgres(&mut client);
        assert_pg_state_true(&mut client, store, &session);
    };
    let mut next = 0u32;
    for round in 0..3 {
        for message in turn(2, &mut next) {
            store.append(&session, message).expect("append");
            check(&store);
        }
        store
            .append(&session, NewMessage::user("and"))
            .expect("user");
        store
            .append(
                &session,
                NewMessage::assistant(vec![call(&format!("x{round}"))]),
            )
            .expect("call");
        check(&store);
        store.cancel_pending(&session, "stop").expect("cancel");
        check(&store);
    }
    store.revert_to_turn(&session, 3).expect("revert");
    check(&store);
    store.undo_revert(&session).expect("undo");
    check(&store);
    store.compact(&session, 4, "summary").expect("compact");
    check(&store);
    store.revert_to_turn(&session, 4).expect("revert");
    store
        .append(&session, NewMessage::user("again"))
        .expect("append after revert");
    check(&store);
    assert!(
        pg_state(&mut client, &session).is_some(),
        "an append leaves the state stored"
    );
    // A fork and an import count their messages too.
    store.fork(&session, 2).expect("fork");
    store.import_session(turn(2, &mut next)).expect("import");
    assert_message_counts_true_on_postgres(&mut client);
}

/// Asserts that `appended` was refused while `id` was the session's one pending call.
fn assert_pending(appended: session_store::Result<impl std::fmt::Debug>, id: &str) {
    match refusal(appended) {
        Refusal::PendingToolUses { ids, .. } => assert_eq!(ids, vec![id.to_owned()]),
        other => panic!("expected {id} pending, got {other:?}"),
    }
}

/// SQL of other code that appends an assistant message calling `call` to session `$1`, its
/// part under the id `part` (below the store's, which count up from 1).
fn call_by_other_code(call: &str, part: i64) -> String {
    format!(
        "WITH m AS (INSERT INTO messages (session_id, seq, turn_index, role, created_at)
                    SELECT $1, MAX(seq) + 1, MAX(turn_index), 'assistant', '2026-01-01T00:00:00Z'
                    FROM messages WHERE session_id = $1 RETURNING id)
         INSERT INTO parts (id, session_id, message_id, ordinal, kind, tool_use_id, tool_name, input)
         SELECT {part}, $1, id, 0, 'tool_use', '{call}', 'bash', '{{}}' FROM m"
    )
}

/// A PostgreSQL append starts from the tail state the session row keeps and checks it against
/// the rows in its first insert: rows changed with SQL that leave the session row as the last
/// append wrote it are seen there, each by the part of the check that covers it, and the
/// append is decided on the rows.
#[test]
fn a_remembered_tail_on_postgres_is_checked_against_the_rows() {
    let Some((schema, store, mut client, session)) = pg_session() else {
        return;
    };
    let sql = |client: &mut postgres::Client, statement: &str| {
        client
            .execute(statement, &[&session.as_str()])
            .expect("the edit with SQL");
    };
    store
        .append(&session, NewMessage::user("go"))
        .expect("user");
    store
        .append(
            &session,
            NewMessage::assistant(vec![call("c1"), call("c2")]),
        )
        .expect("calls");
    store
        .append(&session, NewMessage::tool(vec![result("c1"), result("c2")]))
        .expect("results");
    // The first result deleted: the session's last seq and largest part id stay, only the
    // open block's count of parts moved.
    sql(
        &mut client,
        "DELETE FROM parts WHERE session_id = $1 AND kind = 'tool_result' AND tool_use_id = 'c1'",
    );
    assert_pending(store.append(&session, NewMessage::user("next")), "c1");
    // Each edit below follows an append whose state the next one checks: an append read from
    // the rows that holds a tool message alone does not know where its block's parts start,
    // the assistant message after it does.
    let remembered_after = |answer: &str, text: &str| {
        store
            .append(&session, NewMessage::tool(vec![result(answer)]))
            .expect("answered");
        store
            .append(&session, NewMessage::assistant(vec![Part::text(text)]))
            .expect("remembered");
    };
    remembered_after("c1", "so");
    // A message of other code after the store's last, its part under an id below the
    // largest: only the last seq moved.
    sql(&mut client, &call_by_other_code("c9", -2));
    assert_pending(store.append(&session, NewMessage::user("next")), "c9");
    remembered_after("c9", "ok");
    // A call of other code in an earlier block, under an id below the largest: nothing but
    // the call's own probe sees it.
    sql(
        &mut client,
        "INSERT INTO parts (id, session_id, message_id, ordinal, kind, tool_use_id, tool_name, input)
         SELECT -1, $1, m.id, 5, 'tool_use', 'dup', 'bash', '{}'
         FROM messages m WHERE m.session_id = $1 AND m.seq = 2",
    );
    match refusal(store.append(&session, NewMessage::assistant(vec![call("dup")]))) {
        Refusal::DuplicateToolUseId { id, .. } => assert_eq!(id, "dup"),
        other => panic!("expected dup refused, got {other:?}"),
    }
    // Another store's append: its state is checked as this store's own.
    let other = Store::open(schema.url()).expect("a second store");
    other
        .append(&session, NewMessage::assistant(vec![call("c10")]))
        .expect("the other store's call");
    assert_pending(store.append(&session, NewMessage::user("next")), "c10");
    remembered_after("c10", "fine");
    // The last message marked streaming by other code: the append settles it first.
    sql(
        &mut client,
        "UPDATE messages SET state = 'open' WHERE session_id = $1
         AND seq = (SELECT MAX(seq) FROM messages WHERE session_id = $1)",
    );
    store
        .append(&session, NewMessage::user("more"))
        .expect("after the open message");
    let open: i64 = client
        .query_one(
            "SELECT COUNT(*) FROM messages WHERE session_id = $1 AND state = 'open'",
            &[&session.as_str()],
        )
        .and_then(|row| row.try_get(0))
        .expect("open messages");
    assert_eq!(open, 0, "the open message was settled before the append");
    // A call of other code after the store's last message, then a message of more parts
    // than one statement inserts with the message: its check runs as a statement of its own.
    sql(&mut client, &call_by_other_code("c11", -3));
    let mut many = vec![Part::text("many")];
    many.extend((0..8).map(|at| call(&format!("m{at}"))));
    assert_pending(store.append(&session, NewMessage::assistant(many)), "c11");
    store
        .append(&session, NewMessage::tool(vec![result("c11")]))
        .expect("c11 answered");
    let messages = store.messages(&session).expect("messages");
    assert!(end_of(&messages).pending.is_empty(), "{messages:#?}");
}

/// Two stores on one file, and the path: each runs its writes on its one write connection,
/// whose appends remember the tails they wrote (`store/memory.rs`).
fn one_connection_and_another() -> (tempfile::TempDir, Store, Store, std::path::PathBuf) {
    let (dir, first, path) = temp_store();
    let second = Store::open(&path).expect("open again");
    (dir, first, second, path)
}

#[test]
fn an_append_after_another_connections_append_reads_the_tail_again() {
    let (_dir, first, second, _) = one_connection_and_another();
    let session = session_with(
        &first,
        vec![
            NewMessage::user("go"),
            NewMessage::assistant(vec![call("c1")]),
        ],
    );
    // The first store's connection remembers c1 pending; the second answers it.
    second
        .append_batch(
            &session,
            vec![
                NewMessage::tool(vec![result("c1")]),
                NewMessage::assistant(vec![Part::text("done")]),
            ],
        )
        .expect("answered elsewhere");
    let next = first
        .append(&session, NewMessage::user("next"))
        .expect("the first store sees the answer");
    assert_eq!(next.seq, 5);
    refusal(first.append(&session, NewMessage::tool(vec![result("c1")])));
}

#[test]
fn an_append_after_a_revert_on_the_same_connection_reads_the_tail_again() {
    let (_dir, first, _second, _) = one_connection_and_another();
    let session = first.create_session().expect("create");
    first
        .append_batch(&session, turn(1, &mut 0))
        .expect("turn 0");
    first
        .append(&session, NewMessage::user("again"))
        .expect("turn 1");
    first
        .append(&session, NewMessage::assistant(vec![call("c9")]))
        .expect("a call left pending");
    first.revert_to_turn(&session, 1).expect("revert turn 1");
    let next = first
        .append(&session, NewMessage::user("instead"))
        .expect("nothing is pending after the revert");
    assert_eq!(next.seq, 5, "after the 4 messages of turn 0");
}

#[test]
fn an_append_after_rows_deleted_with_sql_reads_the_tail_again() {
    let (_dir, first, _second, _) = one_connection_and_another();
    let session = session_with(
        &first,
        vec![
            NewMessage::user("go"),
            NewMessage::assistant(vec![call("c1")]),
        ],
    );
    Connection::open(first.path())
        .and_then(|conn| {
            conn.execute_batch("PRAGMA foreign_keys = ON; DELETE FROM messages WHERE seq = 2")
        })
        .expect("the call deleted by hand");
    let next = first
        .append(&session, NewMessage::assistant(vec![Part::text("so")]))
        .expect("no call is pending any more");
    assert_eq!(next.seq, 2);
}

/// How many rows point at a row that is not there (`PRAGMA foreign_key_check`).
fn foreign_key_violations(conn: &Connection) -> usize {
    conn.prepare("PRAGMA foreign_key_check")
        .and_then(|mut s| Ok(s.query_map([], |_| Ok(()))?.count()))
        .expect("foreign_key_check")
}

#[test]
fn an_append_to_a_session_another_connection_deleted_is_refused_and_leaves_no_row() {
    let (_dir, first, second, _) = one_connection_and_another();
    let session = first.create_session().expect("create");
    first
        .append(&session, NewMessage::user("go"))
        .expect("user");
    first
        .append(&session, NewMessage::assistant(vec![Part::text("hi")]))
        .expect("the tail is remembered now");
    second.delete_session(&session).expect("deleted elsewhere");
    match first.append(&session, NewMessage::user("again")) {
        Err(Error::UnknownSession(id)) => assert_eq!(id, session),
        other => panic!("expected UnknownSession, got {other:?}"),
    }
    let conn = raw(first.path());
    let messages: i64 = conn
        .query_row("SELECT COUNT(*) FROM messages", [], |r| r.get(0))
        .expect("count");
    assert_eq!(messages, 0);
    assert_eq!(foreign_key_violations(&conn), 0);
}

#[derive(Clone, Debug)]
enum Op {
    User,
    System,
    Assistant { calls: u8 },
    AnswerFirst,
    Text,
    Turn { calls: u8 },
    Cancel,
    Revert { turn: u8 },
    Undo,
    Compact { keep: u8 },
    Fork { turn: u8 },
    Import { calls: u8 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::User),
        1 => Just(Op::System),
        3 => (0u8..3).prop_map(|calls| Op::Assistant { calls }),
        4 => Just(Op::AnswerFirst),
        2 => Just(Op::Text),
        2 => (0u8..3).prop_map(|calls| Op::Turn { calls }),
        1 => Just(Op::Cancel),
        1 => (0u8..4).prop_map(|turn| Op::Revert { turn }),
        1 => Just(Op::Undo),
        1 => (0u8..6).prop_map(|keep| Op::Compact { keep }),
        1 => (0u8..4).prop_map(|turn| Op::Fork { turn }),
        1 => (0u8..3).prop_map(|calls| Op::Import { calls }),
    ]
}

fn turn(calls: u8, next: &mut u32) -> Vec<NewMessage> {
    let ids: Vec<String> = (0..calls)
        .map(|_| {
            *next += 1;
            format!("t{next}")
        })
        .collect();
    let mut messages = vec![NewMessage::user("do it")];
    if !ids.is_empty() {
        messages.push(NewMessage::assistant(
            ids.iter().map(|id| call(id)).collect(),
        ));
        for id in &ids {
            messages.push(NewMessage::tool(vec![result(id)]));
        }
    }
    messages.push(NewMessage::assistant(vec![Part::text("done")]));
    messages
}

/// Runs `op` on `session` through `store` (forks and imports add to `sessions`); whether it
/// appended to `session`.
fn run_op(
    store: &Store,
    session: &SessionId,
    sessions: &mut Vec<SessionId>,
    op: &Op,
    next: &mut u32,
) -> bool {
    // A write is accepted or refused by the contract; any other error is a bug here.
    let accepted = |result: session_store::Result<()>| match result {
        Ok(_) => true,
        Err(Error::Refused { .. }) => false,
        Err(other) => panic!("{op:?} failed: {other}"),
    };
    let mut fresh = || {
        *next += 1;
        format!("c{next}")
    };
    match op {
        Op::User => accepted(store.append(session, NewMessage::user("more")).map(drop)),
        Op::System => accepted(store.append(session, NewMessage::system("note")).map(drop)),
        Op::Assistant { calls } => {
            let parts = (0..*calls).map(|_| call(&fresh())).collect::<Vec<_>>();
            let parts = if parts.is_empty() {
                vec![Part::text("hm")]
            } else {
                parts
            };
            accepted(
                store
                    .append(session, NewMessage::assistant(parts))
                    .map(drop),
            )
        }
        Op::AnswerFirst => match store.pending_tool_uses(session).expect("pending").first() {
            Some(id) => accepted(
                store
                    .append(session, NewMessage::tool(vec![result(id)]))
                    .map(drop),
            ),
            None => false,
        },
        Op::Text => accepted(
            store
                .append(session, NewMessage::assistant(vec![Part::text("so")]))
                .map(drop),
        ),
        Op::Turn { calls } => accepted(store.append_batch(session, turn(*calls, next)).map(drop)),
        Op::Cancel => !store
            .cancel_pending(session, "stopped")
            .expect("cancel")
            .is_empty(),
        Op::Revert { turn } => {
            let _ = store.revert_to_turn(session, i64::from(*turn));
            false
        }
        Op::Undo => {
            let _ = store.undo_revert(session);
            false
        }
        Op::Compact { keep } => {
            let _ = store.compact(session, usize::from(*keep), "summary");
            false
        }
        Op::Fork { turn } => {
            if let Ok(forked) = store.fork(session, i64::from(*turn)) {
                sessions.push(forked.id);
            }
            false
        }
        Op::Import { calls } => {
            let id = store.import_session(turn(*calls, next)).expect("import");
            sessions.push(id);
            false
        }
    }
}

/// Runs `ops` through `first` or `second` (as each says): most on the first session, every
/// third on the newest (a fork or import). After each, `check` sees the store that ran it and
/// the session, and the first store's pending calls must be the rows'.
fn interleave(
    first: &Store,
    second: &Store,
    ops: &[(Op, bool)],
    mut check: impl FnMut(&Store, &SessionId),
) {
    let mut sessions = vec![first.create_session().expect("create")];
    let mut next = 0u32;
    for (i, (op, by_first)) in ops.iter().enumerate() {
        let session = if i % 3 == 2 {
            sessions.last()
        } else {
            sessions.first()
        }
        .expect("a session")
        .clone();
        let store = if *by_first { first } else { second };
        run_op(store, &session, &mut sessions, op, &mut next);
        check(store, &session);
        let pending: Vec<String> = end_of(&first.messages(&session).expect("messages"))
            .pending
            .into_iter()
            .map(|(_, id)| id)
            .collect();
        assert_eq!(
            first.pending_tool_uses(&session).expect("pending"),
            pending,
            "after {op:?}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn the_stored_tail_state_is_always_the_rows_state(ops in prop::collection::vec(op(), 1..30)) {
        let (_dir, store, path) = temp_store();
        let conn = raw(&path);
        let mut sessions = vec![store.create_session().expect("create")];
        let mut next = 0u32;
        for (i, op) in ops.iter().enumerate() {
            // Most ops go to the first session; every third to the newest (a fork or import).
            let session = if i % 3 == 2 { sessions.last() } else { sessions.first() }
                .expect("a session")
                .clone();
            let appended = run_op(&store, &session, &mut sessions, op, &mut next);
            assert_tail_states_true(&store, &conn);
            assert_message_counts_true(&conn);
            if let Some(state) = stored(&conn, session.as_str()) {
                let (state, _) = split_parts_through(state);
                prop_assert_eq!(state, expected_from(&store.messages(&session).expect("messages")));
            }
            if appended {
                prop_assert!(
                    stored(&conn, session.as_str()).is_some(),
                    "an append leaves the state stored"
                );
            }
        }
    }

    /// Two stores on one file (each remembering the tails its appends wrote,
    /// `store/memory.rs`): whatever either does between the first's appends, its next append
    /// sees the session as the rows have it.
    #[test]
    fn an_append_after_any_write_by_anyone_sees_the_rows(
        ops in prop::collection::vec((op(), any::<bool>()), 1..30),
    ) {
        let (dir, first, second, path) = one_connection_and_another();
        let conn = raw(&path);
        interleave(&first, &second, &ops, |store, _| {
            assert_tail_states_true(store, &conn);
            assert_message_counts_true(&conn);
        });
        // The first store's appends ran without SQLite's foreign-key checks where they took a
        // remembered tail: no row they wrote points nowhere.
        prop_assert_eq!(foreign_key_violations(&conn), 0);
        drop(dir);
    }

    /// Two stores on one PostgreSQL schema: each append starts from the state the session
    /// row keeps, whichever store wrote it, and checks it in its first insert. Whatever
    /// either does between the first's appends, the session's pending calls and its stored
    /// state are the rows'.
    #[test]
    fn an_append_after_any_write_by_anyone_sees_the_rows_on_postgres(
        ops in prop::collection::vec((op(), any::<bool>()), 1..24),
    ) {
        let Some(schema) = PgSchema::create() else {
            return Ok(());
        };
        let first = Store::open(schema.url()).expect("open");
        let second = Store::open(schema.url()).expect("open a second store");
        let mut client = schema.client();
        interleave(&first, &second, &ops, |store, session| {
            assert_message_counts_true_on_postgres(&mut client);
            assert_pg_state_true(&mut client, store, session);
        });
    }
}
