//! Every statement a per-session operation runs on PostgreSQL names its session, so a
//! distributed engine that shards by session (Citus, `migrations-postgres/V18`) routes it to
//! that session's shard: each table of session data a statement reads or writes is keyed by
//! `session_id = $n` (`sessions` by `id = $n`), directly or joined on `session_id` to a table
//! that is, one session per statement (a fork reads its source and writes the fork in
//! statements of their own), and a row inserted names its session. The statements are the
//! server's own record of what ran (`pg_stat_statements`, [`crate::counted`]), the bodies of
//! the store's PL/pgSQL functions included. Skipped, with a note, without
//! `SESSION_STORE_TEST_PG`.
//!
//! What fans out by design (lineage: a deleted session's children lose their parent; listing,
//! search, prune) is named in [`FANS_OUT`] with the reason, and docs/CONTRACT.md says the same.

use std::collections::BTreeSet;
use std::io::Cursor;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use serde_json::json;
use session_store::import::Format;
use session_store::repair::RepairOptions;
use session_store::{
    ExportOptions, NewMessage, Part, Provider, Role, SearchOptions, SessionId, Store,
    TranscriptFormat, Usage,
};

use crate::counted::{Counted, COUNTED};
use crate::util::session_with;

// Every table of session data.
use crate::shardable::TABLES as SESSION_TABLES;

/// Statements that read or write more than one session's shard on purpose, each with why
/// (matched by a fragment of their text).
const FANS_OUT: &[(&str, &str)] = &[
    (
        "where parent_id = $1 and id <> $1",
        "deleting a session unlinks its children (lineage), which live on their own shards",
    ),
    (
        "from sessions where parent_id = $1 and parent_tool_use_id = $2",
        "lineage: whether another sub-agent is linked to the call (its children's rows)",
    ),
    (
        "from sessions where source_thread_id = $1",
        "lineage: an imported sub-agent's parent, found by its thread id",
    ),
    (
        "where source_parent_thread_id = $1",
        "lineage: an imported parent's sub-agents, found by their parent's thread id",
    ),
    (
        "where parent_id = $1 and (parent_tool_use_id is not null",
        "lineage: a parent's sub-agents (`Store::subagents`), each on its own shard",
    ),
];

/// Words that end a table reference instead of naming its alias.
const KEYWORDS: &[&str] = &[
    "where",
    "set",
    "on",
    "join",
    "left",
    "right",
    "inner",
    "outer",
    "full",
    "cross",
    "natural",
    "order",
    "group",
    "limit",
    "returning",
    "values",
    "select",
    "using",
    "for",
    "union",
    "except",
    "intersect",
    "having",
    "offset",
    "window",
    "default",
    "and",
    "or",
    "then",
    "when",
    "into",
    "from",
    "lateral",
    "with",
    "as",
    "do",
    "conflict",
    "overriding",
];

/// The tokens of a statement, lower-cased: words, placeholders (`$3`), numbers and single
/// punctuation; string literals and comments left out.
fn tokens(statement: &str) -> Vec<String> {
    let text = statement.to_lowercase();
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut at = 0;
    while at < chars.len() {
        let c = chars[at];
        let word = |at: usize| {
            let mut end = at;
            while end < chars.len() && (chars[end].is_ascii_alphanumeric() || chars[end] == '_') {
                end += 1;
            }
            end
        };
        if c == '\'' {
            at += 1;
            while at < chars.len() && chars[at] != '\'' {
                at += 1;
            }
            at += 1;
        } else if c == '-' && chars.get(at + 1) == Some(&'-') {
            while at < chars.len() && chars[at] != '\n' {
                at += 1;
            }
        } else if c == '$' && chars.get(at + 1).is_some_and(char::is_ascii_digit) {
            let end = word(at + 1);
            out.push(chars[at..end].iter().collect());
            at = end;
        } else if c.is_ascii_alphanumeric() || c == '_' {
            let end = word(at);
            out.push(chars[at..end].iter().collect());
            at = end;
        } else {
            if !c.is_whitespace() {
                out.push(c.to_string());
            }
            at += 1;
        }
    }
    out
}

