//! Session bundles (`export --format bundle`, `import --format bundle`): a restored session's
//! bundle equals the original's apart from the session id, for random sessions with
//! summaries, reverts, usage, idempotency keys, the thinking latch, lineage and a repair log,
//! from each engine into each engine; a bundle that cannot be restored is refused at its line
//! and writes nothing; and the CLI does both as processes.

use chrono::{DateTime, Duration, TimeZone, Utc};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{json, Value};
use session_store::{
    repair::RepairOptions, Error, Message, NewMessage, Part, SessionId, Store, Summary, Usage,
};

use crate::backends::backends;
use crate::util::{session_store, session_store_ok as ok};

/// One turn of a random session.
#[derive(Clone, Debug)]
struct Turn {
    text: String,
    /// Tool rounds: how many parallel calls, and whether the first one fails.
    steps: Vec<(usize, bool)>,
    usage: bool,
    reasoning: bool,
    keyed: bool,
}

/// A random session and what is done to it after its turns.
#[derive(Clone, Debug)]
struct Spec {
    turns: Vec<Turn>,
    /// Ends with a call: left pending, or answered by a tombstone.
    pending_end: Option<bool>,
    latch: bool,
    compact_keep: Option<usize>,
    revert_from: Option<i64>,
    fork_at: Option<i64>,
}

fn turn() -> impl Strategy<Value = Turn> {
    (
        "[a-z <>&\"'`\\\\é😀\n]{0,16}",
        proptest::collection::vec((0usize..=3, proptest::bool::weighted(0.3)), 0..3),
        any::<bool>(),
        proptest::bool::weighted(0.3),
        proptest::bool::weighted(0.3),
    )
        .prop_map(|(text, steps, usage, reasoning, keyed)| Turn {
            text,
            steps,
            usage,
            reasoning,
            keyed,
        })
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        proptest::collection::vec(turn(), 1..6),
        proptest::option::weighted(0.3, any::<bool>()),
        any::<bool>(),
        proptest::option::weighted(0.5, 0usize..10),
        proptest::option::weighted(0.4, 0i64..6),
        proptest::option::weighted(0.5, 0i64..6),
    )
        .prop_map(
            |(turns, pending_end, latch, compact_keep, revert_from, fork_at)| Spec {
                turns,
                pending_end,
                latch,
                compact_keep,
                revert_from,
                fork_at,
            },
        )
}

fn t(seconds: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 4, 5, 6, 7)
        .single()
        .expect("time")
        + Duration::seconds(seconds)
}

/// The turns of `spec` as appends.
fn append_turns(store: &Store, session: &SessionId, spec: &Spec) -> session_store::Result<()> {
    let mut clock = 0;
    let mut at = || {
        clock += 1;
        t(clock)
    };
    let mut call = 0;
    for (n, turn) in spec.turns.iter().enumerate() {
        let mut user = NewMessage::user(format!("u{n} {}", turn.text)).at(at());
        if turn.keyed {
            user = user.with_idempotency_key(format!("key-{n}"));
        }
        let mut batch = vec![user];
        for &(calls, fails) in &turn.steps {
            let mut parts = Vec::new();
            if turn.reasoning {
                parts.push(Part::reasoning(
                    format!("thinking {n}"),
                    Some(json!({"anthropic": {"signature": format!("sig{n}")}})),
                ));
            }
            let ids: Vec<String> = (0..calls.max(1))
                .map(|_| {
                    call += 1;
                    format!("call_{call}")
                })
                .collect();
            parts.extend(
                ids.iter()
                    .map(|id| Part::tool_use(id, "bash", json!({"id": id}))),
            );
            let mut assistant = NewMessage::assistant(parts)
                .at(at())
                .by_model("anthropic/claude-test");
            if turn.usage {
                assistant = assistant.with_usage(Usage::new(100 + call as u64, 7).cache(3, 0));
            }
            batch.push(assistant);
            let results = ids
                .iter()
                .enumerate()
                .map(|(i, id)| match i == 0 && fails {
                    true => Part::tool_error(id, "exit 1"),
                    false => Part::tool_result(id, format!("out {id}")),
                })
                .collect();
            batch.push(NewMessage::tool(results).at(at()));
        }
        let mut answer = NewMessage::assistant(vec![Part::text(format!("a{n} {}", turn.text))])
            .at(at())
            .by_model("anthropic/claude-test");
        if turn.usage {
            answer = answer.with_usage(Usage::new(50, 5));
        }
        batch.push(answer);
        store.append_batch(session, batch)?;
    }
    if let Some(cancel) = spec.pending_end {
        store.append(
            session,
            NewMessage::assistant(vec![Part::tool_use("last", "bash", json!({}))]).at(at()),
        )?;
        if cancel {
            store.cancel_pending(session, "stopped by the test")?;
        }
    }
    Ok(())
}

