//! The end of a stored session (its pending calls) is one answer, whoever asks: the pending
//! list, the session listings (`sessions`), `cancel`, the append's check, the export's
//! tombstones and the forensic views. Other code writes rows the store never would (an id
//! repeated, emptied, NULL, in another case or with a space, a result before its call);
//! every reader still agrees with [`end_of`], this file's own reading of the contract over
//! the messages loaded plainly, which shares nothing with the store's walk or its queries.

use std::path::Path;

use proptest::prelude::*;
use serde_json::json;
use session_store::{ExportOptions, Message, NewMessage, Part, Provider, Role, SessionId, Store};

use session_store::request::RepairKind;

use crate::backends::{backends, Backend, Place};
use crate::util::session_store;
use crate::util::temp_store;

/// The end of a session as this test reads the contract: the last user or assistant message
/// is the speaker; when it is an assistant message, each of its calls with a non-empty id
/// is one slot, and each result with a non-empty id in a tool message after it takes the
/// first slot still open whose id is the same bytes. Open slots are pending; calls without
/// an id can never be answered, so are never pending.
pub struct End<'a> {
    /// Where the speaker stands in the messages.
    pub speaker: Option<usize>,
    /// The speaker message.
    pub message: Option<&'a Message>,
    /// The pending calls: (ordinal, id), in part order.
    pub pending: Vec<(usize, String)>,
    /// The ids of the speaker's calls that a result took, sorted, once each.
    pub answered: Vec<String>,
    /// The ordinals of the speaker's calls without an id.
    pub idless: Vec<usize>,
}

impl End<'_> {
    /// The pending ids, in part order.
    pub fn pending_ids(&self) -> Vec<String> {
        self.pending.iter().map(|(_, id)| id.clone()).collect()
    }
}

/// [`End`] of `messages` (in seq order).
pub fn end_of(messages: &[Message]) -> End<'_> {
    let speaker = messages
        .iter()
        .rposition(|m| matches!(m.role, Role::User | Role::Assistant));
    let mut end = End {
        speaker,
        message: speaker.map(|at| &messages[at]),
        pending: Vec::new(),
        answered: Vec::new(),
        idless: Vec::new(),
    };
    let Some(at) = speaker.filter(|&at| messages[at].role == Role::Assistant) else {
        return end;
    };
    // (ordinal, id, taken)
    let mut slots: Vec<(usize, &str, bool)> = Vec::new();
    for (ordinal, part) in messages[at].parts.iter().enumerate() {
        if let Part::ToolUse { id, .. } = part {
            if id.is_empty() {
                end.idless.push(ordinal);
            } else {
                slots.push((ordinal, id, false));
            }
        }
    }
    for message in messages[at + 1..].iter().filter(|m| m.role == Role::Tool) {
        for part in &message.parts {
            let Part::ToolResult { tool_use_id, .. } = part else {
                continue;
            };
            if tool_use_id.is_empty() {
                continue;
            }
            if let Some(slot) = slots
                .iter_mut()
                .find(|(_, id, taken)| !taken && id == tool_use_id)
            {
                slot.2 = true;
            }
        }
    }
    for (ordinal, id, taken) in slots {
        if taken {
            end.answered.push(id.to_owned());
        } else {
            end.pending.push((ordinal, id.to_owned()));
        }
    }
    end.answered.sort();
    end.answered.dedup();
    end
}

/// The first column of every row of a raw query, as text, on `b`'s engine.
fn texts(b: &Backend, sql: &str) -> Vec<String> {
    match &b.place {
        Place::Sqlite { path, .. } => {
            let conn = rusqlite::Connection::open(path).expect("open raw");
            let mut stmt = conn.prepare(sql).expect("prepare");
            let rows = stmt
                .query_map([], |r| r.get::<_, Option<String>>(0))
                .expect("query")
                .collect::<rusqlite::Result<Vec<_>>>()
                .expect("rows");
            rows.into_iter().map(Option::unwrap_or_default).collect()
        }
        Place::Postgres(schema) => schema
            .client()
            .query(sql, &[])
            .expect("query")
            .iter()
            .map(|r| r.get::<_, Option<String>>(0).unwrap_or_default())
            .collect(),
    }
}

/// `text` as an SQL literal; `None` is NULL.
fn literal(text: Option<&str>) -> String {
    text.map_or("NULL".to_owned(), |t| {
        format!("'{}'", t.replace('\'', "''"))
    })
}

