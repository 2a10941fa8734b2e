//! What the benchmarks share: the workload (a realistic tool turn), the raw-rusqlite baseline
//! that writes and reads the same rows with no store logic, the two peers (a JSON Lines file
//! and a JSON-blob-per-message table), and reading criterion's own estimates back to print
//! ratios measured in the same run.
//!
//! The baseline and the peers use the store's connection settings (WAL, `synchronous=NORMAL`,
//! `foreign_keys=ON`), so a ratio measures the store's logic, not a different durability.
#![allow(dead_code)] // each bench uses part of this module
#![allow(clippy::disallowed_methods)] // benches read the clock like the store does
#![allow(clippy::unwrap_used)] // a benchmark that fails to set up should stop loudly

pub mod million;

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use chrono::{DateTime, SecondsFormat, Utc};
use rusqlite::{params, Connection, Row, TransactionBehavior};
use serde_json::{json, Value};
use session_store::{Message, NewMessage, Part, PartKind, Role, SessionId};

/// Deterministic filler text of about `len` bytes (word-like, so JSON and SQLite see text).
pub fn filler(seed: u64, len: usize) -> String {
    const WORDS: &[&str] = &[
        "fn",
        "let",
        "match",
        "the",
        "session",
        "store",
        "tool",
        "result",
        "error",
        "path",
        "src/lib.rs",
        "=>",
        "Ok(())",
        "cargo",
        "test",
        "assert_eq!",
        "parts",
        "turn",
        "{",
        "}",
    ];
    let mut out = String::with_capacity(len + 16);
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.push_str(WORDS[(x % WORDS.len() as u64) as usize]);
        out.push(if x.is_multiple_of(11) { '\n' } else { ' ' });
    }
    out
}

/// A tool_use id as providers make them (`toolu_01` and 22 random-looking base-62
/// characters): ids in a real session are not in insertion order, so an index on them takes
/// each new one at a random place.
pub fn tool_use_id(n: u64) -> String {
    const DIGITS: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut x = n.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x2545_f491_4f6c_dd1d;
    let mut id = String::from("toolu_01");
    for _ in 0..22 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        id.push(DIGITS[(x % 62) as usize] as char);
    }
    id
}

/// The length of a tool result: 0.5 to 4 KB, ~2.2 KB on average.
fn result_len(n: u64) -> usize {
    500 + (n.wrapping_mul(2_654_435_761) % 3_500) as usize
}

/// Messages in one [`tool_turn`].
pub const TURN_LEN: usize = 6;

/// One realistic tool turn, `n` making its ids unique (see [`tool_use_id`]): a user request (~200 B); an assistant
/// message with signed reasoning (~600 B), a short text and three tool_uses; three tool
/// messages with a result each (0.5-4 KB, ~2.2 KB on average, like a file read or a
/// command's output); the final answer (~800 B). About 8 KiB of content in 6 messages and 10
/// parts.
pub fn tool_turn(n: u64) -> Vec<NewMessage> {
    let ids: Vec<String> = (0..3).map(|i| tool_use_id(n * 3 + i)).collect();
    let mut turn = vec![
        NewMessage::user(filler(n, 200)),
        NewMessage::assistant(vec![
            Part::reasoning(
                filler(n + 1, 600),
                Some(json!({"anthropic": {"signature": filler(n + 2, 300)}})),
            ),
            Part::text("Let me look at the code."),
            Part::tool_use(
                &ids[0],
                "bash",
                json!({"command": "ls -la src", "timeout": 120}),
            ),
            Part::tool_use(
                &ids[1],
                "read",
                json!({"path": "src/store/write.rs", "limit": 400}),
            ),
            Part::tool_use(
                &ids[2],
                "grep",
                json!({"pattern": "prepare_cached", "path": "src"}),
            ),
        ]),
    ];
    for (i, id) in ids.iter().enumerate() {
        turn.push(NewMessage::tool(vec![Part::tool_result(
            id,
            filler(n * 7 + i as u64, result_len(n * 3 + i as u64)),
        )]));
    }
    turn.push(NewMessage::assistant(vec![Part::text(filler(n + 3, 800))]));
    turn
}