/// A session built from `spec`, and its fork when the spec has one.
fn build(store: &Store, spec: &Spec) -> session_store::Result<(SessionId, Option<SessionId>)> {
    let session = store.create_session()?;
    append_turns(store, &session, spec)?;
    if spec.latch {
        store.record_completion(&session, t(1000))?;
    }
    if let Some(keep) = spec.compact_keep {
        store.compact(&session, keep, "summary <of> the head")?;
    }
    let turns = store
        .messages(&session)?
        .last()
        .map_or(0, |m| m.turn_index + 1);
    if let Some(from) = spec.revert_from.filter(|&from| from > 0 && from < turns) {
        // A revert that would split the compacted head is refused: then there is none.
        match store.revert_to_turn(&session, from) {
            Ok(_) | Err(Error::RevertSplitsCompaction { .. }) => {}
            Err(other) => return Err(other),
        }
    }
    let turns = store
        .messages(&session)?
        .last()
        .map_or(0, |m| m.turn_index + 1);
    let fork = match spec.fork_at {
        Some(at) if at <= turns => Some(store.fork(&session, at)?.id),
        _ => None,
    };
    Ok((session, fork))
}

/// A bundle's lines as JSON, the session id taken out of the header, and the parent left out
/// when `forget_parent` (a restore where the parent is not there to point at).
fn comparable(bundle: &str, forget_parent: bool) -> Vec<Value> {
    bundle
        .lines()
        .enumerate()
        .map(|(at, line)| {
            let mut value: Value = serde_json::from_str(line).expect("a bundle line is JSON");
            if at == 0 {
                value["session"] = Value::Null;
            }
            if forget_parent && value["table"] == "sessions" {
                value["row"]["parent_id"] = Value::Null;
            }
            value
        })
        .collect()
}

/// What the store reads of a session, row ids left out.
fn readable(store: &Store, session: &SessionId) -> (Vec<Message>, Vec<Summary>, Vec<(i64, Usage)>) {
    let messages = store
        .messages(session)
        .expect("messages")
        .into_iter()
        .map(|m| Message { id: 0, ..m })
        .collect();
    let summaries = store
        .summaries(session)
        .expect("summaries")
        .into_iter()
        .map(|s| Summary { id: 0, ..s })
        .collect();
    let usage = store.message_usage(session).expect("usage");
    (messages, summaries, usage)
}

/// Restores `session`'s bundle from `source` into `dest` and checks the second bundle and
/// everything the store reads against the first.
fn round_trip(
    source: &Store,
    session: &SessionId,
    dest: &Store,
    parent_there: bool,
) -> Result<(), TestCaseError> {
    let first = source.export_bundle(session).expect("bundle");
    let restored = dest.import_bundle(first.as_bytes()).expect("restore");
    prop_assert_ne!(&restored, session);
    let second = dest.export_bundle(&restored).expect("second bundle");
    prop_assert_eq!(
        comparable(&second, false),
        comparable(&first, !parent_there),
        "second bundle differs"
    );
    prop_assert!(readable(dest, &restored) == readable(source, session));
    prop_assert_eq!(
        dest.usage(&restored).expect("usage").turns,
        source.usage(session).expect("usage").turns
    );
    Ok(())
}

