//! One behaviour, two backends: a store that keeps its guarantees on SQLite but not on
//! PostgreSQL (a pairing check outside the write's transaction, a `seq` two writers both
//! take, a revert that loses a column, a mend that leaves a rule broken, an export that
//! differs by a byte) would let a fleet that moved to PostgreSQL send histories a provider
//! rejects. Every test here runs the same code against each backend of
//! [`crate::backends::backends`] and, where both ran, compares what they say.

use anyhow::{ensure, Context, Result};
use chrono::{DateTime, TimeZone, Utc};
use serde_json::json;
use session_store::repair::RepairOptions;
use session_store::{
    request::{check_anthropic, check_openai},
    CompactionOutcome, Error, ExportOptions, NewMessage, Part, Provider, Refusal, Reverted, Role,
    SearchOptions, SessionId, MAX_ID_BYTES,
};

use crate::backends::{backends, Backend};
use crate::turn_fixtures::{assert_compacted_prefix_of_whole_turns, assert_pairs_intact};

/// Runs `test` on every backend; the error names the backend that failed.
fn on_each<T>(test: impl Fn(&Backend) -> Result<T>) -> Result<Vec<(&'static str, T)>> {
    let mut results = Vec::new();
    for backend in backends() {
        let value = test(&backend).with_context(|| format!("on {}", backend.name))?;
        results.push((backend.name, value));
    }
    Ok(results)
}

/// Fails unless every backend returned the same value.
fn all_equal<T: PartialEq + std::fmt::Debug>(results: &[(&'static str, T)]) {
    for pair in results.windows(2) {
        assert_eq!(
            pair[0].1, pair[1].1,
            "{} and {} disagree",
            pair[0].0, pair[1].0
        );
    }
}

fn t(minute: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 2, 3, minute, 0)
        .single()
        .unwrap_or_default()
}

/// A turn: user, assistant with `tools` calls, their results, final answer; fixed times.
fn turn(tag: &str, tools: usize, minute: u32) -> Vec<NewMessage> {
    let mut messages = vec![NewMessage::user(format!("{tag}: go")).at(t(minute))];
    if tools > 0 {
        let calls = (0..tools)
            .map(|i| Part::tool_use(format!("{tag}_{i}"), "read", json!({"n": i})))
            .collect();
        messages.push(NewMessage::assistant(calls).at(t(minute)));
        let results = (0..tools)
            .map(|i| Part::tool_result(format!("{tag}_{i}"), format!("result {i}")))
            .collect();
        messages.push(NewMessage::tool(results).at(t(minute)));
    }
    messages.push(NewMessage::assistant(vec![Part::text(format!("{tag}: done"))]).at(t(minute)));
    messages
}

/// The first backend's answer, after asserting that every backend gave the same (`what`
/// they do alike, for the message).
fn alike<'r, T: PartialEq + std::fmt::Debug>(
    results: &'r [(&'static str, T)],
    what: &str,
) -> Result<&'r T> {
    let (first, rest) = results.split_first().context("a backend")?;
    for other in rest {
        assert_eq!(first.1, other.1, "{} and {} {what}", first.0, other.0);
    }
    Ok(&first.1)
}

fn session_of(backend: &Backend, tools: &[usize]) -> Result<SessionId> {
    let session = backend.store.create_session()?;
    for (i, &count) in tools.iter().enumerate() {
        backend
            .store
            .append_batch(&session, turn(&format!("t{i}"), count, i as u32))?;
    }
    Ok(session)
}

/// What a message is, without its row id and time: equal across backends.
fn shape(messages: &[session_store::Message]) -> Vec<(i64, i64, Role, bool, Vec<Part>)> {
    messages
        .iter()
        .map(|m| (m.seq, m.turn_index, m.role, m.compacted, m.parts.clone()))
        .collect()
}

#[test]
fn a_message_that_breaks_a_pair_is_refused_and_nothing_is_written() -> Result<()> {
    let results = on_each(|b| {
        let store = &b.store;
        let session = store.create_session()?;
        store.append(&session, NewMessage::user("hi"))?;
        store.append(
            &session,
            NewMessage::assistant(vec![Part::tool_use("a", "read", json!({}))]),
        )?;
        let before = b.dump();
        let mut refusals = Vec::new();
        for message in [
            NewMessage::user("moving on"),
            NewMessage::tool(vec![Part::tool_result("zzz", "nobody asked")]),
            NewMessage::assistant(vec![Part::tool_use("a", "read", json!({}))]),
        ] {
            let err = store
                .append(&session, message)
                .expect_err("a message that breaks a pair is refused");
            refusals.push(format!("{:?}", err.refusal().context("a refusal")?));
            ensure!(b.dump() == before, "a refused append wrote something");
        }
        // A batch is refused whole: its valid first message is not written either.
        let batch = vec![
            NewMessage::tool(vec![Part::tool_result("a", "ok")]),
            NewMessage::tool(vec![Part::tool_result("a", "again")]),
        ];
        let err = store.append_batch(&session, batch).expect_err("refused");
        ensure!(matches!(err, Error::Refused { index: 1, .. }), "{err:?}");
        ensure!(b.dump() == before, "a refused batch wrote something");
        let appended = store.append(
            &session,
            NewMessage::tool(vec![Part::tool_result("a", "ok")]),
        )?;
        ensure!((appended.seq, appended.turn_index) == (3, 0));
        Ok(refusals)
    })?;
    all_equal(&results);
    Ok(())
}

#[test]
fn the_store_assigns_seq_and_turn_index() -> Result<()> {
    let results = on_each(|b| {
        let session = session_of(b, &[1, 0, 2])?;
        Ok(shape(&b.store.messages(&session)?))
    })?;
    let (_, first) = &results[0];
    let seqs: Vec<i64> = first.iter().map(|m| m.0).collect();
    assert_eq!(seqs, (1..=first.len() as i64).collect::<Vec<_>>());
    let turns: Vec<i64> = first.iter().map(|m| m.1).collect();
    assert_eq!(turns, [0, 0, 0, 0, 1, 1, 2, 2, 2, 2]);
    all_equal(&results);
    Ok(())
}

#[test]
fn unknown_sessions_and_taken_ids_are_typed_errors() -> Result<()> {
    on_each(|b| {
        let nobody = SessionId::new("nobody");
        ensure!(matches!(
            b.store.messages(&nobody),
            Err(Error::UnknownSession(_))
        ));
        ensure!(matches!(
            b.store.append(&nobody, NewMessage::user("x")),
            Err(Error::UnknownSession(_))
        ));
        for k in [0, 3] {
            ensure!(matches!(
                b.store.last_turns(&nobody, k),
                Err(Error::UnknownSession(_))
            ));
        }
        let id = SessionId::new("taken");
        b.store.create_session_with_id(&id)?;
        ensure!(matches!(
            b.store.create_session_with_id(&id),
            Err(Error::SessionExists(_))
        ));
        ensure!(b.store.has_session(&id)? && !b.store.has_session(&nobody)?);
        Ok(())
    })?;
    Ok(())
}

#[test]
fn cancel_pending_answers_every_open_call_with_a_tombstone() -> Result<()> {
    let results = on_each(|b| {
        let store = &b.store;
        let session = store.create_session()?;
        store.append(&session, NewMessage::user("go"))?;
        store.append(
            &session,
            NewMessage::assistant(vec![
                Part::tool_use("x", "read", json!({})),
                Part::tool_use("y", "read", json!({})),
            ]),
        )?;
        ensure!(store.pending_tool_uses(&session)? == ["x", "y"]);
        let answered = store.cancel_pending(&session, "interrupted")?;
        ensure!(store.pending_tool_uses(&session)?.is_empty());
        ensure!(store.cancel_pending(&session, "again")?.is_empty());
        store.append(&session, NewMessage::user("next"))?;
        let report = store.check(&[], &RepairOptions::default())?;
        ensure!(report.violations.is_empty(), "{:?}", report.violations);
        Ok((answered, shape(&store.messages(&session)?)))
    })?;
    all_equal(&results);
    Ok(())
}

#[test]
fn streamed_messages_store_each_part_and_interrupt_when_dropped() -> Result<()> {
    use session_store::MessageState;
    let results = on_each(|b| {
        let store = &b.store;
        let session = store.create_session()?;
        store.append(&session, NewMessage::user("go"))?;
        let mut open = store.begin_message(&session, Role::Assistant)?;
        open.push(Part::text("reading"))?;
        open.push(Part::tool_use("s1", "read", json!({})))?;
        ensure!(store.messages(&session)?[1].state == MessageState::Open);
        let refused = store.append(&session, NewMessage::user("hurry"));
        ensure!(
            matches!(refused, Err(Error::MessageOpen { seq: 2, .. })),
            "{refused:?}"
        );
        let duplicate = open.push(Part::tool_use("s1", "read", json!({})));
        ensure!(
            matches!(duplicate, Err(Error::Refused { .. })),
            "{duplicate:?}"
        );
        open.finish()?;
        store.append(
            &session,
            NewMessage::tool(vec![Part::tool_result("s1", "ok")]),
        )?;
        let mut open = store.begin_message(&session, Role::Assistant)?;
        open.push(Part::tool_use("s2", "read", json!({})))?;
        drop(open);
        let messages = store.messages(&session)?;
        let states: Vec<MessageState> = messages.iter().map(|m| m.state).collect();
        ensure!(store.pending_tool_uses(&session)?.is_empty());
        store.append(&session, NewMessage::user("next"))?;
        let report = store.check(&[], &RepairOptions::default())?;
        ensure!(report.violations.is_empty(), "{:?}", report.violations);
        Ok((states, shape(&store.messages(&session)?)))
    })?;
    for (_, (states, _)) in &results {
        assert_eq!(
            states,
            &[
                MessageState::Complete,
                MessageState::Complete,
                MessageState::Complete,
                MessageState::Interrupted,
                MessageState::Complete,
            ]
        );
    }
    all_equal(&results);
    Ok(())
}

#[test]
fn budget_reads_the_same_ledger_and_plans_the_same_cut() -> Result<()> {
    let results = on_each(|b| {
        let store = &b.store;
        let session = session_of(b, &[2, 1, 3, 0])?;
        store.append(
            &session,
            NewMessage::assistant(vec![Part::text("with usage")])
                .with_usage(session_store::Usage::new(700, 20).cache(100, 50)),
        )?;
        let budget = store.budget(&session, 10)?;
        ensure!(budget.reported_input_tokens == Some(850), "{budget:?}");
        ensure!(budget.over);
        let roomy = store.budget(&session, 1_000_000)?;
        ensure!(!roomy.over && roomy.compact_through_turn.is_none());
        Ok((budget, roomy))
    })?;
    all_equal(&results);
    Ok(())
}