/// One table of session data a statement reads or writes.
#[derive(Debug)]
struct Reference {
    table: String,
    /// The alias, or the table's name when it has none.
    name: String,
    aliased: bool,
    /// Where an `INSERT`'s column list names the session column, its position.
    inserted_session: Option<Option<usize>>,
    /// Where in the statement's tokens the reference stands (an `INSERT`'s select list
    /// follows it).
    at: usize,
    keyed: bool,
}

impl Reference {
    /// The column that names the session: `sessions.id`, elsewhere `session_id`.
    fn column(&self) -> &'static str {
        if self.table == "sessions" {
            "id"
        } else {
            "session_id"
        }
    }
}

/// The tables of session data `tokens` reference.
fn references(tokens: &[String]) -> Vec<Reference> {
    let mut found = Vec::new();
    for at in 0..tokens.len().saturating_sub(1) {
        let before = tokens[at].as_str();
        let table = tokens[at + 1].as_str();
        if !["from", "join", "update", "into", "using"].contains(&before)
            || !SESSION_TABLES.contains(&table)
            || tokens.get(at + 2).is_some_and(|t| t == ".")
        {
            continue;
        }
        let mut next = at + 2;
        if tokens.get(next).is_some_and(|t| t == "as") {
            next += 1;
        }
        let alias = tokens
            .get(next)
            .filter(|t| is_word(t) && !KEYWORDS.contains(&t.as_str()));
        let inserted_session = (before == "into").then(|| {
            let column = if table == "sessions" {
                "id"
            } else {
                "session_id"
            };
            insert_columns(&tokens[at + 2..])
                .iter()
                .position(|c| c == column)
        });
        found.push(Reference {
            table: table.to_owned(),
            name: alias.cloned().unwrap_or_else(|| table.to_owned()),
            aliased: alias.is_some(),
            inserted_session,
            at,
            keyed: false,
        });
    }
    found
}

fn is_word(token: &str) -> bool {
    token
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
}

/// The column list of an `INSERT INTO table (a, b, ...)`, from the tokens after the table.
fn insert_columns(after_table: &[String]) -> Vec<String> {
    if after_table.first().is_none_or(|t| t != "(") {
        return Vec::new();
    }
    after_table[1..]
        .iter()
        .take_while(|t| *t != ")")
        .filter(|t| *t != ",")
        .cloned()
        .collect()
}

/// `q.column = value`, `column = value` or the other way round, found in a statement.
#[derive(Debug)]
struct Equality {
    qualifier: Option<String>,
    column: String,
    other: Operand,
}

#[derive(Debug, PartialEq)]
enum Operand {
    /// A placeholder, or an argument of the function whose body the statement is.
    Parameter(String),
    /// Another table's column: `q.column`.
    Column(String, String),
    Other,
}

/// The operand at `at`: the column it names, a parameter, or something else; with its length.
fn operand(tokens: &[String], at: usize, parameters: &[String]) -> (Option<String>, String, usize) {
    let token = tokens.get(at).cloned().unwrap_or_default();
    if tokens.get(at + 1).is_some_and(|t| t == ".") {
        let column = tokens.get(at + 2).cloned().unwrap_or_default();
        return (Some(token), column, 3);
    }
    let preceded_by_dot = at > 0 && tokens[at - 1] == ".";
    if parameters.contains(&token) && !preceded_by_dot {
        return (None, format!("${token}"), 1);
    }
    (None, token, 1)
}

/// Every `a = b` of the statement with a column on at least one side.
fn equalities(tokens: &[String], parameters: &[String]) -> Vec<Equality> {
    let mut found = Vec::new();
    for at in 1..tokens.len().saturating_sub(1) {
        if tokens[at] != "=" || tokens[at - 1] == "<" || tokens[at - 1] == ">" {
            continue;
        }
        // The left side: `q . c` or `c`.
        let left_start = if at >= 3 && tokens[at - 2] == "." {
            at - 3
        } else {
            at - 1
        };
        let left = operand(tokens, left_start, parameters);
        let right = operand(tokens, at + 1, parameters);
        for (side, other) in [(&left, &right), (&right, &left)] {
            let (qualifier, column, _) = side;
            if column.starts_with('$') || !is_word(column) {
                continue;
            }
            let other = match other {
                (None, value, _) if value.starts_with('$') => {
                    Operand::Parameter(value.trim_start_matches('$').to_owned())
                }
                (Some(q), column, _) => Operand::Column(q.clone(), column.clone()),
                _ => Operand::Other,
            };
            found.push(Equality {
                qualifier: qualifier.clone(),
                column: column.clone(),
                other,
            });
        }
    }
    found
}

