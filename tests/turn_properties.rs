//! Turn boundaries under random tool-heavy histories: the class of bug where index arithmetic
//! on a message list ignores turns only fires when a cut happens to land inside a long turn,
//! so fixed examples miss it. For random sessions (parallel and sequential tool calls, split
//! tool blocks, system notes, a pending last turn) and every `min_keep_tail`, no compaction
//! splits a turn, the tail is never shorter than asked (unless the history is), compacted
//! turns are a prefix, and for many page sizes every page ends on a turn boundary and the
//! pages together are the session.

use proptest::prelude::*;
use serde_json::json;
use session_store::plan_compaction;
use session_store::turn_indexes;
use session_store::{Message, NewMessage, Part, Role, SessionId, Store};

use crate::pages::all_pages;
use crate::turn_fixtures::{
    assert_compacted_prefix_of_whole_turns, assert_pairs_intact, open_store,
};
use crate::util::violations;

/// One assistant step: how many tool calls it makes, and whether each result gets its own
/// tool message.
type Step = (usize, bool);

#[derive(Clone, Debug)]
struct TurnSpec {
    system_note: bool,
    steps: Vec<Step>,
}

fn turn_spec() -> impl Strategy<Value = TurnSpec> {
    (
        proptest::bool::weighted(0.2),
        proptest::collection::vec((1usize..=3, any::<bool>()), 0..5),
    )
        .prop_map(|(system_note, steps)| TurnSpec { system_note, steps })
}

fn history() -> impl Strategy<Value = (Vec<TurnSpec>, bool)> {
    (
        proptest::collection::vec(turn_spec(), 1..8),
        proptest::bool::weighted(0.3),
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
            batch.push(NewMessage::assistant(
                ids.iter()
                    .map(|id| Part::tool_use(id.clone(), "bash", json!({"n": id})))
                    .collect(),
            ));
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

/// The pure plan for `keep` is the smallest walk left from `len - max(keep, 1)` to a user
/// message that opens a turn after the first.
fn check_plan(roles: &[Role], keep: usize) {
    let turns = turn_indexes(roles.iter().copied());
    let opens = |i: usize| roles[i] == Role::User && turns[i] > 0;
    let start = roles.len().saturating_sub(keep.max(1));
    let expected = (1..=start).rev().find(|&i| opens(i));
    let plan = plan_compaction(roles, keep);
    let got = plan.cut().map(|c| c.cut);
    assert_eq!(
        got,
        if keep.max(1) >= roles.len() {
            None
        } else {
            expected
        }
    );
    if let Some(cut) = plan.cut() {
        assert!(roles.len() - cut.cut >= keep, "tail shorter than asked");
        assert!(
            turns[cut.cut - 1] < turns[cut.cut],
            "cut inside turn {}",
            turns[cut.cut]
        );
        assert_eq!(cut.last_compacted_turn(), turns[cut.cut - 1]);
    }
}

fn check_pages(store: &Store, session: &SessionId, all: &[Message], max: usize) {
    let pages = all_pages(store, session, max).expect("pages");
    let joined: Vec<Message> = pages.iter().flatten().cloned().collect();
    assert_eq!(joined, all, "pages together are the session (max {max})");
    for (i, page) in pages.iter().enumerate() {
        let Some(last) = page.last() else {
            assert!(all.is_empty(), "only an empty session has an empty page");
            continue;
        };
        if let Some(next) = pages.get(i + 1).and_then(|p| p.first()) {
            assert!(
                last.turn_index < next.turn_index,
                "page {i} ends inside a turn"
            );
            // Greedy: the next turn would not have fit.
            let next_turn = all
                .iter()
                .filter(|m| m.turn_index == next.turn_index)
                .count();
            assert!(
                page.len() + next_turn > max,
                "page {i} stopped early (max {max})"
            );
        }
        let turns_in_page = page
            .first()
            .map_or(0, |f| last.turn_index - f.turn_index + 1);
        assert!(
            page.len() <= max || turns_in_page == 1,
            "page {i} exceeds {max} with {turns_in_page} turns"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn no_cut_ever_splits_a_turn((turns, pending_end) in history(), revert_at in 0i64..10) {
        let (_dir, store) = open_store().expect("store");
        let session = build(&store, &turns, pending_end).expect("build");
        let all = store.messages(&session).expect("messages");
        let len = all.len();
        let roles: Vec<Role> = all.iter().map(|m| m.role).collect();

        for keep in 0..=len + 1 {
            check_plan(&roles, keep);
        }
        for max in [0, 1, 2, 3, 5, 8, 13, 34, len] {
            check_pages(&store, &session, &all, max);
        }

        // A revert keeps the turns before it, whole, and its undo restores the session.
        store.revert_to_turn(&session, revert_at).expect("revert");
        let kept: Vec<Message> = all.iter().filter(|m| m.turn_index < revert_at).cloned().collect();
        prop_assert_eq!(&store.messages(&session).expect("messages"), &kept);
        prop_assert_eq!(violations(store.path()), Vec::<String>::new());
        store.undo_revert(&session).expect("undo");
        prop_assert_eq!(&store.messages(&session).expect("messages"), &all);

        // Every tail size, from the whole history down to nothing: successive compactions of
        // one session, each one on top of the ones before.
        let mut compacted_before = 0;
        for keep in (0..=len + 1).rev() {
            store.compact(&session, keep, "summary").expect("compact");
            let now = store.messages(&session).expect("messages");
            prop_assert_eq!(now.len(), len);
            let compacted = assert_compacted_prefix_of_whole_turns(&now);
            prop_assert!(compacted >= compacted_before, "compaction never shrinks the head");
            compacted_before = compacted;
            let view = store.provider_history(&session).expect("view");
            prop_assert!(view.messages.len() >= keep.min(len), "tail shorter than {}", keep);
            prop_assert_eq!(view.summary.is_some(), compacted > 0);
            if let Some(summary) = &view.summary {
                prop_assert_eq!(summary.last_turn, now[compacted - 1].turn_index);
            }
            assert_pairs_intact(&view.messages);
            prop_assert_eq!(violations(store.path()), Vec::<String>::new());
        }
        prop_assert_eq!(
            store.pending_tool_uses(&session).expect("pending").is_empty(),
            !pending_end
        );
    }
}