#[test]
fn pages_and_slices_hold_whole_turns() -> Result<()> {
    let results = on_each(|b| {
        let store = &b.store;
        let session = session_of(b, &[2, 0, 3, 1, 0])?;
        let mut pages = Vec::new();
        let mut cursor = None;
        loop {
            let page = store.page(&session, cursor, 5)?;
            assert_pairs_intact(&page.messages);
            pages.push(shape(&page.messages));
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        let slice = shape(&store.turns(&session, 1..=2)?);
        let last = shape(&store.last_turns(&session, 2)?);
        ensure!(slice.iter().all(|m| (1..=2).contains(&m.1)));
        ensure!(last.iter().all(|m| m.1 >= 3));
        Ok((pages, slice, last))
    })?;
    all_equal(&results);
    Ok(())
}

#[test]
fn compaction_hides_whole_turns_behind_one_summary() -> Result<()> {
    let results = on_each(|b| {
        let store = &b.store;
        let session = session_of(b, &[2, 1, 3, 0])?;
        ensure!(matches!(
            store.compact(&session, 3, "  "),
            Err(Error::EmptySummary { .. })
        ));
        let outcome = store.compact(&session, 3, "the story so far")?;
        let CompactionOutcome::Compacted {
            newly_compacted,
            kept,
            ..
        } = outcome
        else {
            anyhow::bail!("nothing compacted: {outcome:?}");
        };
        let all = store.messages(&session)?;
        let compacted = assert_compacted_prefix_of_whole_turns(&all);
        ensure!(compacted == newly_compacted && kept == all.len() - compacted);
        let view = store.provider_history(&session)?;
        assert_pairs_intact(&view.messages);
        ensure!(view.summary.as_ref().map(|s| s.text.as_str()) == Some("the story so far"));
        ensure!(store.summaries(&session)?.len() == 1);
        let again = store.compact(&session, 100, "more")?;
        ensure!(again.is_nothing());
        Ok((newly_compacted, kept, shape(&view.messages)))
    })?;
    all_equal(&results);
    Ok(())
}

#[test]
fn revert_and_undo_restore_the_same_history_until_the_next_append() -> Result<()> {
    let results = on_each(|b| {
        let store = &b.store;
        let session = session_of(b, &[2, 3, 1, 2])?;
        let before = store.messages(&session)?;
        let reverted = store.revert_to_turn(&session, 2)?;
        ensure!(
            reverted
                == Reverted {
                    from_turn: 2,
                    messages: 8,
                    summaries: 0
                },
            "{reverted:?}"
        );
        ensure!(store.messages(&session)?.len() == before.len() - 8);
        ensure!(b.count("SELECT COUNT(*) FROM reverted_parts") == 10);
        let undone = store.undo_revert(&session)?;
        ensure!(undone.map(|u| u.messages) == Some(8));
        ensure!(
            store.messages(&session)? == before,
            "undo changed the history"
        );
        store.revert_to_turn(&session, 3)?;
        store.append_batch(&session, turn("new", 1, 30))?;
        ensure!(
            store.undo_revert(&session)?.is_none(),
            "undo after an append"
        );
        ensure!(b.count("SELECT COUNT(*) FROM reverted_messages") == 0);
        // A revert into a compacted head without its summary is refused, nothing moved.
        store.compact(&session, 2, "summary")?;
        let dump = b.dump();
        let err = store.revert_to_turn(&session, 1).err();
        if err.is_some() {
            ensure!(matches!(err, Some(Error::RevertSplitsCompaction { .. })));
            ensure!(b.dump() == dump);
        }
        Ok(shape(&store.messages(&session)?))
    })?;
    all_equal(&results);
    Ok(())
}

#[test]
fn export_is_the_same_body_on_every_backend() -> Result<()> {
    let results = on_each(|b| {
        let store = &b.store;
        let session = session_of(b, &[1, 2])?;
        store.append(&session, NewMessage::user("think").at(t(40)))?;
        store.append(
            &session,
            NewMessage::assistant(vec![
                Part::reasoning("hmm", Some(json!({"anthropic": {"signature": "sig"}}))),
                Part::tool_use("late", "read", json!({"path": "/x"})),
            ])
            .at(t(40)),
        )?;
        store.compact(&session, 2, "earlier turns")?;
        let now = t(41);
        let options = ExportOptions::default();
        let anthropic = store.export(&session, Provider::Anthropic, now, &options)?;
        let openai = store.export(&session, Provider::OpenAi, now, &options)?;
        ensure!(check_anthropic(&anthropic).is_empty());
        ensure!(check_openai(&openai).is_empty());
        store.record_completion(&session, t(40))?;
        let state = store.thinking_state(&session)?;
        ensure!(state.last_completion == Some(t(40)));
        store.clear_thinking_state(&session)?;
        ensure!(store.thinking_state(&session)?.last_completion.is_none());
        Ok((anthropic, openai))
    })?;
    all_equal(&results);
    Ok(())
}

/// A broken session as other code would write it, in plain SQL that both dialects accept:
/// a call the next user message leaves unanswered, an answer to nothing, a repeated id.
pub const BROKEN: &str = "
    INSERT INTO sessions (id, created_at, updated_at)
        VALUES ('broken', '2026-01-02T03:00:00Z', '2026-01-02T03:00:00Z');
    INSERT INTO messages (session_id, seq, turn_index, role, compacted, created_at) VALUES
        ('broken', 1, 0, 'user', 0, '2026-01-02T03:00:00Z'),
        ('broken', 2, 0, 'assistant', 0, '2026-01-02T03:00:01Z'),
        ('broken', 3, 1, 'user', 0, '2026-01-02T03:00:02Z'),
        ('broken', 4, 1, 'tool', 0, '2026-01-02T03:00:03Z'),
        ('broken', 5, 1, 'assistant', 0, '2026-01-02T03:00:04Z'),
        ('broken', 6, 1, 'tool', 0, '2026-01-02T03:00:05Z');
    INSERT INTO parts (message_id, ordinal, kind, text, tool_use_id, tool_name, input, is_error) VALUES
        ((SELECT id FROM messages WHERE session_id = 'broken' AND seq = 1), 0, 'text', 'hi', NULL, NULL, NULL, 0),
        ((SELECT id FROM messages WHERE session_id = 'broken' AND seq = 2), 0, 'tool_use', NULL, 'a', 'read', '{}', 0),
        ((SELECT id FROM messages WHERE session_id = 'broken' AND seq = 3), 0, 'text', 'moving on', NULL, NULL, NULL, 0),
        ((SELECT id FROM messages WHERE session_id = 'broken' AND seq = 4), 0, 'tool_result', 'late', 'zzz', NULL, NULL, 0),
        ((SELECT id FROM messages WHERE session_id = 'broken' AND seq = 5), 0, 'tool_use', NULL, 'a', 'read', '{}', 0),
        ((SELECT id FROM messages WHERE session_id = 'broken' AND seq = 6), 0, 'tool_result', 'ok', 'a', NULL, NULL, 0);
";

#[test]
fn a_broken_session_from_other_code_is_found_and_mended_in_one_transaction() -> Result<()> {
    let results = on_each(|b| {
        let store = &b.store;
        let healthy = session_of(b, &[1])?;
        b.exec(BROKEN);
        let broken = SessionId::new("broken");
        let options = RepairOptions::default();
        let report = store.check(&[], &options)?;
        ensure!(report.broken_sessions() == std::slice::from_ref(&broken));
        let mut rules: Vec<String> = report
            .violations
            .iter()
            .map(|v| {
                format!(
                    "{} seq {} part {:?}",
                    v.rule.as_str(),
                    v.seq.unwrap_or_default(),
                    v.part
                )
            })
            .collect();
        rules.sort();
        // Export is valid even before the mend.
        let body = store.export(
            &broken,
            Provider::Anthropic,
            t(50),
            &ExportOptions::default(),
        )?;
        ensure!(check_anthropic(&body).is_empty());
        let healthy_before = store.messages(&healthy)?;
        let repair = store.repair_session(&broken, &options)?;
        ensure!(!repair.changes.is_empty());
        ensure!(store.check(&[], &options)?.violations.is_empty());
        ensure!(
            store.messages(&healthy)? == healthy_before,
            "a healthy session changed"
        );
        let logged = b.count("SELECT COUNT(*) FROM repair_log");
        ensure!(logged == repair.changes.len() as i64);
        // Mending again finds nothing and writes nothing.
        let dump = b.dump();
        ensure!(store.repair_session(&broken, &options)?.changes.is_empty());
        ensure!(b.dump() == dump);
        Ok((rules, shape(&store.messages(&broken)?), logged))
    })?;
    all_equal(&results);
    Ok(())
}

#[test]
fn many_writers_of_one_session_never_collide_on_seq() -> Result<()> {
    on_each(|b| {
        let session = b.store.create_session()?;
        let writers = 4;
        let turns = 8;
        std::thread::scope(|scope| -> Result<()> {
            let handles: Vec<_> = (0..writers)
                .map(|w| {
                    // Another handle, as another process would open.
                    let store = b.reopen();
                    let session = session.clone();
                    scope.spawn(move || -> Result<()> {
                        for i in 0..turns {
                            store.append_batch(&session, turn(&format!("w{w}_{i}"), 1, 0))?;
                        }
                        Ok(())
                    })
                })
                .collect();
            for handle in handles {
                handle
                    .join()
                    .map_err(|_| anyhow::anyhow!("writer panicked"))??;
            }
            Ok(())
        })?;
        let messages = b.store.messages(&session)?;
        let seqs: Vec<i64> = messages.iter().map(|m| m.seq).collect();
        ensure!(seqs == (1..=(writers * turns * 4) as i64).collect::<Vec<_>>());
        assert_pairs_intact(&messages);
        ensure!(b
            .store
            .check(&[], &RepairOptions::default())?
            .violations
            .is_empty());
        Ok(())
    })?;
    Ok(())
}

#[test]
fn listings_count_the_same_on_every_backend() -> Result<()> {
    let results = on_each(|b| {
        let store = &b.store;
        for (id, tools) in [
            ("alpha-1", &[1, 0][..]),
            ("alpha-2", &[2][..]),
            ("beta", &[][..]),
        ] {
            let session = SessionId::new(id);
            store.create_session_with_id(&session)?;
            for (i, &n) in tools.iter().enumerate() {
                store.append_batch(&session, turn(&format!("{id}{i}"), n, 0))?;
            }
        }
        store.append(&SessionId::new("beta"), NewMessage::user("x"))?;
        store.append(
            &SessionId::new("beta"),
            NewMessage::assistant(vec![Part::tool_use("p", "read", json!({}))]),
        )?;
        let mut overviews: Vec<_> = store
            .session_overviews()?
            .into_iter()
            .map(|o| (o.id, o.messages, o.turns, o.compacted_turns, o.pending))
            .collect();
        overviews.sort_by(|a, b| a.0.cmp(&b.0));
        let prefix = store.sessions_with_prefix("alpha", 10)?;
        let mut infos: Vec<_> = store
            .sessions()?
            .into_iter()
            .map(|s| (s.id, s.message_count))
            .collect();
        infos.sort();
        let ids = store.session_ids()?;
        Ok((overviews, prefix, infos, ids))
    })?;
    all_equal(&results);
    Ok(())
}

#[test]
fn a_copy_between_any_two_backends_reads_back_the_same() -> Result<()> {
    let sources = backends();
    for source in &sources {
        let store = &source.store;
        // Everything a session can hold: compaction, a pending revert, a mended session's log.
        let session = session_of(source, &[1, 2, 0, 1])?;
        store.compact(&session, 4, "summary")?;
        store.revert_to_turn(&session, 3)?;
        source.exec(BROKEN);
        store.repair_session(&SessionId::new("broken"), &RepairOptions::default())?;
        store.record_completion(&session, t(9))?;
        for dest in backends() {
            let context = format!("{} to {}", source.name, dest.name);
            let report = store.copy_to(&dest.store, &[]).context(context.clone())?;
            ensure!(report.sessions == 2, "{context}: {report:?}");
            for id in [&session, &SessionId::new("broken")] {
                ensure!(
                    shape(&store.messages(id)?) == shape(&dest.store.messages(id)?),
                    "{context}"
                );
                ensure!(
                    store.thinking_state(id)? == dest.store.thinking_state(id)?,
                    "{context}"
                );
                let body = |s: &session_store::Store| {
                    s.export(id, Provider::Anthropic, t(59), &ExportOptions::default())
                };
                ensure!(body(store)? == body(&dest.store)?, "{context}");
            }
            for table in crate::backends::TABLES {
                let sql = format!("SELECT COUNT(*) FROM {table}");
                ensure!(source.count(&sql) == dest.count(&sql), "{context}: {table}");
            }
            // Copying again skips what the destination holds with the same rows.
            let again = store.copy_to(&dest.store, &[])?;
            ensure!(
                again.sessions == 0 && again.skipped.len() == 2,
                "{context}: {again:?}"
            );
            // The revert moved with its rows: undo works on the copy.
            let undone = dest.store.undo_revert(&session)?;
            ensure!(undone.map(|u| u.messages) == Some(4), "{context}");
            // The session whose revert was undone there differs now: refused, nothing written.
            let refused = store.copy_to(&dest.store, &[]);
            ensure!(
                matches!(&refused, Err(Error::CopyConflict { first, sessions, .. })
                    if *first == session && sessions.len() == 1),
                "{context}: {refused:?}"
            );
        }
    }
    Ok(())
}

/// `sessions.message_count` is kept by the store's own writes since V14 (no trigger counts an
/// inserted message on either engine): an append that forgot to count, or a rarer insert
/// (undo, fork, import, mend, copy) that forgot to recount, would list a wrong count.
#[test]
fn every_write_keeps_the_message_count_on_every_backend() -> Result<()> {
    const OFF: &str = "SELECT COUNT(*) FROM sessions s
        WHERE s.message_count <> (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id)";
    let results = on_each(|b| {
        let store = &b.store;
        let session = session_of(b, &[1, 2])?;
        ensure!(b.count(OFF) == 0, "append_batch");
        store.append(&session, NewMessage::user("more").at(t(5)))?;
        store.append(
            &session,
            NewMessage::assistant(vec![Part::tool_use("open", "read", json!({}))]).at(t(5)),
        )?;
        ensure!(b.count(OFF) == 0, "append");
        let forked = store.fork(&session, 2)?;
        ensure!(b.count(OFF) == 0, "fork");
        store.cancel_pending(&session, "stopped")?;
        ensure!(b.count(OFF) == 0, "cancel");
        store.revert_to_turn(&session, 1)?;
        ensure!(b.count(OFF) == 0, "revert");
        store.undo_revert(&session)?;
        ensure!(b.count(OFF) == 0, "undo");
        let imported = store.import_session(turn("imp", 3, 7))?;
        ensure!(b.count(OFF) == 0, "import");
        b.exec(BROKEN);
        store.repair_session(&SessionId::new("broken"), &RepairOptions::default())?;
        ensure!(b.count(OFF) == 0, "mend");
        for dest in backends() {
            store.copy_to(&dest.store, &[])?;
            ensure!(dest.count(OFF) == 0, "copy to {}", dest.name);
        }
        let count = |id: &SessionId| -> Result<i64> {
            Ok(store.session(id)?.context("listed")?.message_count)
        };
        Ok([
            count(&session)?,
            count(&forked.id)?,
            count(&imported)?,
            count(&SessionId::new("broken"))?,
        ])
    })?;
    all_equal(&results);
    Ok(())
}

/// A call id is refused whenever its session used it before, however many appends back, on
/// every backend: where a store remembers a session's tail (SQLite's write connection,
/// PostgreSQL's one-statement append), the ids its own earlier appends wrote count as much
/// as those of the tail read from the rows. The first reuse comes
/// after six turns of appends that each kept what they wrote; each later one after the
/// refusal before it (which forgets what the connection remembered).
#[test]
fn a_call_id_reused_turns_later_is_refused_on_every_backend() -> Result<()> {
    let results = on_each(|b| {
        let session = b.store.create_session()?;
        for round in 0..6 {
            let id = format!("toolu_{round}");
            b.store.append(&session, NewMessage::user("go").at(t(9)))?;
            b.store.append(
                &session,
                NewMessage::assistant(vec![Part::tool_use(id.as_str(), "read", json!({}))])
                    .at(t(9)),
            )?;
            b.store.append(
                &session,
                NewMessage::tool(vec![Part::tool_result(id.as_str(), "ok")]).at(t(9)),
            )?;
        }
        b.store
            .append(&session, NewMessage::user("again").at(t(9)))?;
        let mut refused = Vec::new();
        for earlier in 0..6 {
            let reused = format!("toolu_{earlier}");
            let call = Part::tool_use(reused.as_str(), "read", json!({}));
            match b
                .store
                .append(&session, NewMessage::assistant(vec![call]).at(t(9)))
            {
                Err(Error::Refused {
                    reason: Refusal::DuplicateToolUseId { id },
                    ..
                }) if id == reused => refused.push(earlier),
                other => anyhow::bail!("{reused} again: {other:?}"),
            }
        }
        Ok(refused)
    })?;
    all_equal(&results);
    assert_eq!(results[0].1, [0, 1, 2, 3, 4, 5]);
    Ok(())
}

/// The append asks which of a batch's call ids the session already uses in the statement
/// that reads the session's tail for up to four calls (SQLite: one statement per width, 1 to
/// 4), one by one or in groups of 32 for more: a stored id in any place of a batch of any
/// width (the first group, past it, or the last one of a group) is refused the same on
/// every backend, and fresh ids pass.
#[test]
fn a_reused_call_id_is_found_in_batches_of_any_length_on_every_backend() -> Result<()> {
    let results = on_each(|b| {
        let session = session_of(b, &[2])?;
        let mut refusals = Vec::new();
        for (calls, at) in [
            (1, 0),
            (2, 1),
            (3, 2),
            (4, 0),
            (4, 3),
            (5, 4),
            (40, 0),
            (40, 31),
            (40, 35),
            (64, 63),
        ] {
            let ids: Vec<String> = (0..calls)
                .map(|i| {
                    if i == at {
                        "t0_1".to_owned()
                    } else {
                        format!("n{calls}_{i}")
                    }
                })
                .collect();
            let batch = vec![
                NewMessage::user("go").at(t(9)),
                NewMessage::assistant(
                    ids.iter()
                        .map(|id| Part::tool_use(id.as_str(), "read", json!({})))
                        .collect(),
                )
                .at(t(9)),
            ];
            match b.store.append_batch(&session, batch) {
                Err(Error::Refused {
                    index: 1,
                    reason: Refusal::DuplicateToolUseId { id },
                    ..
                }) if id == "t0_1" => refusals.push((calls, at)),
                other => anyhow::bail!("{calls} calls, reused at {at}: {other:?}"),
            }
        }
        // The same long batch with fresh ids only is stored.
        let fresh: Vec<Part> = (0..40)
            .map(|i| Part::tool_use(format!("f{i}"), "read", json!({})))
            .collect();
        b.store.append_batch(
            &session,
            vec![
                NewMessage::user("go").at(t(9)),
                NewMessage::assistant(fresh).at(t(9)),
            ],
        )?;
        ensure!(b.store.pending_tool_uses(&session)?.len() == 40);
        Ok(refusals)
    })?;
    all_equal(&results);
    Ok(())
}

/// One turn with `n % 3` tool calls at a fixed time, for other test modules.
pub fn turn_for_tests(n: u32) -> Vec<NewMessage> {
    turn(&format!("cli{n}"), (n % 3) as usize, n)
}

/// The forensic views' rows for `sql`'s rule list, as `rule seq part` lines, sorted.
fn view_rows(b: &Backend) -> Vec<String> {
    let sql = "SELECT rule || ' ' || seq || ' ' || COALESCE(CAST(part AS TEXT), '-') FROM problems";
    let mut rows: Vec<String> = match &b.place {
        crate::backends::Place::Sqlite { path, .. } => {
            let conn = rusqlite::Connection::open(path).expect("open");
            let mut stmt = conn.prepare(sql).expect("prepare");
            let rows = stmt
                .query_map([], |r| r.get::<_, String>(0))
                .expect("query")
                .collect::<rusqlite::Result<Vec<_>>>()
                .expect("rows");
            rows
        }
        crate::backends::Place::Postgres(schema) => schema
            .client()
            .query(sql, &[])
            .expect("query")
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect(),
    };
    rows.sort();
    rows
}

#[test]
fn the_forensic_views_name_what_the_check_finds_on_every_backend() -> Result<()> {
    let results = on_each(|b| {
        session_of(b, &[1, 2])?;
        b.exec(BROKEN);
        // A second answer to an answered call: an orphan, not a second pairing.
        b.exec(ANSWERED_TWICE);
        let mut checked: Vec<String> = b
            .store
            .check(&[], &RepairOptions::default())?
            .violations
            .iter()
            .map(|v| {
                let part = v.part.map_or("-".to_owned(), |p| p.to_string());
                format!("{} {} {part}", v.rule.as_str(), v.seq.unwrap_or_default())
            })
            .collect();
        checked.sort();
        let viewed = view_rows(b);
        ensure!(viewed == checked, "views {viewed:?}, check {checked:?}");
        ensure!(
            viewed.iter().any(|row| row == "orphan_tool_result 4 0"),
            "the second answer is not an orphan in the views: {viewed:?}"
        );
        for session in ["broken", "twice"] {
            b.store
                .repair_session(&SessionId::new(session), &RepairOptions::default())?;
        }
        ensure!(
            view_rows(b).is_empty(),
            "views after the mend: {:?}",
            view_rows(b)
        );
        let tombstones = b.count("SELECT COUNT(*) FROM tombstones");
        let turns = b.count("SELECT COUNT(*) FROM session_turns");
        Ok((viewed, tombstones, turns))
    })?;
    all_equal(&results);
    Ok(())
}

#[test]
fn a_writer_that_waits_past_the_busy_timeout_gets_a_typed_busy_error() -> Result<()> {
    on_each(|b| {
        let session = session_of(b, &[1])?;
        let options = session_store::StoreOptions {
            busy_timeout: std::time::Duration::from_millis(200),
            ..Default::default()
        };
        let impatient = session_store::Store::open_with(b.location(), &options)?;
        let before = b.dump();
        // Another process holds the session's write lock (SQLite: the file's; PostgreSQL:
        // the session row's).
        let result = match &b.place {
            crate::backends::Place::Sqlite { path, .. } => {
                let mut conn = rusqlite::Connection::open(path)?;
                let tx =
                    conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
                let result = impatient.append(&session, NewMessage::user("late"));
                tx.rollback()?;
                result
            }
            crate::backends::Place::Postgres(schema) => {
                let mut client = schema.client();
                let mut tx = client.transaction()?;
                tx.execute(
                    "SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE",
                    &[&session.as_str()],
                )?;
                let result = impatient.append(&session, NewMessage::user("late"));
                tx.rollback()?;
                result
            }
        };
        let err = result.expect_err("a held lock past the timeout fails the write");
        ensure!(err.is_busy(), "{err:?}");
        ensure!(b.dump() == before, "a busy write wrote something");
        impatient.append(&session, NewMessage::user("in time"))?;
        Ok(())
    })?;
    Ok(())
}

#[test]
fn usage_is_kept_moved_by_revert_and_copied_on_every_backend() -> Result<()> {
    let results = on_each(|b| {
        let store = &b.store;
        let session = session_of(b, &[1])?;
        store.append(&session, NewMessage::user("more").at(t(20)))?;
        store.append(
            &session,
            NewMessage::assistant(vec![Part::text("answer")])
                .at(t(20))
                .with_usage(session_store::Usage::new(120, 30)),
        )?;
        let usage = "SELECT COUNT(*) FROM usage";
        let tokens =
            "SELECT CAST(COALESCE(SUM(input_tokens + output_tokens), 0) AS BIGINT) FROM usage";
        ensure!(b.count(usage) == 1 && b.count(tokens) == 150);
        store.revert_to_turn(&session, 1)?;
        ensure!(b.count(usage) == 0, "usage of reverted messages left live");
        store.undo_revert(&session)?;
        ensure!(
            b.count(usage) == 1 && b.count(tokens) == 150,
            "undo lost usage"
        );
        let mut copies = Vec::new();
        for dest in backends() {
            store.copy_to(&dest.store, &[])?;
            copies.push((dest.count(usage), dest.count(tokens)));
        }
        ensure!(copies.iter().all(|&c| c == (1, 150)), "{copies:?}");
        let rows = store.message_usage(&session)?;
        ensure!(rows.len() == 1 && rows[0].1 == session_store::Usage::new(120, 30));
        Ok((b.count(tokens), rows))
    })?;
    all_equal(&results);
    Ok(())
}

#[test]
fn deleting_a_session_takes_every_row_of_it_and_nothing_else() -> Result<()> {
    let results = on_each(|b| {
        let store = &b.store;
        let keep = session_of(b, &[1, 1])?;
        let gone = session_of(b, &[2, 0, 1])?;
        store.compact(&gone, 2, "summary")?;
        store.revert_to_turn(&gone, 2)?;
        b.exec(BROKEN);
        store.repair_session(&SessionId::new("broken"), &RepairOptions::default())?;
        let kept = store.messages(&keep)?;
        let deleted = store.delete_session(&gone)?;
        let broken = store.delete_session(&SessionId::new("broken"))?;
        ensure!(matches!(
            store.delete_session(&gone),
            Err(Error::UnknownSession(_))
        ));
        ensure!(store.messages(&keep)? == kept);
        for table in crate::backends::TABLES {
            let left = b.count(&format!("SELECT COUNT(*) FROM {table}"));
            let expected = match *table {
                "sessions" => 1,
                "messages" => kept.len() as i64,
                "parts" => kept.iter().map(|m| m.parts.len() as i64).sum(),
                _ => 0,
            };
            ensure!(
                left == expected,
                "{table}: {left} rows left, {expected} expected"
            );
        }
        Ok((deleted.messages, broken.messages))
    })?;
    all_equal(&results);
    Ok(())
}

#[test]
fn real_transcripts_import_the_same_on_every_backend() -> Result<()> {
    let dir = crate::util::transcripts().join("agentcmd/claude");
    let mut files: Vec<_> = std::fs::read_dir(&dir)?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    ensure!(!files.is_empty(), "no transcripts in {}", dir.display());
    let results = on_each(|b| {
        let mut out = Vec::new();
        for file in &files {
            let text = std::fs::read_to_string(file)?;
            let imported =
                session_store::import::import(session_store::import::Format::ClaudeCode, &text)?;
            let session = b.store.import_session(imported.clone().into_messages())?;
            let report = b
                .store
                .check(std::slice::from_ref(&session), &RepairOptions::default())?;
            ensure!(
                report.violations.is_empty(),
                "{}: {:?}",
                file.display(),
                report.violations
            );
            let body = b.store.export(
                &session,
                Provider::Anthropic,
                t(59),
                &ExportOptions::default(),
            )?;
            ensure!(check_anthropic(&body).is_empty());
            // The whole import (title, compactions, child sessions) in one transaction.
            let tree = b.store.import(&imported)?;
            let messages = b.store.messages(&tree.session)?;
            let overview = b
                .store
                .session_overviews()?
                .into_iter()
                .find(|o| o.id == tree.session)
                .context("overview of the import")?;
            let whole = (
                tree.children.len(),
                overview.title,
                overview.messages,
                overview.compacted_turns,
                messages.iter().filter(|m| m.compacted).count(),
            );
            out.push((
                shape(&b.store.messages(&session)?),
                b.store.pending_tool_uses(&session)?,
                body,
                whole,
            ));
        }
        Ok(out)
    })?;
    all_equal(&results);
    Ok(())
}

#[test]
fn second_release_parts_model_and_idempotent_appends_behave_the_same_on_every_backend() -> Result<()>
{
    let results = on_each(|b| {
        let store = &b.store;
        let session = store.create_session()?;
        let source = json!({"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="});
        let user = NewMessage::new(
            Role::User,
            vec![
                Part::Text {
                    text: "look".into(),
                    provider_metadata: None,
                },
                Part::Image {
                    source: source.clone(),
                    title: None,
                    provider_metadata: None,
                },
                Part::Document {
                    source: json!({"type": "text", "data": "doc"}),
                    title: Some("notes".into()),
                    provider_metadata: Some(json!({"cache_control": {"type": "ephemeral"}})),
                },
            ],
        )
        .at(t(1))
        .with_idempotency_key("k1");
        let assistant = NewMessage::assistant(vec![
            Part::ServerToolUse {
                id: "srvtoolu_1".into(),
                name: "web_search".into(),
                input: json!({"query": "rust"}),
                provider_metadata: None,
            },
            Part::ServerToolResult {
                tool_use_id: "srvtoolu_1".into(),
                block: json!({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}),
                provider_metadata: None,
            },
            Part::Opaque {
                block: json!({"type": "mystery", "x": 1}),
                provider_metadata: None,
            },
            Part::tool_use("call_1", "read", json!({"path": "a"})),
        ])
        .by_model("claude-test")
        .at(t(1))
        .with_idempotency_key("k2");
        let result = NewMessage::tool(vec![Part::ToolResult {
            tool_use_id: "call_1".into(),
            content: "ok".into(),
            is_error: false,
            blocks: Some(json!([{"type": "text", "text": "ok"}])),
            provider_metadata: None,
        }])
        .at(t(1));
        let batch = vec![user, assistant, result];
        let first = store.append_batch(&session, batch.clone())?;
        // A retry of the keyed prefix gets the stored messages back and writes nothing.
        let again = store.append_batch(&session, batch[..2].to_vec())?;
        ensure!(again == first[..2], "{again:?} != {first:?}");
        let conflict = store.append_batch(
            &session,
            vec![NewMessage::user("other")
                .at(t(2))
                .with_idempotency_key("k1")],
        );
        ensure!(
            matches!(conflict, Err(Error::IdempotencyConflict { .. })),
            "{conflict:?}"
        );
        let messages = store.messages(&session)?;
        ensure!(messages.len() == 3, "{}", messages.len());
        ensure!(messages[1].model.as_deref() == Some("claude-test"));
        let overview = store
            .session_overviews()?
            .into_iter()
            .find(|o| o.id == session)
            .context("overview")?;
        ensure!(overview.messages == 3, "{overview:?}");
        let count = b.count(&format!(
            "SELECT message_count FROM sessions WHERE id = '{}'",
            session.as_str()
        ));
        ensure!(count == 3, "message_count {count}");
        // A revert and its undo keep the model.
        store.revert_to_turn(&session, 0)?;
        store.undo_revert(&session)?;
        let back = store.messages(&session)?;
        ensure!(back[1].model.as_deref() == Some("claude-test"));
        Ok(shape(&back))
    })?;
    all_equal(&results);
    Ok(())
}

/// A row outside the contract written by other code (a `created_at` that is no time) is read
/// by the one row decoder on every backend: the check names it `unreadable_row` and goes on
/// to the other sessions, the mend leaves it as it is, and a read of it fails typed.
#[test]
fn a_row_outside_the_contract_is_reported_the_same_on_every_backend() -> Result<()> {
    let results = on_each(|b| {
        let healthy = session_of(b, &[1])?;
        let odd = session_of(b, &[1])?;
        b.exec(&format!(
            "UPDATE messages SET created_at = 'yesterday' WHERE session_id = '{}' AND seq = 2",
            odd.as_str()
        ));
        let report = b.store.check(&[], &RepairOptions::default())?;
        ensure!(report.sessions_checked == 2, "checked {report:?}");
        let found: Vec<(String, String)> = report
            .violations
            .iter()
            .map(|v| (v.session_id.as_str().to_owned(), v.rule.as_str().to_owned()))
            .collect();
        ensure!(
            found == vec![(odd.as_str().to_owned(), "unreadable_row".to_owned())],
            "found {found:?}"
        );
        let repair = b.store.repair_session(&odd, &RepairOptions::default())?;
        ensure!(repair.changes.is_empty(), "mended {:?}", repair.changes);
        ensure!(
            matches!(b.store.messages(&odd), Err(Error::CorruptRow { .. })),
            "the odd session read"
        );
        ensure!(b.store.messages(&healthy)?.len() == 4);
        Ok(report.violations[0].detail.clone())
    })?;
    all_equal(&results);
    Ok(())
}

/// A call answered twice, as other code would write it: the second result is an orphan (a
/// call has exactly one answer), on every backend, in the check and in the views alike.
pub const ANSWERED_TWICE: &str = "
    INSERT INTO sessions (id, created_at, updated_at)
        VALUES ('twice', '2026-01-02T03:00:00Z', '2026-01-02T03:00:00Z');
    INSERT INTO messages (session_id, seq, turn_index, role, compacted, created_at) VALUES
        ('twice', 1, 0, 'user', 0, '2026-01-02T03:00:00Z'),
        ('twice', 2, 0, 'assistant', 0, '2026-01-02T03:00:01Z'),
        ('twice', 3, 0, 'tool', 0, '2026-01-02T03:00:02Z'),
        ('twice', 4, 0, 'tool', 0, '2026-01-02T03:00:03Z'),
        ('twice', 5, 0, 'assistant', 0, '2026-01-02T03:00:04Z');
    INSERT INTO parts (message_id, ordinal, kind, text, tool_use_id, tool_name, input, is_error) VALUES
        ((SELECT id FROM messages WHERE session_id = 'twice' AND seq = 1), 0, 'text', 'hi', NULL, NULL, NULL, 0),
        ((SELECT id FROM messages WHERE session_id = 'twice' AND seq = 2), 0, 'tool_use', NULL, 'c', 'read', '{}', 0),
        ((SELECT id FROM messages WHERE session_id = 'twice' AND seq = 3), 0, 'tool_result', 'first', 'c', NULL, NULL, 0),
        ((SELECT id FROM messages WHERE session_id = 'twice' AND seq = 4), 0, 'tool_result', 'second', 'c', NULL, NULL, 0),
        ((SELECT id FROM messages WHERE session_id = 'twice' AND seq = 5), 0, 'text', 'done', NULL, NULL, NULL, 0);
";

#[test]
fn a_second_answer_to_one_call_is_an_orphan_in_the_views_of_every_backend() -> Result<()> {
    let results = on_each(|b| {
        b.exec(ANSWERED_TWICE);
        let checked: Vec<String> = b
            .store
            .check(&[], &RepairOptions::default())?
            .violations
            .iter()
            .map(|v| {
                let part = v.part.map_or("-".to_owned(), |p| p.to_string());
                format!("{} {} {part}", v.rule.as_str(), v.seq.unwrap_or_default())
            })
            .collect();
        ensure!(checked == ["orphan_tool_result 4 0"], "check {checked:?}");
        let viewed = view_rows(b);
        ensure!(viewed == checked, "views {viewed:?}, check {checked:?}");
        // The call is answered once, by its first result, and pending nowhere.
        let answered = b.count(
            "SELECT COUNT(*) FROM tool_calls WHERE tool_use_id = 'c' AND answered AND NOT pending",
        );
        ensure!(answered == 1, "tool_calls answered: {answered}");
        ensure!(b.count("SELECT COUNT(*) FROM session_turns WHERE pending_calls > 0") == 0);
        b.store
            .repair_session(&SessionId::new("twice"), &RepairOptions::default())?;
        ensure!(
            view_rows(b).is_empty(),
            "after the mend: {:?}",
            view_rows(b)
        );
        Ok((viewed, shape(&b.store.messages(&SessionId::new("twice"))?)))
    })?;
    all_equal(&results);
    Ok(())
}

/// A query of one word said thousands of times is one word (found at the cost of one), and
/// one with more distinct words than `MAX_SEARCH_TERMS` is a typed error, never a query cut
/// short, on every backend.
#[test]
fn search_terms_count_once_and_too_many_are_a_typed_error_on_every_backend() -> Result<()> {
    use session_store::{SearchOptions, MAX_SEARCH_TERMS};
    let results = on_each(|b| {
        let session = named_session(b, "terms", &[])?;
        b.store.append(
            &session,
            NewMessage::user("deploy the staging cluster, then deploy again").at(t(1)),
        )?;
        b.store
            .append(&session, NewMessage::user("a staging note").at(t(1)))?;
        let options = SearchOptions::default();
        let once = hit_shapes(&b.store.search("deploy staging", &options)?);
        ensure!(once.len() == 1, "{once:?}");
        for query in [
            "deploy staging ".repeat(10_000),
            format!("{} staging", "deploy ".repeat(MAX_SEARCH_TERMS * 4)),
            "Deploy deploy DEPLOY staging staging".to_owned(),
        ] {
            let hits = hit_shapes(&b.store.search(&query, &options)?);
            ensure!(hits == once, "{} words: {hits:?}", query.len());
        }
        let words: Vec<String> = (0..MAX_SEARCH_TERMS).map(|n| format!("w{n}")).collect();
        ensure!(b.store.search(&words.join(" "), &options)?.is_empty());
        let mut refused = Vec::new();
        for extra in ["deploy", "w64*", "x y z"] {
            let query = format!("{} {extra}", words.join(" "));
            match b.store.search(&query, &options) {
                Err(Error::TooManySearchTerms { max }) => refused.push(max),
                other => anyhow::bail!("{extra}: {other:?}"),
            }
        }
        ensure!(refused == [MAX_SEARCH_TERMS; 3]);
        Ok(once)
    })?;
    all_equal(&results);
    Ok(())
}

/// A count above what the usage columns keep is refused by the append with its field, and
/// nothing is written; the largest count is kept exactly; a sum past `i64::MAX` is a typed
/// error naming the count and the turn or the session, on every backend.
#[test]
fn token_counts_are_kept_exactly_or_refused_and_sums_never_overflow_on_every_backend() -> Result<()>
{
    use session_store::{Usage, MAX_TOKEN_COUNT};
    let results = on_each(|b| {
        let store = &b.store;
        let session = named_session(b, "counts", &[])?;
        store.append(&session, NewMessage::user("q").at(t(1)))?;
        let mut refused = Vec::new();
        for usage in [
            Usage::new(MAX_TOKEN_COUNT + 1, 1),
            Usage::new(1, u64::MAX),
            Usage::new(1, 1).cache(0, 1 << 63),
            Usage {
                cache_read_tokens: Some(u64::MAX),
                ..Usage::default()
            },
        ] {
            let before = store.messages(&session)?;
            let message = NewMessage::assistant(vec![Part::text("a")]).with_usage(usage);
            match store.append(&session, message) {
                Err(Error::Refused {
                    reason: Refusal::TokenCountOutOfRange { field, value },
                    ..
                }) => refused.push((field, value)),
                other => anyhow::bail!("{other:?}"),
            }
            ensure!(
                store.messages(&session)? == before,
                "a refused append wrote"
            );
        }
        ensure!(store.message_usage(&session)?.is_empty());
        // Two messages at the largest count: each is kept; their sum is not an i64.
        for _ in 0..2 {
            store.append(
                &session,
                NewMessage::assistant(vec![Part::text("a")])
                    .at(t(1))
                    .with_usage(Usage::new(MAX_TOKEN_COUNT, 1)),
            )?;
        }
        let kept: Vec<Option<u64>> = store
            .message_usage(&session)?
            .into_iter()
            .map(|(_, u)| u.input_tokens)
            .collect();
        ensure!(kept == [Some(MAX_TOKEN_COUNT); 2], "{kept:?}");
        let turn = match store.usage(&session) {
            Err(Error::UsageOverflow { field, over, .. }) => (field, over),
            other => anyhow::bail!("{other:?}"),
        };
        // One per turn: each turn sums, the session does not.
        let spread = named_session(b, "spread", &[])?;
        for minute in 1..=2 {
            store.append_batch(
                &spread,
                vec![
                    NewMessage::user("q").at(t(minute)),
                    NewMessage::assistant(vec![Part::text("a")])
                        .at(t(minute))
                        .with_usage(Usage::new(1, MAX_TOKEN_COUNT)),
                ],
            )?;
        }
        let total = match store.usage(&spread) {
            Err(error @ Error::UsageOverflow { .. }) => error.to_string(),
            other => anyhow::bail!("{other:?}"),
        };
        Ok((refused, turn, total))
    })?;
    all_equal(&results);
    let (refused, turn, total) = &results[0].1;
    assert_eq!(
        refused,
        &[
            ("input_tokens", MAX_TOKEN_COUNT_PLUS_ONE),
            ("output_tokens", u64::MAX),
            ("cache_write_tokens", 1 << 63),
            ("cache_read_tokens", u64::MAX),
        ]
    );
    assert_eq!(turn, &("input_tokens", "turn 0".to_owned()));
    assert_eq!(
        total,
        "usage of session spread: the sum of output_tokens over the whole session is above 9223372036854775807"
    );
    Ok(())
}

const MAX_TOKEN_COUNT_PLUS_ONE: u64 = 1 << 63;

/// A session with a name of its own, so hits and lineage compare across backends.
fn named_session(b: &Backend, name: &str, turns: &[Vec<NewMessage>]) -> Result<SessionId> {
    let session = SessionId::new(name);
    b.store.create_session_with_id(&session)?;
    for turn in turns {
        b.store.append_batch(&session, turn.clone())?;
    }
    Ok(session)
}

#[test]
fn fork_and_lineage_are_the_same_on_every_backend() -> Result<()> {
    let results = on_each(|b| {
        let store = &b.store;
        let source = named_session(
            b,
            "source",
            &[turn("a", 1, 1), turn("b", 2, 2), turn("c", 0, 3)],
        )?;
        store.append(
            &source,
            NewMessage::assistant(vec![Part::text("extra")])
                .at(t(3))
                .with_usage(session_store::Usage::new(10, 5).model("m1")),
        )?;
        store.compact(&source, 1, "turn a, briefly")?;
        // Out of range and unknown sources are refused, and nothing is written.
        let before = b.dump();
        let refused = store.fork(&source, 4);
        ensure!(
            matches!(
                refused,
                Err(Error::NoSuchTurn {
                    turn: 4,
                    turns: 3,
                    ..
                })
            ),
            "{refused:?}"
        );
        ensure!(matches!(
            store.fork(&SessionId::new("nobody"), 0),
            Err(Error::UnknownSession(_))
        ));
        ensure!(b.dump() == before, "a refused fork wrote something");
        let mut forks = Vec::new();
        for at in 0..=3 {
            let fork = store.fork(&source, at)?;
            let messages = shape(&store.messages(&fork.id)?);
            let summaries = store.summaries(&fork.id)?.len();
            let usage = store.message_usage(&fork.id)?;
            forks.push((
                fork.at_turn,
                fork.messages,
                fork.summaries,
                fork.uncompacted,
                fork.tombstoned.clone(),
                messages,
                summaries,
                usage,
            ));
        }
        // A fork of a session with calls pending at the end: tombstones.
        let open = named_session(b, "open", &[turn("x", 0, 4)])?;
        store.append_batch(
            &open,
            vec![
                NewMessage::user("go").at(t(5)),
                NewMessage::assistant(vec![Part::tool_use("p1", "read", json!({}))]).at(t(5)),
            ],
        )?;
        let pending = store.fork(&open, 2)?;
        ensure!(pending.tombstoned == ["p1"], "{pending:?}");
        let pending_shape = shape(&store.messages(&pending.id)?);
        // A fork of a fork, then the tree; ids are random, so name them by their place.
        let child = store.fork(&source, 2)?;
        let grandchild = store.fork(&child.id, 1)?;
        let lineage = store.lineage()?;
        let depth_of = |id: &SessionId| lineage.iter().find(|l| &l.id == id).map(|l| l.depth);
        ensure!(depth_of(&source) == Some(0));
        ensure!(depth_of(&child.id) == Some(1));
        ensure!(depth_of(&grandchild.id) == Some(2));
        let gc = lineage
            .iter()
            .find(|l| l.id == grandchild.id)
            .context("grandchild listed")?;
        ensure!(gc.parent.as_ref() == Some(&child.id) && gc.forked_at_turn == Some(1));
        ensure!(lineage.len() == store.session_ids()?.len());
        // Deleting the parent keeps the fork as a root that remembers it was one.
        store.delete_session(&child.id)?;
        let after = store.lineage()?;
        let orphan = after
            .iter()
            .find(|l| l.id == grandchild.id)
            .context("grandchild kept")?;
        ensure!(orphan.parent.is_none() && orphan.depth == 0 && orphan.forked_at_turn == Some(1));
        let report = store.check(&[], &RepairOptions::default())?;
        ensure!(report.violations.is_empty(), "{:?}", report.violations);
        Ok((forks, pending_shape, lineage.len()))
    })?;
    all_equal(&results);
    Ok(())
}

/// Sets a session's `updated_at` as other code (or time) would.
fn age(b: &Backend, session: &str, updated_at: &str) {
    b.exec(&format!(
        "UPDATE sessions SET updated_at = '{updated_at}' WHERE id = '{session}'"
    ));
}

#[test]
fn prune_deletes_the_same_old_sessions_on_every_backend() -> Result<()> {
    let results = on_each(|b| {
        let store = &b.store;
        for (name, updated_at) in [
            ("old-b", "2026-01-01T00:00:00Z"),
            ("old-a", "2026-01-01T00:00:00Z"),
            ("older", "2025-06-01 12:00:00"),
            ("young", "2026-03-01T00:00:00Z"),
            ("unreadable", "yesterday"),
        ] {
            named_session(b, name, &[turn(name, 1, 1)])?;
            age(b, name, updated_at);
        }
        let cutoff = Utc
            .with_ymd_and_hms(2026, 2, 1, 0, 0, 0)
            .single()
            .context("cutoff")?;
        let before = b.dump();
        let candidates = store.prune_candidates(cutoff)?;
        ensure!(b.dump() == before, "a dry run wrote");
        let names: Vec<&str> = candidates.iter().map(|d| d.session.as_str()).collect();
        ensure!(names == ["older", "old-a", "old-b"], "{names:?}");
        let deleted = store.prune(cutoff)?;
        ensure!(deleted == candidates, "{deleted:?} != {candidates:?}");
        let left: Vec<String> = store.session_ids()?.iter().map(|s| s.to_string()).collect();
        ensure!(left == ["unreadable", "young"], "{left:?}");
        ensure!(store.prune(cutoff)?.is_empty());
        Ok(deleted)
    })?;
    all_equal(&results);
    Ok(())
}

/// What a hit says that does not depend on the backend's row ids or scoring scale.
fn hit_shapes(
    hits: &[session_store::SearchHit],
) -> Vec<(String, i64, i64, String, String, String)> {
    hits.iter()
        .map(|h| {
            (
                h.session.to_string(),
                h.seq,
                h.turn,
                h.role.clone(),
                h.kind.clone(),
                h.snippet.clone(),
            )
        })
        .collect()
}

#[test]
fn search_finds_and_ranks_the_same_parts_on_every_backend() -> Result<()> {
    use session_store::SearchOptions;
    let results = on_each(|b| {
        let store = &b.store;
        let deploy = named_session(
            b,
            "deploy",
            &[vec![
                NewMessage::user("Deploy the staging cluster").at(t(1)),
                NewMessage::assistant(vec![
                    Part::reasoning("staging first, then production", None),
                    Part::tool_use(
                        "d1",
                        "run_shell",
                        json!({"cmd": "cargo build", "path": "src/main.rs"}),
                    ),
                ])
                .at(t(1)),
                NewMessage::tool(vec![Part::tool_result(
                    "d1",
                    "Finished release build of session-store",
                )])
                .at(t(1)),
                NewMessage::assistant(vec![Part::text(
                    "Deployed: staging staging staging is green.",
                )])
                .at(t(1)),
            ]],
        )?;
        named_session(
            b,
            "other",
            &[vec![
                NewMessage::user("A long note that mentions staging once among many other unrelated words about weather and lunch").at(t(2)),
                NewMessage::assistant(vec![Part::text("Noted, nothing to deploy.")]).at(t(2)),
            ]],
        )?;
        let all = SearchOptions::default();
        let mut found = Vec::new();
        for query in [
            "staging",
            "deploy staging",
            "depl*",
            "\"src/main.rs\"",
            "run_shell",
            "cargo",
            "RELEASE build",
            "\"unbalanced (",
            "-",
            "nowhere",
        ] {
            found.push((query, hit_shapes(&store.search(query, &all)?)));
        }
        // Ranking: the short text that repeats the word comes before the long one that says
        // it once; every hit's score says so (lower is better on both backends).
        let staging = store.search("staging", &all)?;
        ensure!(staging.len() == 4, "{:?}", hit_shapes(&staging));
        ensure!(
            staging[0].seq == 4 && staging[0].session == deploy,
            "{:?}",
            hit_shapes(&staging)
        );
        ensure!(
            staging.last().map(|h| h.session.as_str()) == Some("other"),
            "{:?}",
            hit_shapes(&staging)
        );
        ensure!(staging.windows(2).all(|w| w[0].score <= w[1].score));
        // One session, a limit, a highlight of the caller's.
        let options = SearchOptions {
            session: Some(deploy.clone()),
            limit: 2,
            highlight: ("<b>".into(), "</b>".into()),
            ..Default::default()
        };
        let mine = store.search("staging", &options)?;
        ensure!(mine.len() == 2 && mine.iter().all(|h| h.session == deploy));
        ensure!(
            mine[0].snippet.contains("<b>staging</b>"),
            "{:?}",
            mine[0].snippet
        );
        let unknown = SearchOptions {
            session: Some(SessionId::new("nobody")),
            ..Default::default()
        };
        ensure!(matches!(
            store.search("staging", &unknown),
            Err(Error::UnknownSession(_))
        ));
        ensure!(matches!(
            store.search("", &unknown),
            Err(Error::UnknownSession(_))
        ));
        // Deleted and reverted parts are not found; an undo finds them again.
        store.revert_to_turn(&deploy, 0)?;
        ensure!(
            store.search("cargo", &all)?.is_empty(),
            "a reverted part was found"
        );
        store.undo_revert(&deploy)?;
        ensure!(store.search("cargo", &all)?.len() == 1);
        store.delete_session(&SessionId::new("other"))?;
        ensure!(
            store.search("weather", &all)?.is_empty(),
            "a deleted part was found"
        );
        // A long text: a window of about `snippet_tokens` words around the match, cut
        // with `…` on the sides it stops short of.
        let long = named_session(
            b,
            "long",
            &[vec![NewMessage::user(
                "one two three four five six seven eight nine ten eleven twelve thirteen \
                 fourteen fifteen sixteen seventeen eighteen nineteen twenty kubernetes \
                 twentyone twentytwo twentythree twentyfour twentyfive twentysix twentyseven",
            )
            .at(t(6))]],
        )?;
        let mut windows = Vec::new();
        for (query, tokens) in [
            ("kubernetes", 6),
            ("kubernetes", 64),
            ("one", 5),
            ("twentyseven", 5),
            ("kubernetes twentyfive", 8),
        ] {
            let options = SearchOptions {
                session: Some(long.clone()),
                snippet_tokens: tokens,
                ..Default::default()
            };
            windows.push(hit_shapes(&store.search(query, &options)?));
        }
        Ok((found, hit_shapes(&mine), windows))
    })?;
    all_equal(&results);
    Ok(())
}

#[test]
fn the_usage_report_sums_the_same_on_every_backend() -> Result<()> {
    let results = on_each(|b| {
        let store = &b.store;
        let session = named_session(b, "costly", &[turn("a", 1, 1)])?;
        store.append_batch(
            &session,
            vec![
                NewMessage::user("more").at(t(2)),
                NewMessage::assistant(vec![Part::tool_use("u1", "read", json!({}))])
                    .at(t(2))
                    .with_usage(
                        session_store::Usage::new(100, 20)
                            .model("small")
                            .cache(50, 7),
                    ),
                NewMessage::tool(vec![Part::tool_result("u1", "ok")]).at(t(2)),
                NewMessage::assistant(vec![Part::text("done")])
                    .at(t(2))
                    .with_usage(session_store::Usage::new(300, 40).model("large")),
                NewMessage::user("again").at(t(3)),
                NewMessage::assistant(vec![Part::text("fine")])
                    .at(t(3))
                    .with_usage(session_store::Usage {
                        output_tokens: Some(3),
                        ..Default::default()
                    }),
            ],
        )?;
        let usage = store.usage(&session)?;
        ensure!(usage.turns.len() == 2, "{usage:?}");
        ensure!(usage.turns[0].models == ["small", "large"], "{usage:?}");
        ensure!(usage.turns[0].tokens.input_tokens == Some(400));
        ensure!(
            usage.turns[1].tokens.input_tokens.is_none(),
            "a sum of NULLs is None"
        );
        ensure!(usage.total.messages == 3 && usage.total.output_tokens == Some(63));
        ensure!(matches!(
            store.usage(&SessionId::new("nobody")),
            Err(Error::UnknownSession(_))
        ));
        Ok(usage)
    })?;
    all_equal(&results);
    Ok(())
}

#[test]
fn the_size_report_counts_the_same_content_and_reclaim_runs_on_every_backend() -> Result<()> {
    let results = on_each(|b| {
        let store = &b.store;
        let big = named_session(b, "big", &[turn("big", 2, 1), turn("more", 1, 2)])?;
        store.append(&big, NewMessage::user("héllo wörld, 4 bytes: 🦀").at(t(3)))?;
        named_session(b, "small", &[turn("s", 0, 1)])?;
        let report = store.size_report(1)?;
        ensure!(report.sessions == 2, "{report:?}");
        ensure!(report.largest.len() == 1 && report.largest[0].session == big);
        ensure!(report.tool_output_bytes > 0 && report.content_bytes > report.tool_output_bytes);
        ensure!(report.file_bytes > 0, "{report:?}");
        ensure!(report.search_index_bytes > 0, "{report:?}");
        for table in ["messages", "parts", "sessions"] {
            ensure!(
                report.objects.iter().any(|o| o.name == table),
                "{table} missing from {:?}",
                report.objects
            );
        }
        ensure!(report.objects.windows(2).all(|w| w[0].bytes >= w[1].bytes));
        let contents = (
            report.sessions,
            report.content_bytes,
            report.tool_output_bytes,
            report.largest.clone(),
        );
        // Delete, then give the space back: both calls work and measure something.
        store.delete_session(&big)?;
        let reclaimed = store.reclaim_space()?;
        ensure!(
            reclaimed.before_bytes > 0 && reclaimed.after_bytes > 0,
            "{reclaimed:?}"
        );
        let full = store.vacuum()?;
        ensure!(full.full_vacuum, "{full:?}");
        ensure!(
            full.after_bytes <= reclaimed.before_bytes,
            "{full:?} after {reclaimed:?}"
        );
        ensure!(store.bytes_on_disk() > 0);
        let after = store.size_report(5)?;
        ensure!(after.sessions == 1 && after.largest.len() == 1);
        Ok((contents, after.content_bytes))
    })?;
    all_equal(&results);
    Ok(())
}

#[test]
fn a_common_word_is_ranked_among_its_newest_matches_only_on_every_backend() -> Result<()> {
    use session_store::SearchOptions;
    let results = on_each(|b| {
        let store = &b.store;
        let session = named_session(b, "birds", &[])?;
        store.append(&session, NewMessage::user("heron heron heron").at(t(1)))?;
        for n in 0..10 {
            store.append(
                &session,
                NewMessage::user(format!(
                    "a heron and {n} other birds in a long list of words"
                ))
                .at(t(1)),
            )?;
        }
        let all = store.search("heron", &SearchOptions::default())?;
        ensure!(all.len() == 11 && all[0].seq == 1, "{:?}", hit_shapes(&all));
        let newest = SearchOptions {
            max_ranked: 5,
            ..SearchOptions::default()
        };
        let mut seqs: Vec<i64> = store
            .search("heron", &newest)?
            .iter()
            .map(|h| h.seq)
            .collect();
        seqs.sort_unstable();
        ensure!(seqs == [7, 8, 9, 10, 11], "{seqs:?}");
        Ok(hit_shapes(&all))
    })?;
    all_equal(&results);
    Ok(())
}

#[test]
fn rows_other_code_writes_updates_and_deletes_are_searched_as_they_are_on_every_backend(
) -> Result<()> {
    use session_store::SearchOptions;
    let results = on_each(|b| {
        let store = &b.store;
        named_session(b, "script", &[turn("s", 1, 1)])?;
        b.exec(
            "INSERT INTO messages (session_id, seq, turn_index, role, compacted, created_at)
                 VALUES ('script', 99, 0, 'assistant', 0, '2026-01-01T00:00:00Z');
             INSERT INTO parts (message_id, ordinal, kind, text, is_error)
                 VALUES ((SELECT id FROM messages WHERE session_id = 'script' AND seq = 99),
                         0, 'text', 'written by a python script: pelican', 0);",
        );
        let found = |query: &str| -> Result<Vec<i64>> {
            Ok(store
                .search(query, &SearchOptions::default())?
                .iter()
                .map(|h| h.seq)
                .collect())
        };
        ensure!(found("pelican")? == [99]);
        // PostgreSQL has no trigger (V18, shardable by session): other code that rewrites a
        // part's words sets its search document back to NULL, as the store's own statements do.
        let reset = if b.name == "postgres" {
            ", search_document = NULL"
        } else {
            ""
        };
        b.exec(&format!(
            "UPDATE parts SET text = 'now it says flamingo'{reset} WHERE text LIKE '%pelican%'"
        ));
        ensure!(
            found("pelican")?.is_empty(),
            "an updated part is found by its old text"
        );
        ensure!(found("flamingo")? == [99]);
        b.exec("DELETE FROM parts WHERE text LIKE '%flamingo%'");
        ensure!(found("flamingo")?.is_empty(), "a deleted part is found");
        Ok(())
    })?;
    all_equal(&results);
    Ok(())
}

#[test]
fn search_syntax_in_a_query_is_just_text_on_every_backend() -> Result<()> {
    use session_store::SearchOptions;
    let results = on_each(|b| {
        let store = &b.store;
        let session = named_session(b, "syntax", &[])?;
        store.append(
            &session,
            NewMessage::user("error: \"file not found\" (code 2) NEAR the AND gate, é and 漢字")
                .at(t(1)),
        )?;
        let mut counts = Vec::new();
        for query in [
            "\"file",
            "(code",
            "NEAR(",
            "AND",
            "OR",
            "NOT",
            "code:2",
            "*",
            "-",
            "^gate",
            "file*",
            "\"\"\"",
            "gate)",
            "col:text",
            "{text}",
            "+",
            "a\u{0}b",
            "'",
            "\\",
            "a & b | !c",
            "<->",
            "gate:*",
            "\"file not\"",
            "AND gate",
            "fou*",
            "漢字",
            "é",
        ] {
            let hits = store.search(query, &SearchOptions::default());
            let hits = hits.with_context(|| format!("query {query:?}"))?;
            counts.push((query, hits.len()));
        }
        Ok(counts)
    })?;
    all_equal(&results);
    Ok(())
}

#[test]
fn forks_beside_a_live_writer_are_whole_turn_prefixes_on_every_backend() -> Result<()> {
    on_each(|b| {
        let store = &b.store;
        let source = session_of(b, &[1])?;
        let writer = {
            let (store, source) = (b.reopen(), source.clone());
            std::thread::spawn(move || -> session_store::Result<()> {
                for n in 0..20 {
                    store.append_batch(&source, turn(&format!("live{n}"), 1 + n % 3, 5))?;
                }
                Ok(())
            })
        };
        let mut forks = Vec::new();
        for _ in 0..10 {
            let turns = store
                .messages(&source)?
                .last()
                .map_or(0, |m| m.turn_index + 1);
            forks.push(store.fork(&source, turns)?);
        }
        writer
            .join()
            .map_err(|_| anyhow::anyhow!("writer panicked"))??;
        let all = store.messages(&source)?;
        for fork in forks {
            let copied = store.messages(&fork.id)?;
            ensure!(fork.tombstoned.is_empty(), "each turn is appended whole");
            ensure!(copied.len() <= all.len());
            for (copy, original) in copied.iter().zip(&all) {
                ensure!((copy.seq, &copy.parts) == (original.seq, &original.parts));
            }
            let next = all.get(copied.len()).map(|m| m.role);
            ensure!(
                matches!(next, None | Some(Role::User)),
                "a fork ends at a turn boundary"
            );
        }
        let report = store.check(&[], &RepairOptions::default())?;
        ensure!(report.violations.is_empty(), "{:?}", report.violations);
        Ok(())
    })?;
    Ok(())
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]

    /// No string a person can type makes the search fail, on either backend, and both find
    /// a query of ASCII and Han characters in the same parts. Agreement is not asserted for
    /// any string: SQLite's unicode61 tokenizer removes diacritics and combining marks
    /// (`"ୋA"` is `a`), and it classifies characters by Unicode 6.1 (a symbol assigned later,
    /// `"a🔾"`, is part of a word there and a separator for PostgreSQL's `[[:alnum:]]`),
    /// documented differences (`store/pg/search.rs`).
    #[test]
    fn no_query_is_an_error_and_both_backends_agree(
        query in "\\PC{0,30}",
        ascii in "[ -~]{0,30}",
        han in "[ -~一-龥]{0,30}",
    ) {
        thread_local! {
            static BACKENDS: Vec<Backend> = {
                let all = backends();
                for b in &all {
                    let session = SessionId::new("text");
                    b.store.create_session_with_id(&session).expect("session");
                    b.store
                        .append(&session, NewMessage::user("some text to match against, 漢字 (x) \"y\" a-b c_d"))
                        .expect("append");
                }
                all
            };
        }
        BACKENDS.with(|all| {
            for (q, agree) in [(&query, false), (&ascii, true), (&han, true)] {
                let mut found = Vec::new();
                for b in all {
                    let hits = b.store.search(q, &session_store::SearchOptions::default());
                    proptest::prop_assert!(hits.is_ok(), "{}: {:?}: {:?}", b.name, q, hits);
                    found.push(hits.map(|h| hit_shapes(&h)).unwrap_or_default());
                }
                if agree {
                    proptest::prop_assert!(found.windows(2).all(|w| w[0] == w[1]), "{:?}: {:?}", q, found);
                }
            }
            Ok(())
        })?;
    }
}