/// Why `statement` is not routed to one session's shard, or `None` when it is (or touches no
/// session data). `parameters` are the names that stand for bound values besides `$n` (a
/// function's arguments, in its body).
fn unroutable(statement: &str, parameters: &[String]) -> Option<String> {
    let tokens = tokens(statement);
    let mut refs = references(&tokens);
    if refs.is_empty() {
        return None;
    }
    let equalities = equalities(&tokens, parameters);
    let mut sessions_named = BTreeSet::new();
    // Direct keys: `q.session_id = $n`; an unqualified one keys one unaliased reference.
    let mut unqualified: Vec<&Equality> = Vec::new();
    for equality in &equalities {
        let Operand::Parameter(p) = &equality.other else {
            continue;
        };
        match &equality.qualifier {
            Some(q) => {
                for r in refs.iter_mut().filter(|r| &r.name == q) {
                    if equality.column == r.column() {
                        r.keyed = true;
                        sessions_named.insert(p.clone());
                    }
                }
            }
            None => unqualified.push(equality),
        }
    }
    for equality in unqualified {
        if let Some(r) = refs.iter_mut().find(|r| {
            !r.keyed && !r.aliased && r.inserted_session.is_none() && equality.column == r.column()
        }) {
            r.keyed = true;
            if let Operand::Parameter(p) = &equality.other {
                sessions_named.insert(p.clone());
            }
        }
    }
    // An inserted row names its session in its column list.
    for r in refs.iter_mut() {
        if let Some(Some(position)) = r.inserted_session {
            r.keyed = true;
            if let Some(p) = selected_parameter(&tokens[r.at..], position) {
                sessions_named.insert(p);
            }
        }
    }
    // Joins on the session's column carry a key from one table to the other.
    loop {
        let mut changed = false;
        for equality in &equalities {
            let (Some(q), Operand::Column(oq, oc)) = (&equality.qualifier, &equality.other) else {
                continue;
            };
            let keyed = |name: &str, column: &str| {
                refs.iter()
                    .any(|r| r.name == name && r.keyed && r.column() == column)
            };
            if keyed(oq, oc) {
                for r in refs.iter_mut() {
                    if &r.name == q && !r.keyed && r.column() == equality.column {
                        r.keyed = true;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    let loose: Vec<String> = refs
        .iter()
        .filter(|r| !r.keyed)
        .map(|r| format!("{} {}", r.table, r.name))
        .collect();
    if !loose.is_empty() {
        return Some(format!("not keyed by its session: {}", loose.join(", ")));
    }
    if sessions_named.len() > 1 {
        return Some(format!(
            "names {} sessions: {sessions_named:?}",
            sessions_named.len()
        ));
    }
    None
}

/// Where an `INSERT ... SELECT` writes the session column from a parameter (`SELECT $2, ...`),
/// that parameter: the `position`th item of the first select list in `tokens` (which start
/// at the `INSERT`'s table).
fn selected_parameter(tokens: &[String], position: usize) -> Option<String> {
    let select = tokens.iter().position(|t| t == "select")?;
    let mut depth = 0usize;
    let mut item = 0;
    let mut first_of_item = None;
    for token in &tokens[select + 1..] {
        match token.as_str() {
            "(" => depth += 1,
            ")" if depth == 0 => break,
            ")" => depth -= 1,
            "," if depth == 0 => {
                item += 1;
                continue;
            }
            "from" if depth == 0 => break,
            _ => {}
        }
        if item == position && first_of_item.is_none() {
            first_of_item = Some(token.clone());
        }
    }
    first_of_item
        .filter(|t| t.starts_with('$'))
        .map(|t| t.trim_start_matches('$').to_owned())
}

/// The bodies of the store's own functions (PL/pgSQL or SQL) that `statement` calls (every
/// one with `None`), with each function's argument names.
fn called_functions(counted: &mut Counted, statement: Option<&str>) -> Vec<(String, Vec<String>)> {
    let text = statement.map(str::to_lowercase);
    counted
        .client
        .query(
            "SELECT proname::TEXT, prosrc, coalesce(proargnames, '{}')::TEXT[] FROM pg_proc
             WHERE pronamespace = (SELECT oid FROM pg_namespace WHERE nspname = $1)",
            &[&counted.schema],
        )
        .expect("the schema's functions")
        .into_iter()
        .filter(|row| {
            text.as_ref()
                .is_none_or(|text| text.contains(&format!("{}(", row.get::<_, String>(0))))
        })
        .map(|row| (row.get(1), row.get(2)))
        .collect()
}

/// What fails the rule among the statements `work` ran: one line each.
pub fn check(counted: &mut Counted, operation: &str, work: impl FnOnce()) -> Vec<String> {
    let ran = counted.count(work);
    assert!(!ran.is_empty(), "{operation} ran no statement");
    let mut wrong = Vec::new();
    for (statement, _) in ran {
        let lower = statement.to_lowercase();
        if FANS_OUT
            .iter()
            .any(|(fragment, _)| lower.contains(fragment))
        {
            continue;
        }
        for (body, arguments) in called_functions(counted, Some(&statement)) {
            for inner in body.split(';') {
                if let Some(why) = unroutable(inner, &arguments) {
                    wrong.push(format!(
                        "{operation}: (in a function) {why}: {}",
                        inner.trim()
                    ));
                }
            }
        }
        // A statement of a function's body (`pg_stat_statements.track = all`) names its
        // values by the function's arguments.
        let arguments: Vec<String> = called_functions(counted, None)
            .into_iter()
            .flat_map(|(_, arguments)| arguments)
            .collect();
        if let Some(why) = unroutable(&statement, &arguments) {
            wrong.push(format!("{operation}: {why}: {statement}"));
        }
    }
    wrong
}

fn assistant_calling(call: &str) -> NewMessage {
    NewMessage::new(
        Role::Assistant,
        vec![
            Part::text("Let me look."),
            Part::tool_use(call, "bash", json!({"cmd": "ls"})),
        ],
    )
    .with_usage(Usage::new(10, 5).model("m"))
}

/// A session of `turns` complete turns, each a question, a call, its result and an answer.
fn grown(store: &Store, turns: usize) -> SessionId {
    let session = store.create_session().expect("session");
    for turn in 0..turns {
        let call = format!("call_{turn}");
        store
            .append_batch(
                &session,
                vec![
                    NewMessage::user(format!("question {turn}")),
                    assistant_calling(&call),
                    NewMessage::tool(vec![Part::tool_result(&call, "out")]),
                    NewMessage::assistant(vec![Part::text("done")]),
                ],
            )
            .expect("a turn");
    }
    session
}

/// The small import inputs, one per request-body format.
fn bodies() -> Vec<(Format, String)> {
    vec![
        (
            Format::Anthropic,
            json!({"system": "Be brief.", "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a b"}]},
            ]})
            .to_string(),
        ),
        (
            Format::OpenAi,
            json!({"messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello"},
            ]})
            .to_string(),
        ),
        (
            Format::Responses,
            json!({"instructions": "Be brief.", "input": [
                {"role": "user", "content": "hi"},
            ]})
            .to_string(),
        ),
        (
            Format::Gemini,
            json!({"contents": [
                {"role": "user", "parts": [{"text": "hi"}]},
                {"role": "model", "parts": [{"text": "hello"}]},
            ]})
            .to_string(),
        ),
    ]
}

