//! Repair under random damage: valid databases (tool turns, a compacted session, a pending
//! turn) broken at random in the ways older code breaks them (compacted flags flipped,
//! tool_result rows deleted or moved, turn indexes scrambled, results moved into user
//! messages) must come out of `store-repair` healthy by the contract's rules (checked here
//! with independent SQL), with no message or part deleted, and a second run must change
//! nothing.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use proptest::prelude::*;
use rusqlite::{params, Connection};
use serde_json::Value;
use session_store::{NewMessage, Store};

use crate::fault_support::{assert_integrity, raw, tool_turn, violations};
use crate::util::dump_in;

const BIN: &str = env!("CARGO_BIN_EXE_store-repair");

/// One way to break a row; `pick` chooses which row among the candidates.
#[derive(Clone, Debug)]
enum Damage {
    FlipCompacted { pick: u64 },
    DeleteResult { pick: u64 },
    MoveResult { pick: u64, to: u64 },
    ScrambleTurn { pick: u64, to: u64 },
    ResultIntoUser { pick: u64 },
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        any::<u64>().prop_map(|pick| Damage::FlipCompacted { pick }),
        any::<u64>().prop_map(|pick| Damage::DeleteResult { pick }),
        (any::<u64>(), any::<u64>()).prop_map(|(pick, to)| Damage::MoveResult { pick, to }),
        (any::<u64>(), 0..40u64).prop_map(|(pick, to)| Damage::ScrambleTurn { pick, to }),
        any::<u64>().prop_map(|pick| Damage::ResultIntoUser { pick }),
    ]
}

/// Three healthy sessions: plain tool turns, a compacted one, one ending in a pending turn.
fn healthy(path: &Path) {
    let store = Store::open(path).expect("open");
    for s in 0..3 {
        let session = store.create_session().expect("session");
        for t in 0..4 {
            store
                .append_batch(&session, tool_turn(&format!("s{s}t{t}")))
                .expect("turn");
        }
        match s {
            1 => {
                store
                    .compact(&session, 8, "earlier turns, summarised")
                    .expect("compact");
            }
            2 => {
                let mut pending = tool_turn(&format!("s{s}pending"));
                pending.truncate(2);
                store.append_batch(&session, pending).expect("pending");
            }
            _ => {
                store
                    .append(&session, NewMessage::user("thanks"))
                    .expect("user");
            }
        }
    }
}

fn ids(conn: &Connection, sql: &str) -> Vec<i64> {
    conn.prepare(sql)
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .expect("ids")
}

fn pick(candidates: &[i64], n: u64) -> Option<i64> {
    (!candidates.is_empty()).then(|| candidates[(n % candidates.len() as u64) as usize])
}

fn apply(conn: &Connection, damage: &Damage) {
    let results = ids(
        conn,
        "SELECT id FROM parts WHERE kind = 'tool_result' ORDER BY id",
    );
    match *damage {
        Damage::FlipCompacted { pick: n } => {
            let all = ids(conn, "SELECT id FROM messages ORDER BY id");
            if let Some(id) = pick(&all, n) {
                conn.execute(
                    "UPDATE messages SET compacted = 1 - compacted WHERE id = ?1",
                    [id],
                )
                .expect("flip");
            }
        }
        Damage::DeleteResult { pick: n } => {
            if let Some(id) = pick(&results, n) {
                conn.execute("DELETE FROM parts WHERE id = ?1", [id])
                    .expect("delete");
            }
        }
        Damage::MoveResult { pick: n, to } => {
            let messages = ids(conn, "SELECT id FROM messages ORDER BY id");
            if let (Some(part), Some(message)) = (pick(&results, n), pick(&messages, to)) {
                conn.execute(
                    "UPDATE parts SET message_id = ?2,
                         ordinal = (SELECT COALESCE(MAX(ordinal), -1) + 1 FROM parts WHERE message_id = ?2)
                     WHERE id = ?1",
                    params![part, message],
                )
                .expect("move");
            }
        }
        Damage::ScrambleTurn { pick: n, to } => {
            let all = ids(conn, "SELECT id FROM messages ORDER BY id");
            if let Some(id) = pick(&all, n) {
                conn.execute(
                    "UPDATE messages SET turn_index = ?2 WHERE id = ?1",
                    params![id, to as i64],
                )
                .expect("scramble");
            }
        }
        Damage::ResultIntoUser { pick: n } => {
            let tools = ids(
                conn,
                "SELECT id FROM messages WHERE role = 'tool' ORDER BY id",
            );
            if let Some(id) = pick(&tools, n) {
                conn.execute("UPDATE messages SET role = 'user' WHERE id = ?1", [id])
                    .expect("role");
            }
        }
    }
}

