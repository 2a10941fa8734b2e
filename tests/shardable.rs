//! PostgreSQL's schema is one a distributed engine (Citus) can shard by session
//! (`migrations-postgres/V18`): read from the catalog of a freshly migrated schema, every
//! table carries the session's id, every key and foreign key includes it, lineage has no
//! foreign key and no trigger is left. A database at V17 with rows migrates to it with every
//! export unchanged. And what the triggers did, the store's own statements now do: children
//! lose a deleted parent, the tail state and the message counts stay right through deletes,
//! reverts, pops and compaction. Skipped, with a note, when `SESSION_STORE_TEST_PG` is unset.

use std::process::Command;

use chrono::{DateTime, TimeZone, Utc};
use serde_json::json;
use session_store::repair::RepairOptions;
use session_store::{
    ExportOptions, NewMessage, Part, Provider, Refusal, SessionId, Store, TranscriptFormat, Usage,
};

use crate::backends::{backends, Backend, PgSchema};
use crate::util::session_with;

const REPAIR: &str = env!("CARGO_BIN_EXE_store-repair");

/// Every table of session data, parents before the rows that reference them.
pub(crate) const TABLES: &[&str] = &[
    "sessions",
    "messages",
    "parts",
    "usage",
    "idempotency_keys",
    "reverts",
    "summaries",
    "reverted_messages",
    "reverted_parts",
    "reverted_usage",
    "repair_log",
];

fn t(minute: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 4, 5, minute, 0)
        .single()
        .unwrap_or_default()
}

/// The store's tables in the schema the client's search path names first (refinery's
/// history left out: it is the migrator's, not session data).
fn store_tables(client: &mut postgres::Client) -> Vec<String> {
    client
        .query(
            "SELECT relname::TEXT FROM pg_class
             WHERE relnamespace = current_schema()::regnamespace AND relkind IN ('r', 'p')
               AND relname <> 'refinery_schema_history'
             ORDER BY relname",
            &[],
        )
        .expect("tables")
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// The column a table is distributed by: `sessions.id`, every other table's `session_id`.
fn session_column(table: &str) -> &'static str {
    if table == "sessions" {
        "id"
    } else {
        "session_id"
    }
}

#[test]
fn every_table_key_and_foreign_key_of_a_fresh_schema_includes_the_session() {
    let Some(schema) = PgSchema::create() else {
        return;
    };
    drop(Store::open(schema.url()).expect("migrate"));
    let mut client = schema.client();
    let tables = store_tables(&mut client);
    for expected in TABLES {
        assert!(tables.iter().any(|t| t == expected), "{expected} missing");
    }
    let column_of = |client: &mut postgres::Client, table: &str| -> Option<i16> {
        client
            .query_opt(
                "SELECT attnum FROM pg_attribute
                 WHERE attrelid = to_regclass($1) AND attname = $2 AND NOT attisdropped",
                &[&table, &session_column(table)],
            )
            .expect("attribute")
            .map(|row| row.get(0))
    };
    for table in &tables {
        let Some(session) = column_of(&mut client, table) else {
            panic!("{table} has no {}", session_column(table));
        };
        let not_null: bool = client
            .query_one(
                "SELECT attnotnull FROM pg_attribute WHERE attrelid = to_regclass($1) AND attnum = $2",
                &[table, &session],
            )
            .expect("not null")
            .get(0);
        assert!(not_null, "{table}.{} may be NULL", session_column(table));
        // Every primary key, unique constraint and unique index includes it.
        let unique = client
            .query(
                "SELECT c.relname::TEXT, i.indkey::INT2[] FROM pg_index i
                 JOIN pg_class c ON c.oid = i.indexrelid
                 WHERE i.indrelid = to_regclass($1) AND i.indisunique",
                &[table],
            )
            .expect("unique indexes");
        for row in &unique {
            let (name, keys): (String, Vec<i16>) = (row.get(0), row.get(1));
            assert!(
                keys.contains(&session),
                "{table}: {name} {keys:?} leaves out the session"
            );
        }
        // Every foreign key includes it on both sides.
        let foreign = client
            .query(
                "SELECT conname::TEXT, conkey, confrelid::regclass::TEXT, confkey FROM pg_constraint
                 WHERE conrelid = to_regclass($1) AND contype = 'f'",
                &[table],
            )
            .expect("foreign keys");
        for row in &foreign {
            let (name, keys, target, target_keys): (String, Vec<i16>, String, Vec<i16>) =
                (row.get(0), row.get(1), row.get(2), row.get(3));
            let target = target.rsplit('.').next().unwrap_or(&target).to_owned();
            let target_session = column_of(&mut client, &target).expect("target's column");
            let at = keys.iter().position(|k| *k == session);
            assert!(
                at.is_some() && at == target_keys.iter().position(|k| *k == target_session),
                "{table}: {name} {keys:?} -> {target} {target_keys:?} is not along the session"
            );
        }
    }
    // Lineage is a plain column.
    let lineage_keys: i64 = client
        .query_one(
            "SELECT COUNT(*) FROM pg_constraint c
             JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)
             WHERE c.conrelid = to_regclass('sessions') AND c.contype = 'f' AND a.attname = 'parent_id'",
            &[],
        )
        .expect("lineage")
        .get(0);
    assert_eq!(lineage_keys, 0, "sessions.parent_id has a foreign key");
    let triggers: Vec<String> = client
        .query(
            "SELECT t.tgname::TEXT FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
             WHERE c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal",
            &[],
        )
        .expect("triggers")
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(triggers.is_empty(), "triggers left: {triggers:?}");
}