fn fixture(path: &str) -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .expect("fixture")
}

/// A session broken by hand (as other code could write it) before any statement is
/// counted, so a mend rewrites parts and moves messages: a call answered twice under one id,
/// a result no call asks for, a call left unanswered before the next user message.
fn broken(store: &Store, counted: &mut Counted) -> SessionId {
    let session = session_with(
        store,
        vec![
            NewMessage::user("go"),
            NewMessage::assistant(vec![Part::text("ok")]),
        ],
    );
    let schema = counted.schema.clone();
    let id = session.as_str();
    // (seq, turn, role, kind, tool_use_id)
    let rows = [
        (10, 0, "assistant", "tool_use", "call_dup"),
        (11, 0, "tool", "tool_result", "call_dup"),
        (12, 0, "assistant", "tool_use", "call_dup"),
        (13, 0, "tool", "tool_result", "call_dup"),
        (14, 0, "tool", "tool_result", "call_ghost"),
        (15, 0, "assistant", "tool_use", "call_mid"),
        (16, 1, "user", "text", ""),
    ];
    for (seq, turn, role, kind, call) in rows {
        let (call, name, input) = match kind {
            "tool_use" => (format!("'{call}'"), "'bash'", "'{}'"),
            "tool_result" => (format!("'{call}'"), "NULL", "NULL"),
            _ => ("NULL".to_owned(), "NULL", "NULL"),
        };
        counted
            .client
            .batch_execute(&format!(
                "WITH m AS (INSERT INTO {schema}.messages
                     (session_id, seq, turn_index, role, compacted, created_at)
                     VALUES ('{id}', {seq}, {turn}, '{role}', 0, '2026-01-01T00:00:00Z')
                     RETURNING id)
                 INSERT INTO {schema}.parts (session_id, message_id, ordinal, kind, text,
                     tool_use_id, tool_name, input, is_error)
                 SELECT '{id}', m.id, 0, '{kind}', 'x', {call}, {name}, {input}, 0 FROM m"
            ))
            .expect("a hand-written row");
    }
    counted
        .client
        .batch_execute(&format!(
            "UPDATE {schema}.sessions SET tail_state = NULL WHERE id = '{id}'"
        ))
        .expect("the tail read again");
    session
}