/// A small deterministic generator for [`agent_turns`] (xorshift64*).
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// The next value.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A value in `low..=high`.
    pub fn range(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low + 1)
    }

    /// `len` random ASCII letters and digits.
    pub fn alnum(&mut self, len: usize) -> String {
        const DIGITS: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
        (0..len)
            .map(|_| DIGITS[(self.next() % 62) as usize] as char)
            .collect()
    }
}

/// `turns` turns of an agent at work, the shape an outside harness measured and the other
/// benches lack: a user message (50-400 B); 0-10 tool steps, each one assistant message
/// (half of them with signed reasoning of 200-2,000 B and an 88-character signature, a
/// short text, and 1-4 parallel tool_uses with `toolu_` + 24 random alphanumerics and a
/// 50-500 B JSON input) and ONE tool message holding all of that step's results (0-4,000 B
/// each, 5% of them errors); then the final answer (100-1,500 B). 171 turns are about 2,000
/// messages of ~3 KB each.
pub fn agent_turns(seed: u64, turns: usize) -> Vec<Vec<NewMessage>> {
    let mut rng = Rng::new(seed);
    (0..turns).map(|_| agent_turn(&mut rng)).collect()
}

/// One turn of [`agent_turns`].
pub fn agent_turn(rng: &mut Rng) -> Vec<NewMessage> {
    let mut turn = vec![NewMessage::user(filler(
        rng.next(),
        rng.range(50, 400) as usize,
    ))];
    for _ in 0..rng.range(0, 10) {
        let mut parts = Vec::new();
        if rng.next().is_multiple_of(2) {
            let signature = rng.alnum(88);
            parts.push(Part::reasoning(
                filler(rng.next(), rng.range(200, 2_000) as usize),
                Some(json!({"anthropic": {"signature": signature}})),
            ));
        }
        parts.push(Part::text("Let me check that."));
        let ids: Vec<String> = (0..rng.range(1, 4))
            .map(|_| format!("toolu_{}", rng.alnum(24)))
            .collect();
        for id in &ids {
            let input = json!({"command": filler(rng.next(), rng.range(30, 480) as usize)});
            parts.push(Part::tool_use(id, "bash", input));
        }
        turn.push(NewMessage::assistant(parts));
        let results = ids
            .iter()
            .map(|id| {
                let text = filler(rng.next(), rng.range(0, 4_000) as usize);
                if rng.next().is_multiple_of(20) {
                    Part::tool_error(id, text)
                } else {
                    Part::tool_result(id, text)
                }
            })
            .collect();
        turn.push(NewMessage::tool(results));
    }
    turn.push(NewMessage::assistant(vec![Part::text(filler(
        rng.next(),
        rng.range(100, 1_500) as usize,
    ))]));
    turn
}

/// The store's per-connection settings, for the baseline and the peers.
pub fn configure(conn: &Connection) {
    conn.busy_timeout(std::time::Duration::from_secs(30))
        .unwrap();
    conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
        .unwrap();
    conn.pragma_update(None, "foreign_keys", true).unwrap();
    conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
}

/// RFC 3339 with microseconds, as the store writes it.
pub fn now_text() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// The baseline: a connection to a database whose schema `Store::open` created, inserting
/// the same rows the store inserts (message, parts, the session's `updated_at`) with
/// `prepare_cached`, keeping `seq` and `turn_index` in memory instead of reading them.
pub struct Raw {
    /// The connection.
    pub conn: Connection,
    session: String,
    seq: i64,
    turn: Option<i64>,
    /// Other connections append to the session too: each append reads its end first.
    shared: bool,
}

/// The session's last seq and last turn, for a floor writer that shares its session.
const SESSION_END: &str = "SELECT MAX(seq), MAX(turn_index) FROM messages WHERE session_id = ?1";