/// Every row of random sessions (summaries, reverts, usage, keys, latch, forks) survives a
/// bundle from each engine into each engine: the restored session's bundle is the same
/// apart from its id, and reads back the same.
#[test]
fn a_restored_bundle_is_the_same_session_on_every_engine() {
    let sources = backends();
    let dests = backends();
    let mut runner = TestRunner::new(Config {
        cases: 16,
        ..Config::default()
    });
    let result = runner.run(&spec(), |spec| {
        for source in &sources {
            let (session, fork) = build(&source.store, &spec).expect("session builds");
            for dest in &dests {
                round_trip(&source.store, &session, &dest.store, false)?;
                if let Some(fork) = &fork {
                    round_trip(&source.store, fork, &dest.store, false)?;
                }
            }
            // Restored beside its parent, a fork keeps its lineage.
            if let Some(fork) = &fork {
                round_trip(&source.store, fork, &source.store, true)?;
            }
        }
        Ok(())
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
}

/// A session mended by `store-repair` keeps its repair log through a bundle, its rows
/// pointing at the restored messages and parts.
#[test]
fn the_repair_log_travels_with_its_session() {
    for source in backends() {
        source.exec(crate::conformance::BROKEN);
        let broken = SessionId::new("broken");
        let repair = source
            .store
            .repair_session(&broken, &RepairOptions::default())
            .expect("mend");
        assert!(!repair.changes.is_empty());
        let bundle = source.store.export_bundle(&broken).expect("bundle");
        let logged = bundle
            .lines()
            .filter(|l| l.contains("\"repair_log\""))
            .count();
        assert_eq!(
            logged,
            repair.changes.len() + 1,
            "{}: header + rows",
            source.name
        );
        for dest in backends() {
            let restored = dest
                .store
                .import_bundle(bundle.as_bytes())
                .expect("restore");
            let again = dest.store.export_bundle(&restored).expect("bundle");
            assert_eq!(comparable(&again, false), comparable(&bundle, false));
            let linked = dest.count(&format!(
                "SELECT COUNT(*) FROM repair_log r JOIN messages m ON m.id = r.message_id \
                 WHERE r.session_id = '{restored}' AND m.session_id = '{restored}'"
            ));
            let with_message = bundle
                .lines()
                .filter(|l| {
                    l.contains("\"repair_log\"")
                        && l.contains("\"message_id\":")
                        && !l.contains("\"message_id\":null")
                })
                .count();
            assert_eq!(
                linked as usize, with_message,
                "{} -> {}",
                source.name, dest.name
            );
        }
    }
}

/// A bundle the store cannot restore is refused with the line that is wrong, whether the
/// reader sees it (a cut-off file, a reference to nothing) or only the database does (a role
/// outside the contract, on the last line of many): nothing of it is written, on either
/// engine.
#[test]
fn a_bundle_that_cannot_be_restored_writes_nothing_and_names_its_line() {
    for backend in backends() {
        let spec = Spec {
            turns: vec![
                Turn {
                    text: "hello".into(),
                    steps: vec![(2, true)],
                    usage: true,
                    reasoning: true,
                    keyed: true,
                };
                3
            ],
            pending_end: None,
            latch: true,
            compact_keep: Some(2),
            revert_from: None,
            fork_at: None,
        };
        let (session, _) = build(&backend.store, &spec).expect("session");
        let bundle = backend.store.export_bundle(&session).expect("bundle");
        let lines: Vec<&str> = bundle.lines().collect();
        let last_message = lines
            .iter()
            .rposition(|l| l.contains("\"table\":\"messages\""))
            .expect("messages");
        let cases: Vec<(String, usize, &str)> = vec![
            (lines[..lines.len() - 1].join("\n"), lines.len(), "promises"),
            (
                with_line(&lines, last_message, |l| {
                    l.replace("\"role\":\"assistant\"", "\"role\":\"robot\"")
                }),
                last_message + 1,
                "refuses the row",
            ),
            (
                with_line(&lines, last_message, |l| {
                    l.replace("\"seq\":", "\"seq\":\"x\",\"unused\":")
                }),
                last_message + 1,
                "",
            ),
            (
                with_line(&lines, lines.len() - 1, |_| {
                    "{\"table\":\"parts\"}".to_owned()
                }),
                lines.len(),
                "nothing else",
            ),
        ];
        for (text, line, words) in cases {
            let before = backend.dump();
            match backend.store.import_bundle(text.as_bytes()) {
                Err(Error::Bundle { line: at, detail }) => {
                    assert_eq!(at, line, "{}: {detail}", backend.name);
                    assert!(detail.contains(words), "{detail}");
                }
                other => panic!("{}: not refused: {other:?}", backend.name),
            }
            assert_eq!(
                backend.dump(),
                before,
                "{}: something was written",
                backend.name
            );
        }
    }
}

/// `lines` with line `at` (from 0) replaced by `edit` of it.
fn with_line(lines: &[&str], at: usize, edit: impl Fn(&str) -> String) -> String {
    let mut out: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
    out[at] = edit(lines[at]);
    out.join("\n")
}

/// A bundle written before a column existed (here: `messages.model` left out) restores with
/// the database's default for it.
#[test]
fn a_bundle_without_a_newer_column_restores_with_its_default() {
    for backend in backends() {
        let (session, _) = build(
            &backend.store,
            &Spec {
                turns: vec![Turn {
                    text: "hi".into(),
                    steps: vec![],
                    usage: false,
                    reasoning: false,
                    keyed: false,
                }],
                pending_end: None,
                latch: false,
                compact_keep: None,
                revert_from: None,
                fork_at: None,
            },
        )
        .expect("session");
        let bundle = backend.store.export_bundle(&session).expect("bundle");
        let older: String = bundle
            .lines()
            .map(|line| {
                let mut value: Value = serde_json::from_str(line).expect("json");
                if let Some(row) = value["row"].as_object_mut() {
                    row.remove("model");
                }
                format!("{value}\n")
            })
            .collect();
        assert_ne!(older, bundle);
        let restored = backend
            .store
            .import_bundle(older.as_bytes())
            .expect("restore");
        let messages = backend.store.messages(&restored).expect("messages");
        assert_eq!(messages.len(), 2);
        assert!(
            messages.iter().all(|m| m.model.is_none()),
            "{}",
            backend.name
        );
    }
}

/// The CLI: `export --format bundle` on stdout, `import --format bundle FILE` (and `auto`)
/// prints the new id, into a new database file; a refused bundle exits 2, names its line and
/// creates no file.
#[test]
fn the_cli_exports_a_bundle_and_imports_it_into_another_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (one, two) = (dir.path().join("one.db"), dir.path().join("two.db"));
    let fixture = crate::util::transcripts().join("spotter/tool_heavy.jsonl");
    let id = ok(&one, &["import", fixture.to_str().expect("path")]);
    let id = id.trim();
    let bundle = ok(&one, &["export", id, "--format", "bundle"]);
    let file = dir.path().join("bundle.jsonl");
    std::fs::write(&file, &bundle).expect("write");
    let file = file.to_str().expect("path");
    for format in ["bundle", "auto"] {
        let restored = ok(&two, &["import", "--format", format, file]);
        let restored = restored.trim();
        assert_eq!(restored.lines().count(), 1);
        assert_ne!(restored, id);
        let again = ok(&two, &["export", restored, "--format", "bundle"]);
        assert_eq!(comparable(&again, false), comparable(&bundle, false));
    }
    let refused = session_store(
        &one,
        &[
            "export",
            id,
            "--format",
            "bundle",
            "--model",
            "anthropic/claude-x",
        ],
    );
    assert_eq!(
        refused.status.code(),
        Some(2),
        "--model is for request bodies"
    );
    assert!(refused.stdout.is_empty());
    let broken = dir.path().join("broken.jsonl");
    std::fs::write(
        &broken,
        bundle.replacen("\"version\":1", "\"version\":9", 1),
    )
    .expect("write");
    let fresh = dir.path().join("fresh.db");
    let output = session_store(
        &fresh,
        &[
            "import",
            "--format",
            "bundle",
            broken.to_str().expect("path"),
        ],
    );
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("line 1") && stderr.contains("version 9"),
        "{stderr}"
    );
    assert!(!fresh.exists(), "a refused bundle created a database");
}