/// The writes of one session's life, each through the public API.
fn writes(store: &Store, counted: &mut Counted) -> Vec<String> {
    let mut wrong = Vec::new();
    let session = grown(store, 3);
    let orphan = broken(store, counted);
    let long_ago = Utc
        .with_ymd_and_hms(2020, 1, 1, 0, 0, 0)
        .single()
        .expect("a date");

    let mut run = |name: &str, work: &mut dyn FnMut()| wrong.extend(check(counted, name, work));
    run("create_session", &mut || {
        store.create_session().expect("create");
    });
    run("append", &mut || {
        store
            .append(&session, NewMessage::user("more"))
            .expect("append");
    });
    run("append_batch", &mut || {
        store
            .append_batch(
                &session,
                vec![
                    assistant_calling("call_b"),
                    NewMessage::tool(vec![Part::tool_result("call_b", "out")]),
                ],
            )
            .expect("batch");
    });
    run("idempotency replay", &mut || {
        for _ in 0..2 {
            store
                .append(
                    &session,
                    NewMessage::user("once").with_idempotency_key("key-1"),
                )
                .expect("keyed append");
        }
    });
    run("cancel_pending", &mut || {
        store
            .append(&session, assistant_calling("call_c"))
            .expect("call");
        store.cancel_pending(&session, "stopped").expect("cancel");
    });
    run("stream", &mut || {
        let mut open = store
            .begin_message(&session, Role::Assistant)
            .expect("open");
        open.push(Part::text("streamed")).expect("push");
        open.keep_alive().expect("keep alive");
        open.set_model("provider/model").expect("model");
        open.finish().expect("finish");
    });
    run("settle_open_messages", &mut || {
        let mut open = store
            .begin_message(&session, Role::Assistant)
            .expect("open");
        open.push(Part::text("left behind")).expect("push");
        // Its handle gone, the message is settled: interrupted, with a log row.
        drop(open);
        store.settle_open_messages(&session).expect("settle");
    });
    run("set_title", &mut || {
        store.set_title(&session, Some("a title")).expect("title");
    });
    run("record_completion", &mut || {
        store
            .record_completion(&session, long_ago)
            .expect("completion");
        store.clear_thinking_state(&session).expect("clear");
    });
    run("revert_to_turn", &mut || {
        store.revert_to_turn(&session, 2).expect("revert");
    });
    run("undo_revert", &mut || {
        store.undo_revert(&session).expect("undo");
    });
    run("replace_from_turn", &mut || {
        store
            .replace_from_turn(&session, 3, vec![NewMessage::user("instead")])
            .expect("replace");
    });
    run("pop_part", &mut || {
        store
            .pop_part(&session, |part| {
                part.kind() == session_store::PartKind::Text
            })
            .expect("pop");
    });
    run("compact", &mut || {
        store
            .compact(&session, 2, "The story so far.")
            .expect("compact");
    });
    run("fork", &mut || {
        store.fork(&session, 2).expect("fork");
    });
    let stale = session_with(
        store,
        vec![
            NewMessage::user("go").at(long_ago),
            assistant_calling("call_stale").at(long_ago),
        ],
    );
    run("repair_session (a broken session)", &mut || {
        let mended = store
            .repair_session(&orphan, &RepairOptions::default())
            .expect("mend");
        let messages = store.messages(&orphan).expect("the mended session");
        for change in &mended.changes {
            let at = messages.iter().find(|m| Some(m.seq) == change.seq);
            assert_eq!(at.map(|m| m.id), Some(change.message_id), "{change:?}");
        }
        let actions: BTreeSet<&str> = mended.changes.iter().map(|c| c.action).collect();
        eprintln!("mend actions: {actions:?}");
        assert!(
            actions.len() > 1,
            "the broken session is mended: {actions:?}"
        );
    });
    run("repair_session (a stale call)", &mut || {
        let options = RepairOptions {
            stale_after: Some(Duration::from_secs(60)),
            ..RepairOptions::default()
        };
        let mended = store.repair_session(&stale, &options).expect("mend");
        assert!(!mended.changes.is_empty(), "the stale call is mended");
    });
    for (format, body) in bodies() {
        run(&format!("import {}", format.as_str()), &mut || {
            store
                .import_reader(format, Cursor::new(body.clone()))
                .expect("import");
        });
    }
    run("import claude-code", &mut || {
        store
            .import_reader(
                Format::ClaudeCode,
                Cursor::new(fixture(
                    "tests/fixtures/transcripts/fasthooks/sample_main_transcript.jsonl",
                )),
            )
            .expect("import");
    });
    run("import codex with sub-agents", &mut || {
        store
            .import_readers_as(
                vec![
                    (
                        Format::Codex,
                        Cursor::new(fixture("tests/fixtures/codex_subagents/parent.jsonl")),
                    ),
                    (
                        Format::Codex,
                        Cursor::new(fixture(
                            "tests/fixtures/codex_subagents/child-finished.jsonl",
                        )),
                    ),
                ],
                None,
            )
            .expect("import");
    });
    let bundle = store.export_bundle(&session).expect("a bundle");
    store
        .delete_session(&session)
        .expect("make room for the bundle");
    run("import_bundle", &mut || {
        store
            .import_bundle(Cursor::new(bundle.clone()))
            .expect("import the bundle");
    });
    run("import_session", &mut || {
        store
            .import_session(vec![NewMessage::user("imported")])
            .expect("import");
    });
    let child = store.create_session().expect("child");
    run("link_subagent", &mut || {
        let _ = store.link_subagent(&session, &child);
    });
    run("delete_session", &mut || {
        store.delete_session(&child).expect("delete");
    });
    wrong
}