/// An error and its causes, as one line.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        text.push_str(&format!(": {next}"));
        cause = next.source();
    }
    text
}

/// A NUL character (U+0000) in a text: PostgreSQL's text cannot keep one, so every engine
/// refuses it at write, saying where it is (the message of the batch, the part, its field)
/// in the same words, and writes nothing; an import of a transcript holding one is refused
/// alike. A SQLite database that already holds one (other code wrote it) still reads it
/// exactly, copies it exactly to SQLite, and `copy` to PostgreSQL refuses it before writing
/// anything, naming the session, the message's seq, the part and the column.
#[test]
fn a_nul_in_a_text_is_refused_alike_on_every_engine_with_where_it_is() -> Result<()> {
    let results = on_each(|b| {
        let store = &b.store;
        let session = session_of(b, &[1])?;
        let before = store.messages(&session)?;
        let mut refusals = Vec::new();
        let batches: Vec<Vec<NewMessage>> = vec![
            vec![NewMessage::user("a\u{0}b")],
            vec![
                NewMessage::user("fine"),
                NewMessage::assistant(vec![
                    Part::text("calling"),
                    Part::tool_use("call\u{0}x", "read", json!({"path": "a\u{0}b"})),
                ]),
            ],
            vec![
                NewMessage::user("fine"),
                NewMessage::assistant(vec![Part::tool_use("c1", "read", json!({}))]),
                NewMessage::tool(vec![Part::tool_result("c1", "out\u{0}put")]),
            ],
            vec![NewMessage::user("keyed").with_idempotency_key("k\u{0}1")],
            vec![NewMessage {
                model: Some("model\u{0}x".to_owned()),
                ..NewMessage::assistant(vec![Part::text("hi")])
            }],
        ];
        for batch in batches {
            let refused = store.append_batch(&session, batch);
            ensure!(
                matches!(
                    &refused,
                    Err(Error::Refused {
                        reason: Refusal::NulInText { .. } | Refusal::NulInMessageField { .. },
                        ..
                    })
                ),
                "{refused:?}"
            );
            let error = refused.err().context("refused")?;
            refusals.push(chain(&error).replace(session.as_str(), "SESSION"));
        }
        ensure!(store.messages(&session)? == before, "a refused batch wrote");
        let summary = store.compact(&session, 1, "so far\u{0}");
        ensure!(
            matches!(summary, Err(Error::NulInSessionText { .. })),
            "{summary:?}"
        );
        ensure!(
            store.summaries(&session)?.is_empty(),
            "a refused summary was written"
        );
        let title = store.set_title(&session, Some("a\u{0}title"));
        ensure!(
            matches!(&title, Err(Error::NulInSessionText { field: "title", .. })),
            "{title:?}"
        );
        ensure!(
            store
                .session_overview(&session)?
                .context("listed")?
                .title
                .is_none(),
            "a refused title was written"
        );
        // A NUL inside a JSON value is kept escaped, on both engines.
        store.append_batch(
            &session,
            vec![
                NewMessage::user("json"),
                NewMessage::assistant(vec![Part::tool_use("j1", "read", json!({"p": "a\u{0}b"}))]),
                NewMessage::tool(vec![Part::tool_result("j1", "ok")]),
            ],
        )?;
        let input = store
            .messages(&session)?
            .into_iter()
            .rev()
            .nth(1)
            .map(|m| m.parts);
        ensure!(
            matches!(input.as_deref(), Some([Part::ToolUse { input, .. }]) if input["p"] == "a\u{0}b"),
            "{input:?}"
        );
        let sessions = store.sessions()?.len();
        let body = r#"{"messages": [{"role": "user", "content": "a\u0000b"}]}"#;
        let imported = store.import_reader(
            session_store::import::Format::OpenAi,
            std::io::Cursor::new(body.as_bytes()),
        );
        ensure!(imported.is_err(), "{imported:?}");
        refusals.push(chain(&imported.err().context("refused")?));
        ensure!(
            store.sessions()?.len() == sessions,
            "a refused import wrote"
        );
        Ok(refusals)
    })?;
    all_equal(&results);
    for (_, refusals) in &results {
        assert!(
            refusals[3].contains("idempotency_key holds a NUL"),
            "{refusals:?}"
        );
        assert!(refusals[4].contains("model holds a NUL"), "{refusals:?}");
        assert!(refusals[5].contains("holds a NUL"), "{refusals:?}");
        assert!(
            refusals[0].contains("text of part 0 (text) holds a NUL"),
            "{refusals:?}"
        );
        assert!(
            refusals[1].contains("message 1 of the append"),
            "{refusals:?}"
        );
        assert!(
            refusals[1].contains("id of part 1 (tool_use)"),
            "{refusals:?}"
        );
        assert!(
            refusals[2].contains("content of part 0 (tool_result)"),
            "{refusals:?}"
        );
    }

    // Other code put a NUL into a SQLite database: it reads back exactly, copies exactly to
    // SQLite, and is refused by a copy to PostgreSQL before anything is written.
    let source = crate::backends::sqlite();
    let session = session_of(&source, &[1])?;
    source.exec(&format!(
        "UPDATE parts SET text = 'a' || char(0) || 'b' WHERE message_id =
         (SELECT id FROM messages WHERE session_id = '{session}' AND seq = 3)"
    ));
    let held = source.store.messages(&session)?;
    let text_of = |messages: &[session_store::Message]| match &messages[2].parts[0] {
        Part::ToolResult { content, .. } => content.clone(),
        other => format!("{other:?}"),
    };
    assert_eq!(text_of(&held), "a\u{0}b");
    for dest in backends() {
        let copied = source.store.copy_to(&dest.store, &[]);
        if dest.name == "postgres" {
            match &copied {
                Err(Error::NulInCopiedText { session: s, place }) => {
                    assert_eq!(s, &session);
                    assert_eq!(place, "message seq 3, part 0, column text");
                }
                other => panic!("copy to postgres: {other:?}"),
            }
            assert!(dest.store.sessions()?.is_empty(), "a refused copy wrote");
        } else {
            copied?;
            assert_eq!(text_of(&dest.store.messages(&session)?), "a\u{0}b");
        }
    }
    Ok(())
}

