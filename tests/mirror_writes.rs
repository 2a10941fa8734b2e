//! What writers that keep a session as a mirror of another record (the Python adapters) need
//! from the store, on every backend: `replace_from_turn` rewrites a session's end in one
//! transaction or not at all, `pop_part` takes the latest matching part away in one
//! transaction (two poppers never share one), `set_title` names a session, `stored_parts`
//! hands back parts as their rows hold them, and a refusal names its rule and ids.

use anyhow::{ensure, Result};
use serde_json::json;
use session_store::{Error, NewMessage, Part, Role, SessionId, Store};

use crate::backends::{backends, Backend};

fn on_each(test: impl Fn(&Backend) -> Result<()>) -> Result<()> {
    for backend in backends() {
        test(&backend).map_err(|e| e.context(format!("on {}", backend.name)))?;
    }
    Ok(())
}

/// A session of three turns, the middle one with a tool call.
fn three_turns(store: &Store) -> Result<SessionId> {
    let session = store.create_session()?;
    store.append_batch(
        &session,
        vec![
            NewMessage::user("first"),
            NewMessage::assistant(vec![Part::text("one")]),
            NewMessage::user("second"),
            NewMessage::assistant(vec![Part::tool_use("call_1", "ls", json!({}))]),
            NewMessage::tool(vec![Part::tool_result("call_1", "a b")]),
            NewMessage::user("third"),
            NewMessage::assistant(vec![Part::text("three")]),
        ],
    )?;
    Ok(session)
}

fn texts(store: &Store, session: &SessionId) -> Result<Vec<(Role, usize)>> {
    Ok(store
        .messages(session)?
        .iter()
        .map(|m| (m.role, m.parts.len()))
        .collect())
}

#[test]
fn replace_from_turn_rewrites_the_end_in_one_transaction_or_not_at_all() -> Result<()> {
    on_each(|backend| {
        let store = &backend.store;
        let session = three_turns(store)?;
        let replaced = store.replace_from_turn(
            &session,
            1,
            vec![
                NewMessage::user("second, again"),
                NewMessage::assistant(vec![Part::tool_use("call_2", "ls", json!({}))]),
            ],
        )?;
        ensure!(replaced.iter().map(|a| a.seq).collect::<Vec<_>>() == [3, 4]);
        let messages = store.messages(&session)?;
        ensure!(messages.len() == 4);
        ensure!(messages[2].parts == [Part::text("second, again")]);
        ensure!(store.pending_tool_uses(&session)? == ["call_2"]);
        ensure!(
            store.undo_revert(&session)?.is_none(),
            "nothing is left to undo"
        );

        // A refused replacement (a result for no call) leaves the session as it was.
        let before = store.messages(&session)?;
        let refused = store.replace_from_turn(
            &session,
            0,
            vec![
                NewMessage::user("x"),
                NewMessage::tool(vec![Part::tool_result("nobody", "y")]),
            ],
        );
        ensure!(
            matches!(refused, Err(Error::Refused { index: 1, .. })),
            "{refused:?}"
        );
        ensure!(store.messages(&session)? == before);

        // No messages: the turns are deleted.
        ensure!(store.replace_from_turn(&session, 1, Vec::new())?.is_empty());
        ensure!(texts(store, &session)? == [(Role::User, 1), (Role::Assistant, 1)]);
        ensure!(store
            .check(std::slice::from_ref(&session), &Default::default())?
            .violations
            .is_empty());
        let unknown = store.replace_from_turn(&SessionId::new("nope"), 0, Vec::new());
        ensure!(matches!(unknown, Err(Error::UnknownSession(_))));
        Ok(())
    })
}

#[test]
fn set_title_names_and_clears_a_session_and_refuses_an_unknown_one() -> Result<()> {
    on_each(|backend| {
        let store = &backend.store;
        let session = store.create_session()?;
        let title = |store: &Store| -> Result<Option<String>> {
            Ok(store.session_overview(&session)?.and_then(|o| o.title))
        };
        store.set_title(&session, Some("Fix the build"))?;
        ensure!(title(store)?.as_deref() == Some("Fix the build"));
        store.set_title(&session, None)?;
        ensure!(title(store)?.is_none());
        let unknown = store.set_title(&SessionId::new("nope"), Some("x"));
        ensure!(matches!(unknown, Err(Error::UnknownSession(_))));
        Ok(())
    })
}

