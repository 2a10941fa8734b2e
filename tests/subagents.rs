//! Sub-agents of Claude Code logs: a main log with its sub-agent's sidechain lines (the
//! layout Claude Code wrote before it moved them to `subagents/agent-*.jsonl`, rebuilt here
//! from the fixtures' own files) imports the sidechain as a child session whose
//! `parent_tool_use_id` names the Task call that spawned it and whose `state` says how that
//! call ended. The expectations are read from the JSON here, not from the importer.

use serde_json::Value;
use session_store::import::{import as import_transcript, Format};
use session_store::{Part, SessionId, Store, SubagentState};

/// (main log, sidechain file) pairs of the fixtures.
const PAIRS: &[(&str, &str)] = &[
    (
        "tests/fixtures/transcripts/spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl",
        "tests/fixtures/transcripts/spotter/258c7280-ae70-4798-800f-63464d01a85d/subagents/agent-a881341.jsonl",
    ),
    (
        "tests/fixtures/transcripts/spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl",
        "tests/fixtures/transcripts/spotter/258c7280-ae70-4798-800f-63464d01a85d/subagents/agent-acompact-fffbd0.jsonl",
    ),
    (
        "tests/fixtures/transcripts/fasthooks/sample_main_transcript.jsonl",
        "tests/fixtures/transcripts/fasthooks/sample_agent_sidechain.jsonl",
    ),
];

pub(crate) fn lines(path: &str) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("fixture")
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The Task call whose prompt is the sidechain's first user text, and how the main log
/// answered it: (call id, Some(is_error) when answered).
fn spawning_call(main: &[Value], side: &[Value]) -> Option<(String, Option<bool>)> {
    let first = side.iter().find(|l| l["type"] == "user")?;
    let prompt = match &first["message"]["content"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks.iter().find_map(|b| b["text"].as_str())?.to_owned(),
        _ => return None,
    };
    let blocks = || {
        main.iter()
            .filter_map(|l| l["message"]["content"].as_array())
            .flatten()
    };
    let call = blocks().find(|b| {
        b["type"] == "tool_use" && b["input"]["prompt"].as_str() == Some(prompt.as_str())
    })?;
    let id = call["id"].as_str()?.to_owned();
    let answer = blocks()
        .find(|b| b["type"] == "tool_result" && b["tool_use_id"].as_str() == Some(id.as_str()))
        .map(|b| b["is_error"] == true);
    Some((id, answer))
}

#[test]
fn sidechains_become_children_linked_to_their_task_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("s.db")).expect("open");
    let mut linked = 0;
    for (main_path, side_path) in PAIRS {
        let text = format!(
            "{}\n{}",
            std::fs::read_to_string(main_path).expect("main").trim_end(),
            std::fs::read_to_string(side_path).expect("side")
        );
        let (main, side) = (lines(main_path), lines(side_path));
        let expected = spawning_call(&main, &side);
        let imported = import_transcript(Format::ClaudeCode, &text).expect("import");
        let sessions = store.import(&imported).expect("store");
        assert_eq!(sessions.children.len(), 1, "{main_path}");
        let children = store.subagents(Some(&sessions.session)).expect("subagents");
        assert_eq!(children.len(), 1, "{main_path}");
        let child = &children[0];
        assert_eq!(child.id, sessions.children[0]);
        assert_eq!(child.parent.as_ref(), Some(&sessions.session));
        let state = match &expected {
            Some((id, answer)) => {
                linked += 1;
                assert_eq!(
                    child.parent_tool_use_id.as_deref(),
                    Some(id.as_str()),
                    "{main_path}"
                );
                match answer {
                    Some(false) => SubagentState::Completed,
                    Some(true) => SubagentState::Incomplete,
                    None => SubagentState::Active,
                }
            }
            None => {
                assert_eq!(child.parent_tool_use_id, None, "{main_path}");
                let last = side
                    .iter()
                    .rev()
                    .find(|l| l["type"] == "user" || l["type"] == "assistant");
                let answered = last.is_some_and(|l| {
                    l["type"] == "assistant"
                        && l["message"]["content"]
                            .as_array()
                            .is_some_and(|b| b.iter().all(|b| b["type"] != "tool_use"))
                });
                if answered {
                    SubagentState::Completed
                } else {
                    SubagentState::Incomplete
                }
            }
        };
        assert_eq!(child.state, Some(state), "{main_path}");
        // The parent's call names its child session too, and `show` lists it under it.
        if let Some((id, _)) = &expected {
            let messages = store.messages(&sessions.session).expect("messages");
            let call = messages
                .iter()
                .flat_map(|m| &m.parts)
                .find(|p| matches!(p, Part::ToolUse { id: call, .. } if call == id))
                .expect("the call is stored");
            let metadata = serde_json::to_string(call).expect("json");
            assert!(metadata.contains(child.id.as_str()), "{metadata}");
            let shown = show(&dir.path().join("s.db"), &sessions.session);
            let at_call = shown.find(id.as_str()).expect("call shown");
            let at_child = shown
                .find(&format!("sub-agent {}", child.id.as_str()))
                .expect("child shown");
            assert!(at_child > at_call, "the child is listed under its call");
        }
        assert!(tree(&dir.path().join("s.db")).contains(&format!(
            "{}\tsub-agent\tspawned_by={}\tstate={}",
            child.id.as_str(),
            child.parent_tool_use_id.as_deref().unwrap_or("-"),
            state.as_str()
        )));
    }
    assert_eq!(linked, 1, "the spotter pair links its Task call");
    // A session nobody spawned is no sub-agent.
    assert_eq!(store.subagents(None).expect("all").len(), PAIRS.len());
}

