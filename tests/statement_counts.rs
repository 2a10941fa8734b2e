//! What an append costs the PostgreSQL server, counted by the server itself
//! (`pg_stat_statements`): the statements of each append shape, at the floor (BEGIN, the
//! message, its parts, COMMIT) plus what pairing needs (the session's lock and tail state in
//! one statement, the tail state written back, a probe of the calls' ids), and the same
//! whatever other sessions do meanwhile (an append reads nothing outside its session, so
//! another session's writes cannot make it fall back to a slower path).
//!
//! The store under test connects as a role only this module uses (`.ci/postgres` creates it
//! and loads `pg_stat_statements`), so the tests running beside it do not blur the counts.
//! Skipped, with a note, when `SESSION_STORE_TEST_PG` is unset or the server lacks either.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde_json::json;
use session_store::{NewMessage, Part, Role, SessionId, Store};

use crate::backends::pg_url;

/// The role `.ci/postgres` creates for this module (password = name).
const COUNTED_ROLE: &str = "session_store_counted";

/// One test of this module at a time: they share the role's counters.
static COUNTED: Mutex<()> = Mutex::new(());

/// A schema owned by the counted role, dropped at the end.
struct Counted {
    url: String,
    client: postgres::Client,
    schema: String,
}

impl Counted {
    /// Connects as the counted role, or `None` (with a note) when it cannot.
    fn open() -> Option<Self> {
        let base = pg_url()?;
        let mut config: postgres::Config = base.parse().expect("SESSION_STORE_TEST_PG parses");
        config.user(COUNTED_ROLE).password(COUNTED_ROLE);
        let mut client = match config.connect(postgres::NoTls) {
            Ok(client) => client,
            Err(e) => {
                eprintln!("note: no role {COUNTED_ROLE} ({e}): run .ci/postgres; skipped");
                return None;
            }
        };
        if client
            .query_one("SELECT 1 FROM pg_stat_statements LIMIT 0", &[])
            .is_err()
            && client
                .query("SELECT 1 FROM pg_stat_statements LIMIT 1", &[])
                .is_err()
        {
            eprintln!("note: pg_stat_statements is not loaded: run .ci/postgres; skipped");
            return None;
        }
        let schema = format!("counted_{}", std::process::id());
        client
            .batch_execute(&format!(
                "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"
            ))
            .expect("create the counted schema");
        let url = format!(
            "postgres://{COUNTED_ROLE}:{COUNTED_ROLE}@{}/{}?options=-c%20search_path%3D{schema}",
            host_port(&base),
            config.get_dbname().expect("the test URL names a database"),
        );
        Some(Self {
            url,
            client,
            schema,
        })
    }

    /// The URL of the same tables for the test database's own role (whose statements are
    /// not counted), granted everything on them.
    fn shared_with_test_role(&mut self) -> String {
        let base = pg_url().expect("configured");
        let config: postgres::Config = base.parse().expect("SESSION_STORE_TEST_PG parses");
        let role = config.get_user().expect("the test URL names a role");
        let schema = &self.schema;
        self.client
            .batch_execute(&format!(
                "GRANT USAGE ON SCHEMA {schema} TO {role};
                 GRANT ALL ON ALL TABLES IN SCHEMA {schema} TO {role};
                 GRANT ALL ON ALL SEQUENCES IN SCHEMA {schema} TO {role};"
            ))
            .expect("share the counted schema");
        let sep = if base.contains('?') { '&' } else { '?' };
        format!("{base}{sep}options=-c%20search_path%3D{schema}")
    }

    /// Every statement the counted role ran in this database so far, with its calls (this
    /// module's own reads of the counters left out).
    fn snapshot(&mut self) -> BTreeMap<String, i64> {
        self.client
            .query(
                "SELECT query, calls FROM pg_stat_statements
                 WHERE userid = (SELECT oid FROM pg_roles WHERE rolname = current_user)
                   AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                   AND query NOT LIKE '%pg_stat_statements%'",
                &[],
            )
            .expect("read pg_stat_statements")
            .into_iter()
            .fold(BTreeMap::new(), |mut all, row| {
                *all.entry(row.get::<_, String>(0)).or_default() += row.get::<_, i64>(1);
                all
            })
    }

