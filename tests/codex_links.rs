//! Codex sub-agents linked to the rollout of the thread that spawned them whatever the order
//! they are stored in: parent first or last, in separate imports or in one import run, with
//! `session_store.child_session` on the parent's `spawn_agent` call, `show` and
//! `sessions --tree` listing each child under its call, and re-imports linking nothing twice.
//! The expectations are read from the fixtures' JSON, not from the importer.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::Value;
use session_store::import::{import as import_transcript, Format};
use session_store::{Part, SessionId, Store, Subagent};

use crate::streaming::assert_exports_pass;
use crate::subagents::{cli, codex_spawning_call, codex_state, lines, own_lines, CODEX_CHILDREN};

const PARENT: &str = "tests/fixtures/codex_subagents/parent.jsonl";

/// How a test stores a list of rollouts.
#[derive(Clone, Copy, Debug)]
enum Storing {
    /// One [`Store::import`] each.
    Whole,
    /// One [`Store::import_reader`] each.
    Streamed,
    /// All of them in one [`Store::import_readers_as`] (one transaction).
    OneRun,
}

const RUNS: [Storing; 3] = [Storing::Whole, Storing::Streamed, Storing::OneRun];

fn read(path: &str) -> String {
    std::fs::read_to_string(path).expect("fixture")
}

/// Stores `paths` in order, as `run` says; the sessions in the same order.
fn store_all(store: &Store, paths: &[&str], run: Storing) -> Vec<SessionId> {
    let texts: Vec<String> = paths.iter().map(|path| read(path)).collect();
    store_texts(store, &texts, run)
}

/// A child rollout's own thread id.
fn thread_of(path: &str) -> String {
    own_lines(&lines(path))[0]["payload"]["id"]
        .as_str()
        .expect("thread id")
        .to_owned()
}

/// The `session_store.child_session` of every call of `session` that names one.
fn child_sessions(store: &Store, session: &SessionId) -> BTreeMap<String, String> {
    store
        .messages(session)
        .expect("messages")
        .iter()
        .flat_map(|m| &m.parts)
        .filter_map(|p| match p {
            Part::ToolUse {
                id,
                provider_metadata: Some(metadata),
                ..
            } => metadata
                .pointer("/session_store/child_session")
                .and_then(Value::as_str)
                .map(|child| (id.clone(), child.to_owned())),
            _ => None,
        })
        .collect()
}

/// The sub-agent `child` as `store` has it.
fn subagent(store: &Store, child: &SessionId) -> Subagent {
    store
        .subagents(None)
        .expect("subagents")
        .into_iter()
        .find(|s| &s.id == child)
        .unwrap_or_else(|| panic!("{child} has no sub-agent row"))
}

/// `child` (stored from `path`) is linked to `parent` as the fixtures say: its call, its
/// state, the call's `child_session`.
fn assert_linked(store: &Store, parent: &SessionId, child: &SessionId, path: &str, what: &str) {
    let call = codex_spawning_call(&lines(PARENT), &thread_of(path));
    let found = subagent(store, child);
    assert_eq!(found.parent.as_ref(), Some(parent), "{what}: {path}");
    assert_eq!(found.parent_tool_use_id, call, "{what}: {path}");
    assert_eq!(
        found.state,
        Some(codex_state(&lines(path))),
        "{what}: {path}"
    );
    if let Some(call) = call {
        assert_eq!(
            child_sessions(store, parent).get(&call).map(String::as_str),
            Some(child.as_str()),
            "{what}: {path}: the call names its child"
        );
    }
}