const INSERT_MESSAGE: &str = "
    INSERT INTO messages (session_id, seq, turn_index, role, compacted, created_at)
    VALUES (?1, ?2, ?3, ?4, 0, ?5)";
const INSERT_PART: &str = "
    INSERT INTO parts (message_id, ordinal, kind, text, tool_use_id, tool_name, input, is_error, provider_metadata)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";
const TOUCH_SESSION: &str = "UPDATE sessions SET updated_at = ?2 WHERE id = ?1";

/// The floor: the contract's three tables with their keys, foreign keys and UNIQUE
/// constraints, plus the one index every turn-aware read needs,
/// `messages (session_id, turn_index, seq)`. No CHECK constraints, no other index, no
/// column beyond the contract's. What any program keeping the contract's rows in SQLite
/// must pay at least.
pub const FLOOR_SCHEMA: &str = "
    CREATE TABLE sessions (
        id          TEXT PRIMARY KEY,
        created_at  TEXT NOT NULL,
        updated_at  TEXT NOT NULL);
    CREATE TABLE messages (
        id          INTEGER PRIMARY KEY,
        session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        seq         INTEGER NOT NULL,
        turn_index  INTEGER NOT NULL,
        role        TEXT NOT NULL,
        compacted   INTEGER NOT NULL DEFAULT 0,
        created_at  TEXT NOT NULL,
        UNIQUE (session_id, seq));
    CREATE INDEX messages_by_turn ON messages (session_id, turn_index, seq);
    CREATE TABLE parts (
        id          INTEGER PRIMARY KEY,
        message_id  INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
        ordinal     INTEGER NOT NULL,
        kind        TEXT NOT NULL,
        text        TEXT,
        tool_use_id TEXT,
        tool_name   TEXT,
        input       TEXT,
        is_error    INTEGER NOT NULL DEFAULT 0,
        provider_metadata TEXT,
        UNIQUE (message_id, ordinal));";

/// The floor's connection settings: WAL and `synchronous=NORMAL`, nothing else (SQLite's
/// defaults otherwise, so foreign keys are not enforced: the strictest floor).
pub fn configure_floor(conn: &Connection) {
    conn.busy_timeout(std::time::Duration::from_secs(30))
        .unwrap();
    conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
        .unwrap();
    conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
}

/// Creates the floor's schema in a new file at `path`.
pub fn create_floor(path: &Path) {
    let conn = Connection::open(path).unwrap();
    configure_floor(&conn);
    conn.execute_batch(FLOOR_SCHEMA).unwrap();
}

impl Raw {
    /// The floor baseline: creates [`FLOOR_SCHEMA`] in a new file at `path` and a session in
    /// it; appends exactly like [`Raw::open`]'s baseline.
    pub fn floor(path: &Path) -> Self {
        create_floor(path);
        let conn = Connection::open(path).unwrap();
        configure_floor(&conn);
        Self::with_session(conn)
    }

    /// Another floor writer on the floor file at `path` (made by [`Raw::floor`]), with a
    /// session of its own.
    pub fn floor_session(path: &Path) -> Self {
        let conn = Connection::open(path).unwrap();
        configure_floor(&conn);
        Self::with_session(conn)
    }

    /// Opens `path` (already created by `Store::open`) and creates a session in it.
    pub fn open(path: &Path) -> Self {
        let conn = Connection::open(path).unwrap();
        configure(&conn);
        Self::with_session(conn)
    }

    /// Another floor writer on the floor file at `path` (made by [`Raw::floor`]), appending
    /// to its session `session` beside others: each append reads the session's end in its
    /// transaction (one statement on the floor's two indexes) instead of counting its own.
    pub fn join(path: &Path, session: &str) -> Self {
        let conn = Connection::open(path).unwrap();
        configure_floor(&conn);
        Self {
            conn,
            session: session.to_owned(),
            seq: 0,
            turn: None,
            shared: true,
        }
    }

    /// The session's id.
    pub fn session(&self) -> &str {
        &self.session
    }