/// Sessions with everything a session holds, written by this build on SQLite: tool calls,
/// usage, idempotency keys, a compaction summary, a revert waiting for its undo, a fork
/// (parent and child), a mended session with its repair log. Returns the session ids.
fn rich_sessions(store: &Store) -> Vec<SessionId> {
    let a = SessionId::new("alpha");
    store.create_session_with_id(&a).expect("alpha");
    for turn in 0..4u32 {
        let call = format!("toolu_{turn}a");
        let second = format!("toolu_{turn}b");
        store
            .append_batch(
                &a,
                vec![
                    NewMessage::user(format!("turn {turn}: look"))
                        .at(t(turn))
                        .with_idempotency_key(format!("user-{turn}")),
                    NewMessage::assistant(vec![
                        Part::text("reading"),
                        Part::tool_use(&call, "read", json!({"path": format!("f{turn}")})),
                        Part::tool_use(&second, "grep", json!({"pattern": "x"})),
                    ])
                    .at(t(turn))
                    .by_model("anthropic/claude")
                    .with_usage(Usage::new(100 + u64::from(turn), 20).model("m")),
                    NewMessage::tool(vec![
                        Part::tool_result(&call, format!("contents {turn}")),
                        Part::tool_result(&second, "no match"),
                    ])
                    .at(t(turn)),
                    NewMessage::assistant(vec![Part::text(format!("done {turn}"))])
                        .at(t(turn))
                        .with_usage(Usage::new(50, 5)),
                ],
            )
            .expect("a turn");
    }
    store
        .compact(&a, 2, "the first two turns")
        .expect("compact");
    let fork = store.fork(&a, 3).expect("fork");
    store.revert_to_turn(&a, 3).expect("a revert waiting");
    let b = SessionId::new("bravo");
    store.create_session_with_id(&b).expect("bravo");
    store
        .append(&b, NewMessage::user("hello").at(t(9)))
        .expect("bravo");
    store
        .append(
            &b,
            NewMessage::assistant(vec![Part::tool_use("toolu_b", "bash", json!({}))]).at(t(9)),
        )
        .expect("a call");
    store.cancel_pending(&b, "stopped").expect("tombstone");
    vec![a, fork.id, b]
}

