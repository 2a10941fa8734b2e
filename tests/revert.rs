//! Revert that cuts anywhere but a turn start, or that cannot be undone, or that comes back
//! after the user moved on: a revert by timestamp can land inside a turn and strand a
//! tool_result; an undo after a new append would interleave two futures. These tests pin
//! revert by turn (always a turn start), undo until the next append, and gone for good after
//! it, across a reopen of the file, with the compacted head kept consistent.

use rusqlite::Connection;
use session_store::{Error, Message, NewMessage, Part, Reverted, Store};

use crate::turn_fixtures::{
    assert_compacted_prefix_of_whole_turns, assert_pairs_intact, open_store, session_of_turns,
};
use crate::util::violations;

fn side_rows(store: &Store) -> rusqlite::Result<(i64, i64, i64)> {
    let conn = Connection::open(store.path())?;
    conn.query_row(
        "SELECT (SELECT COUNT(*) FROM reverts), (SELECT COUNT(*) FROM reverted_messages),
                (SELECT COUNT(*) FROM reverted_parts)",
        [],
        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
    )
}

fn turns_of(messages: &[Message]) -> Vec<i64> {
    let mut turns: Vec<i64> = messages.iter().map(|m| m.turn_index).collect();
    turns.dedup();
    turns
}

#[test]
fn undo_before_append_restores_the_same_history() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let session = session_of_turns(&store, &[2, 3, 1, 2])?;
    let before = store.messages(&session)?;
    let reverted = store.revert_to_turn(&session, 2)?;
    assert_eq!(
        reverted,
        Reverted {
            from_turn: 2,
            messages: 4 + 6,
            summaries: 0
        }
    );
    let live = store.messages(&session)?;
    assert_eq!(turns_of(&live), [0, 1]);
    assert_eq!(
        live.last().map(|m| m.role),
        Some(session_store::Role::Assistant)
    );
    assert_pairs_intact(&live);
    assert!(store.pending_tool_uses(&session)?.is_empty());
    assert_eq!(side_rows(&store)?, (1, 10, 10));
    assert_eq!(violations(store.path()), Vec::<String>::new());

    let undone = store.undo_revert(&session)?;
    assert_eq!(undone.map(|u| u.messages), Some(10));
    assert_eq!(
        store.messages(&session)?,
        before,
        "ids, seqs and parts come back"
    );
    assert_eq!(side_rows(&store)?, (0, 0, 0));
    assert_eq!(store.undo_revert(&session)?, None, "nothing left to undo");
    Ok(())
}

/// The append skips forgetting reverts when the session row kept its tail state (issue 16):
/// that is only right if every revert and undo clears the state. After each of these
/// sequences the next append leaves nothing to undo, whatever the row kept before.
#[test]
fn every_append_after_a_revert_or_an_undo_forgets_the_reverts() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let session = session_of_turns(&store, &[1, 1, 1, 1])?;
    // revert, append
    store.revert_to_turn(&session, 3)?;
    store.append(&session, NewMessage::user("again"))?;
    assert_eq!(side_rows(&store)?, (0, 0, 0));
    // revert, revert, undo, append
    store.revert_to_turn(&session, 3)?;
    store.revert_to_turn(&session, 2)?;
    assert!(store.undo_revert(&session)?.is_some());
    store.append(&session, NewMessage::user("once more"))?;
    assert_eq!(store.undo_revert(&session)?, None);
    assert_eq!(side_rows(&store)?, (0, 0, 0));
    // an append, then a revert past the end (nothing moved), then an append
    store.revert_to_turn(&session, 99)?;
    store.append(&session, NewMessage::user("and again"))?;
    assert_eq!(side_rows(&store)?, (0, 0, 0));
    Ok(())
}

#[test]
fn reverted_messages_are_gone_after_the_next_append() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let session = session_of_turns(&store, &[1, 1, 1])?;
    store.revert_to_turn(&session, 1)?;
    store.append(&session, NewMessage::user("a different question"))?;
    assert_eq!(store.undo_revert(&session)?, None);
    assert_eq!(side_rows(&store)?, (0, 0, 0));
    let live = store.messages(&session)?;
    assert_eq!(live.len(), 5);
    assert_eq!(turns_of(&live), [0, 1]);
    // The reverted turn's tool_use ids are free again.
    store.append_batch(&session, crate::turn_fixtures::tool_turn("t1", 1))?;
    Ok(())
}

