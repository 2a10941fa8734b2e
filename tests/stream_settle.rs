//! What happens to an open (streaming) message besides its own writer's pushes, on both
//! engines: a fork copies it as settling would leave it, a settle writes a `repair_log` row
//! (by the next write or by the mend), and a writer on another host holds a lease that runs
//! out.

use std::time::Duration;

use serde_json::{json, Value};
use session_store::repair::{RepairOptions, WRITER_LEASE};
use session_store::{Error, MessageState, NewMessage, Part, Role, SessionId, Store};

use crate::backends::{backends, Backend};
use crate::streaming::assert_exports_pass;

fn started(store: &Store) -> SessionId {
    let session = store.create_session().expect("session");
    store
        .append(&session, NewMessage::user("list /tmp"))
        .expect("user");
    session
}

/// The parts a streamed message holds when something happens to it: (case, parts, the
/// calls among them).
fn streamed_cases() -> Vec<(&'static str, Vec<Part>, Vec<&'static str>)> {
    vec![
        ("text only", vec![Part::text("Let me look")], vec![]),
        (
            "one call",
            vec![
                Part::text("Let me look"),
                Part::tool_use("call_a", "bash", json!({"cmd": "ls /tmp"})),
            ],
            vec!["call_a"],
        ),
        (
            "two calls",
            vec![
                Part::tool_use("call_a", "bash", json!({"cmd": "ls /tmp"})),
                Part::tool_use("call_b", "bash", json!({"cmd": "ls /var"})),
            ],
            vec!["call_a", "call_b"],
        ),
    ]
}

/// The `repair_log` rows of `session`: (rule, action, after_json).
fn log_rows(backend: &Backend, session: &SessionId) -> Vec<(String, String, Value)> {
    let sql = format!(
        "SELECT rule, action, after_json FROM repair_log WHERE session_id = '{}' ORDER BY id",
        session.as_str()
    );
    let rows: Vec<(String, String, String)> = match &backend.place {
        crate::backends::Place::Sqlite { path, .. } => {
            let conn = rusqlite::Connection::open(path).expect("open");
            let mut stmt = conn.prepare(&sql).expect("prepare");
            let rows = stmt
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .expect("query");
            rows.collect::<Result<_, _>>().expect("rows")
        }
        crate::backends::Place::Postgres(schema) => schema
            .client()
            .query(&sql, &[])
            .expect("query")
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect(),
    };
    rows.into_iter()
        .map(|(rule, action, after)| (rule, action, serde_json::from_str(&after).expect("json")))
        .collect()
}

/// What a settle of a message with `calls` logs.
fn interrupt_row(cause: &str, calls: &[&str]) -> (String, String, Value) {
    (
        "abandoned_message".to_owned(),
        "interrupt".to_owned(),
        json!({"state": "interrupted", "cause": cause, "tombstones": calls.len(), "tool_use_ids": calls}),
    )
}

/// Makes the open message's writer a process of this host that does not run.
fn orphan_the_writer(backend: &Backend, session: &SessionId) {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    backend.exec(&format!(
        "UPDATE messages SET writer = '{}|999999999|1|1' WHERE session_id = '{}' AND state = 'open'",
        host.trim(),
        session.as_str()
    ));
}

/// Makes the open message's writer one of another host, last heard from `silent` ago.
fn remote_writer(backend: &Backend, session: &SessionId, silent: chrono::TimeDelta) {
    let now = chrono::DateTime::<chrono::Utc>::from(std::time::SystemTime::now());
    let heard = (now - silent).to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    backend.exec(&format!(
        "UPDATE messages SET writer = 'another-host.example|4242|17|1' \
         WHERE session_id = '{s}' AND state = 'open';
         UPDATE sessions SET updated_at = '{heard}' WHERE id = '{s}'",
        s = session.as_str()
    ));
}

fn last(store: &Store, session: &SessionId) -> session_store::Message {
    store
        .messages(session)
        .expect("messages")
        .pop()
        .expect("a message")
}