/// An id longer than `MAX_ID_BYTES` that other code (or a build before the limit) put into
/// a SQLite database copies exactly to SQLite, and a copy to PostgreSQL, whose B-tree keys
/// hold about 2.7 KB, refuses it by name before anything is written (it failed untyped,
/// half-way through the rows: "index row size exceeds btree version 4 maximum").
#[test]
fn a_copy_to_postgres_refuses_an_id_longer_than_the_limit_by_name_before_writing() -> Result<()> {
    let source = crate::backends::sqlite();
    let session = session_of(&source, &[1])?;
    // Random hex: a repeated character compresses into PostgreSQL's index row.
    source.exec(&format!(
        "UPDATE parts SET tool_use_id = hex(randomblob(1500)) WHERE kind = 'tool_use' AND message_id =
         (SELECT id FROM messages WHERE session_id = '{session}' AND seq = 2)"
    ));
    for dest in backends() {
        let copied = source.store.copy_to(&dest.store, &[]);
        if dest.name == "postgres" {
            match &copied {
                Err(Error::LongIdInCopiedRow {
                    session: s,
                    place,
                    bytes,
                }) => {
                    assert_eq!(s, &session);
                    assert_eq!(place, "message seq 2, part 0, column tool_use_id");
                    assert_eq!(*bytes, 3000);
                }
                other => panic!("copy to postgres: {other:?}"),
            }
            assert!(dest.store.sessions()?.is_empty(), "a refused copy wrote");
        } else {
            copied?;
            let copied = dest.store.messages(&session)?;
            assert!(
                copied[1].parts == source.store.messages(&session)?[1].parts,
                "{:?}",
                copied[1].parts
            );
        }
    }
    Ok(())
}