    fn with_session(conn: Connection) -> Self {
        let session = SessionId::random().to_string();
        let now = now_text();
        conn.execute(
            "INSERT INTO sessions (id, created_at, updated_at) VALUES (?1, ?2, ?2)",
            params![session, now],
        )
        .unwrap();
        Self {
            conn,
            session,
            seq: 0,
            turn: None,
            shared: false,
        }
    }

    /// Changes the durability of the baseline's commits (`NORMAL` like the store, or `FULL`:
    /// fsync on every commit).
    pub fn synchronous(&self, level: &str) {
        self.conn.pragma_update(None, "synchronous", level).unwrap();
    }

    /// Appends `messages` in one `BEGIN IMMEDIATE` transaction.
    pub fn append(&mut self, messages: &[NewMessage]) {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .unwrap();
        let now = now_text();
        if self.shared {
            (self.seq, self.turn) = tx
                .prepare_cached(SESSION_END)
                .unwrap()
                .query_row(params![self.session], |row| {
                    Ok((row.get::<_, Option<i64>>(0)?.unwrap_or(0), row.get(1)?))
                })
                .unwrap();
        }
        for message in messages {
            self.seq += 1;
            let turn = match (message.role, self.turn) {
                (Role::User, Some(t)) => t + 1,
                (Role::User, None) => 0,
                (_, t) => t.unwrap_or(0),
            };
            if message.role == Role::User {
                self.turn = Some(turn);
            }
            tx.prepare_cached(INSERT_MESSAGE)
                .unwrap()
                .execute(params![
                    self.session,
                    self.seq,
                    turn,
                    message.role.as_str(),
                    now
                ])
                .unwrap();
            let id = tx.last_insert_rowid();
            for (ordinal, part) in message.parts.iter().enumerate() {
                insert_part(&tx, id, ordinal as i64, part);
            }
        }
        tx.prepare_cached(TOUCH_SESSION)
            .unwrap()
            .execute(params![self.session, now])
            .unwrap();
        tx.commit().unwrap();
    }
}

fn insert_part(conn: &Connection, message_id: i64, ordinal: i64, part: &Part) {
    let metadata = part
        .provider_metadata()
        .map(|m| serde_json::to_string(m).unwrap());
    let (text, tool_use_id, tool_name, input, is_error) = match part {
        Part::Text { text, .. } | Part::Reasoning { text, .. } => {
            (Some(text.as_str()), None, None, None, false)
        }
        Part::RedactedReasoning { data, .. } => (Some(data.as_str()), None, None, None, false),
        Part::ToolUse {
            id, name, input, ..
        } => (
            None,
            Some(id.as_str()),
            Some(name.as_str()),
            Some(serde_json::to_string(input).unwrap()),
            false,
        ),
        Part::ToolResult {
            tool_use_id,
            content,
            is_error,
            ..
        } => (
            Some(content.as_str()),
            Some(tool_use_id.as_str()),
            None,
            None,
            *is_error,
        ),
        other => unreachable!("the benches write no {} parts", other.kind()),
    };
    conn.prepare_cached(INSERT_PART)
        .unwrap()
        .execute(params![
            message_id,
            ordinal,
            part.kind().as_str(),
            text,
            tool_use_id,
            tool_name,
            input,
            is_error,
            metadata
        ])
        .unwrap();
}

/// The rows of the provider view (every message not compacted, with its parts), in one join,
/// without the store's snapshot transaction, session check or summary lookup.
pub const RAW_SELECT: &str = "
    SELECT m.id, m.seq, m.turn_index, m.role, m.compacted, m.created_at,
           p.id, p.kind, p.text, p.tool_use_id, p.tool_name, p.input, p.is_error, p.provider_metadata
    FROM messages m LEFT JOIN parts p ON p.message_id = m.id
    WHERE m.session_id = ?1 AND m.compacted = 0
    ORDER BY m.seq, p.ordinal";