/// The ids the export answers with a tombstone in the speaker's block, sorted: a call the
/// provider must see answered, so a pending one, or one without an id.
fn exported_tombstones(store: &Store, session: &SessionId, speaker_seq: i64) -> Vec<String> {
    let request = store
        .export_request(
            session,
            Provider::Anthropic,
            session_store::clock(),
            &ExportOptions {
                persist_latch: false,
                ..ExportOptions::default()
            },
        )
        .expect("export");
    let mut ids: Vec<String> = request
        .view
        .repairs
        .iter()
        .filter(|r| r.kind == RepairKind::Tombstone && r.seq == speaker_seq)
        .map(|r| {
            // "tool_use \"id\" has no result: ..."
            let quoted = r
                .detail
                .strip_prefix("tool_use ")
                .and_then(|rest| rest.split(" has no result").next())
                .unwrap_or_else(|| panic!("tombstone detail {:?}", r.detail));
            serde_json::from_str::<String>(quoted).expect("a quoted id")
        })
        .collect();
    ids.sort();
    ids
}

/// Every reader of `session` on `b` says what [`end_of`] says is pending; returns it.
fn assert_readers_agree(b: &Backend, session: &SessionId) -> Vec<String> {
    let store = &b.store;
    let messages = store.messages(session).expect("messages");
    let end = end_of(&messages);
    let expected = end.pending_ids();
    let context = format!("on {}: {messages:#?}", b.name);
    assert_eq!(
        store.pending_tool_uses(session).expect("pending"),
        expected,
        "pending_tool_uses {context}"
    );
    let listed = store
        .session_overviews()
        .expect("overviews")
        .into_iter()
        .find(|o| &o.id == session)
        .expect("listed");
    assert_eq!(listed.pending, expected, "session_overviews {context}");
    let one = store
        .session_overview(session)
        .expect("overview")
        .expect("found");
    assert_eq!(one.pending, expected, "session_overview {context}");
    let sid = literal(Some(session.as_str()));
    let viewed = texts(
        b,
        &format!(
            "SELECT COALESCE(tool_use_id, '') FROM tool_calls
             WHERE session_id = {sid} AND pending ORDER BY seq, part"
        ),
    );
    assert_eq!(viewed, expected, "the tool_calls view {context}");
    let counted = texts(
        b,
        &format!(
            "SELECT CAST(COALESCE(SUM(pending_calls), 0) AS TEXT) FROM session_turns
             WHERE session_id = {sid}"
        ),
    );
    assert_eq!(
        counted,
        [expected.len().to_string()],
        "the session_turns view {context}"
    );
    if let Some(message) = end.message {
        let mut tombstoned = expected.clone();
        tombstoned.extend(end.idless.iter().map(|_| String::new()));
        tombstoned.sort();
        assert_eq!(
            exported_tombstones(store, session, message.seq),
            tombstoned,
            "export {context}"
        );
    }
    expected
}

/// `cancel_pending` answers exactly what every reader says is pending, and then nothing is.
fn assert_cancel_answers_the_pending(b: &Backend, session: &SessionId) {
    let pending = assert_readers_agree(b, session);
    let answered = b.store.cancel_pending(session, "stopped").expect("cancel");
    assert_eq!(answered, pending, "cancel on {}", b.name);
    assert_eq!(assert_readers_agree(b, session), Vec::<String>::new());
}

fn call(id: &str) -> Part {
    Part::tool_use(id, "bash", json!({"cmd": "ls"}))
}

fn result(id: &str) -> Part {
    Part::tool_result(id, "ok")
}

/// Sets the id of the session's tool part (call or result) that holds `from` (the first
/// such part, by part id) to `to`, as other code would.
fn set_id(b: &Backend, session: &SessionId, from: &str, to: Option<&str>) {
    other_code_changes(
        b,
        session,
        &format!(
            "UPDATE parts SET tool_use_id = {to} WHERE id = (
             SELECT p.id FROM parts p JOIN messages m ON m.id = p.message_id
             WHERE m.session_id = {sid} AND p.tool_use_id = {from} ORDER BY p.id LIMIT 1)",
            to = literal(to),
            sid = literal(Some(session.as_str())),
            from = literal(Some(from)),
        ),
    );
}