/// `show` of `parent` lists each child under the call that spawned it (before the next
/// message), and `sessions --tree` one level under `parent`.
fn assert_shown(db: &str, parent: &SessionId, children: &[(SessionId, Option<String>)]) {
    let shown = cli(db, &["show", parent.as_str(), "--full"]);
    let tree = cli(db, &["sessions", "--tree"]);
    let at_parent = tree
        .lines()
        .position(|l| l == parent.as_str())
        .unwrap_or_else(|| panic!("{parent} not a root of the tree:\n{tree}"));
    for (child, call) in children {
        let at_child = shown
            .find(&format!("sub-agent {child}"))
            .unwrap_or_else(|| panic!("{child} not shown:\n{shown}"));
        if let Some(call) = call {
            let at_call = shown.find(call.as_str()).expect("call shown");
            let next_message = shown[at_call..]
                .find("\n#")
                .map_or(shown.len(), |n| at_call + n);
            assert!(
                at_call < at_child && at_child < next_message,
                "{child} not under {call}:\n{shown}"
            );
        }
        let line = format!(
            "  {child}\tsub-agent\tspawned_by={}\t",
            call.as_deref().unwrap_or("-")
        );
        let at_line = tree
            .lines()
            .position(|l| l.starts_with(&line))
            .unwrap_or_else(|| panic!("no {line:?} in the tree:\n{tree}"));
        assert!(at_line > at_parent, "{tree}");
    }
}

/// The orders the rollouts are stored in: the parent at each place, the children both ways.
fn orders() -> Vec<Vec<&'static str>> {
    let all: Vec<&str> = std::iter::once(PARENT)
        .chain(CODEX_CHILDREN.iter().map(|(path, _)| *path))
        .collect();
    let mut orders = Vec::new();
    for start in 0..all.len() {
        let mut order = all.clone();
        order.rotate_left(start);
        orders.push(order.clone());
        order.reverse();
        orders.push(order);
    }
    orders
}

#[test]
fn codex_sub_agents_link_to_their_parent_whatever_the_order() {
    let orders = orders();
    assert_eq!(orders.len(), 8);
    let mut parent_last = 0;
    for run in RUNS {
        for order in &orders {
            parent_last += usize::from(order.last() == Some(&PARENT));
            for backend in crate::backends::backends() {
                let store = &backend.store;
                let what = format!("{} {run:?} {order:?}", backend.name);
                let sessions = store_all(store, order, run);
                let by_path: BTreeMap<&str, SessionId> =
                    order.iter().copied().zip(sessions).collect();
                let parent = &by_path[PARENT];
                let mut shown = Vec::new();
                for (path, _) in CODEX_CHILDREN {
                    let child = &by_path[path];
                    assert_linked(store, parent, child, path, &what);
                    shown.push((child.clone(), subagent(store, child).parent_tool_use_id));
                }
                // Two calls name a child each; nothing else carries a `child_session`.
                assert_eq!(child_sessions(store, parent).len(), 2, "{what}");
                assert_eq!(
                    store.subagents(Some(parent)).expect("children").len(),
                    CODEX_CHILDREN.len(),
                    "{what}"
                );
                assert_shown(&backend.location(), parent, &shown);
                for session in by_path.values() {
                    assert_exports_pass(store, session);
                }
            }
        }
    }
    assert_eq!(
        parent_last,
        2 * RUNS.len(),
        "the parent comes last in some runs"
    );
}

#[test]
fn codex_sub_agents_without_their_parent_keep_their_state_and_wait_for_it() {
    for run in RUNS {
        for backend in crate::backends::backends() {
            let store = &backend.store;
            let what = format!("{} {run:?}", backend.name);
            let paths: Vec<&str> = CODEX_CHILDREN.iter().map(|(path, _)| *path).collect();
            let children = store_all(store, &paths, run);
            for (child, path) in children.iter().zip(&paths) {
                let found = subagent(store, child);
                assert_eq!(
                    (found.parent, found.parent_tool_use_id),
                    (None, None),
                    "{what}: {path}"
                );
                assert_eq!(found.state, Some(codex_state(&lines(path))), "{what}");
                assert_exports_pass(store, child);
            }
            // A rollout of no sub-agent, of another thread, links none of them.
            let other = crate::util::transcripts().join("agentcmd/codex");
            let other = std::fs::read_dir(other)
                .expect("fixtures")
                .next()
                .expect("a rollout")
                .expect("entry")
                .path();
            let other = store_all(store, &[other.to_str().expect("utf-8")], run);
            assert_eq!(store.subagents(Some(&other[0])).expect("none"), []);
            // The parent, stored at last, takes every one of them.
            let parent = store_all(store, &[PARENT], run).remove(0);
            for (child, path) in children.iter().zip(&paths) {
                assert_linked(store, &parent, child, path, &what);
            }
        }
    }
}

