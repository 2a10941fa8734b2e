//! Retention that leaves rows behind, deletes too much, or never gives the space back:
//! a delete that forgets a side table (usage, summaries, reverts and their moved rows,
//! `repair_log`, the search index) leaves orphans that still cost bytes and still show up in
//! search; a prune that reads `updated_at` once and deletes later removes a session a live
//! writer just touched; SQLite keeps freed pages in the file. These tests pin delete (every
//! row of the session, nothing of any other, one transaction, beside a live writer), prune
//! by age with a dry run that writes nothing, and space measured back on the file system.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use chrono::TimeDelta;
use rusqlite::Connection;
use serde_json::json;
use session_store::{Error, NewMessage, Part, SearchOptions, SessionId, Store, Usage};

use crate::turn_fixtures::{open_store, session_of_turns, tool_turn};
use crate::util::{dump, violations};

/// Rows of every table that belong to `session`, by table.
fn rows_of(store: &Store, session: &SessionId) -> anyhow::Result<Vec<(String, i64)>> {
    let conn = Connection::open(store.path())?;
    let queries = [
        ("sessions", "SELECT COUNT(*) FROM sessions WHERE id = ?1"),
        ("messages", "SELECT COUNT(*) FROM messages WHERE session_id = ?1"),
        ("parts", "SELECT COUNT(*) FROM parts p JOIN messages m ON m.id = p.message_id WHERE m.session_id = ?1"),
        ("usage", "SELECT COUNT(*) FROM usage u JOIN messages m ON m.id = u.message_id WHERE m.session_id = ?1"),
        ("summaries", "SELECT COUNT(*) FROM summaries WHERE session_id = ?1"),
        ("reverts", "SELECT COUNT(*) FROM reverts WHERE session_id = ?1"),
        ("reverted_messages", "SELECT COUNT(*) FROM reverted_messages WHERE session_id = ?1"),
        ("reverted_parts", "SELECT COUNT(*) FROM reverted_parts p JOIN reverted_messages m ON m.id = p.reverted_message_id WHERE m.session_id = ?1"),
        ("reverted_usage", "SELECT COUNT(*) FROM reverted_usage u JOIN reverted_messages m ON m.id = u.reverted_message_id WHERE m.session_id = ?1"),
        ("repair_log", "SELECT COUNT(*) FROM repair_log WHERE session_id = ?1"),
    ];
    let mut out = Vec::new();
    for (table, sql) in queries {
        out.push((
            table.to_owned(),
            conn.query_row(sql, [session.as_str()], |r| r.get(0))?,
        ));
    }
    Ok(out)
}

/// A session with a row in every table: usage, a summary, an undoable revert holding usage,
/// and a repair_log entry.
fn full_session(store: &Store, word: &str) -> anyhow::Result<SessionId> {
    let session = session_of_turns(store, &[1, 2, 1, 1])?;
    store.append_batch(
        &session,
        vec![
            NewMessage::user(format!("about {word}")),
            NewMessage::assistant(vec![Part::text(word)]).with_usage(Usage::new(1, 2)),
        ],
    )?;
    store.append_batch(
        &session,
        vec![
            NewMessage::user("later"),
            NewMessage::assistant(vec![Part::text("reply")]).with_usage(Usage::new(3, 4)),
        ],
    )?;
    store.compact(&session, 6, "summary")?;
    store.revert_to_turn(&session, 5)?;
    Connection::open(store.path())?.execute(
        "INSERT INTO repair_log (session_id, rule, action, repaired_at) VALUES (?1, 'r', 'a', 't')",
        [session.as_str()],
    )?;
    Ok(session)
}