/// Every message of the session with its parts (the floor's "load all").
pub const RAW_SELECT_ALL: &str = "
    SELECT m.id, m.seq, m.turn_index, m.role, m.compacted, m.created_at,
           p.id, p.kind, p.text, p.tool_use_id, p.tool_name, p.input, p.is_error, p.provider_metadata
    FROM messages m LEFT JOIN parts p ON p.message_id = m.id
    WHERE m.session_id = ?1
    ORDER BY m.seq, p.ordinal";

/// The last `?2` turns of the session (turn indexes are dense in a session written through
/// the contract's rule), in order, on the `(session_id, turn_index, seq)` index; `m.id` in
/// the `ORDER BY` lets the join keep the index's order (no sort).
pub const RAW_SELECT_LAST_TURNS: &str = "
    SELECT m.id, m.seq, m.turn_index, m.role, m.compacted, m.created_at,
           p.id, p.kind, p.text, p.tool_use_id, p.tool_name, p.input, p.is_error, p.provider_metadata
    FROM messages m LEFT JOIN parts p ON p.message_id = m.id
    WHERE m.session_id = ?1
      AND m.turn_index > (SELECT MAX(turn_index) FROM messages WHERE session_id = ?1) - ?2
    ORDER BY m.turn_index, m.seq, m.id, p.ordinal";

/// The raw read: [`RAW_SELECT`] decoded into the store's own `Message` and `Part` values.
pub fn raw_load(conn: &Connection, session: &str) -> Vec<Message> {
    raw_query(conn, RAW_SELECT, rusqlite::params![session])
}

/// The floor's "load all": [`RAW_SELECT_ALL`] decoded into `Message` values.
pub fn raw_load_all(conn: &Connection, session: &str) -> Vec<Message> {
    raw_query(conn, RAW_SELECT_ALL, rusqlite::params![session])
}

/// The floor's last `k` turns ([`RAW_SELECT_LAST_TURNS`]) decoded into `Message` values.
pub fn raw_last_turns(conn: &Connection, session: &str, k: i64) -> Vec<Message> {
    raw_query(conn, RAW_SELECT_LAST_TURNS, rusqlite::params![session, k])
}

/// A part as the floor keeps it when nothing asks for more: the columns as owned values,
/// JSON left as text.
#[derive(Debug)]
pub struct RawPart {
    /// `parts.kind`.
    pub kind: String,
    /// `parts.text`.
    pub text: Option<String>,
    /// `parts.tool_use_id`.
    pub tool_use_id: Option<String>,
    /// `parts.tool_name`.
    pub tool_name: Option<String>,
    /// `parts.input` (JSON text).
    pub input: Option<String>,
    /// `parts.is_error`.
    pub is_error: bool,
    /// `parts.provider_metadata` (JSON text).
    pub provider_metadata: Option<String>,
}

/// A message as the floor keeps it when nothing asks for more (see [`RawPart`]).
#[derive(Debug)]
pub struct RawMessage {
    /// `messages.id`.
    pub id: i64,
    /// `messages.seq`.
    pub seq: i64,
    /// `messages.turn_index`.
    pub turn_index: i64,
    /// `messages.role`.
    pub role: String,
    /// `messages.compacted`.
    pub compacted: bool,
    /// `messages.created_at` (RFC 3339 text).
    pub created_at: String,
    /// Its parts.
    pub parts: Vec<RawPart>,
}

/// The lowest floor of a load: [`RAW_SELECT_ALL`]'s rows as owned strings, no JSON or time
/// parsing. Shown beside the `Message` floor to say what decoding into values costs.
pub fn raw_load_strings(conn: &Connection, session: &str) -> Vec<RawMessage> {
    let mut stmt = conn.prepare_cached(RAW_SELECT_ALL).unwrap();
    let mut rows = stmt.query([session]).unwrap();
    let mut messages: Vec<RawMessage> = Vec::new();
    while let Some(row) = rows.next().unwrap() {
        let id: i64 = row.get(0).unwrap();
        if messages.last().is_none_or(|m| m.id != id) {
            messages.push(RawMessage {
                id,
                seq: row.get(1).unwrap(),
                turn_index: row.get(2).unwrap(),
                role: row.get(3).unwrap(),
                compacted: row.get::<_, i64>(4).unwrap() != 0,
                created_at: row.get(5).unwrap(),
                parts: Vec::new(),
            });
        }
        if row.get::<_, Option<i64>>(6).unwrap().is_some() {
            messages.last_mut().unwrap().parts.push(RawPart {
                kind: row.get(7).unwrap(),
                text: row.get(8).unwrap(),
                tool_use_id: row.get(9).unwrap(),
                tool_name: row.get(10).unwrap(),
                input: row.get(11).unwrap(),
                is_error: row.get::<_, i64>(12).unwrap() != 0,
                provider_metadata: row.get(13).unwrap(),
            });
        }
    }
    messages
}

