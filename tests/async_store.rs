//! `AsyncStore` (cargo feature `tokio`): the store's operations as `async fn`s that run on
//! tokio's blocking pool. The failure class is a store call that blocks a runtime worker
//! thread: on a current-thread runtime every other task (timers, sockets, a UI heartbeat)
//! stops while the store waits on SQLite's lock, the disk or a PostgreSQL server. A ticker
//! task beside thousands of appends shows it, against each backend; the same appends through
//! the blocking `Store` in the task are the control that stops the ticker.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::Result;
use serde_json::json;
use session_store::{AsyncStore, Error, NewMessage, OpenError, Part, Refusal, SessionId, Store};

use crate::backends::backends;

/// Appends per run: thousands, as an agent loop over a long session makes.
const APPENDS: usize = 2_000;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("current-thread runtime")
}

/// A task that counts its turns on the runtime until `stop` is set. Each turn also rests
/// the thread a moment (a heartbeat's work): a ticker that only yields would spin a core
/// that the appends and the other tests need.
async fn ticker(ticks: Arc<AtomicU64>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        ticks.fetch_add(1, Ordering::Relaxed);
        std::thread::sleep(std::time::Duration::from_micros(20));
        tokio::task::yield_now().await;
    }
}

/// A user / assistant exchange, `n` apart from the others.
fn exchange(n: usize) -> [NewMessage; 2] {
    [
        NewMessage::user(format!("question {n}")),
        NewMessage::assistant(vec![Part::text(format!("answer {n}"))]),
    ]
}

/// What the ticker did while `APPENDS` appends ran one after another in the runtime's main
/// task: how many times it ticked, and across how many of the appends it ticked.
struct Ticked {
    ticks: u64,
    appends: u64,
}

/// Runs `APPENDS` appends (through `append`) in the runtime's main task beside a ticker.
fn ticker_beside_appends<F, Fut>(append: F) -> Ticked
where
    F: Fn(NewMessage) -> Fut,
    Fut: std::future::Future<Output = session_store::Result<()>>,
{
    let runtime = runtime();
    let ticks = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    runtime.block_on(async {
        let ticking = tokio::spawn(ticker(ticks.clone(), stop.clone()));
        // Let the ticker start.
        tokio::task::yield_now().await;
        let start = ticks.load(Ordering::Relaxed);
        let mut appends = 0;
        for n in 0..APPENDS / 2 {
            for message in exchange(n) {
                let before = ticks.load(Ordering::Relaxed);
                append(message).await.expect("append");
                if ticks.load(Ordering::Relaxed) > before {
                    appends += 1;
                }
            }
        }
        let ticked = Ticked {
            ticks: ticks.load(Ordering::Relaxed) - start,
            appends,
        };
        stop.store(true, Ordering::Relaxed);
        ticking.await.expect("ticker");
        ticked
    })
}

#[test]
fn a_current_thread_runtime_keeps_running_other_tasks_while_async_store_appends() -> Result<()> {
    for backend in backends() {
        let store = runtime().block_on(AsyncStore::open(backend.location()))?;
        let session = runtime().block_on(store.create_session())?;
        let ticked = ticker_beside_appends(|message| {
            let (store, session) = (store.clone(), session.clone());
            async move { store.append(&session, message).await.map(drop) }
        });
        eprintln!(
            "{}: {} ticks, across {} of {APPENDS} appends",
            backend.name, ticked.ticks, ticked.appends
        );
        // The append's blocking work runs on the pool while the runtime's only thread runs
        // the ticker: the main task yields nowhere else, so every tick was made while an
        // append was in flight, and most appends are crossed by one (not all: a fast append
        // can end before the scheduler gets to the ticker). Blocking gives 0 and 0.
        let least = APPENDS as u64 / 4;
        assert!(
            ticked.ticks >= least && ticked.appends >= least,
            "{}: the ticker ticked {} times, across {} of {APPENDS} appends",
            backend.name,
            ticked.ticks,
            ticked.appends
        );
        assert_eq!(
            backend.store.messages(&session)?.len(),
            APPENDS,
            "{}",
            backend.name
        );

        // The control: the same appends through the blocking `Store` in the task hold the
        // runtime's only thread, and the ticker never gets to tick. (On PostgreSQL the
        // blocking client refuses to run on a runtime thread at all: a panic.)
        if backend.name != "sqlite" {
            continue;
        }
        let control = backend.store.create_session()?;
        let blocked = ticker_beside_appends(|message| {
            let result = backend.store.append(&control, message).map(drop);
            async move { result }
        });
        assert_eq!(
            (blocked.ticks, blocked.appends),
            (0, 0),
            "{}: the control ticked",
            backend.name
        );
    }
    Ok(())
}