/// The reads of one session, each through the public API.
fn reads(store: &Store, counted: &mut Counted) -> Vec<String> {
    let mut wrong = Vec::new();
    let session = grown(store, 2);
    let mut run = |name: &str, work: &mut dyn FnMut()| wrong.extend(check(counted, name, work));
    run("messages", &mut || {
        store.messages(&session).expect("messages");
    });
    run("session", &mut || {
        store.session(&session).expect("session");
    });
    run("usage", &mut || {
        store.usage(&session).expect("usage");
        store.message_usage(&session).expect("message usage");
    });
    run("provider_history", &mut || {
        store.provider_history(&session).expect("history");
        store.summaries(&session).expect("summaries");
    });
    run("turns", &mut || {
        store.last_turns(&session, 1).expect("last turns");
        store.turns(&session, 0..1).expect("turns");
    });
    run("pending_tool_uses", &mut || {
        store.pending_tool_uses(&session).expect("pending");
    });
    run("stored_parts", &mut || {
        store.stored_parts(&session, Some(3)).expect("parts");
    });
    run("thinking_state", &mut || {
        store.thinking_state(&session).expect("thinking");
    });
    run("check", &mut || {
        store
            .check(std::slice::from_ref(&session), &RepairOptions::default())
            .expect("check");
    });
    run("session_overview", &mut || {
        store.session_overview(&session).expect("overview");
    });
    run("search in one session (with its catch-up)", &mut || {
        let options = SearchOptions {
            session: Some(session.clone()),
            ..SearchOptions::default()
        };
        store.search("question", &options).expect("search");
    });
    run("export_bundle", &mut || {
        store.export_bundle(&session).expect("bundle");
    });
    run("export", &mut || {
        store
            .export_now(&session, Provider::Anthropic, &ExportOptions::default())
            .expect("export");
    });
    run("transcript", &mut || {
        store
            .transcript(&session, TranscriptFormat::Markdown)
            .expect("transcript");
    });
    run("budget", &mut || {
        store.budget(&session, 100_000).expect("budget");
    });
    run("page", &mut || {
        store.page(&session, None, 3).expect("page");
    });
    wrong
}

