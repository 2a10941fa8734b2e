//! One behaviour, two backends: a store that keeps its guarantees on SQLite but not on
//! PostgreSQL (a pairing check outside the write's transaction, a `seq` two writers both
//! take, a revert that loses a column, a mend that leaves a rule broken, an export that
//! differs by a byte) would let a fleet that moved to PostgreSQL send histories a provider
//! rejects. Every test here runs the same code against each backend of
//! [`crate::backends::backends`] and, where both ran, compares what they say.

use anyhow::{ensure, Context, Result};
use chrono::{DateTime, TimeZone, Utc};
use serde_json::json;
use session_store::RepairOptions;
use session_store::{
    check_anthropic, check_openai, CompactionOutcome, Error, ExportOptions, NewMessage, Part,
    Provider, Reverted, Role, SessionId,
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
            .map(|v| format!("{} seq {} part {:?}", v.rule.as_str(), v.seq, v.part))
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
            // The revert moved with its rows: undo works on the copy.
            let undone = dest.store.undo_revert(&session)?;
            ensure!(undone.map(|u| u.messages) == Some(4), "{context}");
            // Copying again is refused: the destination has the sessions.
            let again = store.copy_to(&dest.store, std::slice::from_ref(&session));
            ensure!(matches!(again, Err(Error::SessionExists(_))), "{context}");
        }
    }
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
        let mut checked: Vec<String> = b
            .store
            .check(&[], &RepairOptions::default())?
            .violations
            .iter()
            .map(|v| {
                let part = v.part.map_or("-".to_owned(), |p| p.to_string());
                format!("{} {} {part}", v.rule.as_str(), v.seq)
            })
            .collect();
        checked.sort();
        let viewed = view_rows(b);
        ensure!(viewed == checked, "views {viewed:?}, check {checked:?}");
        b.store
            .repair_session(&SessionId::new("broken"), &RepairOptions::default())?;
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
                session_store::import_transcript(session_store::Format::ClaudeCode, &text)?;
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
                block: json!({"type": "web_search_tool_result", "content": []}),
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