/// Runs `sql`, an update or delete of `session`'s rows, as other code does it on each
/// engine: on SQLite its triggers clear the session's tail state; PostgreSQL has none
/// (`migrations-postgres/V18`, shardable by session), so other code clears it in the same
/// transaction, as the store's own statements do (`docs/CONTRACT.md`).
fn other_code_changes(b: &Backend, session: &SessionId, sql: &str) {
    if b.name == "postgres" {
        b.exec(&format!(
            "BEGIN; {sql}; UPDATE sessions SET tail_state = NULL WHERE id = {}; COMMIT;",
            literal(Some(session.as_str()))
        ));
    } else {
        b.exec(sql);
    }
}

/// Reproduction (a): calls `a` and `b`, the answer to `a`, then another writer sets `b`'s
/// id to `a`. The second `a` has no answer and is pending for every reader; `cancel` answers
/// it; the next user message is then accepted. Cases: the answer in a tool message, with a
/// system message after it, and a third call renamed instead (the Anthropic body with the
/// answer in a user message: through the command line, below).
#[test]
fn a_call_renamed_to_an_answered_id_stays_pending_for_every_reader() {
    let bodies: Vec<(Vec<NewMessage>, &str)> = vec![
        (
            vec![
                NewMessage::user("go"),
                NewMessage::assistant(vec![call("a"), call("b")]),
                NewMessage::tool(vec![result("a")]),
                NewMessage::system("a note after the results"),
            ],
            "b",
        ),
        (
            vec![
                NewMessage::user("go"),
                NewMessage::assistant(vec![call("a"), call("b")]),
                NewMessage::tool(vec![result("a")]),
            ],
            "b",
        ),
        (
            vec![
                NewMessage::user("go"),
                NewMessage::assistant(vec![call("a"), call("b"), call("c")]),
                NewMessage::tool(vec![result("a"), result("b")]),
            ],
            "c",
        ),
    ];
    for b in backends() {
        for (body, renamed) in &bodies {
            let session = b.store.import_session(body.clone()).expect("import");
            set_id(&b, &session, renamed, Some("a"));
            assert_eq!(assert_readers_agree(&b, &session), ["a"], "on {}", b.name);
            assert_cancel_answers_the_pending(&b, &session);
            b.store
                .append(&session, NewMessage::user("next"))
                .expect("a user message after the cancel");
        }
    }
}

/// Reproduction (b): the session ends in calls `a` and `b`, then another writer empties
/// `b`'s id (or sets it NULL). Only `a` is pending (a call without an id can never be
/// answered; the check names it `dangling_tool_use`); `cancel` answers `a` and succeeds.
#[test]
fn a_call_whose_id_is_emptied_is_not_pending_and_cancel_answers_the_rest() {
    for b in backends() {
        for (calls, emptied, to) in [
            (vec!["a", "b"], "b", Some("")),
            (vec!["a", "b"], "b", None),
            (vec!["a", "b", "c"], "b", Some("")),
            (vec!["a", "b"], "a", Some("")),
        ] {
            let session = b
                .store
                .import_session(vec![
                    NewMessage::user("go"),
                    NewMessage::assistant(calls.iter().map(|id| call(id)).collect()),
                ])
                .expect("import");
            set_id(&b, &session, emptied, to);
            let expected: Vec<&str> = calls.iter().copied().filter(|id| *id != emptied).collect();
            assert_eq!(
                assert_readers_agree(&b, &session),
                expected,
                "on {}",
                b.name
            );
            assert_cancel_answers_the_pending(&b, &session);
            b.store
                .append(&session, NewMessage::user("next"))
                .expect("a user message after the cancel");
        }
    }
}

/// The `sessions --json` entry of `session`: its pending count and ids.
fn listed_pending(db: &Path, session: &str) -> (u64, Vec<String>) {
    let output = session_store(db, &["sessions", "--json"]);
    assert!(output.status.success(), "{output:?}");
    let list: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let entry = list
        .as_array()
        .and_then(|all| all.iter().find(|s| s["id"] == session))
        .unwrap_or_else(|| panic!("{session} in {list}"));
    (
        entry["pending"].as_u64().expect("a count"),
        serde_json::from_value(entry["pending_tool_use_ids"].clone()).expect("ids"),
    )
}

