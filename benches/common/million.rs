//! The 1,000,000-message fixture shared by the repair and session-listing benchmarks: 10,000
//! sessions of 100 messages (a system message, then turns of user / assistant with text and a
//! tool_use / tool result / assistant, the first 41 messages of each session compacted;
//! healthy), built once with raw inserts under Cargo's target tmpdir and reused by later runs.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, TransactionBehavior};
use session_store::Store;

pub const SESSIONS: usize = 10_000;
pub const PER_SESSION: usize = 100;
const COMPACTED: usize = 41;

pub fn fixture() -> PathBuf {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("repair-1m-messages.db");
    // Reuse the fixture unless this build's migrations no longer agree with it.
    if path.exists() && Store::open(&path).is_ok() {
        return path;
    }
    let _ = std::fs::remove_file(&path);
    let partial = path.with_extension("partial");
    let _ = std::fs::remove_file(&partial);
    drop(Store::open(&partial).expect("create fixture"));
    let mut conn = Connection::open(&partial).expect("open fixture");
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .expect("tx");
    {
        let mut session = tx
            .prepare("INSERT INTO sessions (id, created_at, updated_at) VALUES (?1, ?2, ?2)")
            .expect("prepare");
        let mut message = tx
            .prepare(
                "INSERT INTO messages (session_id, seq, turn_index, role, compacted, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .expect("prepare");
        let mut part = tx
            .prepare(
                "INSERT INTO parts (message_id, ordinal, kind, text, tool_use_id, tool_name, input)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .expect("prepare");
        let at = "2026-01-01T00:00:00.000000Z";
        for s in 0..SESSIONS {
            let id = format!("session-{s:05}");
            session.execute(params![id, at]).expect("session");
            let mut users = 0i64;
            for i in 0..PER_SESSION {
                let j = i.wrapping_sub(1);
                let role = match (i, j % 4) {
                    (0, _) => "system",
                    (_, 0) => "user",
                    (_, 2) => "tool",
                    _ => "assistant",
                };
                if role == "user" {
                    users += 1;
                }
                message
                    .execute(params![
                        id,
                        i as i64 + 1,
                        (users - 1).max(0),
                        role,
                        i < COMPACTED,
                        at
                    ])
                    .expect("message");
                let m = tx.last_insert_rowid();
                let call = format!("toolu_{s}_{j}");
                let answer = format!("toolu_{s}_{}", j.wrapping_sub(1));
                match (role, j % 4) {
                    ("assistant", 1) => {
                        part.execute(params![
                            m,
                            0,
                            "text",
                            "let me look",
                            None::<&str>,
                            None::<&str>,
                            None::<&str>
                        ])
                        .expect("part");
                        part.execute(params![
                            m,
                            1,
                            "tool_use",
                            None::<&str>,
                            call,
                            "bash",
                            "{\"cmd\":\"ls -la /tmp\"}"
                        ])
                        .expect("part");
                    }
                    ("tool", _) => {
                        part.execute(params![
                            m,
                            0,
                            "tool_result",
                            "total 0\ndrwxrwxrwt 2 root root",
                            answer,
                            None::<&str>,
                            None::<&str>
                        ])
                        .expect("part");
                    }
                    _ => {
                        part.execute(params![
                            m,
                            0,
                            "text",
                            "a sentence or two of conversation",
                            None::<&str>,
                            None::<&str>,
                            None::<&str>
                        ])
                        .expect("part");
                    }
                }
            }
        }
    }
    // The rows went in as another writer's would; count them as the store's own writes
    // count theirs (since V14 no trigger counts inserts), so the listing reads the counts.
    tx.execute_batch(
        "UPDATE sessions SET message_count =
             (SELECT COUNT(*) FROM messages m WHERE m.session_id = sessions.id)",
    )
    .expect("count");
    tx.commit().expect("commit");
    drop(conn);
    std::fs::rename(&partial, &path).expect("rename fixture");
    path
}