#[test]
fn stored_parts_are_the_rows_of_the_latest_turns_undecoded() -> Result<()> {
    on_each(|backend| {
        let store = &backend.store;
        let session = three_turns(store)?;
        let meta = json!({"kept": {"item": {"b": 1, "a": [1.50, "x"]}}});
        store.append(
            &session,
            NewMessage::new(
                Role::User,
                vec![Part::Text {
                    text: "fourth".into(),
                    provider_metadata: Some(meta.clone()),
                }],
            ),
        )?;
        let all = store.stored_parts(&session, None)?;
        let messages = store.messages(&session)?;
        ensure!(all.len() == messages.iter().map(|m| m.parts.len()).sum::<usize>());
        ensure!(all.iter().map(|p| p.seq).collect::<Vec<_>>() == [1, 2, 3, 4, 5, 6, 7, 8]);
        ensure!(all[3].kind == "tool_use" && all[3].tool_use_id.as_deref() == Some("call_1"));
        ensure!(all[4].kind == "tool_result" && all[4].role == "tool" && !all[4].is_error);
        let kept: serde_json::Value =
            serde_json::from_str(all[7].provider_metadata.as_deref().unwrap_or("null"))?;
        ensure!(kept == meta);
        // The latest 3 messages reach into turn 2: all of turn 2 comes back, and turn 3.
        let last_three = store.stored_parts(&session, Some(3))?;
        let seqs: Vec<i64> = last_three.iter().map(|p| p.seq).collect();
        let turns: Vec<(i64, i64)> = all.iter().map(|p| (p.seq, p.turn_index)).collect();
        ensure!(seqs == [6, 7, 8], "{seqs:?} {turns:?}");
        let last_four = store.stored_parts(&session, Some(4))?;
        ensure!(last_four.iter().map(|p| p.seq).collect::<Vec<_>>() == [3, 4, 5, 6, 7, 8]);
        ensure!(store.stored_parts(&session, Some(1))?.len() == 1);
        ensure!(store.stored_parts(&session, Some(100))? == all);
        let unknown = store.stored_parts(&SessionId::new("nope"), None);
        ensure!(matches!(unknown, Err(Error::UnknownSession(_))));
        Ok(())
    })
}

#[test]
fn a_refusal_names_the_contract_rule_and_the_ids() -> Result<()> {
    on_each(|backend| {
        let store = &backend.store;
        let session = store.create_session()?;
        store.append(&session, NewMessage::user("go"))?;
        store.append(
            &session,
            NewMessage::assistant(vec![Part::tool_use("call_1", "ls", json!({}))]),
        )?;
        let cases = [
            (
                NewMessage::user("next"),
                "dangling_tool_use",
                vec!["call_1"],
            ),
            (
                NewMessage::tool(vec![Part::tool_result("nope", "x")]),
                "orphan_tool_result",
                vec!["nope"],
            ),
            (
                NewMessage::new(Role::User, vec![Part::tool_result("call_1", "x")]),
                "misplaced_tool_result",
                vec!["call_1"],
            ),
        ];
        for (message, rule, ids) in cases {
            let Err(error) = store.append(&session, message) else {
                anyhow::bail!("{rule} was not refused");
            };
            let refusal = error.refusal().ok_or_else(|| anyhow::anyhow!("{error}"))?;
            ensure!(refusal.rule() == rule && refusal.ids() == ids, "{refusal}");
        }
        Ok(())
    })
}

/// Whether a part is text that starts with `item`.
fn is_item(part: &Part) -> bool {
    matches!(part, Part::Text { text, .. } if text.starts_with("item"))
}

