//! Compaction that splits a turn: a cut by message count ("keep the last N") lands inside a
//! tool-heavy turn, hides a tool_use in the summarised head and leaves its tool_result in the
//! visible tail, and every later request of that session is rejected by the provider. These
//! regression tests pin the turn-aligned cut (walk left from `len - min_keep_tail` to the
//! start of that turn) at each boundary case, against a real SQLite file.

use session_store::{CompactionOutcome, Error, NothingToCompact, Role, SessionId, Store};

use crate::turn_fixtures::{
    assert_compacted_prefix_of_whole_turns, assert_pairs_intact, naive_cut_role, open_store,
    session_of_turns,
};

/// Compacts and checks what every compaction must leave behind: whole compacted turns as a
/// prefix, intact pairs in the provider's view, a view that starts with a user message, and a
/// tail of at least `keep` messages (or the whole history). Returns the outcome.
fn compact_and_check(
    store: &Store,
    session: &SessionId,
    keep: usize,
) -> session_store::Result<CompactionOutcome> {
    let before = store.messages(session)?.len();
    let outcome = store.compact(session, keep, "the story so far")?;
    let all = store.messages(session)?;
    assert_eq!(all.len(), before, "compaction never deletes a message");
    let compacted = assert_compacted_prefix_of_whole_turns(&all);
    let view = store.provider_history(session)?;
    assert_eq!(view.messages.len(), before - compacted);
    assert!(
        view.messages.len() >= keep.min(before),
        "tail shorter than asked"
    );
    assert_pairs_intact(&view.messages);
    if compacted > 0 {
        assert!(view.summary.is_some(), "compacted head without a summary");
        assert_eq!(view.messages.first().map(|m| m.role), Some(Role::User));
    }
    Ok(outcome)
}

fn newly_compacted(outcome: &CompactionOutcome) -> usize {
    match outcome {
        CompactionOutcome::Compacted {
            newly_compacted, ..
        } => *newly_compacted,
        CompactionOutcome::NothingToCompact { .. } => 0,
    }
}

fn reason(outcome: &CompactionOutcome) -> Option<NothingToCompact> {
    match outcome {
        CompactionOutcome::NothingToCompact { reason } => Some(*reason),
        CompactionOutcome::Compacted { .. } => None,
    }
}

/// The seed failure: two three-tool turns (8 messages each); keeping 2 naively cuts between
/// the last tool_use and its result.
#[test]
fn three_tool_turn_crossing_the_naive_cut() -> session_store::Result<()> {
    for keep in 1..=8 {
        let (_dir, store) = open_store()?;
        let session = session_of_turns(&store, &[3, 3])?;
        let all = store.messages(&session)?;
        assert_eq!(all.len(), 16);
        if keep == 2 {
            // The naive cut would start the tail with the result of a hidden tool_use.
            assert_eq!(naive_cut_role(&all, keep), Role::Tool);
        }
        let outcome = compact_and_check(&store, &session, keep)?;
        assert_eq!(
            newly_compacted(&outcome),
            8,
            "keep {keep}: only turn 0 goes"
        );
        assert_eq!(store.provider_history(&session)?.messages.len(), 8);
    }
    Ok(())
}

/// A ten-tool turn is 22 messages: a small tail lands deep inside it.
#[test]
fn ten_tool_turn() -> session_store::Result<()> {
    let (_dir, store) = open_store()?;
    let session = session_of_turns(&store, &[1, 10])?;
    assert_eq!(naive_cut_role(&store.messages(&session)?, 4), Role::Tool);
    let outcome = compact_and_check(&store, &session, 4)?;
    assert_eq!(newly_compacted(&outcome), 4);
    let view = store.provider_history(&session)?;
    assert_eq!(view.messages.len(), 22);
    assert_eq!(
        view.summary.map(|s| (s.first_turn, s.last_turn)),
        Some((0, 0))
    );
    Ok(())
}

#[test]
fn one_unbroken_turn_has_nothing_to_compact() -> session_store::Result<()> {
    let (_dir, store) = open_store()?;
    let session = session_of_turns(&store, &[10])?;
    for keep in [0, 1, 4, 21] {
        let outcome = compact_and_check(&store, &session, keep)?;
        assert_eq!(reason(&outcome), Some(NothingToCompact::ReachedFirstTurn));
    }
    assert!(store.summaries(&session)?.is_empty(), "nothing stored");
    assert!(store.provider_history(&session)?.summary.is_none());
    Ok(())
}