/// Both reproductions through the command line, as the issue ran them: an Anthropic body
/// imported, a writer's UPDATE, then `sessions --json` and `cancel` (exit 0, the pending id
/// printed), and nothing pending after.
#[test]
fn the_command_line_lists_and_cancels_what_the_walk_says_is_pending() {
    let use_ = |id: &str| json!({"type": "tool_use", "id": id, "name": "bash", "input": {}});
    let cases = [
        (
            json!({"messages": [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [use_("a"), use_("b")]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "ok"}]}
            ]}),
            "UPDATE parts SET tool_use_id = 'a' WHERE tool_use_id = 'b'",
        ),
        (
            json!({"messages": [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [use_("a"), use_("b")]}
            ]}),
            "UPDATE parts SET tool_use_id = '' WHERE tool_use_id = 'b'",
        ),
    ];
    for (body, update) in cases {
        let (dir, _store, db) = temp_store();
        let file = dir.path().join("body.json");
        std::fs::write(&file, body.to_string()).expect("write body");
        let output = session_store(
            &db,
            &[
                "import",
                "--format",
                "anthropic",
                file.to_str().expect("utf-8"),
            ],
        );
        assert!(output.status.success(), "{output:?}");
        let id = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        rusqlite::Connection::open(&db)
            .and_then(|c| c.execute_batch(update))
            .expect("the other writer");
        assert_eq!(
            listed_pending(&db, &id),
            (1, vec!["a".to_owned()]),
            "{update}"
        );
        let output = session_store(&db, &["cancel", &id]);
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        assert_eq!(String::from_utf8_lossy(&output.stdout), "a\n");
        assert_eq!(listed_pending(&db, &id), (0, vec![]));
    }
}

/// An id as other code may write it: one of a few (so they repeat, and results come before
/// calls), a case or space variant, empty, or NULL.
fn foreign_id() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        4 => prop::sample::select(vec!["a", "b", "c"]).prop_map(|id| Some(id.to_owned())),
        1 => Just(Some("A".to_owned())),
        1 => Just(Some(" a".to_owned())),
        1 => Just(Some("a ".to_owned())),
        1 => Just(Some(String::new())),
        1 => Just(None),
    ]
}

#[derive(Clone, Debug)]
enum Step {
    /// The store appends a user message.
    User,
    /// The store appends an assistant message with this many fresh calls (or a text).
    Calls(u8),
    /// The store answers the first pending call.
    AnswerFirst,
    /// The store is asked to append a result for this id (it may refuse).
    Answer(String),
    /// The store cancels what is pending.
    Cancel,
    /// Another writer sets the id of the session's n-th tool part (call or result).
    SetId(usize, Option<String>),
    /// Another writer appends a message of this role whose parts use these ids (calls in an
    /// assistant message, results in a tool or user message, a text in a system message).
    Insert(Role, Vec<Option<String>>),
    /// Another writer adds a call or a result with this id to the last message.
    AddPart(bool, Option<String>),
    /// Another writer deletes the session's n-th tool part.
    Delete(usize),
}

fn step() -> impl Strategy<Value = Step> {
    let role = prop::sample::select(vec![Role::User, Role::Assistant, Role::Tool, Role::System]);
    prop_oneof![
        2 => Just(Step::User),
        3 => (0u8..4).prop_map(Step::Calls),
        3 => Just(Step::AnswerFirst),
        1 => prop::sample::select(vec!["a", "b", "t1", "t2"]).prop_map(|id| Step::Answer(id.to_owned())),
        1 => Just(Step::Cancel),
        3 => (0usize..8, foreign_id()).prop_map(|(n, id)| Step::SetId(n, id)),
        3 => (role, prop::collection::vec(foreign_id(), 1..4)).prop_map(|(r, ids)| Step::Insert(r, ids)),
        2 => (any::<bool>(), foreign_id()).prop_map(|(c, id)| Step::AddPart(c, id)),
        1 => (0usize..8).prop_map(Step::Delete),
    ]
}

/// The n-th tool part of the session (modulo their count), by part id, as a subquery.
fn nth_tool_part(b: &Backend, session: &SessionId, n: usize) -> Option<String> {
    let sid = literal(Some(session.as_str()));
    let from = format!(
        "FROM parts p JOIN messages m ON m.id = p.message_id
         WHERE m.session_id = {sid} AND p.kind IN ('tool_use', 'tool_result')"
    );
    let count = b.count(&format!("SELECT COUNT(*) {from}"));
    let count = usize::try_from(count).expect("a count");
    (count > 0).then(|| {
        format!(
            "(SELECT p.id {from} ORDER BY p.id LIMIT 1 OFFSET {})",
            n % count
        )
    })
}

