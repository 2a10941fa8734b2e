//! Fork that shares rows with its source, splits a tool pair, loses lineage or leaves the
//! fork broken: a fork copied by message count can cut between a call and its result, a fork
//! that shares rows changes when the source does, and a compacted head copied without its
//! summary hides turns behind a summary of a future the fork never had. These tests pin fork
//! by turn (copy, never share), lineage in `sessions.parent_id` / `forked_at_turn`, refusal of
//! a turn that does not exist with nothing written, tombstones for calls pending at the cut,
//! and (property) that a fork of any healthy session at any turn is healthy and exports as a
//! prefix of the source's export.

use proptest::prelude::*;
use rusqlite::Connection;
use serde_json::{json, Value};
use session_store::{Error, ExportOptions, NewMessage, Part, Provider, SessionId, Store, Usage};

use crate::turn_fixtures::{open_store, session_of_turns, tool_turn};
use crate::util::{dump, violations};

fn lineage_row(store: &Store, id: &SessionId) -> rusqlite::Result<(Option<String>, Option<i64>)> {
    Connection::open(store.path())?.query_row(
        "SELECT parent_id, forked_at_turn FROM sessions WHERE id = ?1",
        [id.as_str()],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
}

#[test]
fn fork_copies_the_turns_before_the_cut_and_records_lineage() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let source = session_of_turns(&store, &[1, 2, 0, 3])?;
    let all = store.messages(&source)?;
    let forked = store.fork(&source, 2)?;
    let copied = store.messages(&forked.id)?;
    let expected: Vec<_> = all.iter().filter(|m| m.turn_index < 2).collect();
    assert_eq!(copied.len(), expected.len());
    assert_eq!(forked.messages, expected.len());
    for (copy, original) in copied.iter().zip(&expected) {
        assert_eq!(
            (
                copy.seq,
                copy.turn_index,
                copy.role,
                &copy.parts,
                copy.created_at
            ),
            (
                original.seq,
                original.turn_index,
                original.role,
                &original.parts,
                original.created_at
            )
        );
        assert_ne!(
            copy.id, original.id,
            "a fork copies rows, it never shares them"
        );
    }
    assert_eq!(
        lineage_row(&store, &forked.id)?,
        (Some(source.to_string()), Some(2))
    );
    assert!(forked.tombstoned.is_empty());
    assert!(violations(store.path()).is_empty());
    Ok(())
}

#[test]
fn fork_and_source_go_on_independently() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let source = session_of_turns(&store, &[1, 1])?;
    let forked = store.fork(&source, 1)?;
    store.append_batch(&forked.id, tool_turn("fork", 1))?;
    store.append_batch(&source, tool_turn("source", 2))?;
    store.revert_to_turn(&source, 0)?;
    assert!(store.messages(&source)?.is_empty());
    let fork_messages = store.messages(&forked.id)?;
    assert_eq!(fork_messages.len(), 4 + 4);
    assert!(violations(store.path()).is_empty());
    Ok(())
}

#[test]
fn fork_at_every_turn_from_zero_to_the_end_and_no_further() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let source = session_of_turns(&store, &[2, 0, 1])?;
    let total = store.messages(&source)?.len();
    assert_eq!(store.fork(&source, 0)?.messages, 0);
    assert_eq!(store.fork(&source, 3)?.messages, total);
    let before = dump(store.path());
    for turn in [4, -1, i64::MAX] {
        let refused = store.fork(&source, turn);
        assert!(
            matches!(refused, Err(Error::NoSuchTurn { turns: 3, .. })),
            "turn {turn}: {refused:?}"
        );
    }
    let unknown = store.fork(&SessionId::new("no-such-session"), 0);
    assert!(matches!(unknown, Err(Error::UnknownSession(_))));
    assert_eq!(dump(store.path()), before, "a refused fork writes nothing");
    Ok(())
}

#[test]
fn a_fork_of_a_fork_keeps_the_chain_and_the_tree_shows_it() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let root = session_of_turns(&store, &[1, 1, 1])?;
    let child = store.fork(&root, 2)?;
    let grandchild = store.fork(&child.id, 1)?;
    assert_eq!(store.messages(&grandchild.id)?.len(), 4);
    assert_eq!(
        lineage_row(&store, &grandchild.id)?,
        (Some(child.id.to_string()), Some(1))
    );
    let tree: Vec<(String, usize)> = store
        .lineage()?
        .into_iter()
        .map(|l| (l.id.to_string(), l.depth))
        .collect();
    assert_eq!(
        tree,
        [
            (root.to_string(), 0),
            (child.id.to_string(), 1),
            (grandchild.id.to_string(), 2)
        ]
    );
    Ok(())
}

