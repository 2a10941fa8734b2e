//! What only the PostgreSQL backend has to get right: processes that open a fresh database
//! together (each migration must run once, under the advisory lock, or two of them fail on
//! the same `CREATE TABLE`), a migration history from a newer build or a foreign one (refused
//! before anything is written, as on SQLite), and a read-only store (every write refused with
//! a typed error), and forensic views in PostgreSQL's dialect that drift from the library's
//! check (random raw sessions, as `views_props.rs` writes them into SQLite). Skipped, with a
//! note, when `SESSION_STORE_TEST_PG` is unset.

use session_store::{NewMessage, OpenError, Store, StoreOptions};

use crate::backends::PgSchema;

#[test]
fn stores_opening_a_fresh_database_together_migrate_it_once() {
    let Some(schema) = PgSchema::create() else {
        return;
    };
    let url = schema.url();
    let opened: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..6)
            .map(|_| scope.spawn(|| Store::open(&url).map(|_| ())))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("opener panicked"))
            .collect()
    });
    for result in opened {
        result.expect("every concurrent open succeeds");
    }
    let mut client = schema.client();
    let versions: Vec<i32> = client
        .query(
            "SELECT version FROM refinery_schema_history ORDER BY version",
            &[],
        )
        .expect("history")
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut unique = versions.clone();
    unique.dedup();
    assert_eq!(versions, unique, "a migration recorded twice");
    assert!(versions.starts_with(&[1, 2, 3, 4, 5]), "{versions:?}");
}

#[test]
fn a_history_from_a_newer_or_foreign_build_is_refused_before_any_write() {
    let Some(schema) = PgSchema::create() else {
        return;
    };
    drop(Store::open(schema.url()).expect("migrate"));
    let mut client = schema.client();
    client
        .batch_execute(
            "INSERT INTO refinery_schema_history (version, name, applied_on, checksum)
             VALUES (99, 'from_the_future', '2030-01-01T00:00:00Z', '1')",
        )
        .expect("future row");
    assert!(matches!(
        Store::open(schema.url()),
        Err(OpenError::FutureSchema { version: 99, .. })
    ));
    client
        .batch_execute(
            "DELETE FROM refinery_schema_history WHERE version = 99;
             UPDATE refinery_schema_history SET checksum = '12345' WHERE version = 2;",
        )
        .expect("divergent row");
    assert!(matches!(
        Store::open(schema.url()),
        Err(OpenError::DivergentSchema { version: 2, .. })
    ));
}

#[test]
fn a_read_only_store_refuses_every_write_with_a_typed_error() {
    let Some(schema) = PgSchema::create() else {
        return;
    };
    let writer = Store::open(schema.url()).expect("migrate");
    let session = writer.create_session().expect("session");
    let options = StoreOptions {
        read_only: true,
        ..StoreOptions::default()
    };
    let reader = Store::open_with(schema.url(), &options).expect("read-only open");
    let err = reader
        .append(&session, NewMessage::user("hi"))
        .expect_err("a read-only store writes nothing");
    assert!(err.is_read_only(), "{err:?}");
    assert!(reader.messages(&session).expect("reads work").is_empty());
    // The second release's writes too: fork, delete, prune, and VACUUM (which runs outside
    // a transaction, so the read-only transaction cannot refuse it by itself).
    let far = session_store::clock() + chrono::TimeDelta::days(1);
    let refused = [
        reader.fork(&session, 0).map(drop),
        reader.delete_session(&session).map(drop),
        reader.prune(far).map(drop),
        reader.reclaim_space().map(drop),
        reader.vacuum().map(drop),
    ];
    for result in refused {
        let err = result.expect_err("a read-only store writes nothing");
        assert!(err.is_read_only(), "{err:?}");
    }
    assert!(reader.has_session(&session).expect("still there"));
    // Reads of the second release work.
    assert_eq!(reader.prune_candidates(far).expect("candidates").len(), 1);
    assert_eq!(reader.lineage().expect("lineage").len(), 1);
    reader.size_report(1).expect("size report");
    reader.usage(&session).expect("usage");
    reader
        .search("anything", &Default::default())
        .expect("search");
}