/// Texts that a bulk format must escape (`COPY`'s text format on PostgreSQL: tab, newline,
/// carriage return, backslash, a line that is `\.`, the text `\N` beside a NULL, an empty
/// text) come out of a copy between any two backends as they went in, in every column that
/// holds text (a part's text, a tool's name and JSON input, a model, a title).
#[test]
fn a_copy_keeps_every_character_a_bulk_format_escapes() -> Result<()> {
    let titles = |s: &session_store::Store| -> Result<Vec<Option<String>>> {
        Ok(s.session_overviews()?
            .into_iter()
            .map(|o| o.title)
            .collect())
    };
    let nasty = [
        "tab\there",
        "line\nbreak\r\nand return\r",
        "back\\slash \\\\ \\t \\n",
        "\\.\n\\.",
        "\\N",
        "",
        "é 漢字 🦀 \u{7f}\u{1}",
    ];
    for source in backends() {
        let store = &source.store;
        let session = named_session(&source, "escapes", &[])?;
        store.set_title(&session, Some("\\N\ttitle\n"))?;
        for (at, text) in nasty.iter().enumerate() {
            let call = format!("toolu_{at}");
            store.append(&session, NewMessage::user(*text).at(t(1)))?;
            store.append(
                &session,
                NewMessage::assistant(vec![
                    Part::text(*text),
                    Part::tool_use(&call, format!("tool\t{at}"), json!({ "arg": text })),
                ])
                .by_model(format!("model\\{at}\n"))
                .at(t(2)),
            )?;
            store.append(
                &session,
                NewMessage::tool(vec![Part::tool_result(&call, *text)]).at(t(3)),
            )?;
        }
        for dest in backends() {
            let context = format!("{} to {}", source.name, dest.name);
            store.copy_to(&dest.store, &[]).context(context.clone())?;
            ensure!(
                store.messages(&session)? == dest.store.messages(&session)?,
                "{context}"
            );
            ensure!(titles(store)? == titles(&dest.store)?, "{context}");
        }
    }
    Ok(())
}

