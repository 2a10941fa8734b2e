//! The fuzz targets' bodies, shared by `cargo fuzz` (`fuzz/fuzz_targets/*.rs`, each a line
//! calling one of these) and the bounded random-input run of the normal test suite
//! (`tests/fuzz_targets.rs`, which includes this file as a module). Each takes raw bytes and
//! panics when the library breaks a promise; returning is success.
//!
//! - [`import`]: an importer never panics; what it accepts the store accepts, healthy, and
//!   every export of it passes the provider's contract.
//! - [`loader`]: random rows written straight into the tables (values outside the contract
//!   included, CHECK constraints off): every read either succeeds or refuses the session as
//!   `unreadable_row`, and all reads agree on which (one decoder, one leniency); whatever
//!   export renders passes the provider's contract.
//! - [`repair`]: random damage of the kinds older code does, then `store-repair`'s steps
//!   (inspect, backup, check, mend): every readable session comes out healthy, nothing is
//!   deleted, and a second mend changes nothing. Trailing bytes also flip bytes of a copy of
//!   the file, which must be refused or read without a panic or a hang.
//! - [`copy`]: random rows (values outside the contract included) copied to a new file by
//!   `copy`'s reader and writer: the copy either succeeds, and every session reads back as
//!   it reads in the source (or is refused as unreadable in both), and a rerun skips every
//!   session and writes nothing; or it fails with an error and leaves no file behind.
//! - [`search_query`]: any bytes as a search query, on a store of a few sessions: the search
//!   never fails but for too many distinct terms (exactly when there are), and a query said
//!   twice finds what it finds once.

#![allow(dead_code)]

use std::cell::RefCell;
use std::path::Path;

use rusqlite::{params, Connection};
use serde_json::json;
use session_store::{
    import::{import_bytes as import_transcript_bytes, Format},
    repair::{backup_database, inspect_database_file, RepairOptions},
    Error, ExportOptions, Provider, SessionId, Store,
};

/// The providers whose exports are held to their contract here: every provider the store
/// renders for.
const PROVIDERS: [Provider; 4] = [
    Provider::Anthropic,
    Provider::OpenAi,
    Provider::Responses,
    Provider::Gemini,
];

/// Reads fuzz bytes as small choices; past the end every choice is 0.
pub struct Bytes<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Bytes<'a> {
    /// Choices from `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Self { data, at: 0 }
    }

    /// The next byte (0 past the end).
    pub fn byte(&mut self) -> u8 {
        let b = self.data.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }

    /// A number below `n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        usize::from(self.byte()) % n
    }

    /// One of `items`.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    /// The bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        self.data.get(self.at..).unwrap_or(&[])
    }
}

fn export_options() -> ExportOptions {
    ExportOptions {
        persist_latch: false,
        ..ExportOptions::default()
    }
}

thread_local! {
    static IMPORT_STORE: RefCell<Option<(tempfile::TempDir, Store)>> = const { RefCell::new(None) };
}

/// One importer over arbitrary bytes.
pub fn import(format: Format, data: &[u8]) {
    let Ok(imported) = import_transcript_bytes(format, data) else {
        return;
    };
    let messages = imported.into_messages();
    IMPORT_STORE.with(|cell| {
        let mut cell = cell.borrow_mut();
        let (_, store) = cell.get_or_insert_with(|| {
            let dir = tempfile::tempdir().expect("tempdir");
            let store = Store::open(dir.path().join("import.db")).expect("open");
            (dir, store)
        });
        let session = store
            .import_session(messages)
            .expect("what an importer accepts, the store accepts");
        let report = store
            .check(std::slice::from_ref(&session), &RepairOptions::default())
            .expect("check");
        assert!(
            report.violations.is_empty(),
            "an import stored a broken session: {:?}",
            report.violations
        );
        for provider in PROVIDERS {
            let request = store
                .export_request(
                    &session,
                    provider,
                    session_store::clock(),
                    &export_options(),
                )
                .expect("export");
            assert!(
                request.violations.is_empty(),
                "{provider} export breaks the contract: {:?}",
                request.violations
            );
        }
    });
}

/// Values other writers put in each column: harmless variants, and values outside the
/// contract (`robot`, `hologram`, `yesterday`, a text `seq`).
const ROLES: [&str; 6] = ["user", "assistant", "tool", "system", "robot", "User"];
const VALID_ROLES: [&str; 4] = ["user", "assistant", "tool", "system"];
const KINDS: [&str; 7] = [
    "text",
    "reasoning",
    "redacted_reasoning",
    "tool_use",
    "tool_result",
    "hologram",
    "TEXT",
];
const VALID_KINDS: [&str; 5] = [
    "text",
    "reasoning",
    "redacted_reasoning",
    "tool_use",
    "tool_result",
];
const TIMES: [&str; 5] = [
    "2026-01-01T00:00:00Z",
    "2026-01-01 00:00:01",
    "2026-01-01T00:00:02.5",
    "2026-01-01T01:00:03+01:00",
    "yesterday",
];
const IDS: [Option<&str>; 5] = [Some("a"), Some("b"), Some("c"), Some(""), None];