/// Runs one of the raw `SELECT`s above and decodes its rows into `Message` values.
pub fn raw_query(conn: &Connection, sql: &str, params: impl rusqlite::Params) -> Vec<Message> {
    let mut stmt = conn.prepare_cached(sql).unwrap();
    let mut rows = stmt.query(params).unwrap();
    let mut messages: Vec<Message> = Vec::new();
    while let Some(row) = rows.next().unwrap() {
        let id: i64 = row.get(0).unwrap();
        if messages.last().is_none_or(|m| m.id != id) {
            let created: String = row.get(5).unwrap();
            messages.push(Message {
                id,
                seq: row.get(1).unwrap(),
                turn_index: row.get(2).unwrap(),
                role: row.get::<_, String>(3).unwrap().parse().unwrap(),
                compacted: row.get::<_, i64>(4).unwrap() != 0,
                created_at: DateTime::parse_from_rfc3339(&created)
                    .unwrap()
                    .with_timezone(&Utc),
                model: None,
                state: session_store::MessageState::Complete,
                parts: Vec::new(),
            });
        }
        if let Some(part) = raw_part(row) {
            messages.last_mut().unwrap().parts.push(part);
        }
    }
    messages
}

fn raw_part(row: &Row<'_>) -> Option<Part> {
    row.get::<_, Option<i64>>(6).unwrap()?;
    let kind: PartKind = row.get::<_, String>(7).unwrap().parse().unwrap();
    let text: Option<String> = row.get(8).unwrap();
    let tool_use_id: Option<String> = row.get(9).unwrap();
    let metadata = row
        .get::<_, Option<String>>(13)
        .unwrap()
        .map(|m| serde_json::from_str::<Value>(&m).unwrap());
    Some(match kind {
        PartKind::Text => Part::Text {
            text: text.unwrap_or_default(),
            provider_metadata: metadata,
        },
        PartKind::Reasoning => Part::Reasoning {
            text: text.unwrap_or_default(),
            provider_metadata: metadata,
        },
        PartKind::RedactedReasoning => Part::RedactedReasoning {
            data: text.unwrap_or_default(),
            provider_metadata: metadata,
        },
        PartKind::ToolUse => Part::ToolUse {
            id: tool_use_id.unwrap_or_default(),
            name: row
                .get::<_, Option<String>>(10)
                .unwrap()
                .unwrap_or_default(),
            input: serde_json::from_str(&row.get::<_, String>(11).unwrap()).unwrap(),
            provider_metadata: metadata,
        },
        PartKind::ToolResult => Part::ToolResult {
            tool_use_id: tool_use_id.unwrap_or_default(),
            content: text.unwrap_or_default(),
            is_error: row.get::<_, i64>(12).unwrap() != 0,
            blocks: None,
            provider_metadata: metadata,
        },
        other => unreachable!("the benches write no {other} parts"),
    })
}

/// A stored message as the peers keep it: the store's `Message` shape, serialised whole.
pub fn as_stored(message: &NewMessage, id: i64, seq: i64, turn_index: i64) -> Message {
    Message {
        id,
        seq,
        turn_index,
        role: message.role,
        compacted: false,
        created_at: Utc::now(),
        model: message.model.clone(),
        state: session_store::MessageState::Complete,
        parts: message.parts.clone(),
    }
}

