//! PostgreSQL writers against a raw `postgres` floor: 1, 4 and 16 writer threads, each on its
//! own session and all on one shared session, with `synchronous_commit` on and off; one
//! transaction per message on both arms; messages committed per second of wall time.
//!
//! The floor is a correct minimal writer on a minimal schema (`FLOOR_SCHEMA`: sessions,
//! messages with the turn index and its keys, parts): per message `BEGIN`, the session row
//! updated (its lock, so writers of one session take turns and `seq` never collides), the
//! message inserted with its `seq` and `turn_index` computed by the server, its parts in one
//! multi-row `INSERT`, `COMMIT`. The store's arm is `Store::append` (pairing checked, tail
//! state kept). Own sessions get the agent's shape, one message per transaction (a user
//! question, an assistant message with signed reasoning, a short text and two parallel
//! calls, one tool message with both results of 200-2,000 B, a final answer); the shared
//! session gets text messages only, since writers interleaving there would break each
//! other's tool pairs. Rounds alternate which arm runs first; a ratio is the median over the
//! rounds of ours / floor in messages per second.
//!
//! Both arms' tables first hold resident sessions (`PG_FLOOR_RESIDENT` messages, default
//! 20,000, in sessions of 100, one text part each) and are analysed, as a deployment's
//! tables are: a statement the server would plan again for every run's values shows here,
//! not only on empty tables.
//!
//! `SESSION_STORE_TEST_PG=... cargo bench --bench pg_floor` (skipped with a note when unset);
//! `PG_FLOOR_MESSAGES` (default 400) is the number of messages per configuration, split over
//! its writers; `PG_FLOOR_ROUNDS` (default 3) the rounds; `PG_FLOOR_ONLY=off,each,1` one
//! configuration (`on`/`off`, `each`/`shared`, writers); `PG_FLOOR_KEYS=1` gives each of
//! the store's messages an idempotency key (the floor writes none). Schemas `bench_floor` and
//! `bench_ours` are dropped and made again for every run of every arm.
#![allow(clippy::unwrap_used)] // a benchmark that fails to set up should stop loudly

use std::sync::Barrier;
use std::time::Instant;

use postgres::{Client, NoTls};
use serde_json::json;
use session_store::{NewMessage, Part, Role, SessionId, Store};