/// Turns of 4 messages: keeping 4 cuts exactly at the last user message, no walk needed.
#[test]
fn cut_already_on_a_user_message() -> session_store::Result<()> {
    let (_dir, store) = open_store()?;
    let session = session_of_turns(&store, &[1, 1, 1])?;
    assert_eq!(naive_cut_role(&store.messages(&session)?, 4), Role::User);
    let outcome = compact_and_check(&store, &session, 4)?;
    assert_eq!(newly_compacted(&outcome), 8);
    assert_eq!(store.provider_history(&session)?.messages.len(), 4);
    Ok(())
}

/// A tail of 0 still keeps the last turn: the provider needs a message after the summary, and
/// the last turn may hold a pending tool_use.
#[test]
fn min_keep_tail_zero() -> session_store::Result<()> {
    let (_dir, store) = open_store()?;
    let session = session_of_turns(&store, &[2, 1, 3])?;
    let outcome = compact_and_check(&store, &session, 0)?;
    assert_eq!(newly_compacted(&outcome), 6 + 4);
    let view = store.provider_history(&session)?;
    assert_eq!(view.messages.len(), 8);
    assert!(view.messages.iter().all(|m| m.turn_index == 2));
    Ok(())
}

#[test]
fn min_keep_tail_larger_than_history() -> session_store::Result<()> {
    let (_dir, store) = open_store()?;
    let session = session_of_turns(&store, &[1, 1])?;
    for keep in [8, 9, 1000, usize::MAX] {
        let outcome = compact_and_check(&store, &session, keep)?;
        assert_eq!(reason(&outcome), Some(NothingToCompact::TailCoversHistory));
    }
    assert_eq!(store.provider_history(&session)?.messages.len(), 8);
    Ok(())
}

/// A second compaction on top of the first: planned over the whole session, it only counts
/// when the turn-aligned cut reaches past the old head; the new summary covers the whole head
/// and the first one is kept.
#[test]
fn second_compaction_on_top_of_first() -> session_store::Result<()> {
    let (_dir, store) = open_store()?;
    let session = session_of_turns(&store, &[1, 1, 1, 1, 1])?;
    let first = compact_and_check(&store, &session, 12)?;
    assert_eq!(newly_compacted(&first), 8);
    // The same tail again, or one that walks back into the head: nothing new.
    for keep in [12, 11, 9] {
        let again = compact_and_check(&store, &session, keep)?;
        assert_eq!(
            reason(&again),
            Some(NothingToCompact::AlreadyCompacted { compacted: 8 }),
            "keep {keep}"
        );
    }
    let second = compact_and_check(&store, &session, 3)?;
    assert_eq!(newly_compacted(&second), 8);
    let summaries = store.summaries(&session)?;
    let ranges: Vec<_> = summaries
        .iter()
        .map(|s| (s.first_turn, s.last_turn, s.compacted_from_turn))
        .collect();
    assert_eq!(ranges, [(0, 1, 0), (0, 3, 2)]);
    let view = store.provider_history(&session)?;
    assert_eq!(
        view.summary.as_ref().map(|s| s.id),
        summaries.last().map(|s| s.id)
    );
    assert_eq!(view.messages.len(), 4);
    Ok(())
}

/// A pending tool_use sits in the last turn, which compaction never touches.
#[test]
fn pending_tool_use_stays_visible() -> session_store::Result<()> {
    let (_dir, store) = open_store()?;
    let session = session_of_turns(&store, &[2, 2])?;
    store.append(&session, session_store::NewMessage::user("one more"))?;
    store.append(
        &session,
        session_store::NewMessage::assistant(vec![session_store::Part::tool_use(
            "pending",
            "bash",
            serde_json::json!({}),
        )]),
    )?;
    compact_and_check(&store, &session, 0)?;
    assert_eq!(store.pending_tool_uses(&session)?, ["pending"]);
    let view = store.provider_history(&session)?;
    assert_eq!(view.messages.len(), 2);
    Ok(())
}

/// The summary is all the provider sees of the head: an empty one is refused, and nothing
/// is marked.
#[test]
fn empty_summary_is_refused() -> session_store::Result<()> {
    let (_dir, store) = open_store()?;
    let session = session_of_turns(&store, &[1, 1, 1])?;
    // Blank by any provider's definition, not only Rust's `trim`: a summary of U+FEFF
    // (JavaScript's whitespace) or U+001F (Python's) would leave the export with neither
    // summary nor history.
    for blank in [" \n", "\u{feff}", "\u{1f} \u{feff}"] {
        let refused = store.compact(&session, 1, blank);
        assert!(
            matches!(refused, Err(Error::EmptySummary { .. })),
            "{blank:?}"
        );
    }
    assert!(store.messages(&session)?.iter().all(|m| !m.compacted));
    Ok(())
}