#[test]
fn codex_links_made_again_link_nothing_twice() {
    for run in RUNS {
        for backend in crate::backends::backends() {
            let store = &backend.store;
            let what = format!("{} {run:?}", backend.name);
            let (first, second) = (CODEX_CHILDREN[0].0, CODEX_CHILDREN[1].0);
            let stored = store_all(store, &[first, PARENT, second], run);
            let (child_a, parent, child_b) = (&stored[0], &stored[1], &stored[2]);
            let calls = child_sessions(store, parent);
            let links = store.subagents(None).expect("subagents");
            // The same child again: its call has its child; the copy waits for another parent.
            let copy_a = store_all(store, &[first], run).remove(0);
            assert_eq!(child_sessions(store, parent), calls, "{what}");
            let waiting = subagent(store, &copy_a);
            assert_eq!((waiting.parent, waiting.parent_tool_use_id), (None, None));
            // The parent again: it takes the waiting copy, and leaves the first tree as it was.
            let copy_parent = store_all(store, &[PARENT], run).remove(0);
            assert_linked(store, &copy_parent, &copy_a, first, &what);
            assert_eq!(child_sessions(store, &copy_parent).len(), 1, "{what}");
            assert_eq!(child_sessions(store, parent), calls, "{what}");
            for link in &links {
                assert_eq!(&subagent(store, &link.id), link, "{what}");
            }
            assert_linked(store, parent, child_a, first, &what);
            assert_linked(store, parent, child_b, second, &what);
            // Everything once more: the second child's copy completes the parent's copy
            // that lacked it; the first child's copy waits for, and gets, the third parent.
            let before = store.subagents(None).expect("subagents");
            let again = store_all(store, &[second, first, PARENT], run);
            assert_linked(store, &copy_parent, &again[0], second, &what);
            assert_linked(store, &again[2], &again[1], first, &what);
            assert_eq!(child_sessions(store, &again[2]).len(), 1, "{what}");
            for link in &before {
                assert_eq!(&subagent(store, &link.id), link, "{what}");
            }
            for session in [parent, &copy_parent, &again[2]] {
                let names = child_sessions(store, session);
                let mut distinct: Vec<&String> = names.values().collect();
                distinct.sort();
                distinct.dedup();
                assert_eq!(distinct.len(), names.len(), "{what}");
                for (call, child) in &names {
                    let child = subagent(store, &SessionId::new(child.as_str()));
                    assert_eq!(child.parent.as_ref(), Some(session), "{what}");
                    assert_eq!(child.parent_tool_use_id.as_ref(), Some(call), "{what}");
                }
            }
        }
    }
}

