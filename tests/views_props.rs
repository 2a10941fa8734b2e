//! The forensic views and the library's check must name the same violations: a view that
//! drifts from `Store::check` (a rule read differently, an id-less part matched, a system
//! message that breaks a pair, a position counted wrong) tells a person with the `sqlite3`
//! shell something the library and `store-repair` do not. Random sessions, healthy and
//! broken, are written straight into the tables with raw SQL (random roles, calls and results
//! with ids from a small pool that includes `''` and NULL, answers given twice, compaction
//! flags, wrong turn indexes, gaps in `seq` and `ordinal`), and the `problems` view must
//! report exactly the (session, rule, seq, part) set the check reports, each row with a
//! `detail`, and the same rows when asked about one session; each `problem_<rule>` view holds
//! its rule's rows, and `session_turns` counts the calls `tool_calls` calls pending.

use std::collections::BTreeSet;
use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use rusqlite::{params, Connection};
use session_store::{
    repair::{HealthRule, RepairOptions},
    Store,
};

pub(crate) type Id = Option<&'static str>;

#[derive(Clone, Debug)]
pub(crate) enum RawPart {
    Text,
    Use(Id),
    Result(Id),
}

#[derive(Clone, Debug)]
pub(crate) struct RawMessage {
    pub(crate) role: &'static str,
    pub(crate) parts: Vec<RawPart>,
    /// Added to the contract's turn index when stored (mostly 0).
    pub(crate) turn_offset: i64,
    /// Inverts the session's compaction prefix for this message.
    pub(crate) flip_compacted: bool,
    /// Leaves a hole in `seq` before this message, and in `ordinal` between its parts.
    pub(crate) gaps: bool,
}

#[derive(Clone, Debug)]
pub(crate) struct RawSession {
    pub(crate) messages: Vec<RawMessage>,
    /// Messages `0..compacted_prefix` are compacted (before flips).
    pub(crate) compacted_prefix: usize,
}

fn id() -> impl Strategy<Value = Id> {
    prop::sample::select(vec![Some("a"), Some("b"), Some("c"), Some(""), None])
}

fn role() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["system", "user", "assistant", "tool"])
}

fn part() -> impl Strategy<Value = RawPart> {
    prop_oneof![
        1 => Just(RawPart::Text),
        1 => id().prop_map(RawPart::Use),
        1 => id().prop_map(RawPart::Result),
    ]
}

fn message(
    role: impl Strategy<Value = &'static str>,
    parts: impl Strategy<Value = Vec<RawPart>>,
) -> impl Strategy<Value = RawMessage> {
    (
        role,
        parts,
        prop_oneof![12 => Just(0i64), 1 => Just(1i64), 1 => Just(-1i64)],
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.15),
    )
        .prop_map(
            |(role, parts, turn_offset, flip_compacted, gaps)| RawMessage {
                role,
                parts,
                turn_offset,
                flip_compacted,
                gaps,
            },
        )
}

/// One message of any shape.
fn any_message() -> impl Strategy<Value = Vec<RawMessage>> {
    message(role(), prop::collection::vec(part(), 0..4)).prop_map(|m| vec![m])
}

/// A tool round as agents write it, or nearly: an assistant message with calls, then tool
/// messages answering them (some twice, some with another id, some not at all), sometimes
/// with a system message inside the block.
fn tool_round() -> impl Strategy<Value = Vec<RawMessage>> {
    (
        prop::collection::vec(id(), 1..4),
        prop::collection::vec(
            prop::collection::vec((0..4usize, prop::bool::weighted(0.1)), 1..4),
            0..3,
        ),
        prop::bool::weighted(0.2),
    )
        .prop_flat_map(|(calls, answers, system_inside)| {
            let call_parts: Vec<RawPart> = calls.iter().map(|&id| RawPart::Use(id)).collect();
            let answer_messages: Vec<Vec<RawPart>> = answers
                .iter()
                .map(|results| {
                    results
                        .iter()
                        .map(|&(pick, stray)| {
                            let id = if stray {
                                Some("z")
                            } else {
                                calls[pick % calls.len()]
                            };
                            RawPart::Result(id)
                        })
                        .collect()
                })
                .collect();
            let assistant = message(Just("assistant"), Just(call_parts));
            let tools: Vec<_> = answer_messages
                .into_iter()
                .map(|parts| message(Just("tool"), Just(parts)))
                .collect();
            let system = message(Just("system"), Just(vec![RawPart::Text]));
            (assistant, tools, system).prop_map(move |(assistant, tools, system)| {
                let mut round = vec![assistant];
                let middle = tools.len() / 2;
                for (i, tool) in tools.into_iter().enumerate() {
                    if system_inside && i == middle {
                        round.push(system.clone());
                    }
                    round.push(tool);
                }
                round
            })
        })
}

/// Random sessions, healthy and broken (also written into PostgreSQL by `postgres.rs`).
pub(crate) fn session() -> impl Strategy<Value = RawSession> {
    let chunk = prop_oneof![
        2 => any_message(),
        1 => message(Just("user"), Just(vec![RawPart::Text])).prop_map(|m| vec![m]),
        2 => tool_round(),
    ];
    (prop::collection::vec(chunk, 0..8), 0..6usize).prop_map(|(chunks, prefix)| {
        let messages: Vec<RawMessage> = chunks.into_iter().flatten().collect();
        let compacted_prefix = prefix.min(messages.len());
        RawSession {
            messages,
            compacted_prefix,
        }
    })
}