/// Every row of SQLite's tables, inserted into a PostgreSQL schema at V17 as a V17 build
/// wrote them (ids kept, sequences moved past them).
fn copy_rows_to_v17(sqlite: &std::path::Path, client: &mut postgres::Client) {
    let conn = rusqlite::Connection::open(sqlite).expect("sqlite");
    let mut sql = String::new();
    for table in TABLES {
        let mut stmt = conn
            .prepare(&format!("SELECT * FROM {table}"))
            .expect("select");
        let names: Vec<String> = stmt.column_names().iter().map(|c| c.to_string()).collect();
        // Columns of later migrations (SQLite's file is this build's) are not V17's.
        let v17 = pg_columns(client, table);
        let kept: Vec<usize> = (0..names.len())
            .filter(|at| v17.contains(&names[*at]))
            .collect();
        let kept_names: Vec<&str> = kept.iter().map(|at| names[*at].as_str()).collect();
        let mut rows = stmt.query([]).expect("rows");
        while let Some(row) = rows.next().expect("row") {
            let values: Vec<String> = kept
                .iter()
                .map(|&at| match row.get_ref(at).expect("cell") {
                    rusqlite::types::ValueRef::Null => "NULL".to_owned(),
                    rusqlite::types::ValueRef::Integer(n) => n.to_string(),
                    rusqlite::types::ValueRef::Text(text) => {
                        format!("'{}'", String::from_utf8_lossy(text).replace('\'', "''"))
                    }
                    other => panic!("{table}: {other:?}"),
                })
                .collect();
            sql.push_str(&format!(
                "INSERT INTO {table} ({}) VALUES ({});\n",
                kept_names.join(", "),
                values.join(", ")
            ));
        }
    }
    client.batch_execute(&sql).expect("V17 rows");
    client
        .batch_execute(
            "UPDATE sessions SET message_count =
                 (SELECT COUNT(*) FROM messages m WHERE m.session_id = sessions.id);
             SELECT setval(pg_get_serial_sequence(t, 'id'), 1000)
             FROM unnest(ARRAY['messages', 'parts', 'reverts', 'reverted_messages',
                               'reverted_parts', 'summaries', 'repair_log']) t;",
        )
        .expect("counts and sequences");
}

