//! Checking and mending through the library against real SQLite files: every contract rule
//! broken by raw SQL is found (and nothing healthy is), mending leaves every session healthy
//! without deleting a message or part, logs each change, agrees with the forensic views,
//! changes nothing the second time, and runs beside a live writer.

use std::collections::BTreeSet;
use std::time::Duration;

use rusqlite::Connection;
use session_store::repair::{backup_database, RepairOptions};
use session_store::{NewMessage, Part, SessionId, Store};

use crate::broken_db::{self, dump, dump_session, CASES};

fn broken_store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("broken.db");
    broken_db::build(&path);
    let store = Store::open(&path).expect("open");
    (dir, store)
}

fn found(store: &Store, options: &RepairOptions) -> BTreeSet<(String, String)> {
    store
        .check(&[], options)
        .expect("check")
        .violations
        .into_iter()
        .map(|v| (v.session_id.to_string(), v.rule.to_string()))
        .collect()
}

/// (session, rule, message, part) of every row of the `problems` view.
fn view_problems(conn: &Connection) -> BTreeSet<(String, String, i64, Option<i64>)> {
    let mut stmt = conn
        .prepare("SELECT session_id, rule, message_id, part FROM problems")
        .expect("prepare");
    let rows = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .expect("query");
    rows.collect::<rusqlite::Result<_>>().expect("rows")
}

#[test]
fn check_finds_every_broken_rule_and_nothing_healthy() {
    let (_dir, store) = broken_store();
    let report = store.check(&[], &RepairOptions::default()).expect("check");
    assert_eq!(report.sessions_checked, CASES.len());
    assert_eq!(
        found(&store, &RepairOptions::default()),
        broken_db::expected()
    );
}

#[test]
fn check_and_forensic_views_agree_violation_for_violation() {
    let (dir, store) = broken_store();
    let report = store.check(&[], &RepairOptions::default()).expect("check");
    let library: BTreeSet<_> = report
        .violations
        .iter()
        .map(|v| {
            (
                v.session_id.to_string(),
                v.rule.to_string(),
                v.message_id.unwrap_or_default(),
                v.part.map(|p| p as i64),
            )
        })
        .collect();
    let conn = Connection::open(dir.path().join("broken.db")).expect("open");
    assert_eq!(view_problems(&conn), library);
}

#[test]
fn stale_pending_calls_are_dangling_only_with_stale_after() {
    let (_dir, store) = broken_store();
    let stale = RepairOptions {
        stale_after: Some(Duration::from_secs(3600)),
        ..RepairOptions::default()
    };
    let with_stale = found(&store, &stale);
    assert!(with_stale.contains(&(
        "healthy-pending-at-end".to_owned(),
        "dangling_tool_use".to_owned()
    )));
    let long = RepairOptions {
        stale_after: Some(Duration::from_secs(100 * 365 * 86_400)),
        ..RepairOptions::default()
    };
    assert_eq!(found(&store, &long), broken_db::expected());
}

#[test]
fn mending_every_session_leaves_the_database_healthy_and_deletes_nothing() {
    let (dir, store) = broken_store();
    let conn = Connection::open(dir.path().join("broken.db")).expect("open");
    let ids = |sql: &str| -> BTreeSet<i64> {
        let mut stmt = conn.prepare(sql).expect("prepare");
        let rows = stmt.query_map([], |r| r.get(0)).expect("query");
        rows.collect::<rusqlite::Result<_>>().expect("ids")
    };
    let messages_before = ids("SELECT id FROM messages");
    let parts_before = ids("SELECT id FROM parts");
    let options = RepairOptions::default();
    let mut logged = 0;
    for session in store.session_ids().expect("ids") {
        let repair = store.repair_session(&session, &options).expect("repair");
        let broken = CASES
            .iter()
            .any(|c| c.session == session.as_str() && !c.rules.is_empty());
        assert_eq!(!repair.changes.is_empty(), broken, "{session}");
        logged += repair.changes.len();
    }
    assert!(found(&store, &options).is_empty());
    assert!(view_problems(&conn).is_empty());
    assert!(ids("SELECT id FROM messages").is_superset(&messages_before));
    assert!(ids("SELECT id FROM parts").is_superset(&parts_before));
    let log_rows: i64 = conn
        .query_row("SELECT COUNT(*) FROM repair_log", [], |r| r.get(0))
        .expect("count");
    assert_eq!(log_rows as usize, logged);
}