/// What a refused append looks like through each door.
fn refusal(error: &Error) -> Option<(String, usize, Refusal)> {
    match error {
        Error::Refused {
            session,
            index,
            reason,
        } => Some((session.to_string(), *index, reason.clone())),
        _ => None,
    }
}

#[test]
fn async_store_refuses_what_store_refuses_with_the_same_typed_error() -> Result<()> {
    let runtime = runtime();
    for backend in backends() {
        let store = runtime.block_on(AsyncStore::open(backend.location()))?;
        let session = backend.store.create_session()?;
        backend
            .store
            .append(&session, NewMessage::user("list /tmp"))?;
        let refused = [
            // A result whose call was never made.
            NewMessage::tool(vec![Part::tool_result("ghost", "out")]),
            // An assistant message with no parts.
            NewMessage::assistant(vec![]),
            // A call answered twice in one batch is refused at its second result.
            NewMessage::assistant(vec![
                Part::tool_use("c1", "ls", json!({})),
                Part::tool_use("c1", "ls", json!({})),
            ]),
        ];
        for message in refused {
            let blocking = backend
                .store
                .append(&session, message.clone())
                .expect_err("Store refuses");
            let awaited = runtime
                .block_on(store.append(&session, message))
                .expect_err("AsyncStore refuses");
            assert!(
                refusal(&blocking).is_some(),
                "{}: {blocking:?}",
                backend.name
            );
            assert_eq!(refusal(&awaited), refusal(&blocking), "{}", backend.name);
        }
        assert_eq!(
            backend.store.messages(&session)?.len(),
            1,
            "{}",
            backend.name
        );

        let unknown = SessionId::new("no-such-session");
        for error in [
            runtime.block_on(store.messages(&unknown)).map(drop),
            runtime
                .block_on(store.append(&unknown, NewMessage::user("hi")))
                .map(drop),
            runtime.block_on(store.last_turns(&unknown, 1)).map(drop),
        ] {
            assert!(
                matches!(&error, Err(Error::UnknownSession(id)) if *id == unknown),
                "{}: {error:?}",
                backend.name
            );
        }
    }
    Ok(())
}

#[test]
fn async_store_reads_what_store_wrote_and_the_other_way_round() -> Result<()> {
    let runtime = runtime();
    for backend in backends() {
        let store = runtime.block_on(AsyncStore::open(backend.location()))?;
        let written = backend.store.create_session()?;
        backend.store.append_batch(&written, exchange(1).to_vec())?;
        let (messages, pending, sessions) = runtime.block_on(async {
            let session = store.create_session().await?;
            store.append(&session, NewMessage::user("run it")).await?;
            store
                .append(
                    &session,
                    NewMessage::assistant(vec![Part::tool_use("c1", "run", json!({}))]),
                )
                .await?;
            let pending = store.pending_tool_uses(&session).await?;
            Ok::<_, Error>((
                store.messages(&written).await?,
                pending,
                store.sessions().await?,
            ))
        })?;
        assert_eq!(
            messages,
            backend.store.messages(&written)?,
            "{}",
            backend.name
        );
        assert_eq!(pending, vec!["c1".to_owned()], "{}", backend.name);
        assert_eq!(sessions, backend.store.sessions()?, "{}", backend.name);
    }
    Ok(())
}

#[test]
fn the_last_async_store_goes_away_inside_a_task_without_a_panic() -> Result<()> {
    for backend in backends() {
        let runtime = runtime();
        let appended = runtime.block_on(async {
            let store = AsyncStore::open(backend.location()).await?;
            let session = store.create_session().await?;
            let clone = store.clone();
            // Both handles, and with them the pool and its open connections, go away here,
            // on the runtime's thread (PostgreSQL's client would block closing them).
            let appended = clone.append(&session, NewMessage::user("hi")).await?;
            drop(store);
            drop(clone);
            tokio::task::yield_now().await;
            Ok::<_, Error>((session, appended.seq))
        })?;
        drop(runtime);
        assert_eq!(
            backend.store.messages(&appended.0)?.len(),
            1,
            "{}",
            backend.name
        );
        assert_eq!(appended.1, 1, "{}", backend.name);
    }
    Ok(())
}

#[test]
fn async_store_is_clone_send_sync_and_shares_the_store() -> Result<()> {
    fn shareable<T: Clone + Send + Sync + 'static>() {}
    shareable::<AsyncStore>();
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("s.db");
    let runtime = runtime();
    let store = runtime.block_on(AsyncStore::open_with(
        &path,
        &session_store::StoreOptions::default(),
    ))?;
    let session = runtime.block_on(store.clone().create_session())?;
    assert!(Store::open(&path)?.has_session(&session)?);
    assert_eq!(store.path(), path.as_path());
    assert!(!store.is_postgres());
    // A path that cannot be a database is refused as `Store::open` refuses it.
    let refused = runtime.block_on(AsyncStore::open(":memory:"));
    assert!(
        matches!(refused, Err(OpenError::InvalidPath { .. })),
        "{refused:?}"
    );
    Ok(())
}