/// A value for a column as some writer stored it.
fn any_value(bytes: &mut Bytes<'_>, text: &str) -> rusqlite::types::Value {
    use rusqlite::types::Value;
    match bytes.below(6) {
        0 => Value::Null,
        1 => Value::Blob(text.as_bytes().to_vec()),
        2 => Value::Integer(i64::from(bytes.byte())),
        3 => Value::Real(f64::from(bytes.byte()) / 2.0),
        _ => Value::Text(text.to_owned()),
    }
}

/// Writes random sessions row by row; `strict` keeps roles, kinds and times in the contract.
fn write_rows(conn: &Connection, bytes: &mut Bytes<'_>, strict: bool) {
    conn.execute_batch(
        "PRAGMA ignore_check_constraints = ON; PRAGMA foreign_keys = OFF;
         PRAGMA synchronous = OFF; BEGIN;",
    )
    .expect("pragmas");
    let sessions = 1 + bytes.below(3);
    for s in 0..sessions {
        let session = format!("s{s}");
        conn.execute(
            "INSERT INTO sessions (id, created_at, updated_at) VALUES (?1, ?2, ?2)",
            params![session, TIMES[0]],
        )
        .expect("session");
        let mut seq: i64 = 0;
        for _ in 0..bytes.below(9) {
            seq += 1 + i64::from(bytes.byte() % 2);
            let role = if strict {
                bytes.pick(&VALID_ROLES)
            } else {
                bytes.pick(&ROLES)
            };
            let time = if strict {
                bytes.pick(&TIMES[..4])
            } else {
                bytes.pick(&TIMES)
            };
            let compacted = match bytes.below(4) {
                0 => rusqlite::types::Value::Text("true".into()),
                n => rusqlite::types::Value::Integer(i64::from(n == 1)),
            };
            conn.execute(
                "INSERT INTO messages (session_id, seq, turn_index, role, compacted, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![session, seq, bytes.below(4) as i64, role, compacted, time],
            )
            .expect("message");
            let message = conn.last_insert_rowid();
            for ordinal in 0..bytes.below(4) {
                let kind = if strict {
                    bytes.pick(&VALID_KINDS)
                } else {
                    bytes.pick(&KINDS)
                };
                let input = match bytes.below(3) {
                    0 => rusqlite::types::Value::Null,
                    1 => rusqlite::types::Value::Text("{\"cmd\": \"ls\"}".into()),
                    _ => rusqlite::types::Value::Text("not json".into()),
                };
                let metadata = match bytes.below(3) {
                    0 => rusqlite::types::Value::Null,
                    1 => rusqlite::types::Value::Text(
                        json!({"anthropic": {"signature": "sig"}}).to_string(),
                    ),
                    _ => rusqlite::types::Value::Text("{broken".into()),
                };
                let is_error = match bytes.below(4) {
                    0 => rusqlite::types::Value::Integer(0),
                    1 => rusqlite::types::Value::Integer(1),
                    2 => rusqlite::types::Value::Text("true".into()),
                    _ => rusqlite::types::Value::Real(0.5),
                };
                conn.execute(
                    "INSERT INTO parts (message_id, ordinal, kind, text, tool_use_id, tool_name,
                                        input, is_error, provider_metadata)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                    params![
                        message,
                        ordinal as i64,
                        kind,
                        any_value(bytes, " text "),
                        bytes.pick(&IDS),
                        any_value(bytes, "bash"),
                        input,
                        is_error,
                        metadata
                    ],
                )
                .expect("part");
            }
        }
    }
    conn.execute_batch("COMMIT; PRAGMA ignore_check_constraints = OFF; PRAGMA foreign_keys = ON;")
        .expect("commit");
}

thread_local! {
    /// A migrated, empty database, made once: migrating (and its fsyncs) for every input
    /// would make the loader and repair targets a hundred times slower.
    static TEMPLATE: (tempfile::TempDir, std::path::PathBuf) = {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("template.db");
        drop(Store::open(&path).expect("create"));
        (dir, path)
    };
}

/// A migrated, empty database in a fresh folder.
fn fresh_database() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("fuzz.db");
    TEMPLATE.with(|(_, template)| std::fs::copy(template, &path).expect("copy template"));
    (dir, path)
}

fn session_ids(store: &Store) -> Vec<SessionId> {
    store.session_ids().expect("session ids never fail")
}