#[test]
fn delete_removes_every_row_of_the_session_and_nothing_else() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let doomed = full_session(&store, "ocelot")?;
    let kept = full_session(&store, "margay")?;
    assert!(
        rows_of(&store, &doomed)?.iter().all(|(_, n)| *n > 0),
        "{:?}",
        rows_of(&store, &doomed)?
    );
    let kept_before = rows_of(&store, &kept)?;
    let kept_messages = store.messages(&kept)?;

    let deleted = store.delete_session(&doomed)?;
    assert_eq!(deleted.messages, 20);
    assert!(
        rows_of(&store, &doomed)?.iter().all(|(_, n)| *n == 0),
        "{:?}",
        rows_of(&store, &doomed)?
    );
    assert_eq!(rows_of(&store, &kept)?, kept_before);
    assert_eq!(store.messages(&kept)?, kept_messages);
    assert!(store
        .search("ocelot", &SearchOptions::default())?
        .is_empty());
    assert_eq!(store.search("margay", &SearchOptions::default())?.len(), 2);
    let conn = Connection::open(store.path())?;
    conn.execute(
        "INSERT INTO parts_fts (parts_fts) VALUES ('integrity-check')",
        [],
    )?;
    let orphans: i64 = conn.query_row(
        "SELECT (SELECT COUNT(*) FROM usage WHERE message_id NOT IN (SELECT id FROM messages))
              + (SELECT COUNT(*) FROM parts WHERE message_id NOT IN (SELECT id FROM messages))",
        [],
        |r| r.get(0),
    )?;
    assert_eq!(orphans, 0);
    assert_eq!(
        store.undo_revert(&kept)?.map(|r| r.messages),
        Some(2),
        "the other session's revert is intact"
    );
    Ok(())
}

#[test]
fn deleting_an_unknown_session_writes_nothing() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    session_of_turns(&store, &[1])?;
    let before = dump(store.path());
    let refused = store.delete_session(&SessionId::new("missing"));
    assert!(matches!(refused, Err(Error::UnknownSession(_))));
    assert_eq!(dump(store.path()), before);
    Ok(())
}

#[test]
fn forks_outlive_their_deleted_parent() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let parent = session_of_turns(&store, &[1, 1])?;
    let fork = store.fork(&parent, 1)?;
    store.delete_session(&parent)?;
    assert_eq!(store.messages(&fork.id)?.len(), 4);
    let lineage = store.lineage()?;
    assert_eq!(lineage.len(), 1);
    assert_eq!(lineage[0].parent, None);
    assert_eq!(lineage[0].forked_at_turn, Some(1));
    Ok(())
}

#[test]
fn prune_deletes_only_sessions_older_than_the_cutoff_and_a_dry_run_writes_nothing(
) -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let old = session_of_turns(&store, &[1])?;
    let other_writer = session_of_turns(&store, &[1])?;
    let recent = session_of_turns(&store, &[1])?;
    let conn = Connection::open(store.path())?;
    conn.execute(
        "UPDATE sessions SET updated_at = '2020-01-01T00:00:00Z' WHERE id = ?1",
        [old.as_str()],
    )?;
    // Written by other code: SQLite's own format, no offset.
    conn.execute(
        "UPDATE sessions SET updated_at = '2020-01-02 00:00:00' WHERE id = ?1",
        [other_writer.as_str()],
    )?;
    let cutoff = session_store::clock() - TimeDelta::days(30);
    let before = dump(store.path());
    let candidates = store.prune_candidates(cutoff)?;
    assert_eq!(
        candidates
            .iter()
            .map(|d| d.session.clone())
            .collect::<Vec<_>>(),
        [old.clone(), other_writer.clone()]
    );
    assert_eq!(
        dump(store.path()),
        before,
        "listing candidates writes nothing"
    );
    let pruned = store.prune(cutoff)?;
    assert_eq!(pruned, candidates);
    assert_eq!(
        store
            .sessions()?
            .into_iter()
            .map(|s| s.id)
            .collect::<Vec<_>>(),
        [recent]
    );
    Ok(())
}