#[test]
fn calls_pending_at_the_cut_get_tombstones_in_the_fork_only() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let source = session_of_turns(&store, &[1])?;
    store.append_batch(
        &source,
        vec![
            NewMessage::user("again"),
            NewMessage::assistant(vec![
                Part::tool_use("p1", "bash", json!({})),
                Part::tool_use("p2", "bash", json!({})),
            ]),
            NewMessage::tool(vec![Part::tool_result("p1", "done")]),
        ],
    )?;
    let forked = store.fork(&source, 2)?;
    assert_eq!(forked.tombstoned, ["p2"]);
    assert_eq!(store.pending_tool_uses(&forked.id)?, Vec::<String>::new());
    assert_eq!(
        store.pending_tool_uses(&source)?,
        ["p2"],
        "the source is untouched"
    );
    // The fork can move on at once.
    store.append(&forked.id, NewMessage::user("next"))?;
    assert!(violations(store.path()).is_empty());
    Ok(())
}

#[test]
fn a_summary_is_copied_only_with_every_turn_it_covers() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let source = session_of_turns(&store, &[1, 1, 1, 1, 1])?;
    // Compact turns 0..=2 (keep the last two turns, 8 messages).
    let outcome = store.compact(&source, 8, "turns 0 to 2 in short")?;
    assert!(!outcome.is_nothing());
    let cover = store.summaries(&source)?[0].last_turn;
    assert_eq!(cover, 2);

    let whole = store.fork(&source, 4)?;
    assert_eq!((whole.summaries, whole.uncompacted), (1, 0));
    let view = store.provider_history(&whole.id)?;
    assert_eq!(
        view.summary.map(|s| s.text).as_deref(),
        Some("turns 0 to 2 in short")
    );

    // Cutting inside the compacted head: the summary speaks of turns the fork lacks.
    let inside = store.fork(&source, 2)?;
    assert_eq!(inside.summaries, 0);
    assert_eq!(inside.uncompacted, 8);
    let view = store.provider_history(&inside.id)?;
    assert!(view.summary.is_none());
    assert_eq!(view.messages.len(), 8, "every copied turn is visible again");
    assert!(violations(store.path()).is_empty());
    Ok(())
}

#[test]
fn usage_rows_are_copied_with_their_messages() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let source = store.create_session()?;
    for turn in 0..3 {
        store.append(&source, NewMessage::user(format!("q{turn}")))?;
        store.append(
            &source,
            NewMessage::assistant(vec![Part::text("a")])
                .with_usage(Usage::new(10 + turn, 1).model("anthropic/m")),
        )?;
    }
    let forked = store.fork(&source, 2)?;
    let usage = store.usage(&forked.id)?;
    assert_eq!(usage.total.messages, 2);
    assert_eq!(usage.total.input_tokens, Some(21));
    assert_eq!(store.usage(&source)?.total.input_tokens, Some(33));
    Ok(())
}

#[test]
fn a_fork_is_found_by_search_under_its_own_id() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let source = store.create_session()?;
    store.append(&source, NewMessage::user("the word xylophone"))?;
    let forked = store.fork(&source, 1)?;
    let hits = store.search("xylophone", &session_store::SearchOptions::default())?;
    let mut sessions: Vec<String> = hits.iter().map(|h| h.session.to_string()).collect();
    sessions.sort();
    let mut expected = vec![source.to_string(), forked.id.to_string()];
    expected.sort();
    assert_eq!(sessions, expected);
    Ok(())
}

#[test]
fn forks_taken_beside_a_live_writer_are_whole_turn_prefixes_of_the_source() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let source = session_of_turns(&store, &[1])?;
    let writer = {
        let (store, source) = (store.clone(), source.clone());
        std::thread::spawn(move || -> session_store::Result<()> {
            for n in 0..30 {
                store.append_batch(&source, tool_turn(&format!("live{n}"), 1 + n % 3))?;
            }
            Ok(())
        })
    };
    let mut forks = Vec::new();
    for _ in 0..15 {
        // The turns seen just before: the writer may add more before the fork runs, which
        // then copies a prefix; either way whole turns.
        let turns = store
            .messages(&source)?
            .last()
            .map_or(0, |m| m.turn_index + 1);
        forks.push(store.fork(&source, turns)?);
    }
    writer.join().expect("writer thread")?;
    let all = store.messages(&source)?;
    for fork in forks {
        let copied = store.messages(&fork.id)?;
        assert!(fork.tombstoned.is_empty(), "each turn is appended whole");
        assert!(copied.len() <= all.len());
        for (copy, original) in copied.iter().zip(&all) {
            assert_eq!((copy.seq, &copy.parts), (original.seq, &original.parts));
        }
        let next = all.get(copied.len()).map(|m| m.role);
        assert!(
            matches!(next, None | Some(session_store::Role::User)),
            "a fork ends at a turn boundary"
        );
    }
    assert!(violations(store.path()).is_empty());
    Ok(())
}

/// One turn of the generated sessions: a system note before it, then assistant steps with
/// tool calls (results in one tool message or one each), reasoning, and a final answer.
#[derive(Clone, Debug)]
struct TurnSpec {
    system_note: bool,
    steps: Vec<(usize, bool)>,
    reasoning: bool,
}