/// `AsyncStore` writes and restores the same bundles and transcripts as `Store`, on each
/// engine.
#[test]
fn async_store_bundles_and_transcripts_are_the_stores() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    for backend in backends() {
        let spec = Spec {
            turns: vec![Turn {
                text: "async".into(),
                steps: vec![(2, false)],
                usage: true,
                reasoning: false,
                keyed: false,
            }],
            pending_end: Some(true),
            latch: false,
            compact_keep: None,
            revert_from: None,
            fork_at: None,
        };
        let (session, _) = build(&backend.store, &spec).expect("session");
        let blocking = backend.store.export_bundle(&session).expect("bundle");
        let html = backend
            .store
            .transcript(&session, session_store::TranscriptFormat::Html)
            .expect("html");
        let store = session_store::AsyncStore::from(backend.reopen());
        runtime.block_on(async {
            assert_eq!(
                store.export_bundle(&session).await.expect("bundle"),
                blocking
            );
            let page = store
                .transcript(&session, session_store::TranscriptFormat::Html)
                .await
                .expect("html");
            assert_eq!(page, html);
            let restored = store
                .import_bundle(std::io::Cursor::new(blocking.clone().into_bytes()))
                .await
                .expect("restore");
            let again = store.export_bundle(&restored).await.expect("bundle");
            assert_eq!(comparable(&again, false), comparable(&blocking, false));
        });
    }
}