pub(crate) fn cli(db: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_session-store"))
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn show(db: &std::path::Path, session: &SessionId) -> String {
    cli(db, &["show", session.as_str(), "--full"])
}

fn tree(db: &std::path::Path) -> String {
    cli(db, &["sessions", "--tree"])
}

#[test]
fn a_sub_agent_stored_apart_is_linked_as_the_whole_log_import_links_it() {
    for backend in crate::backends::backends() {
        let store = &backend.store;
        for (main_path, side_path) in PAIRS {
            let read = |path: &str| std::fs::read_to_string(path).expect("fixture");
            let whole = format!("{}\n{}", read(main_path).trim_end(), read(side_path));
            let imported = import_transcript(Format::ClaudeCode, &whole).expect("import");
            let sessions = store.import(&imported).expect("store");
            let expected = store.subagents(Some(&sessions.session)).expect("subagents");
            // The same two logs as two sessions of their own (a mirror's main key and its
            // `subagents/*` subpath), then linked.
            let import_one = |path: &str| {
                let imported = import_transcript(Format::ClaudeCode, &read(path)).expect("import");
                store.import(&imported).expect("store").session
            };
            let (main, side) = (import_one(main_path), import_one(side_path));
            let linked = store.link_subagent(&main, &side).expect("link");
            assert_eq!(linked.id, side, "{} {main_path}", backend.name);
            assert_eq!(linked.parent.as_ref(), Some(&main));
            assert_eq!(
                (&linked.parent_tool_use_id, linked.state),
                (&expected[0].parent_tool_use_id, expected[0].state),
                "{} {main_path}",
                backend.name
            );
            assert_eq!(
                store.subagents(Some(&main)).expect("subagents"),
                std::slice::from_ref(&linked)
            );
            // The calls' parts stay as the writer stored them (a mirror compares them with
            // its source); linking again changes nothing; a second copy of the sub-agent's
            // log finds its call taken and is linked to the parent alone; an unknown parent
            // or child is refused.
            let parts = store.messages(&main).expect("messages");
            assert_eq!(store.link_subagent(&main, &side).expect("again"), linked);
            assert_eq!(store.messages(&main).expect("messages"), parts);
            let copy = import_one(side_path);
            let second = store.link_subagent(&main, &copy).expect("copy");
            assert_eq!(second.parent.as_ref(), Some(&main));
            if linked.parent_tool_use_id.is_some() {
                assert_eq!(
                    second.parent_tool_use_id, None,
                    "{} {main_path}",
                    backend.name
                );
            }
            assert_eq!(store.messages(&main).expect("messages"), parts);
            assert_eq!(store.link_subagent(&main, &side).expect("again"), linked);
            let nobody = SessionId::new("nobody");
            for (parent, child) in [(&nobody, &side), (&main, &nobody)] {
                assert!(matches!(
                    store.link_subagent(parent, child),
                    Err(session_store::Error::UnknownSession(_))
                ));
            }
        }
    }
}

/// Hand-made Codex rollouts of sub-agents, shaped as the Codex sources write them (see the
/// comment of `import/codex.rs`): (file, whether its first lines are copied from the parent).
pub(crate) const CODEX_CHILDREN: &[(&str, bool)] = &[
    ("tests/fixtures/codex_subagents/child-finished.jsonl", false),
    (
        "tests/fixtures/codex_subagents/child-interrupted.jsonl",
        false,
    ),
    ("tests/fixtures/codex_subagents/child-forked.jsonl", true),
];

/// The rollout's own lines: from its `thread_spawn` `session_meta` on.
pub(crate) fn own_lines(rollout: &[Value]) -> &[Value] {
    let own = rollout
        .iter()
        .position(|l| !l["payload"]["source"]["subagent"]["thread_spawn"].is_null())
        .expect("a thread_spawn session_meta");
    &rollout[own..]
}

/// The state a child rollout ends in, read from its JSON: `completed` when its last item is
/// an assistant message, else `incomplete` (no parent is stored to say more).
pub(crate) fn codex_state(rollout: &[Value]) -> SubagentState {
    let last = own_lines(rollout)
        .iter()
        .rev()
        .find(|l| l["type"] == "response_item")
        .expect("an item");
    if last["payload"]["type"] == "message" && last["payload"]["role"] == "assistant" {
        SubagentState::Completed
    } else {
        SubagentState::Incomplete
    }
}

/// The texts of a rollout's message items.
fn codex_texts(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l["type"] == "response_item" && l["payload"]["type"] == "message")
        .flat_map(|l| {
            l["payload"]["content"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|c| c["text"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn codex_sub_agent_rollouts_record_their_state_on_both_engines() {
    use session_store::request::{check_anthropic, check_gemini, check_openai, check_responses};
    use session_store::{ExportOptions, Provider};
    for backend in crate::backends::backends() {
        let store = &backend.store;
        let mut expected = Vec::new();
        for (path, _) in CODEX_CHILDREN {
            let text = std::fs::read_to_string(path).expect("fixture");
            let state = codex_state(&lines(path));
            let whole = store
                .import(&import_transcript(Format::Codex, &text).expect("import"))
                .expect("store");
            let streamed = store
                .import_reader(Format::Codex, std::io::Cursor::new(text.as_bytes()))
                .expect("streamed");
            for session in [whole.session, streamed.session] {
                expected.push((session.clone(), state));
                let options = ExportOptions {
                    persist_latch: false,
                    ..ExportOptions::default()
                };
                for (provider, check) in [
                    (Provider::Anthropic, check_anthropic as fn(&Value) -> Vec<_>),
                    (Provider::OpenAi, check_openai),
                    (Provider::Responses, check_responses),
                    (Provider::Gemini, check_gemini),
                ] {
                    let body = store
                        .export_now(&session, provider, &options)
                        .expect("export");
                    let violations = check(&body);
                    assert!(
                        violations.is_empty(),
                        "{path} as {provider}: {violations:#?}"
                    );
                }
            }
        }
        let mut found: Vec<(SessionId, SubagentState)> = store
            .subagents(None)
            .expect("subagents")
            .into_iter()
            .map(|s| {
                assert!(
                    s.parent.is_none() && s.parent_tool_use_id.is_none(),
                    "{s:?}"
                );
                (s.id, s.state.expect("a state"))
            })
            .collect();
        found.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        expected.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        assert_eq!(found, expected, "{}", backend.name);
        assert!(
            expected.iter().any(|(_, s)| *s == SubagentState::Completed)
                && expected
                    .iter()
                    .any(|(_, s)| *s == SubagentState::Incomplete),
            "the fixtures cover both ends"
        );
    }
}

#[test]
fn codex_rollouts_of_no_sub_agent_record_no_state() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("s.db")).expect("open");
    let folder = crate::util::transcripts().join("agentcmd/codex");
    let mut imported = 0;
    for entry in std::fs::read_dir(folder).expect("fixtures") {
        let text = std::fs::read_to_string(entry.expect("entry").path()).expect("fixture");
        store
            .import(&import_transcript(Format::Codex, &text).expect("import"))
            .expect("store");
        imported += 1;
    }
    assert!(imported >= 2);
    assert_eq!(store.subagents(None).expect("subagents"), []);
}

#[test]
fn a_forked_codex_child_keeps_only_its_own_records() {
    for (path, forked) in CODEX_CHILDREN {
        let rollout = lines(path);
        let own = own_lines(&rollout);
        let imported = import_transcript(
            Format::Codex,
            &std::fs::read_to_string(path).expect("fixture"),
        )
        .expect("import");
        let texts: Vec<String> = imported
            .messages
            .iter()
            .flat_map(|m| &m.parts)
            .filter_map(|p| match p {
                Part::Text { text, .. } => Some(text.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(texts, codex_texts(own), "{path}");
        if *forked {
            let copied = codex_texts(&rollout[..rollout.len() - own.len()]);
            assert!(
                !copied.is_empty(),
                "{path}: the fixture copies parent records"
            );
            assert!(
                copied.iter().all(|t| !texts.contains(t)),
                "{path}: the parent's records were stored as the child's"
            );
            let calls = imported
                .messages
                .iter()
                .flat_map(|m| &m.parts)
                .filter(|p| matches!(p, Part::ToolUse { .. }))
                .count();
            assert_eq!(calls, 0, "{path}: the parent's spawn_agent call was kept");
        }
        let origin = imported.subagent.expect("a sub-agent");
        assert_eq!(
            origin.parent_thread_id.as_deref(),
            own[0]["payload"]["source"]["subagent"]["thread_spawn"]["parent_thread_id"].as_str(),
            "{path}"
        );
    }
}

/// The call of a parent rollout whose `spawn_agent` output names `thread` as its agent.
pub(crate) fn codex_spawning_call(parent: &[Value], thread: &str) -> Option<String> {
    parent.iter().find_map(|l| {
        let payload = &l["payload"];
        let output: Value = serde_json::from_str(payload["output"].as_str()?).ok()?;
        (payload["type"] == "function_call_output" && output["agent_id"] == thread)
            .then(|| payload["call_id"].as_str().map(str::to_owned))
            .flatten()
    })
}

#[test]
fn a_codex_sub_agent_finds_its_stored_parent_by_thread_id() {
    let parent_path = "tests/fixtures/codex_subagents/parent.jsonl";
    let parent_lines = lines(parent_path);
    let parent_text = std::fs::read_to_string(parent_path).expect("parent");
    let mut with_call = 0;
    for streamed in [false, true] {
        // A fresh database each way: the parent stored twice would be two sessions of one thread.
        for backend in crate::backends::backends() {
            let store = &backend.store;
            let import = |text: &str| {
                if streamed {
                    store
                        .import_reader(Format::Codex, std::io::Cursor::new(text.as_bytes()))
                        .expect("streamed")
                        .session
                } else {
                    let imported = import_transcript(Format::Codex, text).expect("import");
                    store.import(&imported).expect("store").session
                }
            };
            let parent = import(&parent_text);
            for (path, _) in CODEX_CHILDREN {
                let rollout = lines(path);
                let own = own_lines(&rollout);
                let thread = own[0]["payload"]["id"].as_str().expect("thread id");
                let named_parent = own[0]["payload"]["source"]["subagent"]["thread_spawn"]
                    ["parent_thread_id"]
                    .as_str();
                assert_eq!(named_parent, parent_lines[0]["payload"]["id"].as_str());
                let call = codex_spawning_call(&parent_lines, thread);
                with_call += usize::from(call.is_some());
                let child = import(&std::fs::read_to_string(path).expect("child"));
                let linked = store.subagents(Some(&parent)).expect("subagents");
                let found = linked.iter().find(|s| s.id == child).unwrap_or_else(|| {
                    panic!(
                        "{}: {path} not linked: {:?}",
                        backend.name,
                        store.subagents(None)
                    )
                });
                assert_eq!(found.parent.as_ref(), Some(&parent), "{path}");
                assert_eq!(found.parent_tool_use_id, call, "{}: {path}", backend.name);
                assert_eq!(found.state, Some(codex_state(&rollout)), "{path}");
            }
        }
    }
    assert!(with_call >= 2, "the fixtures link calls");
}