/// `len` characters no compressor shrinks (hex of random UUIDs): an index entry of this id
/// is as long as the id.
fn incompressible(len: usize) -> String {
    let mut id = String::new();
    while id.len() < len {
        id.push_str(&SessionId::random().as_str().replace('-', ""));
    }
    id.truncate(len);
    id
}

/// Ids are keys of PostgreSQL's B-tree indexes, whose entries hold at most 2,704 bytes: an
/// id of `MAX_ID_BYTES` (a session's, a call's, a key; incompressible) is stored and read
/// back on every engine, one byte more is refused alike on every engine before anything is
/// written (a part's id, a result's, a key: `Refused` with `id_too_long`; a new session's
/// id, or one holding a NUL: `InvalidSessionId`). PostgreSQL failed such writes with an
/// untyped storage error that SQLite took.
#[test]
fn an_id_longer_than_every_engine_keeps_is_refused_alike_on_every_engine() -> Result<()> {
    let results = on_each(|b| {
        let store = &b.store;
        let longest = SessionId::new(incompressible(MAX_ID_BYTES));
        store.create_session_with_id(&longest)?;
        let call = incompressible(MAX_ID_BYTES);
        let key = incompressible(MAX_ID_BYTES);
        store.append_batch(
            &longest,
            vec![
                NewMessage::user("q").with_idempotency_key(key.clone()),
                NewMessage::assistant(vec![Part::tool_use(call.clone(), "read", json!({}))]),
                NewMessage::tool(vec![Part::tool_result(call.clone(), "ok")]),
            ],
        )?;
        let stored = store.messages(&longest)?;
        ensure!(
            matches!(stored[1].parts.as_slice(), [Part::ToolUse { id, .. }] if *id == call),
            "{stored:?}"
        );
        let replayed = store.append(&longest, NewMessage::user("q").with_idempotency_key(key))?;
        ensure!(replayed.id == stored[0].id, "{replayed:?}");

        let session = session_of(b, &[1])?;
        let before = store.messages(&session)?;
        let too_long = incompressible(MAX_ID_BYTES + 1);
        let batches: Vec<Vec<NewMessage>> = vec![
            vec![NewMessage::user("keyed").with_idempotency_key(too_long.clone())],
            vec![
                NewMessage::user("fine"),
                NewMessage::assistant(vec![
                    Part::text("calling"),
                    Part::tool_use(too_long.clone(), "read", json!({})),
                ]),
            ],
            vec![NewMessage::tool(vec![Part::tool_result(
                too_long.clone(),
                "out",
            )])],
        ];
        let mut refusals = Vec::new();
        for batch in batches {
            let refused = store.append_batch(&session, batch);
            ensure!(
                matches!(
                    &refused,
                    Err(Error::Refused {
                        reason: Refusal::IdTooLong { bytes, .. },
                        ..
                    }) if *bytes == MAX_ID_BYTES + 1
                ),
                "{refused:?}"
            );
            let error = refused.err().context("refused")?;
            refusals.push(chain(&error).replace(session.as_str(), "SESSION"));
        }
        ensure!(store.messages(&session)? == before, "a refused write wrote");
        // A stream takes the same rule.
        let streamed = store.create_session()?;
        store.append(&streamed, NewMessage::user("stream"))?;
        let mut open = store.begin_message(&streamed, Role::Assistant)?;
        let pushed = open.push(Part::tool_use(too_long.clone(), "read", json!({})));
        ensure!(
            matches!(
                &pushed,
                Err(Error::Refused {
                    reason: Refusal::IdTooLong { .. },
                    ..
                })
            ),
            "{pushed:?}"
        );
        ensure!(open.is_empty(), "a refused push was kept");
        let sessions = store.sessions()?.len();
        for id in [too_long, "a\u{0}b".to_owned()] {
            let created = store.create_session_with_id(&SessionId::new(id));
            ensure!(
                matches!(&created, Err(Error::InvalidSessionId { .. })),
                "{created:?}"
            );
            refusals.push(chain(&created.err().context("refused")?));
        }
        ensure!(
            store.sessions()?.len() == sessions,
            "a refused session was created"
        );
        Ok(refusals)
    })?;
    alike(&results, "refuse alike")?;
    Ok(())
}