/// Peer 1: a JSON Lines file, one line per message, appended with one `write` each (no
/// fsync, like the agent CLIs that keep their sessions this way), read back whole.
pub struct Jsonl {
    path: PathBuf,
    file: File,
    seq: i64,
}

impl Jsonl {
    /// Creates (or appends to) the file at `path`.
    pub fn open(path: &Path) -> Self {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        Self {
            path: path.to_path_buf(),
            file,
            seq: 0,
        }
    }

    /// Appends one line per message.
    pub fn append(&mut self, messages: &[NewMessage]) {
        for message in messages {
            self.seq += 1;
            let mut line = serde_json::to_vec(&as_stored(message, self.seq, self.seq, 0)).unwrap();
            line.push(b'\n');
            self.file.write_all(&line).unwrap();
        }
    }

    /// Reads every line back into messages.
    pub fn load(&self) -> Vec<Message> {
        let reader = BufReader::new(File::open(&self.path).unwrap());
        reader
            .lines()
            .map(|line| serde_json::from_str(&line.unwrap()).unwrap())
            .collect()
    }
}

/// Peer 2: a JSON-blob-per-message table (one row per item, no parts), the shape the most-used
/// Python agent SDK stores (`agent_messages(id, session_id, message_data, created_at)`).
pub struct Blob {
    /// The connection.
    pub conn: Connection,
    session: String,
    seq: i64,
}

const BLOB_SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS agent_sessions (
        session_id TEXT PRIMARY KEY,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS agent_messages (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL REFERENCES agent_sessions(session_id) ON DELETE CASCADE,
        message_data TEXT NOT NULL,
        created_at TEXT NOT NULL);
    CREATE INDEX IF NOT EXISTS agent_messages_by_session ON agent_messages (session_id, id);";

impl Blob {
    /// Opens (or creates) the peer's database at `path` with one session.
    pub fn open(path: &Path) -> Self {
        let conn = Connection::open(path).unwrap();
        configure(&conn);
        conn.execute_batch(BLOB_SCHEMA).unwrap();
        let session = SessionId::random().to_string();
        let now = now_text();
        conn.execute(
            "INSERT INTO agent_sessions VALUES (?1, ?2, ?2)",
            params![session, now],
        )
        .unwrap();
        Self {
            conn,
            session,
            seq: 0,
        }
    }

    /// Opens an existing peer database at `path` and uses its (first) session.
    pub fn attach(path: &Path) -> Self {
        let conn = Connection::open(path).unwrap();
        configure(&conn);
        let session: String = conn
            .query_row("SELECT session_id FROM agent_sessions LIMIT 1", [], |r| {
                r.get(0)
            })
            .unwrap();
        Self {
            conn,
            session,
            seq: 0,
        }
    }

    /// Appends one row per message in one `BEGIN IMMEDIATE` transaction.
    pub fn append(&mut self, messages: &[NewMessage]) {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .unwrap();
        let now = now_text();
        for message in messages {
            self.seq += 1;
            let data = serde_json::to_string(&as_stored(message, self.seq, self.seq, 0)).unwrap();
            tx.prepare_cached(
                "INSERT INTO agent_messages (session_id, message_data, created_at) VALUES (?1, ?2, ?3)",
            )
            .unwrap()
            .execute(params![self.session, data, now])
            .unwrap();
        }
        tx.prepare_cached("UPDATE agent_sessions SET updated_at = ?2 WHERE session_id = ?1")
            .unwrap()
            .execute(params![self.session, now])
            .unwrap();
        tx.commit().unwrap();
    }

    /// Reads the session's rows back into messages.
    pub fn load(&self) -> Vec<Message> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT message_data FROM agent_messages WHERE session_id = ?1 ORDER BY id",
            )
            .unwrap();
        let rows = stmt
            .query_map([&self.session], |r| r.get::<_, String>(0))
            .unwrap();
        rows.map(|data| serde_json::from_str(&data.unwrap()).unwrap())
            .collect()
    }
}