    /// The statements `work` made the server run: text and number of executions.
    fn count(&mut self, work: impl FnOnce()) -> Vec<(String, i64)> {
        let before = self.snapshot();
        work();
        let after = self.snapshot();
        after
            .into_iter()
            .filter_map(|(query, calls)| {
                let ran = calls - before.get(&query).copied().unwrap_or(0);
                (ran > 0).then_some((query, ran))
            })
            .collect()
    }
}

impl Counted {
    /// The shared buffers (hit or read) that the tail-read statement took over `work`,
    /// and how many times it ran: what the server touched for it, nested statements included.
    fn tail_read_blocks(&mut self, work: impl FnOnce()) -> (i64, i64) {
        let read = |client: &mut postgres::Client| -> (i64, i64) {
            let row = client
                .query_one(
                    "SELECT COALESCE(SUM(shared_blks_hit + shared_blks_read), 0)::BIGINT,
                            COALESCE(SUM(calls), 0)::BIGINT
                     FROM pg_stat_statements
                     WHERE userid = (SELECT oid FROM pg_roles WHERE rolname = current_user)
                       AND query LIKE '%session_store_tail(%'
                       AND query NOT LIKE '%pg_stat_statements%'",
                    &[],
                )
                .expect("read pg_stat_statements");
            (row.get(0), row.get(1))
        };
        let before = read(&mut self.client);
        work();
        let after = read(&mut self.client);
        (after.0 - before.0, after.1 - before.1)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        let _ = self
            .client
            .batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema));
    }
}

/// `host:port` of a `postgres://user:password@host:port/db...` URL.
fn host_port(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, rest)| rest);
    rest.split(['/', '?']).next().unwrap_or(rest)
}

/// The total number of statements in a count.
fn total(ran: &[(String, i64)]) -> i64 {
    ran.iter().map(|(_, calls)| calls).sum()
}

fn user(text: &str) -> NewMessage {
    NewMessage::new(Role::User, vec![Part::text(text)])
}

/// An assistant message of the project's workload shape: signed reasoning, a short text and
/// `calls` parallel tool_uses.
fn assistant(turn: usize, calls: usize) -> NewMessage {
    let mut parts = vec![
        Part::reasoning(
            "thinking ".repeat(40),
            Some(json!({"anthropic": {"signature": "s".repeat(88)}})),
        ),
        Part::text("Let me look."),
    ];
    parts.extend((0..calls).map(|c| {
        Part::tool_use(
            format!("toolu_{turn:012}{c:012}"),
            "bash",
            json!({"cmd": format!("ls {}", "x".repeat(200))}),
        )
    }));
    NewMessage::new(Role::Assistant, parts)
}

/// One tool message holding every result of `assistant(turn, calls)`.
fn results(turn: usize, calls: usize) -> NewMessage {
    NewMessage::new(
        Role::Tool,
        (0..calls)
            .map(|c| Part::tool_result(format!("toolu_{turn:012}{c:012}"), "out ".repeat(300)))
            .collect(),
    )
}

/// The shapes of one turn, each appended in its own transaction, with the statements each
/// may run: BEGIN, the lock with the tail state (and which of the message's call ids the
/// session uses), the message with its parts (one statement), the session row, COMMIT.
fn turn(turn: usize, calls: usize) -> Vec<(&'static str, NewMessage, i64)> {
    vec![
        ("user text", user(&format!("question {turn}")), 5),
        ("assistant with calls", assistant(turn, calls), 5),
        ("tool results", results(turn, calls), 5),
        ("final answer", assistant(turn + 1_000_000, 0), 5),
    ]
}

fn session_store(url: &str) -> (Store, SessionId) {
    let store = Store::open(url).expect("open the counted store");
    let session = store.create_session().expect("session");
    (store, session)
}

