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
