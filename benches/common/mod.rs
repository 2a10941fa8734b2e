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
        out.push(if x % 11 == 0 { '\n' } else { ' ' });
    }
    out
}

/// Messages in one [`tool_turn`].
pub const TURN_LEN: usize = 6;

/// One realistic tool turn, `n` making its ids unique: a user request (~200 B); an assistant
/// message with signed reasoning (~600 B), a short text and three tool_uses; three tool
/// messages with a result each (~2 KiB, like a file read or a command's output); the final
/// answer (~800 B). About 7.5 KiB of content in 6 messages and 10 parts.
pub fn tool_turn(n: u64) -> Vec<NewMessage> {
    let ids: Vec<String> = (0..3).map(|i| format!("toolu_{n:08}_{i}")).collect();
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
            filler(n * 7 + i as u64, 2000),
        )]));
    }
    turn.push(NewMessage::assistant(vec![Part::text(filler(n + 3, 800))]));
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
}

const INSERT_MESSAGE: &str = "
    INSERT INTO messages (session_id, seq, turn_index, role, compacted, created_at)
    VALUES (?1, ?2, ?3, ?4, 0, ?5)";
const INSERT_PART: &str = "
    INSERT INTO parts (message_id, ordinal, kind, text, tool_use_id, tool_name, input, is_error, provider_metadata)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";
const TOUCH_SESSION: &str = "UPDATE sessions SET updated_at = ?2 WHERE id = ?1";

impl Raw {
    /// Opens `path` (already created by `Store::open`) and creates a session in it.
    pub fn open(path: &Path) -> Self {
        let conn = Connection::open(path).unwrap();
        configure(&conn);
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

/// The raw read: [`RAW_SELECT`] decoded into the store's own `Message` and `Part` values.
pub fn raw_load(conn: &Connection, session: &str) -> Vec<Message> {
    let mut stmt = conn.prepare_cached(RAW_SELECT).unwrap();
    let mut rows = stmt.query([session]).unwrap();
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
    use std::time::Instant;
    let mut ratios = Vec::with_capacity(rounds);
    let (mut a_all, mut b_all) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for round in 0..rounds {
        let time = |f: &mut dyn FnMut()| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64()
        };
        let (a, b) = if round % 2 == 0 {
            let a = time(&mut ours);
            (a, time(&mut baseline))
        } else {
            let b = time(&mut baseline);
            (time(&mut ours), b)
        };
        ratios.push(a / b);
        a_all.push(a);
        b_all.push(b);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "paired {name}: median ratio {:.2}x over {rounds} rounds ({:.1} us vs {:.1} us)",
        median(&mut ratios),
        median(&mut a_all) * 1e6,
        median(&mut b_all) * 1e6
    );
}
