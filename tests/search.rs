//! Search that misses rows, finds dead ones, or fails on what a person types: an index kept
//! by the library alone misses rows other code inserts with plain SQL, one without delete
//! triggers still finds reverted or deleted parts, an index created empty misses everything
//! stored before the upgrade, and a query passed to FTS5 as it is fails on `"` or `(`.
//! These tests pin the triggers (insert, update, delete, revert, undo), the migration's
//! backfill, ranking with snippets and locations, and (property) that no query is an error.

use proptest::prelude::*;
use rusqlite::Connection;
use serde_json::json;
use session_store::{Error, NewMessage, Part, SearchOptions, SessionId, Store};

use crate::turn_fixtures::open_store;

fn found(store: &Store, query: &str) -> Vec<(String, i64, String)> {
    store
        .search(query, &SearchOptions::default())
        .expect("search")
        .into_iter()
        .map(|hit| (hit.session.to_string(), hit.seq, hit.kind))
        .collect()
}

fn conversation(store: &Store) -> anyhow::Result<SessionId> {
    let session = store.create_session()?;
    store.append(&session, NewMessage::user("Please check the zeppelin logs"))?;
    store.append(
        &session,
        NewMessage::assistant(vec![
            Part::reasoning("The quokka service writes them", None),
            Part::RedactedReasoning {
                data: "opaquesecretblob".into(),
                provider_metadata: None,
            },
            Part::tool_use("c1", "grep_logs", json!({"pattern": "narwhal"})),
        ]),
    )?;
    store.append(
        &session,
        NewMessage::tool(vec![Part::tool_result("c1", "3 lines mention the axolotl")]),
    )?;
    Ok(session)
}

#[test]
fn text_reasoning_tool_inputs_and_results_are_found_where_they_are() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let session = conversation(&store)?;
    let s = session.to_string();
    assert_eq!(found(&store, "zeppelin"), [(s.clone(), 1, "text".into())]);
    assert_eq!(
        found(&store, "quokka"),
        [(s.clone(), 2, "reasoning".into())]
    );
    assert_eq!(
        found(&store, "narwhal"),
        [(s.clone(), 2, "tool_use".into())]
    );
    assert_eq!(
        found(&store, "grep_logs"),
        [(s.clone(), 2, "tool_use".into())]
    );
    assert_eq!(
        found(&store, "axolotl"),
        [(s.clone(), 3, "tool_result".into())]
    );
    assert!(
        found(&store, "opaquesecretblob").is_empty(),
        "encrypted reasoning is not indexed"
    );
    let hit = &store.search("AXOLOTL lines", &SearchOptions::default())?[0];
    assert_eq!(hit.snippet, "3 [lines] mention the [axolotl]");
    assert_eq!(hit.turn, 0);
    assert_eq!(hit.role, "tool");
    Ok(())
}

#[test]
fn better_matches_rank_first_and_the_limit_holds() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let session = store.create_session()?;
    store.append(&session, NewMessage::user("kestrel"))?;
    store.append(
        &session,
        NewMessage::assistant(vec![Part::text(
        "a long answer that mentions kestrel once among many other words about birds and weather",
    )]),
    )?;
    store.append(&session, NewMessage::user("kestrel kestrel"))?;
    let hits = store.search("kestrel", &SearchOptions::default())?;
    assert_eq!(hits.iter().map(|h| h.seq).collect::<Vec<_>>(), [3, 1, 2]);
    assert!(hits.windows(2).all(|w| w[0].score <= w[1].score));
    let one = SearchOptions {
        limit: 1,
        ..SearchOptions::default()
    };
    assert_eq!(store.search("kestrel", &one)?.len(), 1);
    Ok(())
}

#[test]
fn a_common_word_is_ranked_among_its_newest_matches_only() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let session = store.create_session()?;
    store.append(&session, NewMessage::user("heron heron heron"))?;
    for n in 0..10 {
        store.append(
            &session,
            NewMessage::user(format!(
                "a heron and {n} other birds in a long list of words"
            )),
        )?;
    }
    let all = store.search("heron", &SearchOptions::default())?;
    assert_eq!(all[0].seq, 1, "the best match overall ranks first");
    let newest = SearchOptions {
        max_ranked: 5,
        ..SearchOptions::default()
    };
    let hits = store.search("heron", &newest)?;
    assert_eq!(
        {
            let mut seqs: Vec<i64> = hits.iter().map(|h| h.seq).collect();
            seqs.sort();
            seqs
        },
        [7, 8, 9, 10, 11]
    );
    Ok(())
}