/// Per message, the floor plus what pairing needs, on every shape: and the same again while
/// another session (written by another role, so uncounted) takes writes between ours, which
/// a read outside the session (the largest part id of the whole database) would notice.
#[test]
fn append_runs_the_floor_plus_pairing_whatever_other_sessions_do() {
    let _one = COUNTED.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut counted) = Counted::open() else {
        return;
    };
    let (store, session) = session_store(&counted.url);
    // The other writer works on the same tables as another role: its statements are not
    // counted, but every part it inserts moves the database's largest part id.
    let other = Store::open(counted.shared_with_test_role()).expect("other store");
    let other_session = other.create_session().expect("other session");
    // Statements are prepared once per pooled connection: warm every shape first.
    for message in turn(0, 3).into_iter().map(|(_, m, _)| m) {
        store.append(&session, message).expect("warm-up append");
    }
    let mut report = Vec::new();
    let mut wrong = Vec::new();
    let mut other_turns = 0;
    for (round, interleaved) in [(1, false), (2, true), (3, false), (4, true)] {
        for calls in [1, 2, 4] {
            let number = round * 10 + calls;
            for (shape, message, allowed) in turn(number, calls) {
                if interleaved {
                    other_turns += 1;
                    other
                        .append_batch(
                            &other_session,
                            turn(other_turns, 2)
                                .into_iter()
                                .map(|(_, m, _)| m)
                                .collect(),
                        )
                        .expect("the other session's write");
                }
                let ran = counted.count(|| {
                    store.append(&session, message).expect("counted append");
                });
                if total(&ran) != allowed {
                    wrong.push(format!(
                        "{shape} with {calls} calls (another session written meanwhile: \
                         {interleaved}): {} statements, not {allowed}: {ran:#?}",
                        total(&ran)
                    ));
                }
                report.push(format!(
                    "{shape}, {calls} calls, other writer {interleaved}: {}",
                    total(&ran)
                ));
            }
        }
    }
    eprintln!("{}", report.join("\n"));
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A whole turn in one transaction: one lock and tail read, one probe for the calls, each
/// message and its parts, one session-row update, whatever the number of messages.
#[test]
fn a_turn_in_one_transaction_runs_one_lock_one_probe_and_one_update() {
    let _one = COUNTED.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut counted) = Counted::open() else {
        return;
    };
    let (store, session) = session_store(&counted.url);
    // The first append of a session writes its tail state: start from there.
    store.append(&session, user("hello")).expect("first append");
    for (number, calls) in [(1, 1), (2, 3), (3, 4), (4, 2)] {
        let batch: Vec<NewMessage> = turn(number, calls).into_iter().map(|(_, m, _)| m).collect();
        let messages = i64::try_from(batch.len()).expect("small");
        let ran = counted.count(|| {
            store.append_batch(&session, batch).expect("counted batch");
        });
        // BEGIN, the lock with the tail and the calls' probe, each message with its parts
        // (one statement), the session row, COMMIT.
        assert_eq!(
            total(&ran),
            4 + messages,
            "a turn of {messages} messages with {calls} calls ran {ran:#?}"
        );
    }
}