/// The public methods of one `impl TYPE {` block family across `files`: `pub fn` and
/// `pub async fn` names at the block's first level.
fn public_methods(files: &[std::path::PathBuf], type_name: &str) -> Vec<String> {
    let header = format!("impl {type_name} {{");
    let mut names = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).expect("source");
        let mut inside = false;
        for line in text.lines() {
            if line == header {
                inside = true;
            } else if inside && line == "}" {
                inside = false;
            } else if inside {
                let method = line
                    .strip_prefix("    pub fn ")
                    .or_else(|| line.strip_prefix("    pub async fn "));
                if let Some(rest) = method {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    names.push(name);
                }
            }
        }
    }
    names.sort();
    names.dedup();
    names
}

/// Every Rust file under `dir`, recursively.
fn rust_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            found.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
    found
}

#[test]
fn every_store_operation_has_an_async_twin_of_the_same_name() {
    let library = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/session-store/src");
    let store = public_methods(&rust_files(&library.join("store")), "Store");
    let twins = public_methods(&[library.join("async_store.rs")], "AsyncStore");
    assert!(
        store.len() > 50,
        "found only {} Store methods: {store:?}",
        store.len()
    );
    let missing: Vec<&String> = store.iter().filter(|name| !twins.contains(name)).collect();
    assert!(
        missing.is_empty(),
        "Store operations without an AsyncStore twin: {missing:?}"
    );
    let streamed = public_methods(&[library.join("store/stream.rs")], "OpenMessage");
    let async_streamed = public_methods(&[library.join("async_store.rs")], "AsyncOpenMessage");
    let missing: Vec<&String> = streamed
        .iter()
        .filter(|name| !async_streamed.contains(name))
        .collect();
    assert!(
        missing.is_empty(),
        "OpenMessage methods without an AsyncOpenMessage twin: {missing:?}"
    );
}

#[test]
fn a_message_streamed_through_async_store_finishes_or_is_interrupted_when_dropped() -> Result<()> {
    for backend in backends() {
        let name = backend.name;
        let runtime = runtime();
        let store = runtime.block_on(AsyncStore::open(backend.location()))?;
        runtime.block_on(async {
            let session = store.create_session().await?;
            store
                .append(&session, NewMessage::user("list /tmp"))
                .await?;
            let mut open = store
                .begin_message(&session, session_store::Role::Assistant)
                .await?;
            open.push(Part::text("Listing it.")).await?;
            open.set_model("openai/gpt-5").await?;
            open.keep_alive().await?;
            open.push(Part::tool_use("call_1", "bash", json!({"cmd": "ls"})))
                .await?;
            assert_eq!(open.len(), 2, "{name}");
            let appended = open.finish().await?;
            let messages = store.messages(&session).await?;
            let last = messages.last().expect("a message");
            assert_eq!(last.seq, appended.seq, "{name}");
            assert_eq!(last.model.as_deref(), Some("openai/gpt-5"), "{name}");
            assert_eq!(last.state, session_store::MessageState::Complete, "{name}");
            assert_eq!(
                store.pending_tool_uses(&session).await?,
                vec!["call_1"],
                "{name}"
            );

            // Dropped unfinished: interrupted, its call answered by a tombstone.
            store.cancel_pending(&session, "cancelled").await?;
            store.append(&session, NewMessage::user("again")).await?;
            let mut open = store
                .begin_message(&session, session_store::Role::Assistant)
                .await?;
            open.push(Part::tool_use("call_2", "bash", json!({"cmd": "pwd"})))
                .await?;
            drop(open);
            // The drop's write runs on the blocking pool; the next write waits for its lock.
            let mut state = None;
            for _ in 0..200 {
                let messages = store.messages(&session).await?;
                state = messages
                    .iter()
                    .find(|m| {
                        m.parts
                            .iter()
                            .any(|p| matches!(p, Part::ToolUse { id, .. } if id == "call_2"))
                    })
                    .map(|m| m.state);
                if state == Some(session_store::MessageState::Interrupted) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            assert_eq!(
                state,
                Some(session_store::MessageState::Interrupted),
                "{name}"
            );
            assert!(
                store.pending_tool_uses(&session).await?.is_empty(),
                "{name}"
            );
            anyhow::Ok(())
        })?;
    }
    Ok(())
}