#[test]
fn rows_written_with_plain_sql_are_indexed_updated_and_dropped() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let session = conversation(&store)?;
    let conn = Connection::open(store.path())?;
    conn.execute_batch(&format!(
        "INSERT INTO messages (session_id, seq, turn_index, role, created_at)
             VALUES ('{session}', 4, 0, 'assistant', '2026-01-01T00:00:00Z');
         INSERT INTO parts (message_id, ordinal, kind, text)
             VALUES (last_insert_rowid(), 0, 'text', 'written by a python script: pelican');"
    ))?;
    assert_eq!(found(&store, "pelican").len(), 1);
    conn.execute(
        "UPDATE parts SET text = 'now it says flamingo' WHERE text LIKE '%pelican%'",
        [],
    )?;
    assert!(found(&store, "pelican").is_empty());
    assert_eq!(found(&store, "flamingo").len(), 1);
    conn.execute("DELETE FROM parts WHERE text LIKE '%flamingo%'", [])?;
    assert!(found(&store, "flamingo").is_empty());
    // The index agrees with its content after all of it (FTS5's own check).
    conn.execute(
        "INSERT INTO parts_fts (parts_fts) VALUES ('integrity-check')",
        [],
    )?;
    Ok(())
}

#[test]
fn reverted_parts_leave_the_index_and_come_back_on_undo() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let session = store.create_session()?;
    store.append(&session, NewMessage::user("first turn"))?;
    store.append(&session, NewMessage::user("second turn mentions wombat"))?;
    store.revert_to_turn(&session, 1)?;
    assert!(found(&store, "wombat").is_empty());
    store.undo_revert(&session)?;
    assert_eq!(found(&store, "wombat").len(), 1);
    store.revert_to_turn(&session, 1)?;
    store.append(&session, NewMessage::user("moved on"))?;
    assert!(found(&store, "wombat").is_empty());
    Ok(())
}

#[test]
fn a_database_from_before_v8_is_indexed_by_the_migration() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("old.db");
    // A database another program wrote following the contract, with no migration history.
    let conn = Connection::open(&path)?;
    conn.execute_batch(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
         CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
             seq INTEGER NOT NULL, turn_index INTEGER NOT NULL, role TEXT NOT NULL,
             compacted INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL, UNIQUE (session_id, seq));
         CREATE TABLE parts (id INTEGER PRIMARY KEY, message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
             ordinal INTEGER NOT NULL, kind TEXT NOT NULL, text TEXT, tool_use_id TEXT, tool_name TEXT,
             input TEXT, is_error INTEGER NOT NULL DEFAULT 0, provider_metadata TEXT, UNIQUE (message_id, ordinal));
         INSERT INTO sessions VALUES ('old', '2025-01-01T00:00:00Z', '2025-01-01T00:00:00Z');
         INSERT INTO messages (id, session_id, seq, turn_index, role, created_at)
             VALUES (1, 'old', 1, 0, 'user', '2025-01-01T00:00:00Z');
         INSERT INTO parts (message_id, ordinal, kind, text) VALUES (1, 0, 'text', 'an old capybara');",
    )?;
    drop(conn);
    let store = Store::open(&path)?;
    assert_eq!(
        found(&store, "capybara"),
        [("old".into(), 1, "text".into())]
    );
    Ok(())
}

#[test]
fn session_filter_and_unknown_sessions() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let one = conversation(&store)?;
    let two = conversation(&store)?;
    assert_eq!(found(&store, "zeppelin").len(), 2);
    let only_two = SearchOptions {
        session: Some(two.clone()),
        ..SearchOptions::default()
    };
    let hits = store.search("zeppelin", &only_two)?;
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].session, two);
    assert_ne!(hits[0].session, one);
    let unknown = SearchOptions {
        session: Some(SessionId::new("nope")),
        ..SearchOptions::default()
    };
    assert!(matches!(
        store.search("zeppelin", &unknown),
        Err(Error::UnknownSession(_))
    ));
    assert!(matches!(
        store.search("", &unknown),
        Err(Error::UnknownSession(_))
    ));
    Ok(())
}

#[test]
fn fts_syntax_in_a_query_is_just_text() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let session = store.create_session()?;
    store.append(
        &session,
        NewMessage::user("error: \"file not found\" (code 2) NEAR the AND gate"),
    )?;
    for query in [
        "\"file", "(code", "NEAR(", "AND", "OR", "NOT", "code:2", "*", "-", "^gate", "file*",
        "\"\"\"", "gate)", "col:text", "{text}", "+", "a\u{0}b",
    ] {
        store.search(query, &SearchOptions::default())?;
    }
    assert_eq!(found(&store, "\"file not\"").len(), 1);
    assert_eq!(found(&store, "AND gate").len(), 1);
    assert_eq!(found(&store, "fou*").len(), 1);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// No string a person can type makes the search fail.
    #[test]
    fn no_query_is_an_error(query in "\\PC{0,40}", ascii in "[ -~]{0,30}", any in ".{0,20}") {
        thread_local! {
            static STORE: (tempfile::TempDir, Store) = {
                let (dir, store) = open_store().expect("store");
                let session = store.create_session().expect("session");
                store.append(&session, NewMessage::user("some text to match against, é and 漢字"))
                    .expect("append");
                (dir, store)
            };
        }
        STORE.with(|(_, store)| {
            for q in [&query, &ascii, &any] {
                let result = store.search(q, &SearchOptions::default());
                prop_assert!(result.is_ok(), "{:?}: {:?}", q, result);
            }
            Ok(())
        })?;
    }
}