#[test]
fn unknown_session_is_an_error() -> session_store::Result<()> {
    let (_dir, store) = open_store()?;
    let missing = SessionId::new("missing");
    assert!(matches!(
        store.compact(&missing, 1, "s"),
        Err(Error::UnknownSession(_))
    ));
    assert!(matches!(
        store.provider_history(&missing),
        Err(Error::UnknownSession(_))
    ));
    Ok(())
}

/// End to end: what the provider is sent after compacting the seed shape is the summary,
/// then the kept turns with every tool pair whole, and it passes every provider's contract.
#[test]
fn export_sends_the_summary_in_place_of_the_head() -> anyhow::Result<()> {
    use session_store::request::check;
    use session_store::{ExportOptions, Provider};

    let (_dir, store) = open_store()?;
    let session = session_of_turns(&store, &[3, 3, 3])?;
    store.compact(&session, 2, "Turns 0 and 1 listed files.")?;
    let options = ExportOptions {
        persist_latch: false,
        ..ExportOptions::default()
    };
    for provider in Provider::ALL {
        let body = store.export_now(&session, provider, &options)?;
        let text = body.to_string();
        assert!(
            text.contains("Turns 0 and 1 listed files."),
            "{provider}: {text}"
        );
        assert!(
            !text.contains("t0_call_0") && !text.contains("t1_call_2"),
            "{text}"
        );
        assert!(
            text.contains("t2_call_0") && text.contains("t2_call_2"),
            "{text}"
        );
        let violations = check(provider, &body);
        assert!(violations.is_empty(), "{provider}: {violations:?}");
    }
    Ok(())
}

/// The store plans from the end of the session (`TailSearch`: the last messages, a count of
/// user messages, the head's end) and must cut exactly where the pure planner cuts over the
/// whole stored list: repeated compactions, system messages, and a head other code left with
/// a gap (a message inside it not compacted).
mod planned_from_the_tail {
    use proptest::prelude::*;
    use session_store::{
        plan_compaction, CompactionOutcome, CompactionPlan, NewMessage, Role, SessionId, Store,
    };

    use crate::turn_fixtures::{open_store, tool_turn};

    fn expected(store: &Store, session: &SessionId, keep: usize) -> CompactionPlan {
        let items: Vec<(Role, bool)> = store
            .messages(session)
            .expect("messages")
            .iter()
            .map(|m| (m.role, m.compacted))
            .collect();
        plan_compaction(&items, keep)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        #[test]
        fn the_store_cuts_where_the_whole_list_planner_cuts(
            turns in prop::collection::vec((0usize..4, any::<bool>()), 1..8),
            keeps in prop::collection::vec(0usize..14, 1..4),
            gap in any::<bool>(),
        ) {
            let (dir, store) = open_store().expect("store");
            let session = store.create_session().expect("session");
            for (i, (tools, system)) in turns.iter().enumerate() {
                if *system {
                    store.append(&session, NewMessage::system("note")).expect("system");
                }
                store.append_batch(&session, tool_turn(&format!("p{i}"), *tools)).expect("turn");
            }
            for (round, keep) in keeps.iter().enumerate() {
                if gap && round == 1 {
                    // Other code un-compacts one message inside the head.
                    rusqlite::Connection::open(dir.path().join("sessions.db"))
                        .and_then(|c| c.execute(
                            "UPDATE messages SET compacted = 0 WHERE session_id = ?1 AND seq = 2",
                            [session.as_str()],
                        ))
                        .expect("gap");
                }
                let plan = expected(&store, &session, *keep);
                let len = store.messages(&session).expect("messages").len();
                let outcome = store.compact(&session, *keep, "summary").expect("compact");
                match (plan, outcome) {
                    (CompactionPlan::Nothing { reason }, CompactionOutcome::NothingToCompact { reason: got }) => {
                        prop_assert_eq!(reason, got);
                    }
                    (CompactionPlan::Compact(cut), CompactionOutcome::Compacted { summary, kept, .. }) => {
                        prop_assert_eq!(kept, len - cut.cut);
                        prop_assert_eq!(summary.last_turn, cut.last_compacted_turn());
                        prop_assert_eq!(summary.compacted_from_turn, cut.first_new_turn);
                        let messages = store.messages(&session).expect("messages");
                        prop_assert_eq!(summary.through_seq, messages[cut.cut - 1].seq);
                    }
                    (plan, outcome) => prop_assert!(false, "{plan:?} vs {outcome:?}"),
                }
            }
        }
    }
}