/// Criterion's median estimate (ns) for `group/bench` from this run, if it was measured.
pub fn median_ns(group: &str, bench: &str) -> Option<f64> {
    let home = std::env::var_os("CRITERION_HOME")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR").map(|d| PathBuf::from(d).join("criterion"))
        })
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/criterion"));
    let path = home.join(group).join(bench).join("new/estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let estimates: Value = serde_json::from_str(&text).ok()?;
    estimates["median"]["point_estimate"].as_f64()
}

/// Prints `name: ours / baseline` for each pair measured in this run, as a ratio.
pub fn print_ratios(group: &str, pairs: &[(&str, &str, Option<f64>)]) {
    println!("\n== {group}: ratios of medians, this run ==");
    for (ours, baseline, target) in pairs {
        match (median_ns(group, ours), median_ns(group, baseline)) {
            (Some(a), Some(b)) => {
                let ratio = a / b;
                let verdict = match target {
                    Some(t) if ratio <= *t => format!(" (target {t}x: met)"),
                    Some(t) => format!(" (target {t}x: MISSED)"),
                    None => String::new(),
                };
                println!(
                    "{ours} / {baseline} = {ratio:.2}x  ({:.1} us vs {:.1} us){verdict}",
                    a / 1e3,
                    b / 1e3
                );
            }
            _ => println!("{ours} / {baseline}: not measured in this run"),
        }
    }
}

/// Paired timing, robust to a shared machine's drifting load: each round times one call of
/// `ours` and one of `baseline` back to back (alternating which goes first), and the ratio
/// reported is the median of the per-round ratios. Printed beside criterion's figures.
pub fn paired(name: &str, rounds: usize, mut ours: impl FnMut(), mut baseline: impl FnMut()) {
    rounds_of(
        name,
        rounds,
        &mut || {},
        &mut [("ours", &mut ours), ("baseline", &mut baseline)],
    );
}

/// What [`rounds_of`] measured for one arm.
#[derive(Clone, Debug)]
pub struct Arm {
    /// The arm's name.
    pub name: String,
    /// Median time of one call, seconds.
    pub median: f64,
    /// Median over the rounds of (first arm's time / this arm's time in the same round).
    pub ratio: f64,
}

/// Paired rounds over several arms: each round calls `reset` (untimed) before timing each
/// arm once, the arms taken in a rotating order so none always goes first; the ratio of
/// each arm is the median over rounds of `arms[0]` / that arm, measured in the same round.
/// Prints one line per arm and returns them.
pub fn rounds_of(
    name: &str,
    rounds: usize,
    reset: &mut dyn FnMut(),
    arms: &mut [(&str, &mut dyn FnMut())],
) -> Vec<Arm> {
    use std::time::Instant;
    // `ROUNDS_SCALE=k` runs k times the rounds (to attach a profiler to a long stretch).
    let rounds = rounds
        * std::env::var("ROUNDS_SCALE")
            .ok()
            .and_then(|k| k.parse().ok())
            .unwrap_or(1);
    let n = arms.len();
    let mut times = vec![Vec::with_capacity(rounds); n];
    let mut ratios = vec![Vec::with_capacity(rounds); n];
    for round in 0..rounds {
        let mut this = vec![0.0; n];
        for k in 0..n {
            let i = (round + k) % n;
            reset();
            let start = Instant::now();
            (arms[i].1)();
            this[i] = start.elapsed().as_secs_f64();
        }
        for i in 0..n {
            times[i].push(this[i]);
            ratios[i].push(this[0] / this[i]);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!("paired {name} ({rounds} rounds):");
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let arm = Arm {
            name: arms[i].0.to_owned(),
            median: median(&mut times[i]),
            ratio: median(&mut ratios[i]),
        };
        if i == 0 {
            println!("  {:<28} {:>12.1} us", arm.name, arm.median * 1e6);
        } else {
            println!(
                "  {:<28} {:>12.1} us   {} / this = {:.2}x",
                arm.name,
                arm.median * 1e6,
                arms[0].0,
                arm.ratio
            );
        }
        out.push(arm);
    }
    out
}