/// A part row's values after `message_id, ordinal`: a call or a result with `id`.
fn part_values(is_call: bool, id: Option<&str>) -> String {
    if is_call {
        format!("'tool_use', NULL, {}, 'bash', '{{}}'", literal(id))
    } else {
        format!("'tool_result', 'ok', {}, NULL, NULL", literal(id))
    }
}

/// Runs one step; `fresh` numbers the store's own call ids.
fn run(b: &Backend, session: &SessionId, step: &Step, fresh: &mut u32) {
    let store = &b.store;
    let sid = literal(Some(session.as_str()));
    let last_message =
        format!("(SELECT id FROM messages WHERE session_id = {sid} ORDER BY seq DESC LIMIT 1)");
    // On PostgreSQL every part names its session (V18), as other code writes it there.
    let (session_column, session_value) = if b.name == "postgres" {
        ("session_id, ", format!("{sid}, "))
    } else {
        ("", String::new())
    };
    match step {
        Step::User => {
            let _ = store.append(session, NewMessage::user("more"));
        }
        Step::Calls(n) => {
            let mut parts: Vec<Part> = (0..*n)
                .map(|_| {
                    *fresh += 1;
                    call(&format!("t{fresh}"))
                })
                .collect();
            if parts.is_empty() {
                parts.push(Part::text("thinking aloud"));
            }
            let _ = store.append(session, NewMessage::assistant(parts));
        }
        Step::AnswerFirst => {
            if let Some(id) = store.pending_tool_uses(session).expect("pending").first() {
                store
                    .append(session, NewMessage::tool(vec![result(id)]))
                    .expect("the answer to a pending call is accepted");
            }
        }
        Step::Answer(id) => {
            let _ = store.append(session, NewMessage::tool(vec![result(id)]));
        }
        Step::Cancel => assert_cancel_answers_the_pending(b, session),
        Step::SetId(n, id) => {
            if let Some(part) = nth_tool_part(b, session, *n) {
                other_code_changes(
                    b,
                    session,
                    &format!(
                        "UPDATE parts SET tool_use_id = {} WHERE id = {part}",
                        literal(id.as_deref())
                    ),
                );
            }
        }
        Step::Insert(role, ids) => {
            b.exec(&format!(
                "INSERT INTO messages (session_id, seq, turn_index, role, created_at)
                 SELECT {sid}, COALESCE(MAX(seq), 0) + 1, COALESCE(MAX(turn_index), 0), '{}',
                        '2026-01-01T00:00:00Z'
                 FROM messages WHERE session_id = {sid}",
                role.as_str()
            ));
            for (ordinal, id) in ids.iter().enumerate() {
                let values = match role {
                    Role::System => "'text', 'note', NULL, NULL, NULL".to_owned(),
                    _ => part_values(*role == Role::Assistant, id.as_deref()),
                };
                b.exec(&format!(
                    "INSERT INTO parts ({session_column}message_id, ordinal, kind, text, tool_use_id, tool_name, input)
                     VALUES ({session_value}{last_message}, {ordinal}, {values})"
                ));
            }
        }
        Step::AddPart(is_call, id) => {
            if b.count(&format!(
                "SELECT COUNT(*) FROM messages WHERE session_id = {sid}"
            )) > 0
            {
                b.exec(&format!(
                    "INSERT INTO parts ({session_column}message_id, ordinal, kind, text, tool_use_id, tool_name, input)
                     SELECT {session_value}{last_message}, COALESCE(MAX(ordinal), -1) + 1, {}
                     FROM parts WHERE message_id = {last_message}",
                    part_values(*is_call, id.as_deref())
                ));
            }
        }
        Step::Delete(n) => {
            if let Some(part) = nth_tool_part(b, session, *n) {
                other_code_changes(b, session, &format!("DELETE FROM parts WHERE id = {part}"));
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random sessions, then random edits by another writer, then every reader (and the
    /// forensic views, and the export) agree with [`end_of`] on what is pending, on every
    /// backend; `cancel` answers exactly that, and after it nothing is pending.
    #[test]
    fn every_reader_agrees_on_the_pending_calls_whatever_another_writer_did(
        steps in prop::collection::vec(step(), 1..20)
    ) {
        for b in backends() {
            let session = SessionId::from("s");
            b.store.create_session_with_id(&session).expect("create");
            let mut fresh = 0;
            for step in &steps {
                run(&b, &session, step, &mut fresh);
                assert_readers_agree(&b, &session);
            }
            assert_cancel_answers_the_pending(&b, &session);
        }
    }
}
