//! A full disk: when SQLite has no room for a write (here `max_page_count` just above the
//! file's size, set on every connection of the store through `StoreOptions::max_page_count`),
//! the append returns a typed error (`Error::is_full`), no part of it is visible, nothing
//! panics on the rollback SQLite already did, the store keeps serving reads, and appends work
//! again once the limit is raised.

use session_store::{NewMessage, Part, Store, StoreOptions};

use crate::fault_support::{assert_dense, assert_integrity, assert_invariants, raw, tool_turn};

fn counts(db: &std::path::Path) -> (i64, i64) {
    raw(db)
        .query_row(
            "SELECT (SELECT COUNT(*) FROM messages), (SELECT COUNT(*) FROM parts)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("counts")
}

/// A turn too big for a handful of free pages: each tool result is 6 KiB.
fn big_turn(tag: &str) -> Vec<NewMessage> {
    let mut turn = tool_turn(tag);
    for message in &mut turn {
        for part in &mut message.parts {
            if let Part::ToolResult { content, .. } = part {
                content.push_str(&"y".repeat(6 * 1024));
            }
        }
    }
    turn
}

#[test]
fn append_on_a_full_disk_is_a_typed_error_and_leaves_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("full.db");
    let session = {
        let store = Store::open(&db).expect("open");
        let session = store.create_session().expect("session");
        store
            .append_batch(&session, tool_turn("a"))
            .expect("turn a");
        session
    };
    let pages: i64 = raw(&db)
        .query_row("PRAGMA page_count", [], |r| r.get(0))
        .expect("page_count");
    let tight = StoreOptions {
        max_page_count: Some(pages as u64 + 2),
        ..StoreOptions::default()
    };
    let store = Store::open_with(&db, &tight).expect("open with a quota");

    // A whole turn in one batch: refused whole.
    let before = counts(&db);
    let full = store
        .append_batch(&session, big_turn("b"))
        .expect_err("a 36 KiB turn cannot fit in 2 pages");
    assert!(full.is_full(), "not a disk-full error: {full:?}");
    assert_eq!(counts(&db), before, "part of a refused batch is visible");

    // Message by message: the ones that fit are stored, the first that does not is refused
    // whole, and the session stays healthy (its tail is a pending tool turn at worst).
    let mut refused = None;
    for (i, message) in big_turn("c").into_iter().enumerate() {
        let before = counts(&db);
        match store.append(&session, message.clone()) {
            Ok(_) => continue,
            Err(e) => {
                assert!(e.is_full(), "message {i}: not a disk-full error: {e:?}");
                assert_eq!(
                    counts(&db),
                    before,
                    "part of refused message {i} is visible"
                );
                refused = Some((i, message));
                break;
            }
        }
    }
    let (index, message) = refused.expect("some message of the turn hit the limit");
    {
        let conn = raw(&db);
        assert_integrity(&conn);
        assert_invariants(&conn);
        assert_dense(&conn);
    }
    // The full store still reads, and its pooled connections still work after the rollback.
    let seen = store.messages(&session).expect("reads on a full disk");
    assert_eq!(seen.len() as i64, counts(&db).0);
    let again = store
        .append(&session, message.clone())
        .expect_err("still full");
    assert!(again.is_full(), "{again:?}");
    drop(store);

    // Room again: the refused message and the rest of the turn go in.
    let store = Store::open(&db).expect("reopen without a quota");
    let rest: Vec<NewMessage> = big_turn("c").into_iter().skip(index).collect();
    store
        .append_batch(&session, rest)
        .expect("appends work once the limit is raised");
    store
        .append_batch(&session, big_turn("b"))
        .expect("the refused batch fits now");
    let conn = raw(&db);
    assert_integrity(&conn);
    assert_invariants(&conn);
    assert_dense(&conn);
    assert!(store
        .pending_tool_uses(&session)
        .expect("pending")
        .is_empty());
    assert_eq!(counts(&db).0, 18);
}

/// A database an older build left at `version`, with a session of 40 messages of 2 KiB each
/// (so that rebuilding or indexing its parts needs room), closed and settled.
fn old_database(dir: &std::path::Path, version: usize) -> std::path::PathBuf {
    let (path, conn) = crate::util::database_at(dir, &format!("v{version}.db"), version);
    conn.execute(
        "INSERT INTO sessions (id, created_at, updated_at)
         VALUES ('s', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')",
        [],
    )
    .expect("session");
    for seq in 1..=40i64 {
        let role = if seq % 2 == 1 { "user" } else { "assistant" };
        conn.execute(
            "INSERT INTO messages (session_id, seq, turn_index, role, created_at)
             VALUES ('s', ?1, ?2, ?3, '2026-01-01T00:00:00Z')",
            rusqlite::params![seq, (seq - 1) / 2, role],
        )
        .expect("message");
        conn.execute(
            "INSERT INTO parts (message_id, ordinal, kind, text)
             VALUES (last_insert_rowid(), 0, 'text', ?1)",
            [format!("words {seq} ").repeat(200)],
        )
        .expect("part");
    }
    drop(conn);
    crate::util::settle(&path);
    path
}

/// The migrations a database records (`refinery_schema_history` rows).
fn recorded_migrations(db: &std::path::Path) -> i64 {
    raw(db)
        .query_row("SELECT COUNT(*) FROM refinery_schema_history", [], |r| {
            r.get(0)
        })
        .expect("history")
}

/// Migrating a database other code wrote (as `store-repair` does first) on a disk with room
/// for only part of the work applies every pending migration or none: the first one that
/// does not fit leaves the file as it was, never migrated half-way. Several starting
/// versions, and quotas from almost nothing to enough, so that the disk fills during
/// different migrations.
#[test]
fn a_migration_on_a_full_disk_applies_every_step_or_none() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Every migration the build carries (numbers may have gaps while a branch waits for one).
    let latest = std::fs::read_dir("migrations")
        .expect("migrations")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".sql"))
        })
        .count();
    let latest = i64::try_from(latest).expect("small");
    let mut outcomes = std::collections::BTreeSet::new();
    for version in [1usize, 4, 6, 9] {
        let original = old_database(dir.path(), version);
        let pages: i64 = raw(&original)
            .query_row("PRAGMA page_count", [], |r| r.get(0))
            .expect("page_count");
        let pages = u64::try_from(pages).expect("pages");
        for extra in [1u64, 4, 16, 40, 80, 160, 400] {
            let db = dir.path().join(format!("v{version}-{extra}.db"));
            std::fs::copy(&original, &db).expect("copy");
            let before = crate::util::dump(&db);
            let options = StoreOptions {
                max_page_count: Some(pages + extra),
                ..StoreOptions::default()
            };
            let opened = Store::open_with(&db, &options);
            let context = format!("from V{version} with {extra} pages of room");
            match opened {
                Ok(store) => {
                    drop(store);
                    assert_eq!(recorded_migrations(&db), latest, "{context}");
                    outcomes.insert("migrated");
                }
                Err(error) => {
                    assert!(error.is_full(), "{context}: {error:?}");
                    assert_eq!(
                        recorded_migrations(&db),
                        i64::try_from(version).expect("small"),
                        "{context}: migrated half-way"
                    );
                    assert_eq!(crate::util::dump(&db), before, "{context}: changed");
                    outcomes.insert("refused");
                }
            }
            assert_integrity(&raw(&db));
        }
    }
    // Both outcomes happened, so the quotas reached into the migrations.
    assert_eq!(outcomes.len(), 2, "{outcomes:?}");
}