/// `session-store import` of a folder (nested as Codex nests its rollouts by date) and of
/// several files is one import run: each rollout a session, the links made whatever the
/// files' order, every export passing; a run with one refused file stores nothing and says
/// which file it was.
#[test]
fn the_cli_imports_a_folder_or_several_files_in_one_run_with_their_links() {
    for parent_name in ["a-parent.jsonl", "z-parent.jsonl"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let folder = dir.path().join("sessions");
        let nested = folder.join("2025/10/14");
        std::fs::create_dir_all(&nested).expect("folders");
        let mut names = vec![(PARENT, nested.join(parent_name))];
        for (path, _) in CODEX_CHILDREN {
            let name = std::path::Path::new(path).file_name().expect("name");
            names.push((path, nested.join(name)));
        }
        for (path, copy) in &names {
            std::fs::copy(path, copy).expect("copy");
        }
        // A hidden file (a desktop's folder notes) is no transcript and is left out.
        std::fs::write(nested.join(".DS_Store"), [0u8, 1, 2]).expect("hidden");
        for backend in crate::backends::backends() {
            let db = backend.location();
            let what = format!("{} {parent_name}", backend.name);
            let printed: Value = serde_json::from_str(&cli(
                &db,
                &["import", "--json", folder.to_str().expect("utf-8")],
            ))
            .expect("json");
            let printed = printed.as_array().expect("an array");
            // The files in name order, a session each.
            let mut order: Vec<&(&str, std::path::PathBuf)> = names.iter().collect();
            order.sort_by(|a, b| a.1.cmp(&b.1));
            assert_eq!(printed.len(), order.len(), "{what}");
            let by_path: BTreeMap<&str, SessionId> = order
                .iter()
                .zip(printed)
                .map(|((path, _), object)| {
                    assert_eq!(object["format"], "codex", "{what}");
                    let id = object["session"].as_str().expect("session");
                    (*path, SessionId::new(id))
                })
                .collect();
            let store = &backend.store;
            let parent = &by_path[PARENT];
            let mut shown = Vec::new();
            for (path, _) in CODEX_CHILDREN {
                assert_linked(store, parent, &by_path[path], path, &what);
                let call = subagent(store, &by_path[path]).parent_tool_use_id;
                shown.push((by_path[path].clone(), call));
            }
            assert_shown(&db, parent, &shown);
            for session in by_path.values() {
                assert_exports_pass(store, session);
            }
            // Two files named one by one, the child first: linked as well.
            let child = names[1].1.to_str().expect("utf-8");
            let parent_file = names[0].1.to_str().expect("utf-8");
            let ids = cli(&db, &["import", child, parent_file]);
            let ids: Vec<SessionId> = ids.lines().map(SessionId::new).collect();
            assert_eq!(ids.len(), 2, "{what}");
            assert_linked(store, &ids[1], &ids[0], CODEX_CHILDREN[0].0, &what);
            // One refused file among them: nothing of the run is stored.
            let before = store.sessions().expect("sessions").len();
            let broken = dir.path().join("broken.jsonl");
            std::fs::write(&broken, "{\"type\": \"session_meta\"\n").expect("write");
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_session-store"))
                .args(["--db", &db, "import", "--format", "codex"])
                .args([parent_file, child, broken.to_str().expect("utf-8")])
                .output()
                .expect("run");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{what}: {stderr}");
            assert!(stderr.contains("broken.jsonl"), "{what}: {stderr}");
            assert_eq!(store.sessions().expect("sessions").len(), before, "{what}");
        }
    }
}