/// The columns `table` has on the server.
fn pg_columns(client: &mut postgres::Client, table: &str) -> Vec<String> {
    client
        .query(
            "SELECT attname::TEXT FROM pg_attribute
             WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped",
            &[&table],
        )
        .expect("columns")
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// The columns of every table of session data.
fn columns_of(client: &mut postgres::Client) -> Vec<(String, Vec<String>)> {
    TABLES
        .iter()
        .map(|table| ((*table).to_owned(), pg_columns(client, table)))
        .collect()
}

/// Every row of the store's tables with the columns of `as_of` only (later migrations'
/// columns left out), the tail state and search document (caches, reset by V18) too: what
/// the migrations must not change.
fn rows_as_of(client: &mut postgres::Client, as_of: &[(String, Vec<String>)]) -> String {
    let now = columns_of(client);
    let mut out = String::new();
    for ((table, before), (_, after)) in as_of.iter().zip(&now) {
        let mut dropped: Vec<String> = after
            .iter()
            .filter(|c| !before.contains(c))
            .map(|c| format!("'{c}'"))
            .collect();
        dropped.extend(["'tail_state'".to_owned(), "'search_document'".to_owned()]);
        let rows = client
            .query(
                &format!(
                    "SELECT (to_jsonb(t) - ARRAY[{}]::TEXT[])::TEXT FROM {table} t ORDER BY 1",
                    dropped.join(", ")
                ),
                &[],
            )
            .expect("rows");
        out.push_str(&format!("-- {table} ({})\n", rows.len()));
        for row in rows {
            out.push_str(&row.get::<_, String>(0));
            out.push('\n');
        }
    }
    out
}

/// What a reader sees of `session`: both providers' requests, the bundle, the transcript.
fn exports(store: &Store, session: &SessionId) -> Vec<String> {
    let options = ExportOptions {
        persist_latch: false,
        ..ExportOptions::default()
    };
    let mut out = Vec::new();
    for provider in [Provider::Anthropic, Provider::OpenAi] {
        let body = store
            .export(session, provider, t(59), &options)
            .expect("export");
        out.push(serde_json::to_string(&body).expect("json"));
    }
    out.push(store.export_bundle(session).expect("bundle"));
    out.push(
        store
            .transcript(session, TranscriptFormat::Markdown)
            .expect("transcript"),
    );
    out
}

/// A database at V17 with rows (several sessions, tool calls, usage, idempotency keys, a
/// summary, a pending revert, a fork) migrates to V18: every row is as it was, every
/// export the same bytes as this build's from the same rows on SQLite, `store-repair`
/// finds nothing, and the sessions take writes (pairing still refused, undo still works).
#[test]
fn a_v17_database_with_rows_migrates_to_the_shardable_schema_unchanged() {
    let Some(current) = PgSchema::create() else {
        return;
    };
    drop(Store::open(current.url()).expect("a current schema"));
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("source.db");
    let source = Store::open(&path).expect("sqlite");
    let sessions = rich_sessions(&source);
    let expected: Vec<Vec<String>> = sessions.iter().map(|s| exports(&source, s)).collect();

    let old = PgSchema::create().expect("schema");
    let mut client = old.client();
    let dir_of = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations-postgres");
    for version in 1..=17 {
        let prefix = format!("V{version}__");
        let entry = std::fs::read_dir(&dir_of)
            .expect("migrations-postgres")
            .filter_map(|e| e.ok())
            .find(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .unwrap_or_else(|| panic!("no {prefix}*.sql"));
        let sql = std::fs::read_to_string(entry.path()).expect("a migration");
        client.batch_execute(&sql).expect("a shipped migration");
    }
    let current_name = current
        .url()
        .rsplit("search_path%3D")
        .next()
        .expect("schema name")
        .to_owned();
    client
        .batch_execute(&format!(
            "CREATE TABLE refinery_schema_history AS
                 SELECT * FROM {current_name}.refinery_schema_history WHERE version <= 17;"
        ))
        .expect("history");
    copy_rows_to_v17(&path, &mut client);
    let v17_columns = columns_of(&mut client);
    let before = rows_as_of(&mut client, &v17_columns);
    let triggers: i64 = client
        .query_one(
            "SELECT COUNT(*) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
             WHERE c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal",
            &[],
        )
        .expect("triggers")
        .get(0);
    assert!(triggers > 0, "V17 has its triggers");

    let store = Store::open(old.url()).expect("the V17 database migrates");
    assert_eq!(
        rows_as_of(&mut client, &v17_columns),
        before,
        "the migration changed a row"
    );
    let unkeyed: i64 = client
        .query_one(
            "SELECT (SELECT COUNT(*) FROM parts p JOIN messages m ON m.id = p.message_id
                     WHERE p.session_id <> m.session_id)
                  + (SELECT COUNT(*) FROM usage u JOIN messages m ON m.id = u.message_id
                     WHERE u.session_id <> m.session_id)
                  + (SELECT COUNT(*) FROM reverted_parts p
                     JOIN reverted_messages r ON r.id = p.reverted_message_id
                     WHERE p.session_id <> r.session_id)",
            &[],
        )
        .expect("backfill")
        .get(0);
    assert_eq!(unkeyed, 0, "a row took another session's id");
    let reverted_parts: i64 = client
        .query_one("SELECT COUNT(*) FROM reverted_parts", &[])
        .expect("count")
        .get(0);
    assert!(reverted_parts > 0, "the fixture holds a pending revert");
    for (session, expected) in sessions.iter().zip(&expected) {
        for (got, want) in exports(&store, session).iter().zip(expected) {
            if got != want {
                let at = got
                    .bytes()
                    .zip(want.bytes())
                    .position(|(a, b)| a != b)
                    .unwrap_or(got.len().min(want.len()));
                let from = at.saturating_sub(200);
                panic!(
                    "{session}: the export differs at byte {at}:\n{}\n---\n{}",
                    &got[from..(at + 200).min(got.len())],
                    &want[from..(at + 200).min(want.len())]
                );
            }
        }
    }
    let repair = Command::new(REPAIR)
        .args(["--db", &old.url(), "--dry-run", "--json"])
        .output()
        .expect("store-repair");
    assert_eq!(repair.status.code(), Some(0), "{repair:?}");
    assert!(
        store
            .check(&[], &RepairOptions::default())
            .expect("check")
            .broken_sessions()
            .is_empty(),
        "store-repair finds a broken session"
    );

    // Writes go on: the undo of the waiting revert, a refused broken pair, a valid turn.
    let alpha = &sessions[0];
    let undone = store.undo_revert(alpha).expect("undo").expect("a revert");
    assert_eq!(undone.messages, 4);
    store
        .append(
            alpha,
            NewMessage::assistant(vec![Part::tool_use("toolu_new", "read", json!({}))]),
        )
        .expect("a call");
    let refused = store.append(alpha, NewMessage::user("skipping the result"));
    assert!(
        matches!(
            refused,
            Err(session_store::Error::Refused {
                reason: Refusal::PendingToolUses { .. },
                ..
            })
        ),
        "{refused:?}"
    );
    store
        .append(
            alpha,
            NewMessage::tool(vec![Part::tool_result("toolu_new", "ok")]),
        )
        .expect("the result");
    let listed = store.session(alpha).expect("session").expect("listed");
    assert_eq!(
        listed.message_count,
        i64::try_from(store.messages(alpha).expect("messages").len()).unwrap_or(-1)
    );
}

/// `sessions.message_count` and the real rows agree for every session of `b`.
fn assert_counts_right(b: &Backend, what: &str) {
    let off = b.count(
        "SELECT COUNT(*) FROM sessions s
         WHERE s.message_count <> (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id)",
    );
    assert_eq!(
        off, 0,
        "{what} on {}: a session's message count is off",
        b.name
    );
}

/// The tail state `session`'s row keeps is NULL (the statement that changed its rows cleared
/// it) or the one an append wrote since.
fn stored_state_is_cleared(b: &Backend, session: &SessionId) -> bool {
    b.count(&format!(
        "SELECT COUNT(*) FROM sessions WHERE id = '{session}' AND tail_state IS NULL"
    )) == 1
}

/// Deleting a session leaves its forks as roots (`parent_id` NULL), on PostgreSQL by the
/// delete's own statement (lineage has no foreign key there), on SQLite as before; several
/// forks, a fork of a fork, and a session that is nobody's parent.
#[test]
fn deleting_a_session_clears_its_forks_parent_without_a_foreign_key() {
    for b in backends() {
        let store = &b.store;
        let root = store.create_session().expect("root");
        store.append(&root, NewMessage::user("one")).expect("one");
        store
            .append(&root, NewMessage::assistant(vec![Part::text("a")]))
            .expect("a");
        let forks: Vec<SessionId> = (0..3)
            .map(|_| store.fork(&root, 1).expect("fork").id)
            .collect();
        let grandchild = store.fork(&forks[0], 1).expect("fork of a fork").id;
        let loner = store.create_session().expect("loner");
        store
            .delete_session(&loner)
            .expect("delete a session without forks");
        assert_eq!(
            b.count("SELECT COUNT(*) FROM sessions WHERE parent_id IS NOT NULL"),
            4,
            "on {}",
            b.name
        );
        store.delete_session(&root).expect("delete the parent");
        for fork in &forks {
            assert_eq!(
                b.count(&format!(
                    "SELECT COUNT(*) FROM sessions WHERE id = '{fork}' AND parent_id IS NULL"
                )),
                1,
                "{fork} keeps a deleted parent on {}",
                b.name
            );
        }
        let lineage = store.lineage().expect("lineage");
        let depth_of = |id: &SessionId| lineage.iter().find(|l| &l.id == id).map(|l| l.depth);
        assert_eq!(depth_of(&forks[1]), Some(0), "on {}", b.name);
        assert_eq!(depth_of(&grandchild), Some(1), "on {}", b.name);
        assert_eq!(
            b.count("SELECT COUNT(*) FROM sessions WHERE parent_id IS NOT NULL"),
            1,
            "only the fork of a fork keeps its parent, on {}",
            b.name
        );
        assert_counts_right(&b, "delete");
    }
}

/// A session whose last turn leaves `call` pending: user, an assistant call and its answer,
/// then a user message and an assistant calling `call`.
fn session_with_pending(b: &Backend, call: &str) -> SessionId {
    session_with(
        &b.store,
        vec![
            NewMessage::user("go"),
            NewMessage::assistant(vec![Part::tool_use("first", "read", json!({}))]),
            NewMessage::tool(vec![Part::tool_result("first", "ok")]),
            NewMessage::assistant(vec![Part::text("and then")]),
            NewMessage::user("more"),
            NewMessage::assistant(vec![
                Part::text("calling"),
                Part::tool_use(call, "bash", json!({"n": 1})),
            ]),
        ],
    )
}

fn is_pending_refusal(result: &session_store::Result<impl std::fmt::Debug>) -> bool {
    matches!(
        result,
        Err(session_store::Error::Refused {
            reason: Refusal::PendingToolUses { .. },
            ..
        })
    )
}

/// What PostgreSQL's triggers did on a revert, a pop and a compaction, the statements do:
/// the tail state is cleared or rewritten (the next append is checked against the rows as
/// they are now: a reverted or popped call is no longer pending, a popped answer makes its
/// call pending again, a compaction leaves a pending call pending), and every session's
/// message count stays right.
#[test]
fn revert_pop_and_compaction_keep_the_tail_state_and_counts_without_triggers() {
    for b in backends() {
        let store = &b.store;
        // Revert: the turn with the pending call goes, a user message is taken.
        let reverted = session_with_pending(&b, "r1");
        assert!(is_pending_refusal(
            &store.append(&reverted, NewMessage::user("too early"))
        ));
        store.revert_to_turn(&reverted, 1).expect("revert");
        assert!(
            stored_state_is_cleared(&b, &reverted),
            "revert on {}",
            b.name
        );
        assert_counts_right(&b, "revert");
        store
            .append(&reverted, NewMessage::user("again"))
            .expect("nothing pending after the revert");
        // Undo of a revert brings the call back: pending again.
        let undone = session_with_pending(&b, "u1");
        store.revert_to_turn(&undone, 1).expect("revert");
        store.undo_revert(&undone).expect("undo");
        assert_counts_right(&b, "undo");
        assert!(is_pending_refusal(
            &store.append(&undone, NewMessage::user("still pending"))
        ));

        // pop_part of the pending call: nothing pending.
        let popped = session_with_pending(&b, "p1");
        let part = store
            .pop_part(&popped, |p| p.call_id() == Some("p1"))
            .expect("pop");
        assert!(part.is_some(), "on {}", b.name);
        assert_counts_right(&b, "pop a call");
        store
            .append(&popped, NewMessage::user("the call is gone"))
            .expect("nothing pending after the pop");
        // pop_part of an answer: its call is pending again, pairing enforced.
        let answered = session_with_pending(&b, "p2");
        store
            .append(
                &answered,
                NewMessage::tool(vec![Part::tool_result("p2", "done")]),
            )
            .expect("answer");
        store
            .pop_part(&answered, |p| p.answers() == Some("p2"))
            .expect("pop")
            .expect("the answer");
        assert_counts_right(&b, "pop an answer");
        assert!(
            is_pending_refusal(&store.append(&answered, NewMessage::user("skip it"))),
            "the popped answer's call is pending again on {}",
            b.name
        );
        store
            .append(
                &answered,
                NewMessage::tool(vec![Part::tool_result("p2", "again")]),
            )
            .expect("answered again");

        // Compaction: the pending call stays pending.
        let compacted = session_with_pending(&b, "c1");
        store
            .compact(&compacted, 1, "the first turn")
            .expect("compact");
        assert_counts_right(&b, "compaction");
        assert!(is_pending_refusal(
            &store.append(&compacted, NewMessage::user("still pending"))
        ));
        store
            .append(
                &compacted,
                NewMessage::tool(vec![Part::tool_result("c1", "ok")]),
            )
            .expect("the answer");
        store
            .append(&compacted, NewMessage::user("next"))
            .expect("then a user message");
        assert_counts_right(&b, "appends");
    }
}