#[test]
fn every_statement_of_a_per_session_operation_names_its_session() {
    let _one = COUNTED.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut counted) = Counted::open() else {
        return;
    };
    let store = Store::open(&counted.url).expect("open the counted store");
    let mut wrong = writes(&store, &mut counted);
    wrong.extend(reads(&store, &mut counted));
    assert!(
        wrong.is_empty(),
        "{} statements would fan out to every shard:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// The rule itself, on statements of known shape: the test above cannot pass by reading
/// every statement as routed.
#[test]
fn the_rule_tells_a_routed_statement_from_one_that_fans_out() {
    let routed = [
        "SELECT id FROM messages WHERE session_id = $1 AND seq > $2",
        "SELECT m.seq FROM usage u JOIN messages m ON m.session_id = u.session_id \
         AND m.id = u.message_id WHERE u.session_id = $1",
        "UPDATE sessions SET title = $2 WHERE id = $1",
        "INSERT INTO parts (session_id, message_id, ordinal) VALUES ($1, $2, $3)",
        "INSERT INTO parts (session_id, message_id) SELECT $1, m.id FROM messages m \
         WHERE m.session_id = $1",
        "DELETE FROM parts p USING messages m WHERE m.session_id = $1 \
         AND p.session_id = m.session_id AND p.message_id = m.id",
        "SELECT 1 FROM pg_class",
        "BEGIN",
    ];
    for statement in routed {
        assert_eq!(unroutable(statement, &[]), None, "{statement}");
    }
    let fanning = [
        "SELECT id FROM messages WHERE id = $1",
        "UPDATE parts SET text = $2 WHERE id = $1",
        "SELECT m.seq FROM usage u JOIN messages m ON m.id = u.message_id WHERE m.session_id = $1",
        "SELECT 1 FROM reverted_messages r WHERE r.session_id = $1 AND NOT EXISTS \
         (SELECT 1 FROM messages m WHERE m.id = r.original_id)",
        "INSERT INTO messages (session_id, seq) SELECT $1, seq FROM messages WHERE session_id = $2",
        "INSERT INTO usage (message_id) VALUES ($1)",
        "SELECT id FROM sessions WHERE parent_id = $1",
        "SELECT count(*) FROM parts WHERE session_id = ANY($1)",
    ];
    for statement in fanning {
        assert!(unroutable(statement, &[]).is_some(), "{statement}");
    }
    let args = vec!["session".to_owned()];
    assert_eq!(
        unroutable(
            "SELECT tail_state FROM sessions s WHERE s.id = session FOR UPDATE",
            &args
        ),
        None
    );
    assert!(unroutable("SELECT max(id) FROM parts", &args).is_some());
}