#[test]
fn a_fork_copies_an_open_message_interrupted_with_tombstones_and_leaves_the_source_open() {
    for backend in backends() {
        for (case, parts, calls) in streamed_cases() {
            let store = &backend.store;
            let source = started(store);
            let mut open = store
                .begin_message(&source, Role::Assistant)
                .expect("begin");
            for part in parts.clone() {
                open.push(part).expect("push");
            }
            let fork = store.fork(&source, 1).expect("fork while the writer lives");
            let at = format!("{}: {case}", backend.name);
            assert_eq!(fork.tombstoned, calls, "{at}");
            let copied = store.messages(&fork.id).expect("fork's messages");
            let copy = &copied[1];
            assert_eq!(copy.state, MessageState::Interrupted, "{at}");
            assert_eq!(copy.parts, parts, "{at}: the parts pushed so far stay");
            assert_eq!(
                backend.count(&format!(
                    "SELECT COUNT(*) FROM messages WHERE session_id = '{}' AND writer IS NOT NULL",
                    fork.id.as_str()
                )),
                0,
                "{at}: no writer token in the fork"
            );
            if calls.is_empty() {
                assert_eq!(copied.len(), 2, "{at}");
            } else {
                let tombstones = &copied[2];
                assert_eq!(tombstones.role, Role::Tool, "{at}");
                let answered: Vec<&str> =
                    tombstones.parts.iter().filter_map(Part::answers).collect();
                assert_eq!(answered, calls, "{at}");
            }
            assert_eq!(
                log_rows(&backend, &fork.id),
                [interrupt_row("forked", &calls)],
                "{at}"
            );
            assert!(log_rows(&backend, &source).is_empty(), "{at}");
            // The fork goes on at once; its writer never reaches it.
            store
                .append(&fork.id, NewMessage::user("in the fork"))
                .expect("the fork takes writes");
            assert_exports_pass(store, &fork.id);
            // The source is as it was: still open under its writer, who finishes it.
            assert_eq!(last(store, &source).state, MessageState::Open, "{at}");
            open.push(Part::text("done")).expect("the writer goes on");
            open.finish().expect("finish");
            assert_eq!(last(store, &source).state, MessageState::Complete, "{at}");
            assert!(store
                .check(
                    &[source.clone(), fork.id.clone()],
                    &RepairOptions::default()
                )
                .expect("check")
                .violations
                .is_empty());
        }
    }
}

#[test]
fn settling_an_abandoned_message_writes_a_repair_log_row() {
    for backend in backends() {
        for (case, parts, calls) in streamed_cases() {
            // By the next write, and by the mend.
            for by_mend in [false, true] {
                let store = &backend.store;
                let session = started(store);
                let mut open = store
                    .begin_message(&session, Role::Assistant)
                    .expect("begin");
                for part in parts.clone() {
                    open.push(part).expect("push");
                }
                orphan_the_writer(&backend, &session);
                std::mem::forget(open);
                let at = format!("{}: {case}, by mend {by_mend}", backend.name);
                if by_mend {
                    let repair = store
                        .repair_session(&session, &RepairOptions::default())
                        .expect("mend");
                    let actions: Vec<&str> = repair.changes.iter().map(|c| c.action).collect();
                    assert_eq!(actions, ["interrupt"], "{at}");
                    assert_eq!(
                        repair.changes[0].after["tombstones"],
                        json!(calls.len()),
                        "{at}"
                    );
                } else {
                    store
                        .append(&session, NewMessage::user("are you there?"))
                        .expect("the next write settles");
                }
                assert_eq!(
                    log_rows(&backend, &session),
                    [interrupt_row("writer_gone", &calls)],
                    "{at}"
                );
                assert_eq!(
                    store.messages(&session).expect("messages")[1].state,
                    MessageState::Interrupted
                );
                assert_exports_pass(store, &session);
                // Settled once: a second mend changes and logs nothing.
                let again = store
                    .repair_session(&session, &RepairOptions::default())
                    .expect("mend again");
                assert!(again.changes.is_empty(), "{at}: {again:?}");
                assert_eq!(log_rows(&backend, &session).len(), 1, "{at}");
            }
        }
    }
}