#[test]
fn mended_shapes_are_the_ones_the_contract_names() {
    let (dir, store) = broken_store();
    let options = RepairOptions::default();
    for session in store.session_ids().expect("ids") {
        store.repair_session(&session, &options).expect("repair");
    }
    let conn = Connection::open(dir.path().join("broken.db")).expect("open");
    let roles = |session: &str| -> Vec<String> {
        let mut stmt = conn
            .prepare("SELECT role FROM messages WHERE session_id = ?1 ORDER BY seq")
            .expect("prepare");
        let rows = stmt.query_map([session], |r| r.get(0)).expect("query");
        rows.collect::<rusqlite::Result<_>>().expect("roles")
    };
    // Results and words: a tool message with the results, then a user message with the words.
    assert_eq!(
        roles("user-results-and-words"),
        ["user", "assistant", "tool", "user", "assistant"]
    );
    // The tool-only user message is a tool message now; no message was added.
    assert_eq!(
        roles("tool-only-user-empty-text"),
        ["user", "assistant", "tool", "assistant"]
    );
    // The cancelled call got a tombstone right after its tool block.
    assert_eq!(
        roles("cancelled-mid-history"),
        ["user", "assistant", "tool", "tool", "user", "assistant"]
    );
    let tombstones: Vec<(String, i64)> = {
        let mut stmt = conn
            .prepare("SELECT tool_use_id, by_repair FROM tombstones ORDER BY session_id, seq")
            .expect("prepare");
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("query");
        rows.collect::<rusqlite::Result<_>>().expect("rows")
    };
    assert_eq!(tombstones, [("cancel-b".to_owned(), 1)]);
    // The split turn is visible from its user message on; turn 0 stays compacted.
    let compacted: Vec<i64> = {
        let mut stmt = conn
            .prepare("SELECT compacted FROM session_turns WHERE session_id = 'split-three-tool-turn' ORDER BY turn")
            .expect("prepare");
        let rows = stmt.query_map([], |r| r.get(0)).expect("query");
        rows.collect::<rusqlite::Result<_>>().expect("rows")
    };
    assert_eq!(compacted, [1, 0]);
    // The later duplicate and its answer share a fresh id.
    let renamed: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM parts WHERE tool_use_id = 'dup-a__2'",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(renamed, 2);
}

#[test]
fn a_second_repair_changes_nothing() {
    let (dir, store) = broken_store();
    let options = RepairOptions::default();
    for session in store.session_ids().expect("ids") {
        store.repair_session(&session, &options).expect("repair");
    }
    let path = dir.path().join("broken.db");
    let before = dump(&path);
    for session in store.session_ids().expect("ids") {
        let again = store.repair_session(&session, &options).expect("repair");
        assert!(again.found.is_empty() && again.changes.is_empty());
    }
    assert_eq!(dump(&path), before);
}

#[test]
fn repair_judges_the_session_as_it_is_under_the_lock_not_as_it_was_checked() {
    let (dir, store) = broken_store();
    let session = SessionId::new("cancelled-mid-history");
    assert!(!store
        .check(std::slice::from_ref(&session), &RepairOptions::default())
        .expect("check")
        .violations
        .is_empty());
    // Someone answers the call between the check and the repair.
    let conn = Connection::open(dir.path().join("broken.db")).expect("open");
    conn.execute(
        "UPDATE parts SET kind = 'text', text = 'never mind', tool_use_id = NULL, tool_name = NULL, input = NULL
         WHERE tool_use_id = 'cancel-b'",
        [],
    )
    .expect("update");
    let before = dump_session(&conn, session.as_str());
    let repair = store
        .repair_session(&session, &RepairOptions::default())
        .expect("repair");
    assert!(repair.found.is_empty() && repair.changes.is_empty());
    assert_eq!(dump_session(&conn, session.as_str()), before);
}