const FLOOR_SCHEMA: &str = "
    CREATE TABLE sessions (id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
    CREATE TABLE messages (
        id BIGSERIAL PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions (id),
        seq BIGINT NOT NULL,
        turn_index BIGINT NOT NULL,
        role TEXT NOT NULL,
        created_at TEXT NOT NULL,
        UNIQUE (session_id, seq));
    CREATE INDEX messages_turns ON messages (session_id, turn_index, seq);
    CREATE TABLE parts (
        id BIGSERIAL PRIMARY KEY,
        message_id BIGINT NOT NULL REFERENCES messages (id),
        ordinal BIGINT NOT NULL,
        kind TEXT NOT NULL,
        text TEXT,
        tool_use_id TEXT,
        tool_name TEXT,
        input TEXT,
        is_error BIGINT NOT NULL DEFAULT 0,
        provider_metadata TEXT,
        UNIQUE (message_id, ordinal));";

const FLOOR_LOCK: &str = "UPDATE sessions SET updated_at = $2 WHERE id = $1";
const FLOOR_MESSAGE: &str = "
    INSERT INTO messages (session_id, seq, turn_index, role, created_at)
    SELECT $1, COALESCE(MAX(seq), 0) + 1,
           COALESCE(MAX(turn_index), 0) + CASE WHEN $2 = 'user' THEN 1 ELSE 0 END, $2, $3
    FROM messages WHERE session_id = $1
    RETURNING id";

/// Deterministic filler of `len` bytes.
fn filler(seed: usize, len: usize) -> String {
    let words = [
        "alpha ",
        "delta ",
        "store ",
        "fn main() ",
        "result ",
        "{\"k\": 1} ",
    ];
    let mut out = String::with_capacity(len + 16);
    let mut at = seed;
    while out.len() < len {
        out.push_str(words[at % words.len()]);
        at = at.wrapping_mul(31).wrapping_add(7);
    }
    out.truncate(len);
    out
}

/// The `index`-th message of writer `writer`: the agent's four-message cycle on its own
/// session, or text messages on the shared one.
fn message(writer: usize, index: usize, shared: bool) -> NewMessage {
    let cycle = index / 4;
    let call = |c: usize| format!("toolu_{writer:04}{cycle:08}{c:012}");
    if shared {
        let role = if index.is_multiple_of(2) {
            Role::User
        } else {
            Role::Assistant
        };
        return NewMessage::new(role, vec![Part::text(filler(index, 300))]);
    }
    match index % 4 {
        0 => NewMessage::user(filler(index, 50 + (index * 37) % 350)),
        1 => NewMessage::assistant(vec![
            Part::reasoning(
                filler(index, 200 + (index * 53) % 1800),
                Some(json!({"anthropic": {"signature": "s".repeat(88)}})),
            ),
            Part::text("Let me look."),
            Part::tool_use(call(0), "read_file", json!({"path": filler(index, 60)})),
            Part::tool_use(call(1), "bash", json!({"cmd": filler(index + 1, 200)})),
        ]),
        2 => NewMessage::tool(vec![
            Part::tool_result(call(0), filler(index, 200 + (index * 71) % 1800)),
            Part::tool_result(call(1), filler(index + 3, 200 + (index * 29) % 1800)),
        ]),
        _ => NewMessage::assistant(vec![Part::text(filler(index, 100 + (index * 13) % 1400))]),
    }
}

/// The columns of a part as the floor stores them.
fn part_columns(part: &Part) -> [Option<String>; 6] {
    let json = |v: &serde_json::Value| Some(v.to_string());
    let metadata = part.provider_metadata().and_then(json);
    match part {
        Part::Text { text, .. } => [
            Some("text".into()),
            Some(text.clone()),
            None,
            None,
            None,
            metadata,
        ],
        Part::Reasoning { text, .. } => [
            Some("reasoning".into()),
            Some(text.clone()),
            None,
            None,
            None,
            metadata,
        ],
        Part::ToolUse {
            id, name, input, ..
        } => [
            Some("tool_use".into()),
            None,
            Some(id.clone()),
            Some(name.clone()),
            json(input),
            metadata,
        ],
        Part::ToolResult {
            tool_use_id,
            content,
            ..
        } => [
            Some("tool_result".into()),
            Some(content.clone()),
            Some(tool_use_id.clone()),
            None,
            None,
            metadata,
        ],
        _ => [Some("text".into()), None, None, None, None, metadata],
    }
}

fn parts_sql(count: usize) -> String {
    let rows: Vec<String> = (0..count)
        .map(|r| {
            let p = |c: usize| format!("${}", r * 8 + c);
            format!(
                "({}, {}, {}, {}, {}, {}, {}, {})",
                p(1),
                p(2),
                p(3),
                p(4),
                p(5),
                p(6),
                p(7),
                p(8)
            )
        })
        .collect();
    format!(
        "INSERT INTO parts (message_id, ordinal, kind, text, tool_use_id, tool_name, input, provider_metadata) VALUES {}",
        rows.join(", ")
    )
}

/// The floor's prepared statements on one connection.
struct Floor {
    client: Client,
    lock: postgres::Statement,
    insert: postgres::Statement,
    parts: Vec<postgres::Statement>,
}

impl Floor {
    fn connect(url: &str) -> Floor {
        let mut client = Client::connect(url, NoTls).unwrap();
        let lock = client.prepare(FLOOR_LOCK).unwrap();
        let insert = client.prepare(FLOOR_MESSAGE).unwrap();
        let parts = (0..=4)
            .map(|n| client.prepare(&parts_sql(n.max(1))).unwrap())
            .collect();
        Floor {
            client,
            lock,
            insert,
            parts,
        }
    }

    /// `message` appended to `session` in one transaction.
    fn append(&mut self, session: &str, message: &NewMessage) {
        let mut tx = self.client.transaction().unwrap();
        let now = "2026-01-01T00:00:00Z";
        tx.execute(&self.lock, &[&session, &now]).unwrap();
        let id: i64 = tx
            .query_one(&self.insert, &[&session, &message.role.as_str(), &now])
            .unwrap()
            .get(0);
        let rows: Vec<(i64, [Option<String>; 6])> = message
            .parts
            .iter()
            .enumerate()
            .map(|(at, p)| (at as i64, part_columns(p)))
            .collect();
        let mut params: Vec<&(dyn postgres::types::ToSql + Sync)> = Vec::new();
        for (ordinal, columns) in &rows {
            params.push(&id);
            params.push(ordinal);
            for column in columns {
                params.push(column);
            }
        }
        tx.execute(&self.parts[rows.len()], &params).unwrap();
        tx.commit().unwrap();
    }
}

/// Messages each writer appends to a session of its own before the clock starts, on both
/// arms: the connection's statements prepared and planned, as in a writer that has run a
/// while (PostgreSQL plans a prepared statement five times before it may keep a plan).
const WARM_MESSAGES: usize = 8;

/// One floor writer: `count` messages into `session`, one transaction each.
fn floor_writer(
    url: &str,
    session: &str,
    writer: usize,
    count: usize,
    shared: bool,
    start: &Barrier,
) {
    let mut floor = Floor::connect(url);
    let warm = format!("warm-{writer}");
    floor
        .client
        .execute("INSERT INTO sessions VALUES ($1, 'now', 'now')", &[&warm])
        .unwrap();
    for index in 0..WARM_MESSAGES {
        floor.append(&warm, &message(writer, index, false));
    }
    start.wait();
    for index in 0..count {
        floor.append(session, &message(writer, index, shared));
    }
}

/// One store writer: `count` messages into `session` through `Store::append`.
fn store_writer(
    url: &str,
    session: &str,
    writer: usize,
    count: usize,
    shared: bool,
    start: &Barrier,
) {
    let store = Store::open(url).unwrap();
    let session = SessionId::new(session);
    let warm = SessionId::new(format!("warm-{writer}"));
    store.create_session_with_id(&warm).unwrap();
    for index in 0..WARM_MESSAGES {
        store.append(&warm, message(writer, index, false)).unwrap();
    }
    let keyed = std::env::var_os("PG_FLOOR_KEYS").is_some();
    start.wait();
    for index in 0..count {
        let mut message = message(writer, index, shared);
        if keyed {
            message = message.with_idempotency_key(format!("{writer}-{index}"));
        }
        store.append(&session, message).unwrap();
    }
}

/// `base` with the schema first on the search path and `synchronous_commit` set.
fn url_for(base: &str, schema: &str, synchronous: bool) -> String {
    let sep = if base.contains('?') { '&' } else { '?' };
    let sync = if synchronous { "on" } else { "off" };
    format!("{base}{sep}options=-c%20search_path%3D{schema}%20-c%20synchronous_commit%3D{sync}")
}

/// Resident sessions on either arm's tables (the store's parts name their session):
/// `messages` one-part text messages, 100 to a session, then `ANALYZE`.
fn resident_sql(ours: bool, messages: usize) -> String {
    let session_column = if ours { ", session_id" } else { "" };
    let session_value = if ours { ", m.session_id" } else { "" };
    format!(
        "INSERT INTO sessions (id, created_at, updated_at)
         SELECT 'resident-' || s, 'now', 'now' FROM generate_series(0, ({messages} - 1) / 100) AS s;
         INSERT INTO messages (session_id, seq, turn_index, role, created_at)
         SELECT 'resident-' || (g / 100), g % 100 + 1, (g % 100) / 2 + 1,
                CASE WHEN g % 2 = 0 THEN 'user' ELSE 'assistant' END, 'now'
         FROM generate_series(0, {messages} - 1) AS g;
         INSERT INTO parts (message_id, ordinal, kind, text{session_column})
         SELECT m.id, 0, 'text', repeat('resident ', 40){session_value}
         FROM messages AS m WHERE m.session_id LIKE 'resident-%';
         ANALYZE;"
    )
}

/// Runs one arm of one configuration on a fresh schema; messages per second.
fn run(
    base: &str,
    ours: bool,
    writers: usize,
    shared: bool,
    synchronous: bool,
    total: usize,
    resident: usize,
) -> f64 {
    let schema = if ours { "bench_ours" } else { "bench_floor" };
    let mut admin = Client::connect(base, NoTls).unwrap();
    admin
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"
        ))
        .unwrap();
    let url = url_for(base, schema, synchronous);
    let sessions: Vec<String> = (0..if shared { 1 } else { writers })
        .map(|s| format!("bench-{s}"))
        .collect();
    if ours {
        let store = Store::open(&url).unwrap();
        let mut client = Client::connect(&url, NoTls).unwrap();
        client.batch_execute(&resident_sql(true, resident)).unwrap();
        for session in &sessions {
            store
                .create_session_with_id(&SessionId::new(session))
                .unwrap();
        }
    } else {
        let mut client = Client::connect(&url, NoTls).unwrap();
        client.batch_execute(FLOOR_SCHEMA).unwrap();
        client
            .batch_execute(&resident_sql(false, resident))
            .unwrap();
        for session in &sessions {
            client
                .execute(
                    "INSERT INTO sessions VALUES ($1, 'now', 'now')",
                    &[&session.as_str()],
                )
                .unwrap();
        }
    }
    let each = total / writers;
    // Every writer connects first; the clock runs from the barrier to the last commit.
    let start = Barrier::new(writers + 1);
    let started = std::thread::scope(|scope| {
        for writer in 0..writers {
            let session = &sessions[if shared { 0 } else { writer }];
            let (url, start) = (&url, &start);
            scope.spawn(move || {
                if ours {
                    store_writer(url, session, writer, each, shared, start);
                } else {
                    floor_writer(url, session, writer, each, shared, start);
                }
            });
        }
        start.wait();
        Instant::now()
    });
    let seconds = started.elapsed().as_secs_f64();
    (each * writers) as f64 / seconds
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