/// Writes `views_props`' random sessions into PostgreSQL with raw SQL, as other code might.
fn write_raw(client: &mut postgres::Client, sessions: &[crate::views_props::RawSession]) {
    use crate::views_props::RawPart;
    let at = "2026-01-01T00:00:00.000000Z";
    for (n, session) in sessions.iter().enumerate() {
        let sid = format!("s{n}");
        client
            .execute(
                "INSERT INTO sessions (id, created_at, updated_at) VALUES ($1, $2, $2)",
                &[&sid, &at],
            )
            .expect("session");
        let (mut seq, mut users) = (0i64, 0i64);
        for (index, m) in session.messages.iter().enumerate() {
            seq += if m.gaps { 3 } else { 1 };
            users += i64::from(m.role == "user");
            let turn = (users - 1).max(0) + m.turn_offset;
            let compacted = i64::from((index < session.compacted_prefix) != m.flip_compacted);
            let message_id: i64 = client
                .query_one(
                    "INSERT INTO messages (session_id, seq, turn_index, role, compacted, created_at)
                     VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
                    &[&sid, &seq, &turn, &m.role, &compacted, &at],
                )
                .expect("message")
                .get(0);
            let step = if m.gaps { 5 } else { 1 };
            for (k, part) in m.parts.iter().enumerate() {
                let (kind, text, tool_use_id, name, input) = match *part {
                    RawPart::Text => ("text", Some("words"), None, None, None),
                    RawPart::Use(id) => ("tool_use", None, id, Some("bash"), Some("{}")),
                    RawPart::Result(id) => ("tool_result", Some("ok"), id, None, None),
                };
                client
                    .execute(
                        "INSERT INTO parts (message_id, ordinal, kind, text, tool_use_id, tool_name, input, session_id)
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                        &[&message_id, &(k as i64 * step), &kind, &text, &tool_use_id, &name, &input, &sid],
                    )
                    .expect("part");
            }
        }
    }
}

type Problem = (String, String, i64, Option<i64>);

#[test]
fn the_postgres_views_report_exactly_what_the_check_reports() {
    use proptest::prelude::*;
    use session_store::repair::{HealthRule, RepairOptions};
    use std::collections::BTreeSet;
    let Some(schema) = PgSchema::create() else {
        return;
    };
    let store = Store::open(schema.url()).expect("migrate");
    let client = std::cell::RefCell::new(schema.client());
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(32));
    let strategy = prop::collection::vec(crate::views_props::session(), 1..4);
    let outcome = runner.run(&strategy, |sessions| {
        let mut client = client.borrow_mut();
        client
            .batch_execute("TRUNCATE sessions CASCADE")
            .expect("empty the schema");
        write_raw(&mut client, &sessions);
        let library: BTreeSet<Problem> = store
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
            .collect();
        let mut views = BTreeSet::new();
        for row in client
            .query("SELECT session_id, rule, seq, part, detail FROM problems", &[])
            .expect("problems")
        {
            let detail: Option<String> = row.get(4);
            prop_assert!(detail.is_some_and(|d| !d.is_empty()), "a row without detail");
            views.insert((row.get(0), row.get(1), row.get(2), row.get(3)));
        }
        prop_assert_eq!(&views, &library);
        for n in 0..sessions.len() {
            let sid = format!("s{n}");
            let one: BTreeSet<Problem> = client
                .query(
                    "SELECT session_id, rule, seq, part FROM problems WHERE session_id = $1",
                    &[&sid],
                )
                .expect("one session")
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
                .collect();
            let expected: BTreeSet<Problem> = views.iter().filter(|p| p.0 == sid).cloned().collect();
            prop_assert_eq!(one, expected);
        }
        for rule in HealthRule::ALL {
            let rows: BTreeSet<Problem> = client
                .query(&format!("SELECT session_id, rule, seq, part FROM problem_{rule}"), &[])
                .expect("rule view")
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
                .collect();
            let expected: BTreeSet<Problem> =
                views.iter().filter(|p| p.1 == rule.as_str()).cloned().collect();
            prop_assert_eq!(rows, expected, "problem_{}", rule);
        }
        let turns: BTreeSet<(String, i64, i64)> = client
            .query("SELECT session_id, turn, pending_calls FROM session_turns WHERE pending_calls > 0", &[])
            .expect("session_turns")
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect();
        let calls: BTreeSet<(String, i64, i64)> = client
            .query("SELECT session_id, turn, COUNT(*) FROM tool_calls WHERE pending GROUP BY session_id, turn", &[])
            .expect("tool_calls")
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect();
        prop_assert_eq!(turns, calls);
        Ok(())
    });
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
}

/// The PostgreSQL migrations a V15 build shipped, in order (the files of this repository).
fn shipped_through_v15() -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations-postgres");
    (1..=15)
        .map(|version| {
            let prefix = format!("V{version}__");
            let entry = std::fs::read_dir(&dir)
                .expect("migrations-postgres")
                .filter_map(|e| e.ok())
                .find(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .unwrap_or_else(|| panic!("no {prefix}*.sql"));
            std::fs::read_to_string(entry.path()).expect("read a migration")
        })
        .collect()
}