/// Every statement an append runs that reads rows names the session it reads: the session
/// row by its id, messages and parts through `session_id`. (The server's plans for these
/// use the session's indexes: a read of another session's rows would need a statement
/// without one of them.)
#[test]
fn every_reading_statement_of_an_append_names_its_session() {
    let _one = COUNTED.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut counted) = Counted::open() else {
        return;
    };
    let (store, session) = session_store(&counted.url);
    for (number, calls) in [(1, 1), (2, 4)] {
        for (_, message, _) in turn(number, calls) {
            let ran = counted.count(|| {
                store.append(&session, message).expect("counted append");
            });
            for (query, _) in ran {
                let text = query.to_lowercase();
                if text.contains("session_store_tail(") {
                    // The function's own statements, as the server stores them.
                    let body: String = counted
                        .client
                        .query_one(
                            "SELECT prosrc FROM pg_proc WHERE proname = 'session_store_tail'
                               AND pronamespace = (SELECT oid FROM pg_namespace
                                                   WHERE nspname = $1)",
                            &[&counted.schema],
                        )
                        .expect("the function's body")
                        .get(0);
                    // Its comments left out (they are prose, not statements).
                    let body: String = body
                        .lines()
                        .map(|line| line.split("--").next().unwrap_or_default())
                        .collect::<Vec<_>>()
                        .join("\n");
                    // Each statement that reads (PL/pgSQL's BEGIN and END read nothing).
                    for statement in body
                        .split(';')
                        .filter(|s| s.to_lowercase().contains("from "))
                    {
                        assert_names_the_session(
                            statement,
                            &["session_id = session", "id = session"],
                        );
                    }
                    continue;
                }
                let control = ["begin", "start transaction", "commit"]
                    .iter()
                    .any(|c| text.trim_start().starts_with(c));
                let plain_insert =
                    text.trim_start().starts_with("insert") && !text.contains("select");
                // The message with its parts: it reads only the rows it inserts (`m`, `p`).
                let inserts_only = text.trim_start().starts_with("with m as (")
                    && text.contains("insert into messages")
                    && text.matches("from ").count()
                        == text.matches("from m").count() + text.matches("from p)").count();
                let plain_insert = plain_insert || inserts_only;
                if !control && !plain_insert {
                    assert_names_the_session(&query, &["session_id = $", "where id = $1"]);
                }
            }
        }
    }
}

/// Fails unless every `FROM` of `statement` (each a query's scope; the tables it joins are
/// tied to the first by their join conditions) is matched with one of `keys`.
fn assert_names_the_session(statement: &str, keys: &[&str]) {
    let text = statement.to_lowercase();
    let reads = text.matches("from ").count();
    let keyed: usize = keys.iter().map(|key| text.matches(key).count()).sum();
    assert!(
        keyed >= reads.max(1),
        "a statement of the append reads without naming the session ({reads} tables read, \
         {keyed} keyed): {statement}"
    );
}

/// The tail read of every append touches about the same buffers at 40 messages as at 1,000:
/// each of its statements is answered by a key of the session. PL/pgSQL keeps the plans it
/// made in its first runs, when the tables were nearly empty and never analysed (a new
/// database); plans that scan the session's rows and sort them were cheapest then, and were
/// kept while the session grew (1.2 ms an append at 2,000 messages).
#[test]
fn the_tail_read_stays_keyed_when_its_plans_were_made_on_near_empty_tables() {
    let _one = COUNTED.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut counted) = Counted::open() else {
        return;
    };
    let (store, session) = session_store(&counted.url);
    // The plans are made here, on tables of a few rows (PL/pgSQL keeps a generic plan after
    // five runs), and the session reaches 40 messages.
    for number in 0..10 {
        for (_, message, _) in turn(number, 2) {
            store.append(&session, message).expect("early append");
        }
    }
    let per_append = |counted: &mut Counted, first: usize| {
        let (blocks, calls) = counted.tail_read_blocks(|| {
            for number in first..first + 3 {
                for (_, message, _) in turn(number, 2) {
                    store.append(&session, message).expect("measured append");
                }
            }
        });
        assert!(
            calls >= 12,
            "the tail read ran {calls} times for 12 appends"
        );
        blocks as f64 / calls as f64
    };
    let small = per_append(&mut counted, 100);
    // The session grows to about 1,000 messages, with the same connection's kept plans.
    for number in 200..440 {
        let batch: Vec<NewMessage> = turn(number, 2).into_iter().map(|(_, m, _)| m).collect();
        store.append_batch(&session, batch).expect("growing append");
    }
    let large = per_append(&mut counted, 1_000);
    eprintln!("tail read: {small:.1} buffers an append at 40 messages, {large:.1} at ~1,000");
    assert!(
        large <= small * 1.5 + 4.0,
        "the tail read touched {large:.1} buffers an append at ~1,000 messages, \
         {small:.1} at 40: it reads rows of the session beyond its end"
    );
}