#[test]
fn a_session_touched_after_the_listing_is_not_pruned() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let session = session_of_turns(&store, &[1])?;
    Connection::open(store.path())?.execute(
        "UPDATE sessions SET updated_at = '2020-01-01T00:00:00Z' WHERE id = ?1",
        [session.as_str()],
    )?;
    let cutoff = session_store::clock() - TimeDelta::days(1);
    assert_eq!(store.prune_candidates(cutoff)?.len(), 1);
    // A live writer appends between the listing and the delete.
    store.append_batch(&session, tool_turn("new", 0))?;
    assert!(store.prune(cutoff)?.is_empty());
    assert!(store.has_session(&session)?);
    Ok(())
}

#[test]
fn reclaim_gives_the_deleted_bytes_back_to_the_file_system() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let big = store.create_session()?;
    let blob = (0..800).map(|n| format!("w{n} ")).collect::<String>();
    for i in 0..200 {
        store.append_batch(
            &big,
            vec![
                NewMessage::user(format!("step {i}")),
                NewMessage::assistant(vec![Part::tool_use(format!("c{i}"), "cat", json!({}))]),
                NewMessage::tool(vec![Part::tool_result(format!("c{i}"), blob.clone())]),
            ],
        )?;
    }
    let small = session_of_turns(&store, &[1])?;
    let report = store.size_report(5)?;
    assert_eq!(report.largest[0].session, big);
    assert!(report.tool_output_bytes >= 200 * 3000);
    assert!(report.largest[0].tool_output_bytes * 10 > report.largest[0].content_bytes * 9);
    // The first reclaim switches the file to incremental auto-vacuum.
    assert!(store.reclaim_space()?.full_vacuum);
    let full = store.bytes_on_disk();
    store.delete_session(&big)?;
    let reclaimed = store.reclaim_space()?;
    assert!(!reclaimed.full_vacuum, "later reclaims are incremental");
    assert!(
        reclaimed.after_bytes * 4 < full,
        "{full} bytes before the delete, {} after reclaiming",
        reclaimed.after_bytes
    );
    let after = store.size_report(5)?;
    assert_eq!(after.free_bytes, 0);
    assert!(
        after.search_index_bytes * 4 < report.search_index_bytes,
        "the search index keeps deleted entries: {} bytes before, {} after",
        report.search_index_bytes,
        after.search_index_bytes
    );
    assert_eq!(store.messages(&small)?.len(), 4);
    assert!(violations(store.path()).is_empty());
    Ok(())
}

#[test]
fn delete_prune_and_reclaim_beside_a_live_writer() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let doomed: Vec<SessionId> = (0..6)
        .map(|_| session_of_turns(&store, &[2, 1]))
        .collect::<Result<_, _>>()?;
    let live = store.create_session()?;
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (store, live, stop) = (store.clone(), live.clone(), Arc::clone(&stop));
        std::thread::spawn(move || -> session_store::Result<usize> {
            let mut turns = 0;
            while !stop.load(Ordering::Relaxed) || turns < 5 {
                store.append_batch(&live, tool_turn(&format!("live{turns}"), 1))?;
                turns += 1;
            }
            Ok(turns)
        })
    };
    for session in &doomed[..3] {
        store.delete_session(session)?;
    }
    let conn = Connection::open(store.path())?;
    conn.busy_timeout(std::time::Duration::from_secs(30))?;
    for session in &doomed[3..] {
        conn.execute(
            "UPDATE sessions SET updated_at = '2020-01-01T00:00:00Z' WHERE id = ?1",
            [session.as_str()],
        )?;
    }
    let pruned = store.prune(session_store::clock() - TimeDelta::days(1))?;
    assert_eq!(pruned.len(), 3);
    store.reclaim_space()?;
    store.reclaim_space()?;
    stop.store(true, Ordering::Relaxed);
    let turns = writer.join().expect("writer thread")?;
    assert_eq!(store.messages(&live)?.len(), turns * 4);
    assert_eq!(store.sessions()?.len(), 1);
    assert!(violations(store.path()).is_empty());
    Ok(())
}