/// Writes the sessions with raw SQL, as other code might have.
fn write(conn: &Connection, sessions: &[RawSession]) {
    let at = "2026-01-01T00:00:00.000000Z";
    for (n, session) in sessions.iter().enumerate() {
        let sid = format!("s{n}");
        conn.execute(
            "INSERT INTO sessions (id, created_at, updated_at) VALUES (?1, ?2, ?2)",
            params![sid, at],
        )
        .expect("session");
        let (mut seq, mut users) = (0i64, 0i64);
        for (index, m) in session.messages.iter().enumerate() {
            seq += if m.gaps { 3 } else { 1 };
            users += i64::from(m.role == "user");
            let turn = (users - 1).max(0) + m.turn_offset;
            let compacted = (index < session.compacted_prefix) != m.flip_compacted;
            conn.execute(
                "INSERT INTO messages (session_id, seq, turn_index, role, compacted, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![sid, seq, turn, m.role, compacted, at],
            )
            .expect("message");
            let message_id = conn.last_insert_rowid();
            let step = if m.gaps { 5 } else { 1 };
            for (k, part) in m.parts.iter().enumerate() {
                let (kind, text, tool_use_id, name, input) = match *part {
                    RawPart::Text => ("text", Some("words"), None, None, None),
                    RawPart::Use(id) => ("tool_use", None, id, Some("bash"), Some("{}")),
                    RawPart::Result(id) => ("tool_result", Some("ok"), id, None, None),
                };
                conn.execute(
                    "INSERT INTO parts (message_id, ordinal, kind, text, tool_use_id, tool_name, input)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    params![message_id, k as i64 * step, kind, text, tool_use_id, name, input],
                )
                .expect("part");
            }
        }
    }
}

type Problem = (String, String, i64, Option<i64>);

/// Every row of `problems` (optionally of one session); fails on a row without a detail.
fn view_problems(conn: &Connection, session: Option<&str>) -> BTreeSet<Problem> {
    let mut stmt = conn
        .prepare(
            "SELECT session_id, rule, seq, part, detail FROM problems
             WHERE ?1 IS NULL OR session_id = ?1",
        )
        .expect("prepare");
    let rows = stmt
        .query_map([session], |r| {
            let detail: Option<String> = r.get(4)?;
            Ok(((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?), detail))
        })
        .expect("query")
        .collect::<rusqlite::Result<Vec<_>>>()
        .expect("rows");
    rows.into_iter()
        .map(|(problem, detail)| {
            assert!(
                detail.is_some_and(|d| !d.is_empty()),
                "no detail for {problem:?}"
            );
            problem
        })
        .collect()
}

fn library_problems(path: &Path) -> BTreeSet<Problem> {
    let store = Store::open(path).expect("open store");
    store
        .check(&[], &RepairOptions::default())
        .expect("check")
        .violations
        .into_iter()
        .map(|v| {
            (
                v.session_id.to_string(),
                v.rule.to_string(),
                v.seq.unwrap_or_default(),
                v.part.map(|p| p as i64),
            )
        })
        .collect()
}

#[test]
fn problems_view_reports_exactly_what_the_check_reports() {
    // One migrated empty database, copied for each case: migrating is most of a case's time.
    let dir = tempfile::tempdir().expect("tempdir");
    let template = dir.path().join("template.db");
    drop(Store::open(&template).expect("create"));
    let mut runner = TestRunner::new(ProptestConfig::with_cases(64));
    let strategy = prop::collection::vec(session(), 1..4);
    let outcome = runner.run(&strategy, |sessions| {
        let case = tempfile::tempdir().expect("tempdir");
        let path = case.path().join("random.db");
        std::fs::copy(&template, &path).expect("copy template");
        let conn = Connection::open(&path).expect("raw");
        write(&conn, &sessions);

        let library = library_problems(&path);
        let views = view_problems(&conn, None);
        prop_assert_eq!(&views, &library);

        // A question about one session gets that session's rows, computed on their own.
        for n in 0..sessions.len() {
            let sid = format!("s{n}");
            let one = view_problems(&conn, Some(&sid));
            let expected: BTreeSet<Problem> =
                views.iter().filter(|p| p.0 == sid).cloned().collect();
            prop_assert_eq!(one, expected);
        }

        // Each rule's own view holds that rule's rows of `problems`.
        for rule in HealthRule::ALL {
            let rows: BTreeSet<Problem> = conn
                .prepare(&format!("SELECT session_id, rule, seq, part FROM problem_{rule}"))
                .and_then(|mut s| {
                    s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
                        .collect()
                })
                .expect("rule view");
            let all = view_problems(&conn, None);
            let expected: BTreeSet<Problem> =
                all.into_iter().filter(|p| p.1 == rule.as_str()).collect();
            prop_assert_eq!(rows, expected, "problem_{}", rule);
        }

        // session_turns counts the calls tool_calls calls pending, turn by turn.
        let turns: BTreeSet<(String, i64, i64)> = conn
            .prepare("SELECT session_id, turn, pending_calls FROM session_turns WHERE pending_calls > 0")
            .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect())
            .expect("session_turns");
        let calls: BTreeSet<(String, i64, i64)> = conn
            .prepare("SELECT session_id, turn, COUNT(*) FROM tool_calls WHERE pending GROUP BY session_id, turn")
            .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect())
            .expect("tool_calls");
        prop_assert_eq!(turns, calls);
        Ok(())
    });
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
}