/// Appends do not pay for the full-text index (V12): a part is indexed by the next search,
/// in one batch. No part can be skipped: when a revert deletes the parts with the largest ids
/// (which SQLite then hands out again), the delete trigger brings the index's mark down to
/// the largest id left (V14), so the next part's id, reused or not, is above the mark and
/// the next search indexes it. FTS5's own check agrees with the content after each step.
#[test]
fn appends_leave_indexing_to_the_next_search_and_freed_ids_come_back_above_the_mark(
) -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let conn = Connection::open(store.path())?;
    let indexed = |conn: &Connection| -> rusqlite::Result<i64> {
        conn.query_row("SELECT COUNT(*) FROM parts_fts_docsize", [], |r| r.get(0))
    };
    let mark = |conn: &Connection| -> rusqlite::Result<i64> {
        conn.query_row("SELECT indexed_through FROM search_state", [], |r| r.get(0))
    };
    let check = |conn: &Connection| {
        conn.execute(
            "INSERT INTO parts_fts (parts_fts) VALUES ('integrity-check')",
            [],
        )
    };
    let first = store.create_session()?;
    store.append(&first, NewMessage::user("an aardvark"))?;
    store.append(&first, NewMessage::assistant(vec![Part::text("a badger")]))?;
    assert_eq!(indexed(&conn)?, 0, "an append wrote to the index");
    assert_eq!(found(&store, "aardvark").len(), 1);
    assert_eq!(indexed(&conn)?, 2);
    let before_revert = mark(&conn)?;
    check(&conn)?;
    // Freed ids: the session's parts had the largest ids, up to the mark.
    store.revert_to_turn(&first, 0)?;
    assert!(found(&store, "badger").is_empty());
    let largest_left: i64 =
        conn.query_row("SELECT COALESCE(MAX(id), 0) FROM parts", [], |r| r.get(0))?;
    assert_eq!(
        mark(&conn)?,
        largest_left,
        "the mark came down with the ids"
    );
    let second = store.create_session()?;
    store.append(&second, NewMessage::user("a capybara"))?;
    let id: i64 = conn.query_row("SELECT id FROM parts WHERE text = 'a capybara'", [], |r| {
        r.get(0)
    })?;
    assert!(id <= before_revert, "SQLite handed out a freed id again");
    assert!(id > mark(&conn)?, "a new part is above the mark");
    assert_eq!(indexed(&conn)?, 0, "an append wrote to the index");
    assert_eq!(found(&store, "capybara").len(), 1);
    check(&conn)?;
    store.append(&second, NewMessage::assistant(vec![Part::text("a dingo")]))?;
    assert_eq!(found(&store, "dingo").len(), 1);
    check(&conn)?;
    Ok(())
}

/// A hit names its part by `(session, seq, ordinal)`, the address a store sharded by session
/// reaches on one shard: on every backend, each hit of words in the first, middle and last
/// parts of a message (and one session's search) is the part at that address.
#[test]
fn a_hit_names_its_part_by_session_seq_and_ordinal() -> anyhow::Result<()> {
    for backend in crate::backends::backends() {
        let store = &backend.store;
        let session = conversation(store)?;
        for (query, scoped) in [
            ("quokka", false),
            ("narwhal", false),
            ("axolotl", true),
            ("zeppelin", true),
        ] {
            let options = SearchOptions {
                session: scoped.then(|| session.clone()),
                ..SearchOptions::default()
            };
            let hits = store.search(query, &options)?;
            assert!(!hits.is_empty(), "{}: {query} found", backend.name);
            for hit in hits {
                let messages = store.messages(&hit.session)?;
                let message = messages
                    .iter()
                    .find(|m| m.seq == hit.seq)
                    .expect("the hit's message");
                let part = &message.parts[usize::try_from(hit.ordinal)?];
                assert_eq!(
                    part.kind().as_str(),
                    hit.kind,
                    "{}: {query} at ordinal {}",
                    backend.name,
                    hit.ordinal
                );
                let text = serde_json::to_string(part)?;
                assert!(text.contains(query), "{}: {query} in {text}", backend.name);
            }
        }
    }
    Ok(())
}
