//! A generator of broken session databases, written with raw SQL the way older or foreign
//! code wrote them, so that `store-repair` and the forensic views have every rule broken to
//! find (and the healthy shapes they must not report). Shared by the repair tests.

use std::collections::BTreeSet;
use std::path::Path;

use rusqlite::{params, Connection};
use session_store::Store;

/// One part, as a raw row.
#[derive(Clone, Copy, Debug)]
pub enum P<'a> {
    Text(&'a str),
    Use(&'a str),
    Result(&'a str),
}

/// A session written row by row with whatever turn indexes and flags the case needs.
pub struct Raw<'c> {
    conn: &'c Connection,
    session: String,
    seq: i64,
    users: i64,
    created_at: String,
}

pub const OLD: &str = "2026-01-01T00:00:00.000000Z";

impl<'c> Raw<'c> {
    pub fn new(conn: &'c Connection, session: &str) -> Self {
        conn.execute(
            "INSERT INTO sessions (id, created_at, updated_at) VALUES (?1, ?2, ?2)",
            params![session, OLD],
        )
        .expect("insert session");
        Self {
            conn,
            session: session.to_owned(),
            seq: 0,
            users: 0,
            created_at: OLD.to_owned(),
        }
    }

    /// A message with the contract's turn index.
    pub fn msg(&mut self, role: &str, compacted: bool, parts: &[P<'_>]) -> i64 {
        if role == "user" {
            self.users += 1;
        }
        let turn = (self.users - 1).max(0);
        self.msg_at_turn(role, compacted, turn, parts)
    }

    /// A message with the given stored turn index (right or wrong).
    pub fn msg_at_turn(&mut self, role: &str, compacted: bool, turn: i64, parts: &[P<'_>]) -> i64 {
        self.seq += 1;
        self.conn
            .execute(
                "INSERT INTO messages (session_id, seq, turn_index, role, compacted, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    self.session,
                    self.seq,
                    turn,
                    role,
                    compacted,
                    self.created_at
                ],
            )
            .expect("insert message");
        let id = self.conn.last_insert_rowid();
        for (ordinal, part) in parts.iter().enumerate() {
            let (kind, text, tool_use_id, name, input) = match *part {
                P::Text(t) => ("text", Some(t), None, None, None),
                P::Use(id) => (
                    "tool_use",
                    None,
                    Some(id),
                    Some("bash"),
                    Some("{\"cmd\":\"ls\"}"),
                ),
                P::Result(id) => ("tool_result", Some("ok"), Some(id), None, None),
            };
            self.conn
                .execute(
                    "INSERT INTO parts (message_id, ordinal, kind, text, tool_use_id, tool_name, input)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    params![id, ordinal as i64, kind, text, tool_use_id, name, input],
                )
                .expect("insert part");
        }
        id
    }
}

/// A case of the generated database: its session id and the rules it breaks.
pub struct Case {
    pub session: &'static str,
    pub rules: &'static [&'static str],
}

/// The cases [`build`] writes, healthy ones with no rules.
pub const CASES: &[Case] = &[
    Case {
        session: "healthy-plain",
        rules: &[],
    },
    Case {
        session: "healthy-system-between-use-and-result",
        rules: &[],
    },
    Case {
        session: "healthy-pending-at-end",
        rules: &[],
    },
    Case {
        session: "split-three-tool-turn",
        rules: &["split_turn_compaction"],
    },
    Case {
        session: "compaction-gap",
        rules: &["compaction_gap"],
    },
    Case {
        session: "turn-index-off-by-one",
        rules: &["turn_index_mismatch"],
    },
    Case {
        session: "tool-only-user-empty-text",
        rules: &["dangling_tool_use", "misplaced_tool_result"],
    },
    Case {
        session: "user-results-and-words",
        rules: &["dangling_tool_use", "misplaced_tool_result"],
    },
    Case {
        session: "cancelled-mid-history",
        rules: &["dangling_tool_use"],
    },
    Case {
        session: "orphan-after-compacted-head",
        rules: &["orphan_tool_result"],
    },
    Case {
        session: "duplicate-tool-use-id",
        rules: &["duplicate_tool_use_id"],
    },
];

/// The rules each session breaks, as [`CASES`] says.
pub fn expected() -> BTreeSet<(String, String)> {
    CASES
        .iter()
        .flat_map(|c| {
            c.rules
                .iter()
                .map(|r| (c.session.to_owned(), (*r).to_owned()))
        })
        .collect()
}

/// Creates a migrated database at `path` and writes every case of [`CASES`].
pub fn build(path: &Path) {
    drop(Store::open(path).expect("create store"));
    let conn = Connection::open(path).expect("open raw");
    write_cases(&conn);
}

/// Writes every case of [`CASES`] through `conn` (tables must exist).
pub fn write_cases(conn: &Connection) {
    use P::*;
    let mut s = Raw::new(conn, "healthy-plain");
    s.msg("system", false, &[Text("be brief")]);
    s.msg("user", false, &[Text("hi")]);
    s.msg("assistant", false, &[Text("hello")]);

    // A system message between a tool_use and its result never breaks the pair.
    let mut s = Raw::new(conn, "healthy-system-between-use-and-result");
    s.msg("user", false, &[Text("list /tmp")]);
    s.msg("assistant", false, &[Use("sys-a")]);
    s.msg("system", false, &[Text("reminder: be careful")]);
    s.msg("tool", false, &[Result("sys-a")]);
    s.msg("assistant", false, &[Text("done")]);

    // A call still waiting at the end of the session is legal (until --stale-after).
    let mut s = Raw::new(conn, "healthy-pending-at-end");
    s.msg("user", false, &[Text("run it")]);
    s.msg("assistant", false, &[Use("pend-a")]);

    // The seed's shape: compaction cut by message count inside a three-tool turn, between
    // tool_use b and its result.
    let mut s = Raw::new(conn, "split-three-tool-turn");
    s.msg("user", true, &[Text("first")]);
    s.msg("assistant", true, &[Text("hello")]);
    s.msg("user", true, &[Text("do three things")]);
    s.msg("assistant", true, &[Use("split-a")]);
    s.msg("tool", true, &[Result("split-a")]);
    s.msg("assistant", true, &[Use("split-b")]);
    s.msg("tool", false, &[Result("split-b")]);
    s.msg("assistant", false, &[Use("split-c")]);
    s.msg("tool", false, &[Result("split-c")]);
    s.msg("assistant", false, &[Text("done")]);

    // Turn 1 visible, turn 2 compacted.
    let mut s = Raw::new(conn, "compaction-gap");
    s.msg("user", true, &[Text("zero")]);
    s.msg("assistant", true, &[Text("0")]);
    s.msg("user", false, &[Text("one")]);
    s.msg("assistant", false, &[Text("1")]);
    s.msg("user", true, &[Text("two")]);
    s.msg("assistant", true, &[Text("2")]);
    s.msg("user", false, &[Text("three")]);

    // Turn indexes counted from 1 (u, not u - 1).
    let mut s = Raw::new(conn, "turn-index-off-by-one");
    s.msg_at_turn("user", false, 1, &[Text("hi")]);
    s.msg_at_turn("assistant", false, 1, &[Text("hello")]);
    s.msg_at_turn("user", false, 2, &[Text("again")]);

    // The seed's RC3 shape: results stored in a user message whose text is empty.
    let mut s = Raw::new(conn, "tool-only-user-empty-text");
    s.msg("user", false, &[Text("save three notes")]);
    s.msg("assistant", false, &[Use("empty-a")]);
    s.msg("user", false, &[Text(""), Result("empty-a")]);
    s.msg("assistant", false, &[Text("saved")]);

    let mut s = Raw::new(conn, "user-results-and-words");
    s.msg("user", false, &[Text("two things")]);
    s.msg("assistant", false, &[Use("words-a"), Use("words-b")]);
    s.msg(
        "user",
        false,
        &[Result("words-a"), Text("and also this"), Result("words-b")],
    );
    s.msg("assistant", false, &[Text("ok")]);

    // The seed's RC5 shape: cancelled after the assistant message was stored, before results.
    let mut s = Raw::new(conn, "cancelled-mid-history");
    s.msg("user", false, &[Text("three saves")]);
    s.msg("assistant", false, &[Use("cancel-a"), Use("cancel-b")]);
    s.msg("tool", false, &[Result("cancel-a")]);
    s.msg("user", false, &[Text("stop")]);
    s.msg("assistant", false, &[Text("stopped")]);

    // A result whose call is gone, right after a compacted head.
    let mut s = Raw::new(conn, "orphan-after-compacted-head");
    s.msg("user", true, &[Text("old")]);
    s.msg("assistant", true, &[Text("old answer")]);
    s.msg("user", false, &[Text("new")]);
    s.msg("tool", false, &[Result("orphan-gone")]);
    s.msg("assistant", false, &[Text("ok")]);

    let mut s = Raw::new(conn, "duplicate-tool-use-id");
    s.msg("user", false, &[Text("twice")]);
    s.msg("assistant", false, &[Use("dup-a")]);
    s.msg("tool", false, &[Result("dup-a")]);
    s.msg("assistant", false, &[Use("dup-a")]);
    s.msg("tool", false, &[Result("dup-a")]);
    s.msg("assistant", false, &[Text("done")]);
}

/// Every row of the contract's tables, in a stable order, as text: equal dumps mean equal
/// content.
pub fn dump(path: &Path) -> Vec<String> {
    let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("open for dump");
    dump_conn(&conn)
}

pub fn dump_conn(conn: &Connection) -> Vec<String> {
    let mut rows = Vec::new();
    for sql in [
        "SELECT id, created_at, updated_at FROM sessions ORDER BY id",
        "SELECT id, session_id, seq, turn_index, role, compacted, created_at FROM messages ORDER BY id",
        "SELECT id, message_id, ordinal, kind, text, tool_use_id, tool_name, input, is_error, provider_metadata FROM parts ORDER BY id",
    ] {
        let mut stmt = conn.prepare(sql).expect("prepare dump");
        let width = stmt.column_count();
        let mut query = stmt.query([]).expect("query dump");
        while let Some(row) = query.next().expect("row") {
            let cells: Vec<String> = (0..width)
                .map(|i| format!("{:?}", row.get_ref(i).expect("cell")))
                .collect();
            rows.push(cells.join("|"));
        }
    }
    rows
}

/// One session's rows (messages and parts), for "is it still as it was" comparisons.
pub fn dump_session(conn: &Connection, session: &str) -> Vec<String> {
    let mut stmt = conn
        .prepare(
            "SELECT m.id, m.seq, m.turn_index, m.role, m.compacted, p.id, p.ordinal, p.kind, p.text, p.tool_use_id, p.is_error
             FROM messages m LEFT JOIN parts p ON p.message_id = m.id
             WHERE m.session_id = ?1 ORDER BY m.seq, p.ordinal",
        )
        .expect("prepare");
    let mut rows = stmt.query([session]).expect("query");
    let mut out = Vec::new();
    while let Some(row) = rows.next().expect("row") {
        let cells: Vec<String> = (0..11)
            .map(|i| format!("{:?}", row.get_ref(i).expect("cell")))
            .collect();
        out.push(cells.join("|"));
    }
    out
}