fn text_of(part: &Part) -> String {
    match part {
        Part::Text { text, .. } => text.clone(),
        other => format!("{other:?}"),
    }
}

#[test]
fn pop_part_takes_the_latest_match_and_what_follows_it_in_one_transaction() -> Result<()> {
    on_each(|backend| {
        let store = &backend.store;
        let session = three_turns(store)?;
        // Turn 3 ends with an assistant message of two items and a part that is none.
        store.append_batch(
            &session,
            vec![
                NewMessage::user("item 4"),
                NewMessage::assistant(vec![
                    Part::text("item 5"),
                    Part::text("item 6"),
                    Part::text("not an item"),
                ]),
            ],
        )?;
        let popped = |store: &Store| -> Result<Option<String>> {
            Ok(store.pop_part(&session, is_item)?.as_ref().map(text_of))
        };
        // The latest item goes with the part after it in its message.
        ensure!(popped(store)?.as_deref() == Some("item 6"));
        ensure!(texts(store, &session)?.last() == Some(&(Role::Assistant, 1)));
        // A message left without parts goes.
        ensure!(popped(store)?.as_deref() == Some("item 5"));
        ensure!(texts(store, &session)?.last() == Some(&(Role::User, 1)));
        ensure!(popped(store)?.as_deref() == Some("item 4"));
        // The earlier turns hold no item: the whole session is searched, nothing written.
        let before = store.messages(&session)?;
        ensure!(popped(store)?.is_none());
        ensure!(store.messages(&session)? == before);
        ensure!(before.len() == 7, "turn 3 and 4 are gone: {}", before.len());
        ensure!(store
            .check(std::slice::from_ref(&session), &Default::default())?
            .violations
            .is_empty());
        let unknown = store.pop_part(&SessionId::new("nope"), is_item);
        ensure!(
            matches!(unknown, Err(Error::UnknownSession(_))),
            "{unknown:?}"
        );
        // An item far before the last turns is found (the search widens to every turn).
        let far = store.create_session()?;
        store.append(&far, NewMessage::user("item 0"))?;
        for n in 1..40 {
            store.append(&far, NewMessage::user(format!("plain {n}")))?;
        }
        ensure!(
            store
                .pop_part(&far, is_item)?
                .as_ref()
                .map(text_of)
                .as_deref()
                == Some("item 0")
        );
        ensure!(store.messages(&far)?.is_empty());
        Ok(())
    })
}

#[test]
fn two_poppers_on_one_session_never_pop_the_same_part_and_lose_none() -> Result<()> {
    on_each(|backend| {
        let store = &backend.store;
        let session = store.create_session()?;
        const ITEMS: usize = 60;
        let messages = (0..ITEMS)
            .map(|n| NewMessage::user(format!("item {n}")))
            .collect();
        store.append_batch(&session, messages)?;
        let poppers: Vec<Store> = (0..3).map(|_| backend.reopen()).collect();
        let popped: Vec<Vec<String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = poppers
                .iter()
                .map(|popper| {
                    let session = &session;
                    scope.spawn(move || -> Result<Vec<String>> {
                        let mut mine = Vec::new();
                        while let Some(part) = popper.pop_part(session, is_item)? {
                            mine.push(text_of(&part));
                        }
                        Ok(mine)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().map_err(|_| anyhow::anyhow!("a popper panicked"))?)
                .collect::<Result<_>>()
        })?;
        let mut all: Vec<String> = popped.iter().flatten().cloned().collect();
        all.sort();
        let mut expected: Vec<String> = (0..ITEMS).map(|n| format!("item {n}")).collect();
        expected.sort();
        ensure!(all == expected, "popped {all:?}");
        // Each popper got its items newest first.
        for mine in &popped {
            let numbers: Vec<usize> = mine
                .iter()
                .filter_map(|t| t.strip_prefix("item ")?.parse().ok())
                .collect();
            ensure!(numbers.windows(2).all(|w| w[0] > w[1]), "{numbers:?}");
        }
        ensure!(store.messages(&session)?.is_empty());
        Ok(())
    })
}