#[test]
fn a_writer_on_another_host_is_settled_once_silent_past_its_lease() {
    let minutes = chrono::TimeDelta::minutes;
    assert_eq!(WRITER_LEASE, minutes(10), "the documented lease");
    for backend in backends() {
        // (silent for, settled by the next write).
        for (silent, settled) in [
            (minutes(0), false),
            (minutes(9), false),
            (minutes(11), true),
            (minutes(24 * 60), true),
        ] {
            let store = &backend.store;
            let session = started(store);
            let mut open = store
                .begin_message(&session, Role::Assistant)
                .expect("begin");
            open.push(Part::tool_use("call_r", "bash", json!({})))
                .expect("push");
            remote_writer(&backend, &session, silent);
            std::mem::forget(open);
            let at = format!("{}: silent {silent}", backend.name);
            let found = store
                .check(std::slice::from_ref(&session), &RepairOptions::default())
                .expect("check")
                .violations;
            assert_eq!(found.len(), usize::from(settled), "{at}: {found:?}");
            let write = store.append(&session, NewMessage::user("next"));
            if settled {
                write.expect("settled, then written");
                assert_eq!(
                    log_rows(&backend, &session),
                    [interrupt_row("writer_gone", &["call_r"])],
                    "{at}"
                );
                assert_exports_pass(store, &session);
            } else {
                assert!(
                    matches!(write, Err(Error::MessageOpen { .. })),
                    "{at}: {write:?}"
                );
                assert_eq!(last(store, &session).state, MessageState::Open, "{at}");
                // `store-repair --writer-lease` shorter than the silence settles it.
                let short = RepairOptions {
                    writer_lease: Some(Duration::ZERO),
                    ..RepairOptions::default()
                };
                if silent > chrono::TimeDelta::zero() {
                    let repair = store.repair_session(&session, &short).expect("mend");
                    assert_eq!(repair.changes.len(), 1, "{at}");
                    assert_eq!(
                        store.messages(&session).expect("m")[1].state,
                        MessageState::Interrupted
                    );
                }
            }
        }
    }
}

#[test]
fn keep_alive_renews_the_lease_of_an_open_message() {
    for backend in backends() {
        let store = &backend.store;
        let session = started(store);
        let mut open = store
            .begin_message(&session, Role::Assistant)
            .expect("begin");
        open.push(Part::text("thinking a while")).expect("push");
        let stale = "2000-01-01T00:00:00.000000Z";
        backend.exec(&format!(
            "UPDATE sessions SET updated_at = '{stale}' WHERE id = '{}'",
            session.as_str()
        ));
        open.keep_alive().expect("keep alive");
        let renewed = store
            .sessions()
            .expect("sessions")
            .into_iter()
            .find(|s| s.id == session)
            .expect("listed");
        // 2000-01-01T00:00:00Z is 946 684 800 s after the epoch.
        assert!(
            renewed.updated_at.timestamp() > 946_684_800,
            "{}",
            backend.name
        );
        open.finish().expect("finish");
    }
}

#[test]
fn store_repair_writer_lease_settles_a_silent_remote_writer_sooner() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("lease.db");
    let backend = Backend {
        name: "sqlite",
        store: Store::open(&path).expect("open"),
        place: crate::backends::Place::Sqlite {
            _dir: tempfile::tempdir().expect("unused"),
            path: path.clone(),
        },
    };
    let session = started(&backend.store);
    let mut open = backend
        .store
        .begin_message(&session, Role::Assistant)
        .expect("begin");
    open.push(Part::tool_use("call_r", "bash", json!({})))
        .expect("push");
    remote_writer(&backend, &session, chrono::TimeDelta::minutes(2));
    std::mem::forget(open);
    let run = |extra: &[&str]| {
        let mut args = vec![
            "--db",
            path.to_str().expect("utf-8"),
            "--no-backup",
            "--json",
        ];
        args.extend_from_slice(extra);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_store-repair"))
            .args(&args)
            .output()
            .expect("run store-repair");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: Value = serde_json::from_slice(&out.stdout).expect("json");
        report["repaired"].as_u64().expect("repaired")
    };
    // (arguments, sessions repaired): within the default lease nothing; a shorter one settles.
    for (extra, repaired) in [(&[][..], 0), (&["--writer-lease", "1m"][..], 1)] {
        assert_eq!(run(extra), repaired, "{extra:?}");
    }
    assert_eq!(
        last(&backend.store, &session).role,
        Role::Tool,
        "the tombstones follow"
    );
    assert_eq!(
        log_rows(&backend, &session),
        [interrupt_row("writer_gone", &["call_r"])]
    );
}