#[test]
fn repair_runs_beside_a_live_writer_without_errors_or_lost_writes() {
    let (dir, store) = broken_store();
    let writer = Store::open(dir.path().join("broken.db")).expect("second handle");
    let live = writer.create_session().expect("session");
    let handle = {
        let live = live.clone();
        std::thread::spawn(move || {
            for i in 0..200 {
                writer
                    .append(&live, NewMessage::user(format!("message {i}")))
                    .expect("live append never fails");
                writer
                    .append(&live, NewMessage::assistant(vec![Part::text("ok")]))
                    .expect("live append never fails");
            }
        })
    };
    let options = RepairOptions::default();
    for session in store.session_ids().expect("ids") {
        store.repair_session(&session, &options).expect("repair");
    }
    handle.join().expect("writer thread");
    assert_eq!(store.messages(&live).expect("messages").len(), 400);
    assert!(found(&store, &options).is_empty());
}

#[test]
fn backup_is_a_complete_copy_that_passes_integrity_check() {
    let (dir, store) = broken_store();
    let path = dir.path().join("broken.db");
    let copy = dir.path().join("copy.db");
    store.backup_to(&copy).expect("backup");
    assert_eq!(dump(&copy), dump(&path));
    // An existing destination is refused, not overwritten.
    assert!(backup_database(&path, &copy).is_err());
}

mod random {
    //! Random sessions written raw: the views agree with the library before the mend, and
    //! after it nothing is broken, nothing is lost, and a second mend changes nothing.
    use super::*;
    use crate::broken_db::{Raw, P};
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    struct RawMessage {
        role: &'static str,
        compacted: bool,
        turn_offset: i64,
        parts: Vec<(u8, u8)>,
    }

    fn arb_message() -> impl Strategy<Value = RawMessage> {
        (
            prop::sample::select(vec!["system", "user", "assistant", "tool"]),
            any::<bool>(),
            prop_oneof![4 => Just(0i64), 1 => Just(1i64)],
            prop::collection::vec((0..3u8, 0..4u8), 1..4),
        )
            .prop_map(|(role, compacted, turn_offset, parts)| RawMessage {
                role,
                compacted,
                turn_offset,
                parts,
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(16))]

        #[test]
        fn views_agree_and_mending_is_complete_and_idempotent(
            sessions in prop::collection::vec(prop::collection::vec(arb_message(), 0..10), 1..4)
        ) {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("random.db");
            drop(Store::open(&path).expect("create"));
            let conn = Connection::open(&path).expect("open");
            let ids = ["c0", "c1", "c2", "c3"];
            for (n, messages) in sessions.iter().enumerate() {
                let mut raw = Raw::new(&conn, &format!("s{n}"));
                let mut users = 0;
                for m in messages {
                    if m.role == "user" {
                        users += 1;
                    }
                    let parts: Vec<P<'_>> = m
                        .parts
                        .iter()
                        .map(|&(kind, id)| match kind {
                            0 => P::Text(if id % 2 == 0 { "" } else { "words" }),
                            1 => P::Use(ids[id as usize]),
                            _ => P::Result(ids[id as usize]),
                        })
                        .collect();
                    let turn = (users - 1i64).max(0) + m.turn_offset;
                    raw.msg_at_turn(m.role, m.compacted, turn, &parts);
                }
            }
            let store = Store::open(&path).expect("open store");
            let options = RepairOptions::default();
            let report = store.check(&[], &options).expect("check");
            let library: BTreeSet<_> = report
                .violations
                .iter()
                .map(|v| (v.session_id.to_string(), v.rule.to_string(), v.message_id.unwrap_or_default(), v.part.map(|p| p as i64)))
                .collect();
            prop_assert_eq!(view_problems(&conn), library);

            let parts_before: i64 = conn.query_row("SELECT COUNT(*) FROM parts", [], |r| r.get(0)).expect("count");
            for session in store.session_ids().expect("ids") {
                store.repair_session(&session, &options).expect("repair");
            }
            prop_assert!(store.check(&[], &options).expect("check").violations.is_empty());
            prop_assert!(view_problems(&conn).is_empty());
            let independent = crate::util::violations(&path);
            prop_assert!(independent.is_empty(), "{:?}", independent);
            let parts_after: i64 = conn.query_row("SELECT COUNT(*) FROM parts", [], |r| r.get(0)).expect("count");
            prop_assert!(parts_after >= parts_before);
            let before = dump(&path);
            for session in store.session_ids().expect("ids") {
                prop_assert!(store.repair_session(&session, &options).expect("repair").changes.is_empty());
            }
            prop_assert_eq!(dump(&path), before);
        }
    }
}