fn is_unreadable(store: &Store, session: &SessionId) -> bool {
    store
        .check(std::slice::from_ref(session), &RepairOptions::default())
        .expect("the check never fails on rows")
        .violations
        .iter()
        .any(|v| v.rule.as_str() == "unreadable_row")
}

/// The loader over random rows.
pub fn loader(data: &[u8]) {
    let (_dir, path) = fresh_database();
    let conn = Connection::open(&path).expect("raw");
    write_rows(&conn, &mut Bytes::new(data), false);
    drop(conn);
    let store = Store::open(&path).expect("open");
    store
        .sessions()
        .expect("the session list never fails on rows");
    for session in session_ids(&store) {
        let unreadable = is_unreadable(&store, &session);
        let messages = store.messages(&session);
        match &messages {
            Ok(_) => assert!(!unreadable, "{session}: check and messages() disagree"),
            Err(Error::CorruptRow { .. }) => {
                assert!(unreadable, "{session}: check and messages() disagree")
            }
            Err(other) => panic!("{session}: messages() failed with {other:?}"),
        }
        for provider in PROVIDERS {
            match store.export_request(
                &session,
                provider,
                session_store::clock(),
                &export_options(),
            ) {
                Ok(request) => assert!(
                    request.violations.is_empty(),
                    "{session}: {provider} export breaks the contract: {:?}",
                    request.violations
                ),
                // Export reads only what the provider sees: it refuses exactly when a
                // visible row is unreadable.
                Err(Error::CorruptRow { .. }) => assert!(unreadable, "{session}"),
                Err(other) => panic!("{session}: export failed with {other:?}"),
            }
        }
        let repair = store
            .repair_session(&session, &RepairOptions::default())
            .expect("repair never fails on rows");
        let left_as_is = repair
            .found
            .iter()
            .any(|v| v.rule.as_str() == "unreadable_row");
        assert_eq!(left_as_is, unreadable, "{session}: check and mend disagree");
    }
}

/// The names in `dir`, but for the source database's own files (`source`, `-wal`, `-shm`).
fn others_in(dir: &Path, source: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with(source))
        .collect();
    names.sort();
    names
}

/// `copy`'s reader and writer over random rows.
pub fn copy(data: &[u8]) {
    let (dir, path) = fresh_database();
    let conn = Connection::open(&path).expect("raw");
    write_rows(&conn, &mut Bytes::new(data), false);
    drop(conn);
    let source = Store::open(&path).expect("open");
    let before = others_in(dir.path(), "fuzz.db");
    let dest_path = dir.path().join("copy.db");
    let report = match source.copy_to_path(&dest_path, &[]) {
        Ok(report) => report,
        Err(error) => {
            // A failed copy leaves no new file (nor a temporary one) behind.
            assert_eq!(others_in(dir.path(), "fuzz.db"), before, "after {error:?}");
            return;
        }
    };
    let ids = session_ids(&source);
    assert_eq!(report.sessions, ids.len(), "{report:?}");
    let dest = Store::open(&dest_path).expect("open the copy");
    let without_ids = |messages: Vec<session_store::Message>| -> Vec<session_store::Message> {
        messages
            .into_iter()
            .map(|m| session_store::Message { id: 0, ..m })
            .collect()
    };
    for session in &ids {
        match (source.messages(session), dest.messages(session)) {
            (Ok(ours), Ok(theirs)) => {
                assert_eq!(without_ids(ours), without_ids(theirs), "{session}")
            }
            (Err(Error::CorruptRow { .. }), Err(Error::CorruptRow { .. })) => {}
            (ours, theirs) => panic!("{session}: the copy reads otherwise: {ours:?} / {theirs:?}"),
        }
        assert_eq!(
            is_unreadable(&source, session),
            is_unreadable(&dest, session),
            "{session}"
        );
    }
    // A rerun skips every session and writes nothing.
    drop(dest);
    let bytes = std::fs::read(&dest_path).expect("read the copy");
    let again = source.copy_to_path(&dest_path, &[]).expect("a rerun");
    assert_eq!((again.sessions, again.skipped), (0, ids));
    assert_eq!(std::fs::read(&dest_path).expect("read the copy"), bytes);
}

fn count(conn: &Connection, table: &str) -> i64 {
    conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
        .expect("count")
}