/// One import run is one transaction: a refused input, first, in the middle or last, leaves
/// nothing of the others behind, on both engines.
#[test]
fn an_import_run_with_a_refused_input_stores_nothing() {
    let broken = "{\"type\": \"session_meta\", \"payload\": {\"id\": \"x\"}}\n{\"type\": \"response_item\", \"payload\": {\"type\": \"function_call_output\", \"call_id\": \"nobody\", \"output\": 1}}\n{";
    for backend in crate::backends::backends() {
        let store = &backend.store;
        for at in 0..3 {
            let mut texts = vec![read(PARENT), read(CODEX_CHILDREN[0].0)];
            texts.insert(at, broken.to_owned());
            let inputs = texts
                .into_iter()
                .map(|text| (Format::Codex, std::io::Cursor::new(text.into_bytes())))
                .collect();
            let refused = store.import_readers_as(inputs, None);
            assert!(
                matches!(refused, Err(session_store::Error::Import(_))),
                "{} at {at}: {refused:?}",
                backend.name
            );
            assert_eq!(store.sessions().expect("sessions"), [], "{}", backend.name);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// The links do not depend on the order of the rollouts nor on how they are grouped into
    /// import runs (each run one transaction): any order, any grouping, the same tree.
    #[test]
    fn codex_links_are_the_same_for_any_order_and_grouping(
        order in Just(
            std::iter::once(PARENT)
                .chain(CODEX_CHILDREN.iter().map(|(path, _)| *path))
                .collect::<Vec<&str>>()
        ).prop_shuffle(),
        cuts in prop::collection::vec(any::<bool>(), 4),
        streamed in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path().join("p.db")).expect("open");
        let mut by_path: BTreeMap<&str, SessionId> = BTreeMap::new();
        let mut run: Vec<&str> = Vec::new();
        for (at, path) in order.iter().enumerate() {
            if cuts[at] && !run.is_empty() {
                let how = if streamed { Storing::Streamed } else { Storing::OneRun };
                by_path.extend(run.iter().copied().zip(store_all(&store, &run, how)));
                run.clear();
            }
            run.push(path);
        }
        by_path.extend(run.iter().copied().zip(store_all(&store, &run, Storing::OneRun)));
        let parent = &by_path[PARENT];
        for (path, _) in CODEX_CHILDREN {
            assert_linked(&store, parent, &by_path[path], path, &format!("{order:?} {cuts:?}"));
        }
        prop_assert_eq!(child_sessions(&store, parent).len(), 2);
    }
}

/// `path`'s rollout with its own thread id set to `thread` and its parent's to `parent`.
fn renamed(path: &str, thread: &str, parent: &str) -> String {
    let mut out = String::new();
    for mut line in lines(path) {
        let spawn = &mut line["payload"]["source"]["subagent"]["thread_spawn"];
        if !spawn.is_null() {
            spawn["parent_thread_id"] = Value::from(parent);
            line["payload"]["id"] = Value::from(thread);
        }
        out.push_str(&line.to_string());
        out.push('\n');
    }
    out
}

/// The sessions' parents, each chain walked up: a chain that comes back to a session is a
/// circle.
fn assert_no_circle(store: &Store, sessions: &[SessionId], what: &str) {
    for start in sessions {
        let mut seen = vec![start.clone()];
        let mut at = subagent(store, start).parent;
        while let Some(parent) = at {
            assert!(
                !seen.contains(&parent),
                "{what}: {start} is its own ancestor"
            );
            seen.push(parent.clone());
            at = store
                .subagents(None)
                .expect("subagents")
                .into_iter()
                .find(|s| s.id == parent)
                .and_then(|s| s.parent);
        }
    }
}

/// Stores the rollouts `texts` in order, as `run` says.
fn store_texts(store: &Store, texts: &[String], run: Storing) -> Vec<SessionId> {
    let reader = |text: &String| std::io::Cursor::new(text.clone().into_bytes());
    match run {
        Storing::Whole => texts
            .iter()
            .map(|text| {
                let imported = import_transcript(Format::Codex, text).expect("import");
                store.import(&imported).expect("store").session
            })
            .collect(),
        Storing::Streamed => texts
            .iter()
            .map(|text| {
                store
                    .import_reader(Format::Codex, reader(text))
                    .expect("streamed")
                    .session
            })
            .collect(),
        Storing::OneRun => store
            .import_readers_as(
                texts.iter().map(|t| (Format::Codex, reader(t))).collect(),
                None,
            )
            .expect("one run")
            .into_iter()
            .map(|s| s.session)
            .collect(),
    }
}

#[test]
fn codex_links_never_make_a_session_its_own_ancestor() {
    const A: &str = "0199b2a1-aaaa-7e11-8b3c-2d4e6f708192";
    const B: &str = "0199b2a1-bbbb-7e11-8b3c-2d4e6f708192";
    let finished = "tests/fixtures/codex_subagents/child-finished.jsonl";
    let interrupted = "tests/fixtures/codex_subagents/child-interrupted.jsonl";
    // Each pair names the other's thread as its parent; a lone log names its own thread,
    // stored twice; three logs name each other round.
    let cases: Vec<(&str, Vec<String>)> = vec![
        (
            "two logs each the other's parent",
            vec![renamed(finished, A, B), renamed(interrupted, B, A)],
        ),
        (
            "the same two the other way round",
            vec![renamed(interrupted, B, A), renamed(finished, A, B)],
        ),
        (
            "a log naming its own thread, twice",
            vec![renamed(finished, A, A), renamed(finished, A, A)],
        ),
        (
            "three logs round",
            vec![
                renamed(finished, A, B),
                renamed(interrupted, B, "0199b2a1-cccc-7e11-8b3c-2d4e6f708192"),
                renamed(finished, "0199b2a1-cccc-7e11-8b3c-2d4e6f708192", A),
            ],
        ),
    ];
    for run in RUNS {
        for (case, texts) in &cases {
            for backend in crate::backends::backends() {
                let store = &backend.store;
                let what = format!("{} {run:?} {case}", backend.name);
                let sessions = store_texts(store, texts, run);
                assert_no_circle(store, &sessions, &what);
                if case.contains("own thread") {
                    for session in &sessions {
                        assert_eq!(subagent(store, session).parent, None, "{what}");
                    }
                }
                for session in &sessions {
                    assert_exports_pass(store, session);
                }
            }
        }
    }
}