#[test]
fn hand_written_gaps_in_seq_and_ordinal_survive_a_mend() {
    // Other writers leave gaps: seq 10, 20, 30, ... and ordinals 5, 7.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("gaps.db");
    drop(Store::open(&path).expect("create"));
    let conn = Connection::open(&path).expect("open");
    conn.execute_batch(
        "INSERT INTO sessions (id, created_at, updated_at) VALUES ('gaps', '2026-01-01 00:00:00', '2026-01-01 00:00:00');
         INSERT INTO messages (id, session_id, seq, turn_index, role, created_at) VALUES
           (1, 'gaps', 10, 0, 'user', '2026-01-01 00:00:00'),
           (2, 'gaps', 20, 0, 'assistant', '2026-01-01 00:00:01'),
           (3, 'gaps', 30, 1, 'user', '2026-01-01 00:00:02'),
           (4, 'gaps', 40, 1, 'assistant', '2026-01-01 00:00:03');
         INSERT INTO parts (id, message_id, ordinal, kind, text, tool_use_id, tool_name, input) VALUES
           (11, 1, 5, 'text', 'hi', NULL, NULL, NULL),
           (12, 2, 5, 'tool_use', NULL, 'g1', 'bash', '{}'),
           (13, 2, 7, 'tool_use', NULL, 'g2', 'bash', '{}'),
           (14, 3, 5, 'tool_result', 'one', 'g1', NULL, NULL),
           (15, 3, 7, 'text', 'and then', NULL, NULL, NULL),
           (16, 4, 5, 'text', 'done', NULL, NULL, NULL);",
    )
    .expect("raw rows");
    let store = Store::open(&path).expect("open store");
    let repair = store
        .repair_session(&SessionId::new("gaps"), &RepairOptions::default())
        .expect("repair");
    assert!(!repair.changes.is_empty());
    let rows: Vec<(i64, i64, String, i64)> = {
        let mut stmt = conn
            .prepare("SELECT id, seq, role, turn_index FROM messages WHERE session_id = 'gaps' ORDER BY seq")
            .expect("prepare");
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .expect("query");
        rows.collect::<rusqlite::Result<_>>().expect("rows")
    };
    let shape: Vec<(i64, String, i64)> = rows
        .iter()
        .map(|(_, s, r, t)| (*s, r.clone(), *t))
        .collect();
    assert_eq!(
        shape,
        [
            (10, "user".to_owned(), 0),
            (20, "assistant".to_owned(), 0),
            (30, "tool".to_owned(), 0),
            (31, "tool".to_owned(), 0),
            (32, "user".to_owned(), 1),
            (42, "assistant".to_owned(), 1),
        ]
    );
    // Untouched messages keep their ordinals; the split ones are renumbered from 0.
    let ordinal = |part: i64| -> (i64, i64) {
        conn.query_row(
            "SELECT message_id, ordinal FROM parts WHERE id = ?1",
            [part],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("part")
    };
    assert_eq!(ordinal(11), (1, 5));
    assert_eq!(ordinal(13), (2, 7));
    assert_eq!(ordinal(14), (3, 0));
    assert_eq!(ordinal(15), (rows[4].0, 0));
    assert!(store
        .check(&[], &RepairOptions::default())
        .expect("check")
        .violations
        .is_empty());
}

#[test]
fn compaction_summaries_follow_the_messages_a_mend_moves() {
    // A session compacted by the store, then broken inside its compacted head by other code:
    // the tombstone shifts every later seq, and the summary must still end at the message
    // it ended at.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("summaries.db");
    let store = Store::open(&path).expect("open");
    let session = store.create_session().expect("session");
    for n in 0..3 {
        store
            .append(&session, NewMessage::user(format!("question {n}")))
            .expect("append");
        store
            .append(&session, NewMessage::assistant(vec![Part::text("answer")]))
            .expect("append");
    }
    store
        .compact(&session, 2, "two questions")
        .expect("compact");
    let before = store.summaries(&session).expect("summaries");
    assert_eq!(before[0].through_seq, 4);
    let conn = Connection::open(&path).expect("raw");
    conn.execute(
        "UPDATE parts SET kind = 'tool_use', text = NULL, tool_use_id = 'lost', tool_name = 'bash', input = '{}'
         WHERE message_id = (SELECT id FROM messages WHERE session_id = ?1 AND seq = 2)",
        [session.as_str()],
    )
    .expect("break the head");
    let repair = store
        .repair_session(&session, &RepairOptions::default())
        .expect("repair");
    assert!(repair.changes.iter().any(|c| c.action == "follow_summary"));
    let after = store.summaries(&session).expect("summaries");
    assert_eq!(after[0].through_seq, 5);
    assert_eq!(after[0].last_turn, before[0].last_turn);
    let last_compacted: i64 = conn
        .query_row(
            "SELECT MAX(seq) FROM messages WHERE session_id = ?1 AND compacted = 1",
            [session.as_str()],
            |r| r.get(0),
        )
        .expect("max");
    assert_eq!(last_compacted, 5);
    assert!(store
        .check(&[], &RepairOptions::default())
        .expect("check")
        .violations
        .is_empty());
}

#[test]
fn the_independent_sql_statement_of_the_rules_agrees_before_and_after_mending() {
    let (dir, store) = broken_store();
    let path = dir.path().join("broken.db");
    let conn = Connection::open(&path).expect("open");
    let mut independent = BTreeSet::new();
    for (rule, sql) in crate::util::INVARIANTS {
        let mut stmt = conn.prepare(sql).expect("prepare");
        let sessions = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .expect("query")
            .collect::<rusqlite::Result<Vec<_>>>()
            .expect("rows");
        independent.extend(sessions.into_iter().map(|s| (s, (*rule).to_owned())));
    }
    assert_eq!(independent, broken_db::expected());
    for session in store.session_ids().expect("ids") {
        store
            .repair_session(&session, &RepairOptions::default())
            .expect("repair");
    }
    assert_eq!(crate::util::violations(&path), Vec::<String>::new());
}

/// Every change a mend logs names its message by `(session, seq)` too, the address a store
/// sharded by session reaches on one shard: in every broken session of the fixture, each
/// change's `seq` is the seq of the message `message_id` names once the mend is done.
#[test]
fn each_logged_change_names_its_message_by_seq() {
    let (_dir, store) = broken_store();
    let mut checked = 0;
    for session in store.session_ids().expect("ids") {
        let repair = store
            .repair_session(&session, &RepairOptions::default())
            .expect("repair");
        let messages = store.messages(&session).expect("messages");
        for change in &repair.changes {
            let seq = change
                .seq
                .unwrap_or_else(|| panic!("{session}: {change:?} has no seq"));
            let message = messages
                .iter()
                .find(|m| m.seq == seq)
                .unwrap_or_else(|| panic!("{session}: no message at seq {seq}"));
            assert_eq!(message.id, change.message_id, "{session}: {change:?}");
            checked += 1;
        }
    }
    assert!(checked > 5, "{checked} changes checked");
}