fn main() {
    let Ok(base) = std::env::var("SESSION_STORE_TEST_PG") else {
        eprintln!(
            "note: SESSION_STORE_TEST_PG is unset: the PostgreSQL floor benchmark is skipped"
        );
        return;
    };
    // `cargo bench` passes `--bench`; a filter or `--list` from the harness asks nothing.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let env = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let total = env("PG_FLOOR_MESSAGES", 400);
    let rounds = env("PG_FLOOR_ROUNDS", 3).max(1);
    let resident = env("PG_FLOOR_RESIDENT", 20_000);
    println!(
        "| synchronous_commit | sessions | writers | floor msgs/s | ours msgs/s | ours / floor |"
    );
    println!("| --- | --- | ---: | ---: | ---: | ---: |");
    // `PG_FLOOR_ONLY=off,each,1` runs one configuration (synchronous_commit, sessions, writers).
    let only = std::env::var("PG_FLOOR_ONLY").unwrap_or_default();
    let wanted = |synchronous: bool, shared: bool, writers: usize| {
        only.is_empty()
            || only
                == format!(
                    "{},{},{writers}",
                    if synchronous { "on" } else { "off" },
                    if shared { "shared" } else { "each" }
                )
    };
    for synchronous in [true, false] {
        for shared in [false, true] {
            for writers in [1, 4, 16] {
                if !wanted(synchronous, shared, writers) {
                    continue;
                }
                let (mut floor, mut ours, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
                for round in 0..rounds {
                    let mut pair = [0.0; 2];
                    for arm in [round % 2 == 1, round % 2 == 0] {
                        pair[usize::from(arm)] =
                            run(&base, arm, writers, shared, synchronous, total, resident);
                    }
                    floor.push(pair[0]);
                    ours.push(pair[1]);
                    ratios.push(pair[1] / pair[0]);
                }
                println!(
                    "| {} | {} | {writers} | {:.0} | {:.0} | {:.2} |",
                    if synchronous { "on" } else { "off" },
                    if shared { "one shared" } else { "one each" },
                    median(&mut floor),
                    median(&mut ours),
                    median(&mut ratios),
                );
            }
        }
    }
}