/// A database a V15 build wrote (sessions, tool pairs, a streaming message, a stored tail
/// state, parts indexed by V11's generated column) is migrated by this build: every part is
/// found by search as before, the append path works from the state V15 left (its first
/// append after the migration refuses a broken pair and takes a valid one), and parts
/// appended afterwards are indexed at the next search, not by the append.
#[test]
fn a_v15_database_with_rows_migrates_and_keeps_its_search_and_tails() {
    let Some(current) = PgSchema::create() else {
        return;
    };
    drop(Store::open(current.url()).expect("a current schema"));
    let old = PgSchema::create().expect("schema");
    let mut client = old.client();
    for sql in shipped_through_v15() {
        client.batch_execute(&sql).expect("a shipped migration");
    }
    let current_schema = current.url();
    let current_name = current_schema
        .rsplit("search_path%3D")
        .next()
        .expect("schema name");
    client
        .batch_execute(&format!(
            "CREATE TABLE refinery_schema_history AS
                 SELECT * FROM {current_name}.refinery_schema_history WHERE version <= 15;"
        ))
        .expect("history");
    // Rows as a V15 build wrote them (an append's columns; the count and tail kept by it).
    client
        .batch_execute(
            "INSERT INTO sessions (id, created_at, updated_at, message_count)
                 VALUES ('old', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', 2);
             INSERT INTO messages (session_id, seq, turn_index, role, compacted, created_at)
                 VALUES ('old', 1, 1, 'user', 0, '2026-01-01T00:00:00Z'),
                        ('old', 2, 1, 'assistant', 0, '2026-01-01T00:00:01Z');
             INSERT INTO parts (message_id, ordinal, kind, text, is_error)
                 SELECT id, 0, 'text', 'find the albatross', 0 FROM messages WHERE seq = 1;
             INSERT INTO parts (message_id, ordinal, kind, tool_use_id, tool_name, input, is_error)
                 SELECT id, 0, 'tool_use', 'toolu_old', 'grep', '{\"pattern\":\"albatross\"}', 0
                 FROM messages WHERE seq = 2;",
        )
        .expect("V15 rows");
    let generated: String = client
        .query_one(
            "SELECT attgenerated::TEXT FROM pg_attribute
             WHERE attrelid = to_regclass('parts') AND attname = 'search_document'",
            &[],
        )
        .expect("V11's column")
        .get(0);
    assert_eq!(
        generated, "s",
        "V15's document is a stored generated column"
    );

    let store = Store::open(old.url()).expect("the V15 database migrates");
    let session = session_store::SessionId::new("old");
    let found = |query: &str| -> Vec<i64> {
        store
            .search(query, &session_store::SearchOptions::default())
            .expect("search")
            .iter()
            .map(|h| h.seq)
            .collect()
    };
    assert_eq!(found("albatross"), [1, 2], "the migrated parts are indexed");
    assert_eq!(found("grep"), [2]);
    assert_eq!(
        store.pending_tool_uses(&session).expect("pending"),
        ["toolu_old"]
    );
    let refused = store.append(&session, NewMessage::user("skipping the result"));
    assert!(
        matches!(refused, Err(session_store::Error::Refused { .. })),
        "a broken pair after the migration: {refused:?}"
    );
    store
        .append(
            &session,
            NewMessage::tool(vec![session_store::Part::tool_result(
                "toolu_old",
                "gannet",
            )]),
        )
        .expect("the result");
    let unindexed = |client: &mut postgres::Client| -> i64 {
        client
            .query_one(
                "SELECT COUNT(*) FROM parts WHERE search_document IS NULL",
                &[],
            )
            .expect("count")
            .get(0)
    };
    assert_eq!(unindexed(&mut client), 1, "the append indexed its part");
    assert!(store.search_index_behind().expect("behind"));
    assert_eq!(found("gannet"), [3], "the search caught the index up first");
    assert_eq!(unindexed(&mut client), 0);
    assert!(!store.search_index_behind().expect("behind"));
    // A part whose text other code rewrites, setting its document back to NULL (no trigger
    // does since V18), is indexed again, by its new text.
    client
        .batch_execute(
            "UPDATE parts SET text = 'a cormorant', search_document = NULL WHERE text = 'gannet'",
        )
        .expect("rewrite");
    assert_eq!(unindexed(&mut client), 1);
    assert!(found("gannet").is_empty());
    assert_eq!(found("cormorant"), [3]);
}