/// `store-repair`'s steps over random damage.
pub fn repair(data: &[u8]) {
    let (dir, path) = fresh_database();
    let mut bytes = Bytes::new(data);
    let conn = Connection::open(&path).expect("raw");
    write_rows(&conn, &mut bytes, true);
    let (messages, parts) = (count(&conn, "messages"), count(&conn, "parts"));
    drop(conn);

    inspect_database_file(&path).expect("a database with rows is accepted");
    backup_database(&path, &dir.path().join("backup.db")).expect("backup");
    let store = Store::open(&path).expect("open");
    let options = RepairOptions::default();
    for session in store.check(&[], &options).expect("check").broken_sessions() {
        store
            .repair_session(&session, &options)
            .unwrap_or_else(|e| panic!("{session}: mend failed: {e:?}"));
    }
    let left = store.check(&[], &options).expect("check").violations;
    assert!(left.is_empty(), "still broken after the mend: {left:?}");
    for session in session_ids(&store) {
        let again = store.repair_session(&session, &options).expect("mend");
        assert!(
            again.changes.is_empty(),
            "{session}: a second mend changed {again:?}"
        );
    }
    drop(store);
    let conn = Connection::open(&path).expect("raw");
    assert!(
        count(&conn, "messages") >= messages,
        "a message was deleted"
    );
    assert!(count(&conn, "parts") >= parts, "a part was deleted");
    drop(conn);

    damaged_file(dir.path(), &path, bytes.rest());
}

/// Flips bytes of a copy of the database as `flips` says: the tool refuses it or reads it,
/// never panics.
fn damaged_file(dir: &Path, path: &Path, flips: &[u8]) {
    if flips.len() < 3 {
        return;
    }
    let copy = dir.join("damaged.db");
    let mut file = std::fs::read(path).expect("read");
    if file.is_empty() {
        return;
    }
    for flip in flips.chunks(3) {
        let at = (usize::from(flip[0]) << 8 | usize::from(*flip.get(1).unwrap_or(&0))) % file.len();
        file[at] ^= flip.get(2).copied().unwrap_or(0xff).max(1);
    }
    std::fs::write(&copy, &file).expect("write");
    if inspect_database_file(&copy).is_err() {
        return;
    }
    let Ok(store) = Store::open(&copy) else {
        return;
    };
    let options = RepairOptions::default();
    if let Ok(report) = store.check(&[], &options) {
        for session in report.broken_sessions() {
            let _ = store.repair_session(&session, &options);
        }
    }
}

/// A few sessions of text, tool calls and results to search, one per thread.
fn search_store() -> &'static Store {
    thread_local! {
        static STORE: &'static Store = {
            let dir = Box::leak(Box::new(tempfile::tempdir().expect("tempdir")));
            let store = Store::open(dir.path().join("search.db")).expect("open");
            for (n, text) in [
                "Deploy the staging cluster (fast) \"now\" a-b c_d: 漢字 café 🦀",
                "error: file not found NEAR the AND gate *glob* -flag",
                "\u{1b}[2J clear, tab\there, a bell\u{7}inside",
            ]
            .into_iter()
            .enumerate()
            {
                let session = store.create_session().expect("session");
                store.append(&session, session_store::NewMessage::user(text)).expect("user");
                let call = session_store::Part::tool_use(format!("c{n}"), "read_file", json!({"path": text}));
                store
                    .append(&session, session_store::NewMessage::assistant(vec![call]))
                    .expect("call");
                store
                    .append(
                        &session,
                        session_store::NewMessage::tool(vec![session_store::Part::tool_result(
                            format!("c{n}"),
                            text,
                        )]),
                    )
                    .expect("result");
            }
            Box::leak(Box::new(store))
        };
    }
    STORE.with(|store| *store)
}

/// Any bytes as a search query (lossy UTF-8).
pub fn search_query(data: &[u8]) {
    let query = String::from_utf8_lossy(data);
    let store = search_store();
    let options = session_store::SearchOptions::default();
    let distinct: std::collections::HashSet<(&str, bool)> = query
        .split(|c: char| c.is_whitespace() || c.is_control())
        .map(|term| match term.strip_suffix('*') {
            Some(stem) => (stem.trim_end_matches('*'), true),
            None => (term, false),
        })
        .filter(|(stem, _)| stem.chars().any(char::is_alphanumeric))
        .collect();
    let once = store.search(&query, &options);
    match &once {
        Err(Error::TooManySearchTerms { max }) => {
            assert!(distinct.len() > *max, "refused {} terms", distinct.len());
            return;
        }
        Err(other) => panic!("search of {query:?} failed: {other}"),
        Ok(_) => assert!(distinct.len() <= session_store::MAX_SEARCH_TERMS),
    }
    let twice = store.search(&format!("{query} {query}"), &options);
    let parts = |hits: &[session_store::SearchHit]| -> Vec<i64> {
        hits.iter().map(|h| h.part_id).collect()
    };
    match (once, twice) {
        (Ok(once), Ok(twice)) => assert_eq!(parts(&once), parts(&twice), "{query:?}"),
        (_, twice) => panic!("{query:?} twice: {twice:?}"),
    }
}