fn history() -> impl Strategy<Value = (Vec<TurnSpec>, bool, Option<usize>)> {
    let turn = (
        proptest::bool::weighted(0.2),
        proptest::collection::vec((1usize..=3, any::<bool>()), 0..4),
        proptest::bool::weighted(0.3),
    )
        .prop_map(|(system_note, steps, reasoning)| TurnSpec {
            system_note,
            steps,
            reasoning,
        });
    (
        proptest::collection::vec(turn, 1..7),
        proptest::bool::weighted(0.3),
        proptest::option::weighted(0.3, 0usize..12),
    )
}

fn build(store: &Store, turns: &[TurnSpec], pending_end: bool) -> session_store::Result<SessionId> {
    let session = store.create_session()?;
    let mut call = 0;
    for (t, spec) in turns.iter().enumerate() {
        let mut batch = Vec::new();
        if spec.system_note {
            batch.push(NewMessage::system(format!("note {t}")));
        }
        batch.push(NewMessage::user(format!("turn {t}")));
        for &(tools, split) in &spec.steps {
            let ids: Vec<String> = (0..tools)
                .map(|_| {
                    call += 1;
                    format!("call_{call}")
                })
                .collect();
            let mut parts = Vec::new();
            if spec.reasoning {
                parts.push(Part::reasoning(format!("think {call}"), None));
            }
            parts.extend(
                ids.iter()
                    .map(|id| Part::tool_use(id.clone(), "bash", json!({"n": id}))),
            );
            batch.push(NewMessage::assistant(parts).with_usage(Usage::new(5, 7)));
            let results: Vec<Part> = ids.iter().map(|id| Part::tool_result(id, "ok")).collect();
            if split {
                batch.extend(results.into_iter().map(|r| NewMessage::tool(vec![r])));
            } else {
                batch.push(NewMessage::tool(results));
            }
        }
        batch.push(NewMessage::assistant(vec![Part::text(format!("done {t}"))]));
        store.append_batch(&session, batch)?;
    }
    if pending_end {
        store.append_batch(
            &session,
            vec![
                NewMessage::user("one more"),
                NewMessage::assistant(vec![Part::tool_use("pending", "bash", json!({}))]),
            ],
        )?;
    }
    Ok(session)
}

/// The OpenAI body: one provider message per stored message. (The Anthropic renderer merges
/// a tool block with the user text after it into one user message, so a fork that ends at
/// that block renders the merged message's first half: a prefix of its content, not of the
/// message list.)
fn openai_messages(store: &Store, session: &SessionId) -> anyhow::Result<Vec<Value>> {
    let options = ExportOptions {
        persist_latch: false,
        ..ExportOptions::default()
    };
    let now = session_store::clock();
    let body = store.export(session, Provider::OpenAi, now, &options)?;
    Ok(body["messages"].as_array().cloned().unwrap_or_default())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// A fork of a healthy session at any turn is healthy, holds exactly the messages
    /// before that turn (plus tombstones for calls pending at the cut), and what it sends
    /// a provider is a prefix of what the source sends.
    #[test]
    fn a_fork_at_any_turn_of_a_healthy_session_is_healthy_and_exports_a_prefix(
        (turns, pending_end, keep) in history(),
    ) {
        let (_dir, store) = open_store().expect("store");
        let source = build(&store, &turns, pending_end).expect("healthy session");
        if let Some(keep) = keep {
            store.compact(&source, keep, "summary of the head").expect("compact");
        }
        prop_assert!(violations(store.path()).is_empty());
        let all = store.messages(&source).expect("messages");
        let turn_count = all.last().map_or(0, |m| m.turn_index + 1);
        let cover = store.summaries(&source).expect("summaries").last().map(|s| s.last_turn);
        let source_export = openai_messages(&store, &source).expect("export");
        for at in 0..=turn_count {
            let forked = store.fork(&source, at).expect("fork");
            prop_assert!(violations(store.path()).is_empty(), "fork at {} broke a rule", at);
            let copied = store.messages(&forked.id).expect("fork messages");
            let expected = all.iter().filter(|m| m.turn_index < at).count();
            prop_assert_eq!(copied.len(), expected + usize::from(!forked.tombstoned.is_empty()));
            // The provider sees the same prefix unless the cut fell inside the compacted head
            // (then the fork shows those turns instead of a summary of turns it lacks).
            if cover.is_none_or(|cover| at > cover) {
                let mut fork_export = openai_messages(&store, &forked.id).expect("export");
                fork_export.truncate(fork_export.len() - forked.tombstoned.len());
                prop_assert!(
                    source_export.starts_with(&fork_export),
                    "fork at {} exports {:?}, not a prefix of {:?}", at, fork_export, source_export
                );
            }
        }
    }
}