/// One part whose words would make a PostgreSQL tsvector over its 1 MB limit (a tool result
/// of 400,000 distinct words: a big tree, a log of hashes) failed the search index's
/// catch-up there, and with it every later search of the database. Its first 100,000
/// characters are indexed on PostgreSQL (V22), all of it on SQLite: on every engine the part
/// is found by a word near its start, and a later message by its own.
#[test]
fn one_part_of_many_distinct_words_leaves_search_working_on_every_engine() -> Result<()> {
    let results = on_each(|b| {
        let store = &b.store;
        let session = session_of(b, &[1])?;
        let words: String = (0..400_000).map(|i| format!("w{i} ")).collect();
        store.append(&session, NewMessage::user(words))?;
        store.append(
            &session,
            NewMessage::assistant(vec![Part::text("findme later")]),
        )?;
        let options = SearchOptions::default();
        let early = store.search("w1234", &options)?;
        let later = store.search("findme", &options)?;
        ensure!(early.len() == 1 && later.len() == 1, "{early:?} {later:?}");
        Ok((early[0].seq, later[0].seq))
    })?;
    alike(&results, "find alike")?;
    Ok(())
}

/// A session id with a NUL character names no session on any engine (PostgreSQL's text cannot
/// hold one; none can be created, `InvalidSessionId`): every public operation that names a
/// session (each one the store has, 32 calls) answers as for an unknown session, alike on
/// every engine. PostgreSQL failed many of them (an append, a title, `has_session`,
/// `session`, `last_turns`, ...) with an untyped "invalid byte sequence" storage error.
#[test]
fn a_session_id_with_a_nul_is_an_unknown_session_alike_on_every_engine() -> Result<()> {
    fn answer<T: std::fmt::Debug>(result: session_store::Result<T>) -> String {
        match result {
            Ok(value) => format!("Ok({value:?})"),
            Err(error) => chain(&error),
        }
    }
    let results = on_each(|b| {
        let store = &b.store;
        let nul = SessionId::new("a\u{0}b");
        let in_it = SearchOptions {
            session: Some(nul.clone()),
            ..SearchOptions::default()
        };
        let answers = [
            answer(store.messages(&nul).map(|m| m.len())),
            answer(store.append(&nul, NewMessage::user("x")).map(|m| m.seq)),
            answer(
                store
                    .append_batch(&nul, vec![NewMessage::user("x")])
                    .map(|m| m.len()),
            ),
            answer(store.turns(&nul, 0..1).map(|m| m.len())),
            answer(store.set_title(&nul, Some("t"))),
            answer(store.session_overview(&nul).map(|o| o.is_some())),
            answer(store.has_session(&nul)),
            answer(store.delete_session(&nul)),
            answer(store.fork(&nul, 0).map(|_| ())),
            answer(store.pending_tool_uses(&nul).map(|p| p.len())),
            answer(store.cancel_pending(&nul, "r").map(|p| p.len())),
            answer(store.begin_message(&nul, Role::Assistant).map(|_| ())),
            answer(store.compact(&nul, 1, "s").map(|_| ())),
            answer(store.provider_history(&nul).map(|_| ())),
            answer(store.usage(&nul).map(|_| ())),
            answer(store.search("x", &in_it).map(|h| h.len())),
            answer(store.budget(&nul, 1_000).map(|_| ())),
            answer(store.clear_thinking_state(&nul)),
            answer(store.export_bundle(&nul).map(|_| ())),
            answer(store.last_turns(&nul, 1).map(|m| m.len())),
            answer(store.message_usage(&nul).map(|u| u.len())),
            answer(store.readable_messages(&nul).map(|_| ())),
            answer(store.record_completion(&nul, t(1))),
            answer(store.revert_to_turn(&nul, 0).map(|_| ())),
            answer(store.session(&nul).map(|s| s.is_some())),
            answer(store.settle_open_messages(&nul)),
            answer(store.summaries(&nul).map(|s| s.len())),
            answer(store.thinking_state(&nul).map(|_| ())),
            answer(
                store
                    .transcript(&nul, session_store::TranscriptFormat::Markdown)
                    .map(|_| ()),
            ),
            answer(store.undo_revert(&nul).map(|_| ())),
            answer(store.link_subagent(&nul, &nul).map(|_| ())),
            answer(
                store
                    .search("a\u{0}b", &SearchOptions::default())
                    .map(|h| h.len()),
            ),
        ];
        Ok(answers)
    })?;
    for answer in alike(&results, "answer alike")? {
        assert!(
            answer.contains("unknown session") || answer == "Ok(false)" || answer == "Ok(0)",
            "{answer}"
        );
    }
    Ok(())
}