#[test]
fn a_refused_append_keeps_the_revert_undoable() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let session = session_of_turns(&store, &[1, 1])?;
    store.revert_to_turn(&session, 1)?;
    let refused = store.append(
        &session,
        NewMessage::tool(vec![session_store::Part::tool_result("nope", "x")]),
    );
    assert!(refused.is_err());
    assert_eq!(store.undo_revert(&session)?.map(|u| u.messages), Some(4));
    Ok(())
}

#[test]
fn undo_survives_reopening_the_store() -> anyhow::Result<()> {
    let (dir, store) = open_store()?;
    let session = session_of_turns(&store, &[3, 3])?;
    let before = store.messages(&session)?;
    store.revert_to_turn(&session, 1)?;
    drop(store);
    let store = Store::open(dir.path().join("sessions.db"))?;
    assert_eq!(store.messages(&session)?.len(), 8);
    store.undo_revert(&session)?;
    assert_eq!(store.messages(&session)?, before);
    Ok(())
}

#[test]
fn revert_of_turn_zero_takes_everything() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let session = session_of_turns(&store, &[1, 2])?;
    store.append(&session, NewMessage::system("late system note"))?;
    let before = store.messages(&session)?;
    let reverted = store.revert_to_turn(&session, 0)?;
    assert_eq!(reverted.messages, before.len());
    assert!(store.messages(&session)?.is_empty());
    // An empty session starts over at turn 0 and seq 1.
    store.undo_revert(&session)?;
    assert_eq!(store.messages(&session)?, before);
    store.revert_to_turn(&session, -5)?;
    let appended = store.append(&session, NewMessage::user("fresh start"))?;
    assert_eq!((appended.seq, appended.turn_index), (1, 0));
    Ok(())
}

#[test]
fn revert_past_the_end_changes_nothing() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let session = session_of_turns(&store, &[1, 1])?;
    let before = store.messages(&session)?;
    let reverted = store.revert_to_turn(&session, 2)?;
    assert_eq!(reverted.messages, 0);
    assert_eq!(store.messages(&session)?, before);
    assert_eq!(store.undo_revert(&session)?, None);
    assert_eq!(side_rows(&store)?, (0, 0, 0));
    Ok(())
}

#[test]
fn stacked_reverts_undo_latest_first() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let session = session_of_turns(&store, &[1, 1, 1, 1])?;
    let before = store.messages(&session)?;
    store.revert_to_turn(&session, 3)?;
    store.revert_to_turn(&session, 1)?;
    assert_eq!(store.messages(&session)?.len(), 4);
    assert_eq!(store.undo_revert(&session)?.map(|u| u.from_turn), Some(1));
    assert_eq!(store.messages(&session)?.len(), 12);
    assert_eq!(store.undo_revert(&session)?.map(|u| u.from_turn), Some(3));
    assert_eq!(store.messages(&session)?, before);
    Ok(())
}

/// Message ids are rowids: another session may take the ids a revert freed. Undo keeps the
/// history, with fresh ids where the old ones are taken.
#[test]
fn undo_after_another_session_reused_the_ids() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let session = session_of_turns(&store, &[1, 2])?;
    let before = store.messages(&session)?;
    store.revert_to_turn(&session, 1)?;
    let other = session_of_turns(&store, &[2])?;
    store.undo_revert(&session)?;
    let after = store.messages(&session)?;
    let strip = |m: &[Message]| -> Vec<_> {
        m.iter()
            .map(|m| (m.seq, m.turn_index, m.role, m.parts.clone()))
            .collect()
    };
    assert_eq!(strip(&after), strip(&before));
    assert_eq!(store.messages(&other)?.len(), 6);
    Ok(())
}