fn run(db: &Path, extra: &[&str]) -> (i32, Value) {
    let out = Command::new(BIN)
        .arg("--db")
        .arg(db)
        .args(["--json", "--no-backup"])
        .args(extra)
        .output()
        .expect("run store-repair");
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().expect("exit code"), report)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn repair_mends_random_damage_deletes_nothing_and_is_idempotent(
        damages in proptest::collection::vec(damage(), 1..6)
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("fuzz.db");
        healthy(&db);
        let (messages, parts) = {
            let conn = raw(&db);
            for d in &damages {
                apply(&conn, d);
            }
            let messages: BTreeSet<i64> = ids(&conn, "SELECT id FROM messages").into_iter().collect();
            let parts: BTreeSet<i64> = ids(&conn, "SELECT id FROM parts").into_iter().collect();
            (messages, parts)
        };

        let (code, report) = run(&db, &[]);
        prop_assert_eq!(code, 0, "first run: {}", report);
        let conn = raw(&db);
        assert_integrity(&conn);
        let left = violations(&conn);
        prop_assert!(left.is_empty(), "after repair: {:?}\n{}", left, report);
        let after_messages: BTreeSet<i64> = ids(&conn, "SELECT id FROM messages").into_iter().collect();
        let after_parts: BTreeSet<i64> = ids(&conn, "SELECT id FROM parts").into_iter().collect();
        prop_assert!(messages.is_subset(&after_messages), "a message was deleted");
        prop_assert!(parts.is_subset(&after_parts), "a part was deleted");

        let before_second = dump_in(&conn);
        let (code, second) = run(&db, &[]);
        prop_assert_eq!(code, 0, "second run: {}", second);
        prop_assert_eq!(&second["repaired"], &Value::from(0), "second run repaired: {}", second);
        prop_assert_eq!(second["problems"].as_array().map(Vec::len), Some(0));
        prop_assert_eq!(dump_in(&raw(&db)), before_second, "the second run changed rows");
    }
}

/// The fuzz is only as good as its damage: each kind, applied alone, must be something
/// `store-repair` finds and mends.
#[test]
fn each_kind_of_damage_is_found_and_mended() {
    let kinds = [
        Damage::FlipCompacted { pick: 3 },
        Damage::DeleteResult { pick: 0 },
        Damage::MoveResult { pick: 0, to: 0 },
        Damage::ScrambleTurn { pick: 4, to: 17 },
        Damage::ResultIntoUser { pick: 1 },
    ];
    for damage in kinds {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("one.db");
        healthy(&db);
        apply(&raw(&db), &damage);
        assert!(
            !violations(&raw(&db)).is_empty(),
            "{damage:?} broke nothing"
        );
        let (code, report) = run(&db, &["--dry-run"]);
        assert_eq!(
            code, 1,
            "{damage:?}: dry run should find problems: {report}"
        );
        let (code, report) = run(&db, &[]);
        assert_eq!(code, 0, "{damage:?}: {report}");
        let left = violations(&raw(&db));
        assert!(left.is_empty(), "{damage:?} left {left:?}");
    }
}