/// Times are stored as RFC 3339 text on every engine: the first and last instants of the
/// years 0 to 9999 are stored and read back alike; one microsecond outside, a message's
/// `created_at` is refused (`time_out_of_range`) and a completion's time too, alike on every
/// engine, nothing written. SQLite stored `+200000-01-01T...` and then failed every read of
/// the session with a corrupt row.
#[test]
fn a_time_outside_four_digit_years_is_refused_alike_on_every_engine() -> Result<()> {
    let at = |year, month, day, hour, minute, second, micros| {
        Utc.with_ymd_and_hms(year, month, day, hour, minute, second)
            .single()
            .map(|time| time + chrono::Duration::microseconds(micros))
            .context("a time")
    };
    let first = at(0, 1, 1, 0, 0, 0, 0)?;
    let last = at(9999, 12, 31, 23, 59, 59, 999_999)?;
    let micro = chrono::Duration::microseconds(1);
    let results = on_each(|b| {
        let store = &b.store;
        let session = store.create_session()?;
        store.append(&session, NewMessage::user("first").at(first))?;
        store.append(&session, NewMessage::user("last").at(last))?;
        let stored: Vec<_> = store
            .messages(&session)?
            .iter()
            .map(|m| m.created_at)
            .collect();
        ensure!(stored == [first, last], "{stored:?}");
        let mut answers = Vec::new();
        for time in [first - micro, last + micro, at(200_000, 1, 1, 0, 0, 0, 0)?] {
            let refused = store.append(&session, NewMessage::user("out").at(time));
            ensure!(
                matches!(
                    &refused,
                    Err(Error::Refused {
                        reason: Refusal::TimeOutOfRange { field: "created_at", time: t },
                        ..
                    }) if *t == time
                ),
                "{refused:?}"
            );
            let completion = store.record_completion(&session, time);
            ensure!(
                matches!(&completion, Err(Error::TimeOutOfRange { time: t, .. }) if *t == time),
                "{completion:?}"
            );
            for error in [refused.err(), completion.err()].into_iter().flatten() {
                answers.push(chain(&error).replace(session.as_str(), "SESSION"));
            }
        }
        ensure!(
            store.messages(&session)?.len() == 2,
            "a refused write wrote"
        );
        ensure!(
            store.thinking_state(&session)?.last_completion.is_none(),
            "a refused completion was recorded"
        );
        Ok(answers)
    })?;
    alike(&results, "refused differently")?;
    Ok(())
}

/// A streamed message's model takes an appended message's rule: a NUL is refused
/// (`nul_in_text`) alike on every engine and nothing is written; SQLite stored it and
/// PostgreSQL failed with its own untyped error.
#[test]
fn a_streamed_model_with_a_nul_is_refused_alike_on_every_engine() -> Result<()> {
    let results = on_each(|b| {
        let store = &b.store;
        let session = store.create_session()?;
        store.append(&session, NewMessage::user("stream"))?;
        let mut open = store.begin_message(&session, Role::Assistant)?;
        let refused = open.set_model("provider/a\u{0}b");
        ensure!(
            matches!(
                &refused,
                Err(Error::Refused {
                    reason: Refusal::NulInMessageField { field: "model" },
                    ..
                })
            ),
            "{refused:?}"
        );
        open.push(Part::text("answer"))?;
        open.finish()?;
        let model = store.messages(&session)?[1].model.clone();
        ensure!(model.is_none(), "{model:?}");
        Ok(chain(&refused.err().context("refused")?).replace(session.as_str(), "SESSION"))
    })?;
    alike(&results, "refused differently")?;
    Ok(())
}