/// Rows other code wrote with SQL after a revert take the seqs (and, on SQLite, the ids) the
/// undo would put back: that is an append since, and the undo finds nothing to undo instead
/// of failing on a unique key halfway.
#[test]
fn undo_after_rows_of_other_code_finds_nothing_to_undo() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let session = session_of_turns(&store, &[1, 2])?;
    store.revert_to_turn(&session, 1)?;
    let conn = Connection::open(store.path())?;
    conn.execute_batch(&format!(
        "INSERT INTO messages (session_id, seq, turn_index, role, created_at)
             SELECT '{session}', MAX(seq) + 1, MAX(turn_index) + 1, 'user', '2026-01-01T00:00:00Z'
             FROM messages WHERE session_id = '{session}';
         INSERT INTO parts (message_id, ordinal, kind, text)
             VALUES (last_insert_rowid(), 0, 'text', 'asked by other code');
         UPDATE sessions SET message_count = message_count + 1 WHERE id = '{session}';"
    ))?;
    let before = store.messages(&session)?;
    assert_eq!(store.undo_revert(&session)?, None);
    assert_eq!(store.messages(&session)?, before, "nothing moved");
    assert_eq!(violations(store.path()), Vec::<String>::new());
    // The store's next append forgets the reverts, as after its own appends.
    store.append(
        &session,
        NewMessage::assistant(vec![Part::text("answered")]),
    )?;
    assert_eq!(side_rows(&store)?, (0, 0, 0));
    Ok(())
}

/// A revert into the compacted head is allowed only where a compaction ended, so the
/// remaining head keeps a summary that covers exactly it; the later summary goes aside with
/// the reverted turns and comes back on undo.
#[test]
fn revert_into_the_compacted_head_lands_on_a_compaction_boundary() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let session = session_of_turns(&store, &[1, 1, 1, 1, 1, 1])?;
    store.compact(&session, 16, "turns 0-1")?; // head: turns 0..=1
    store.compact(&session, 8, "turns 0-3")?; // head: turns 0..=3
    let before = store.messages(&session)?;

    // Turn 3 is inside the second compaction: the first summary would not cover turn 2.
    let refused = store.revert_to_turn(&session, 3);
    assert!(matches!(
        refused,
        Err(Error::RevertSplitsCompaction {
            turn: 3,
            summarised_through: Some(1),
            ..
        })
    ));
    assert_eq!(
        store.messages(&session)?,
        before,
        "a refused revert changes nothing"
    );

    let reverted = store.revert_to_turn(&session, 2)?;
    assert_eq!((reverted.messages, reverted.summaries), (16, 1));
    let view = store.provider_history(&session)?;
    assert_eq!(
        view.summary.as_ref().map(|s| s.text.as_str()),
        Some("turns 0-1")
    );
    assert!(view.messages.is_empty());
    assert_compacted_prefix_of_whole_turns(&store.messages(&session)?);
    assert_eq!(violations(store.path()), Vec::<String>::new());

    store.undo_revert(&session)?;
    assert_eq!(store.messages(&session)?, before);
    let view = store.provider_history(&session)?;
    assert_eq!(view.summary.map(|s| s.text), Some("turns 0-3".to_owned()));
    assert_eq!(store.summaries(&session)?.len(), 2);

    // Turn 0 takes everything, summaries included; the next append forgets them.
    store.revert_to_turn(&session, 0)?;
    assert!(store.provider_history(&session)?.summary.is_none());
    store.append(&session, NewMessage::user("again"))?;
    assert!(store.summaries(&session)?.is_empty());
    Ok(())
}

/// The side tables must carry every column of the live tables, or a revert and undo would
/// drop the values of a column added by a later migration.
#[test]
fn reverted_tables_mirror_every_live_column() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let conn = Connection::open(store.path())?;
    let columns = |table: &str| -> rusqlite::Result<Vec<String>> {
        conn.prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))?
            .query_map([], |row| row.get(0))?
            .collect()
    };
    let side_messages = columns("reverted_messages")?;
    for column in columns("messages")? {
        let mirrored = if column == "id" {
            "original_id".to_owned()
        } else {
            column.clone()
        };
        assert!(
            side_messages.contains(&mirrored),
            "reverted_messages lacks {column}"
        );
    }
    let side_parts = columns("reverted_parts")?;
    for column in columns("parts")? {
        let mirrored = if column == "message_id" {
            "reverted_message_id".to_owned()
        } else {
            column.clone()
        };
        assert!(
            side_parts.contains(&mirrored),
            "reverted_parts lacks {column}"
        );
    }
    let side_usage = columns("reverted_usage")?;
    for column in columns("usage")? {
        let mirrored = if column == "message_id" {
            "reverted_message_id".to_owned()
        } else {
            column.clone()
        };
        assert!(
            side_usage.contains(&mirrored),
            "reverted_usage lacks {column}"
        );
    }
    Ok(())
}
