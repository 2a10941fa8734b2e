//! OpenAI Responses, Gemini and Codex rollouts against real files: the failures guarded are
//! a call or output of a real Codex rollout lost on import, a body that does not come back
//! the same after export, import and export again (signatures byte-exact), and a body one of
//! the four providers would reject for a session recorded with any of them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::util::session_store;
use serde_json::{json, Value};
use session_store::{
    import::{detect as detect_format, import as import_transcript, Format},
    request::check,
};
use session_store::{ExportOptions, Message, NewMessage, Part, Provider, Role, SessionId, Store};

fn codex_rollouts() -> Vec<PathBuf> {
    let dir = crate::util::transcripts().join("agentcmd/codex");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("codex folder")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    files
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).expect("fixture readable")
}

/// Calls and outputs a rollout holds, by id, and its reasoning items' encrypted content.
#[derive(Debug, Default, PartialEq)]
struct Inventory {
    calls: HashMap<String, String>,
    outputs: HashMap<String, String>,
    encrypted: Vec<String>,
}

impl Inventory {
    fn of_rollout(text: &str) -> Self {
        let mut inventory = Inventory::default();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let value: Value = serde_json::from_str(line).expect("rollout line");
            if value["type"] != "response_item" {
                continue;
            }
            let item = &value["payload"];
            let id = item["call_id"].as_str().unwrap_or_default().to_owned();
            match item["type"].as_str().unwrap_or_default() {
                "function_call" | "custom_tool_call" | "local_shell_call" => {
                    inventory
                        .calls
                        .insert(id, item["name"].as_str().unwrap_or("local_shell").into());
                }
                "function_call_output" | "custom_tool_call_output" | "local_shell_call_output" => {
                    inventory
                        .outputs
                        .insert(id, item["output"].as_str().unwrap_or_default().into());
                }
                "reasoning" => inventory.encrypted.push(
                    item["encrypted_content"]
                        .as_str()
                        .unwrap_or_default()
                        .into(),
                ),
                _ => {}
            }
        }
        inventory
    }

    fn of_stored(messages: &[Message]) -> Self {
        let mut inventory = Inventory::default();
        for part in messages.iter().flat_map(|m| &m.parts) {
            match part {
                Part::ToolUse { id, name, .. } => {
                    inventory.calls.insert(id.clone(), name.clone());
                }
                Part::ToolResult {
                    tool_use_id,
                    content,
                    ..
                } => {
                    inventory
                        .outputs
                        .insert(tool_use_id.clone(), content.clone());
                }
                Part::Reasoning {
                    provider_metadata, ..
                } => inventory.encrypted.push(
                    provider_metadata
                        .as_ref()
                        .and_then(|m| m.pointer("/openai/encrypted_content"))
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .into(),
                ),
                _ => {}
            }
        }
        inventory
    }
}

fn options() -> ExportOptions {
    ExportOptions {
        persist_latch: false,
        thinking: session_store::request::ThinkingConfig {
            keep_recent: usize::MAX,
            ..session_store::request::ThinkingConfig::default()
        },
        ..ExportOptions::default()
    }
}

fn export(store: &Store, session: &SessionId, provider: Provider) -> Value {
    export_for(store, session, provider, None)
}

fn export_for(
    store: &Store,
    session: &SessionId,
    provider: Provider,
    model: Option<&str>,
) -> Value {
    let options = ExportOptions {
        model: model.map(str::to_owned),
        ..options()
    };
    let request = store
        .export_request(session, provider, session_store::clock(), &options)
        .expect("export");
    assert_eq!(request.violations, vec![], "{provider}: {:#}", request.body);
    assert_eq!(check(provider, &request.body), vec![], "{provider}");
    request.body
}

/// The `encrypted_content` of every reasoning item of a Responses body, in order.
fn encrypted_in(body: &Value) -> Vec<String> {
    body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|item| item["type"] == "reasoning")
        .map(|item| {
            item["encrypted_content"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

#[test]
fn codex_rollouts_import_with_every_call_output_and_reasoning_in_the_source() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("s.db")).expect("open");
    let rollouts = codex_rollouts();
    assert_eq!(rollouts.len(), 2, "{rollouts:?}");
    let mut total_calls = 0;
    for path in rollouts {
        let text = read(&path);
        assert_eq!(
            detect_format(&text),
            Ok(Format::Codex),
            "{}",
            path.display()
        );
        let source = Inventory::of_rollout(&text);
        let imported = import_transcript(Format::Codex, &text).expect("imports");
        assert!(imported.tombstoned.is_empty(), "{:?}", imported.tombstoned);
        assert_eq!(imported.orphans_as_text, 0);
        let session = store.import(&imported).expect("stored").session;
        let messages = store.messages(&session).expect("read back");
        let stored = Inventory::of_stored(&messages);
        assert_eq!(stored, source, "{}", path.display());
        total_calls += source.calls.len();
        // Every format accepts the session; the Responses body replays the reasoning, byte
        // for byte and in order (the last item of an aborted step has no follower, and goes).
        let mut replayed = None;
        for provider in Provider::ALL {
            let body = export(&store, &session, provider);
            if provider == Provider::Responses {
                replayed = Some(encrypted_in(&body));
            }
        }
        let replayed = replayed.expect("responses body");
        assert!(!replayed.is_empty());
        let mut source_order = source.encrypted.iter();
        for blob in &replayed {
            assert!(
                source_order.any(|s| s == blob),
                "{}: reasoning replayed out of order or changed",
                path.display()
            );
        }
        assert!(
            replayed.len() + 2 >= source.encrypted.len(),
            "{}",
            path.display()
        );
    }
    assert_eq!(total_calls, 123 + 16, "the counts SOURCES.md gives");
}

/// A session written by hand with every kind of part, to round-trip through each format.
fn mixed_session(store: &Store) -> SessionId {
    let session = store.create_session().expect("session");
    let gemini_call = Part::ToolUse {
        id: "g1".into(),
        name: "lookup".into(),
        input: json!({"q": "x"}),
        provider_metadata: Some(json!({"gemini": {"thoughtSignature": "R2VtaW5pU2ln"}})),
    };
    store
        .append_batch(
            &session,
            vec![
                NewMessage::system("be brief"),
                NewMessage::user("first question"),
                NewMessage::assistant(vec![
                    Part::reasoning(
                        "I should look it up",
                        Some(json!({"openai": {"encrypted_content": "gAAAAB-enc", "id": "rs_1"}})),
                    ),
                    Part::text("Looking."),
                    Part::tool_use("c1", "shell", json!({"command": ["ls"]})),
                    Part::tool_use("c2", "shell", json!({"command": ["pwd"]})),
                ]),
                NewMessage::tool(vec![
                    Part::tool_result("c2", "/tmp"),
                    Part::tool_error("c1", "denied"),
                ]),
                NewMessage::assistant(vec![Part::text("Done.")]),
                NewMessage::new(
                    Role::User,
                    vec![
                        Part::text("second"),
                        Part::Image {
                            source: json!({"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}),
                            title: None,
                            provider_metadata: None,
                        },
                    ],
                ),
                NewMessage::assistant(vec![
                    Part::Reasoning {
                        text: "thought summary".into(),
                        provider_metadata: Some(json!({"gemini": {"thought": true}})),
                    },
                    gemini_call,
                    Part::tool_use("g2", "lookup", json!({"q": "y"})),
                ]),
                NewMessage::tool(vec![
                    Part::tool_result("g1", "one"),
                    Part::tool_result("g2", "two"),
                ]),
                NewMessage::assistant(vec![
                    Part::Text {
                        text: "All found.".into(),
                        provider_metadata: Some(
                            json!({"gemini": {"thoughtSignature": "VGV4dFNpZw=="}}),
                        ),
                    },
                    Part::Reasoning {
                        text: String::new(),
                        provider_metadata: Some(
                            json!({"gemini": {"text": true, "thoughtSignature": "RW1wdHlTaWc="}}),
                        ),
                    },
                ]),
            ],
        )
        .expect("append");
    session
}

#[test]
fn export_import_export_gives_the_same_body_for_responses_and_gemini() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("s.db")).expect("open");
    let session = mixed_session(&store);
    for (provider, format) in [
        (Provider::Responses, Format::Responses),
        (Provider::Gemini, Format::Gemini),
    ] {
        let first = export(&store, &session, provider);
        let text = first.to_string();
        assert_eq!(detect_format(&text), Ok(format));
        let again = store
            .import(&import_transcript(format, &text).expect("imports its own export"))
            .expect("stored")
            .session;
        let second = export(&store, &again, provider);
        assert_eq!(second, first, "{provider}");
        assert_eq!(second.to_string(), text, "{provider}: byte for byte");
    }
    // Signatures sit on their parts, byte for byte.
    let gemini = export(&store, &session, Provider::Gemini);
    let text = gemini.to_string();
    for signature in ["R2VtaW5pU2ln", "VGV4dFNpZw==", "RW1wdHlTaWc="] {
        assert!(
            text.contains(&format!("\"thoughtSignature\":\"{signature}\"")),
            "{text}"
        );
    }
    let responses = export(&store, &session, Provider::Responses);
    assert_eq!(encrypted_in(&responses), ["gAAAAB-enc"]);
    assert_eq!(
        responses["instructions"],
        Value::Null,
        "an Anthropic-style system stays in place"
    );
}

#[test]
fn a_codex_rollout_exported_as_responses_or_gemini_round_trips() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("s.db")).expect("open");
    let path = &codex_rollouts()[1];
    let session = store
        .import(&import_transcript(Format::Codex, &read(path)).expect("imports"))
        .expect("stored")
        .session;
    for (provider, format) in [
        (Provider::Responses, Format::Responses),
        (Provider::Gemini, Format::Gemini),
    ] {
        let first = export(&store, &session, provider);
        let again = store
            .import(&import_transcript(format, &first.to_string()).expect("imports"))
            .expect("stored")
            .session;
        assert_eq!(export(&store, &again, provider), first, "{provider}");
    }
}

#[test]
fn a_codex_compaction_marker_becomes_a_store_compaction() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("s.db")).expect("open");
    let line = |kind: &str, payload: Value| {
        json!({"timestamp": "2025-09-25T02:12:23.966Z", "type": kind, "payload": payload})
            .to_string()
    };
    let user = |text: &str| {
        line(
            "response_item",
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}),
        )
    };
    let answer = |text: &str| {
        line(
            "response_item",
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}),
        )
    };
    let text = [
        user("one"),
        answer("1"),
        user("two"),
        answer("2"),
        line("compacted", json!({"message": "we counted to two"})),
        user("three"),
        answer("3"),
    ]
    .join("\n");
    let session = store
        .import(&import_transcript(Format::Codex, &text).expect("imports"))
        .expect("stored")
        .session;
    let history = store.provider_history(&session).expect("history");
    assert_eq!(
        history.summary.map(|s| s.text).as_deref(),
        Some("we counted to two")
    );
    assert_eq!(history.messages.len(), 2);
    let body = export(&store, &session, Provider::Responses);
    assert!(body.to_string().contains("we counted to two"));
    assert!(!body.to_string().contains("\"one\""));
}

#[test]
fn the_cli_imports_codex_and_exports_responses_and_gemini() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("s.db");
    let path = &codex_rollouts()[1];
    let output = session_store(&db, &["import", path.to_str().expect("utf-8")]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let id = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    for (format, provider) in [
        ("responses", Provider::Responses),
        ("gemini", Provider::Gemini),
    ] {
        let output = session_store(&db, &["export", &id, "--format", format]);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let body: Value = serde_json::from_slice(&output.stdout).expect("JSON");
        assert_eq!(check(provider, &body), vec![]);
        let file = dir.path().join(format!("{format}.json"));
        std::fs::write(&file, &output.stdout).expect("write");
        let output = session_store(
            &db,
            &["import", "--format", format, file.to_str().expect("utf-8")],
        );
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let output = session_store(
        &db,
        &[
            "export",
            &id,
            "--format",
            "anthropic",
            "--model",
            "anthropic/claude-sonnet-4-5",
        ],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let role_check: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(role_check["messages"][0]["role"], "user");
    // A model that is not `provider/model` is a bad argument.
    let output = session_store(
        &db,
        &["export", &id, "--format", "gemini", "--model", "gemini-3"],
    );
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn a_codex_rollouts_reasoning_goes_only_to_the_model_that_wrote_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("s.db")).expect("open");
    let session = store
        .import(&import_transcript(Format::Codex, &read(&codex_rollouts()[1])).expect("imports"))
        .expect("stored")
        .session;
    let messages = store.messages(&session).expect("read");
    assert!(messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .all(|m| m.model.as_deref() == Some("openai/gpt-5-codex")));
    let own = export_for(
        &store,
        &session,
        Provider::Responses,
        Some("openai/gpt-5-codex"),
    );
    assert!(!encrypted_in(&own).is_empty());
    assert_eq!(
        own,
        export(&store, &session, Provider::Responses),
        "the latest model is assumed"
    );
    let other = export_for(&store, &session, Provider::Responses, Some("openai/gpt-5"));
    assert!(
        encrypted_in(&other).is_empty(),
        "another model's reasoning is not sent"
    );
    let calls = |body: &Value| {
        body["input"].as_array().map_or(0, |items| {
            items
                .iter()
                .filter(|i| i["type"] == "function_call")
                .count()
        })
    };
    assert_eq!(calls(&own), calls(&other), "only the thinking goes");
}

/// Anthropic history, then a Gemini turn, then a Responses turn: each provider's export is
/// valid, and carries the signatures of the target model only, byte for byte.
#[test]
fn switching_provider_mid_session_stays_valid() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("s.db")).expect("open");
    let session = store.create_session().expect("session");
    let claude = "anthropic/claude-sonnet-4-5";
    let gemini = "gemini/gemini-3-pro-preview";
    let gpt = "openai/gpt-5-codex";
    store
        .append_batch(
            &session,
            vec![
                NewMessage::user("list the files"),
                NewMessage::assistant(vec![
                    Part::reasoning(
                        "I will run ls",
                        Some(json!({"anthropic": {"signature": "ANTHROPIC-SIG"}})),
                    ),
                    Part::text(""),
                    Part::tool_use("toolu_1", "bash", json!({"cmd": "ls"})),
                ])
                .by_model(claude),
                NewMessage::tool(vec![Part::tool_result("toolu_1", "a b")]),
                NewMessage::assistant(vec![Part::text("a and b")]).by_model(claude),
                NewMessage::user("now count them"),
                NewMessage::assistant(vec![Part::ToolUse {
                    id: "gem_1".into(),
                    name: "bash".into(),
                    input: json!({"cmd": "ls | wc -l"}),
                    provider_metadata: Some(json!({"gemini": {"thoughtSignature": "GEMINI-SIG"}})),
                }])
                .by_model(gemini),
                NewMessage::tool(vec![Part::tool_result("gem_1", "2")]),
                NewMessage::assistant(vec![Part::text("two")]).by_model(gemini),
                NewMessage::user("and their sizes?"),
                NewMessage::assistant(vec![
                    Part::reasoning(
                        "du it",
                        Some(json!({"openai": {"encrypted_content": "OPENAI-ENC"}})),
                    ),
                    Part::tool_use("call_1", "bash", json!({"cmd": "du a b"})),
                ])
                .by_model(gpt),
                NewMessage::tool(vec![Part::tool_result("call_1", "1 2")]),
            ],
        )
        .expect("append");
    let signatures = ["ANTHROPIC-SIG", "GEMINI-SIG", "OPENAI-ENC"];
    for (target, provider, kept) in [
        (None, Provider::Responses, "OPENAI-ENC"),
        (Some(gpt), Provider::Responses, "OPENAI-ENC"),
        (Some(gemini), Provider::Gemini, "GEMINI-SIG"),
        (Some(claude), Provider::Anthropic, "ANTHROPIC-SIG"),
    ] {
        for any in Provider::ALL {
            let text = export_for(&store, &session, any, target).to_string();
            for signature in signatures.iter().filter(|s| **s != kept) {
                assert!(
                    !text.contains(signature),
                    "{any} for {target:?} sends {signature}"
                );
            }
        }
        let text = export_for(&store, &session, provider, target).to_string();
        assert!(
            text.contains(kept),
            "{provider} for {target:?} lost {kept}: {text}"
        );
    }
    // Gemini: the calls other models made carry the documented stand-in in the current turn.
    let body = export_for(&store, &session, Provider::Gemini, Some(gemini));
    assert!(body
        .to_string()
        .contains("skip_thought_signature_validator"));
}

mod any_stored_session_any_target {
    //! Property: a session written by any code (raw SQL, so the write path's refusals do not
    //! apply), its assistant messages recorded by any mix of models and signed the way each
    //! provider signs, exports a body every provider accepts, for any target model, and sends
    //! no signature another model made.
    use proptest::prelude::*;
    use serde_json::json;
    use session_store::request::{check, check_signed_by_target};
    use session_store::{ExportOptions, Provider, SessionId};

    use crate::util::temp_store;

    const MODELS: [&str; 4] = [
        "anthropic/claude-sonnet-4-5",
        "anthropic/claude-opus-4-6",
        "openai/gpt-5-codex",
        "gemini/gemini-3-pro",
    ];

    /// (kind, text, tool_use_id, tool_name, input, is_error, provider_metadata)
    type Row = (
        &'static str,
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
        bool,
        Option<String>,
    );

    fn part() -> impl Strategy<Value = Row> {
        let id = prop::sample::select(vec!["a", "b", "c", ""]).prop_map(str::to_owned);
        let signature = prop::sample::select(vec!["s1", "s2"]);
        prop_oneof![
            Just(("text", Some("hi".to_owned()), None, None, None, false, None)),
            Just(("text", Some(String::new()), None, None, None, false, None)),
            signature.clone().prop_map(|s| (
                "text",
                Some("said".to_owned()),
                None,
                None,
                None,
                false,
                Some(json!({"gemini": {"thoughtSignature": s}}).to_string())
            )),
            signature.clone().prop_map(|s| (
                "reasoning",
                Some("r".to_owned()),
                None,
                None,
                None,
                false,
                Some(json!({"anthropic": {"signature": s}}).to_string())
            )),
            signature.clone().prop_map(|s| (
                "reasoning",
                Some("r".to_owned()),
                None,
                None,
                None,
                false,
                Some(json!({"openai": {"encrypted_content": s}}).to_string())
            )),
            signature.clone().prop_map(|s| (
                "reasoning",
                Some(String::new()),
                None,
                None,
                None,
                false,
                Some(json!({"gemini": {"text": true, "thoughtSignature": s}}).to_string())
            )),
            Just((
                "redacted_reasoning",
                Some("opaque".to_owned()),
                None,
                None,
                None,
                false,
                None
            )),
            (id.clone(), prop::option::of(signature)).prop_map(|(id, s)| (
                "tool_use",
                None,
                Some(id),
                Some("bash".to_owned()),
                Some(r#"{"cmd":"ls"}"#.to_owned()),
                false,
                s.map(|s| json!({"gemini": {"thoughtSignature": s}}).to_string())
            )),
            (id, any::<bool>()).prop_map(|(id, e)| (
                "tool_result",
                Some("ok".to_owned()),
                Some(id),
                None,
                None,
                e,
                None
            )),
            Just((
                "image",
                None,
                None,
                None,
                Some(
                    json!({"type": "base64", "media_type": "image/png", "data": "AA=="})
                        .to_string()
                ),
                false,
                None
            )),
        ]
    }

    fn message() -> impl Strategy<Value = (&'static str, Option<&'static str>, Vec<Row>)> {
        (
            prop::sample::select(vec!["system", "user", "assistant", "assistant", "tool"]),
            prop::option::of(prop::sample::select(MODELS.to_vec())),
            prop::collection::vec(part(), 0..4),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn any_stored_session_exports_valid_for_any_provider_and_target_model(
            messages in prop::collection::vec(message(), 1..10),
            target in prop::option::of(prop::sample::select(MODELS.to_vec())),
        ) {
            let (_dir, store, path) = temp_store();
            let conn = rusqlite::Connection::open(&path).expect("open");
            conn.execute(
                "INSERT INTO sessions (id, created_at, updated_at) VALUES ('s', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')",
                [],
            ).expect("session");
            let mut users = 0i64;
            for (seq, (role, model, parts)) in messages.iter().enumerate() {
                users += i64::from(*role == "user");
                let model = model.filter(|_| *role == "assistant");
                conn.execute(
                    "INSERT INTO messages (id, session_id, seq, turn_index, role, created_at, model) VALUES (?1, 's', ?1, ?2, ?3, '2026-01-01T00:00:00Z', ?4)",
                    rusqlite::params![seq as i64 + 1, (users - 1).max(0), role, model],
                ).expect("message");
                for (ordinal, (kind, text, id, name, input, is_error, meta)) in parts.iter().enumerate() {
                    conn.execute(
                        "INSERT INTO parts (message_id, ordinal, kind, text, tool_use_id, tool_name, input, is_error, provider_metadata) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                        rusqlite::params![seq as i64 + 1, ordinal as i64, kind, text, id, name, input, is_error, meta],
                    ).expect("part");
                }
            }
            drop(conn);
            let session = SessionId::new("s");
            let stored = store.messages(&session).expect("read");
            let options = ExportOptions {
                persist_latch: false,
                model: target.map(str::to_owned),
                ..ExportOptions::default()
            };
            for provider in Provider::ALL {
                let request = store
                    .export_request(&session, provider, session_store::clock(), &options)
                    .expect("export");
                prop_assert_eq!(&request.violations, &vec![], "{} for {:?}: {:#}", provider, target, request.body);
                prop_assert_eq!(check(provider, &request.body), vec![]);
                prop_assert_eq!(
                    check_signed_by_target(&stored, request.model.as_deref(), &request.body),
                    vec![]
                );
            }
        }
    }
}

/// The calls (id, name) and results (id, text) of an exported body, whatever its provider.
fn calls_and_results(provider: Provider, body: &Value) -> (Vec<(String, String)>, Vec<String>) {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let (mut calls, mut results) = (Vec::new(), Vec::new());
    let list = match provider {
        Provider::Responses => &body["input"],
        Provider::Gemini => &body["contents"],
        _ => &body["messages"],
    };
    for entry in list.as_array().into_iter().flatten() {
        match provider {
            Provider::Anthropic => {
                for block in entry["content"].as_array().into_iter().flatten() {
                    match block["type"].as_str() {
                        Some("tool_use") => calls.push((text(&block["id"]), text(&block["name"]))),
                        Some("tool_result") => results.push(text(&block["tool_use_id"])),
                        _ => {}
                    }
                }
            }
            Provider::OpenAi => {
                for call in entry["tool_calls"].as_array().into_iter().flatten() {
                    calls.push((text(&call["id"]), text(&call["function"]["name"])));
                }
                if entry["role"] == "tool" {
                    results.push(text(&entry["tool_call_id"]));
                }
            }
            Provider::Responses => match entry["type"].as_str() {
                Some("function_call") => {
                    calls.push((text(&entry["call_id"]), text(&entry["name"])))
                }
                Some("function_call_output") => results.push(text(&entry["call_id"])),
                _ => {}
            },
            _ => {
                for part in entry["parts"].as_array().into_iter().flatten() {
                    if let Some(call) = part.get("functionCall") {
                        calls.push((text(&call["id"]), text(&call["name"])));
                    }
                    if let Some(response) = part.get("functionResponse") {
                        results.push(text(&response["id"]));
                    }
                }
            }
        }
    }
    (calls, results)
}

/// Codex CLI before the `{"type", "payload"}` envelope (to about August 2025) wrote a header
/// line `{"id", "timestamp", "instructions", "git"}`, `{"record_type": "state"}` lines and the
/// Responses items bare; `import` refused such a rollout ("no line looks like a Codex rollout
/// line"). The fixture is a real 0.40 rollout (MIT) rewritten into that layout (SOURCES.md):
/// it must be told as Codex, and give the messages, calls, results and exports of the
/// envelope rollout it came from. It has no timestamps and no `turn_context`, so its
/// messages have no `created_at` and no model.
#[test]
fn a_codex_rollout_of_the_older_layout_imports_like_the_envelope_layout() {
    let older_path = crate::util::transcripts().join(
        "agentcmd/codex-older-layout/rollout-2025-09-24T20-12-23-01997ea4-a70d-7da3-8c20-c736db82a7c5.older-layout.jsonl",
    );
    let envelope_path = &codex_rollouts()[1];
    assert!(envelope_path
        .ends_with("rollout-2025-09-24T20-12-23-01997ea4-a70d-7da3-8c20-c736db82a7c5.jsonl"));
    let (older_text, envelope_text) = (read(&older_path), read(envelope_path));
    assert_eq!(detect_format(&older_text), Ok(Format::Codex));

    let older = import_transcript(Format::Codex, &older_text).expect("the older layout imports");
    let envelope = import_transcript(Format::Codex, &envelope_text).expect("imports");
    let shape = |imported: &session_store::import::Imported| {
        imported
            .messages
            .iter()
            .map(|m| (m.role, m.parts.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(older.messages.len(), 37);
    assert_eq!(shape(&older), shape(&envelope));
    assert_eq!(older.system, envelope.system);
    assert_eq!(older.tombstoned, envelope.tombstoned);
    assert!(older.messages.iter().all(|m| m.model.is_none()));

    // Stored, each provider's request is the envelope's (every reasoning item kept).
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("s.db")).expect("open");
    let older_session = store.import(&older).expect("stored").session;
    let envelope_session = store.import(&envelope).expect("stored").session;
    let source = Inventory::of_rollout(&envelope_text);
    assert_eq!(source.calls.len(), 16);
    for provider in [
        Provider::Anthropic,
        Provider::OpenAi,
        Provider::Responses,
        Provider::Gemini,
    ] {
        let body = export(&store, &older_session, provider);
        assert_eq!(
            body,
            export(&store, &envelope_session, provider),
            "{provider}"
        );
        let (calls, results) = calls_and_results(provider, &body);
        let mut ids: Vec<&String> = calls.iter().map(|(id, _)| id).collect();
        ids.sort();
        let mut expected: Vec<&String> = source.calls.keys().collect();
        expected.sort();
        assert_eq!(ids, expected, "{provider}");
        assert!(calls.iter().all(|(id, name)| source.calls[id] == *name));
        assert_eq!(
            results,
            calls.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>()
        );
    }
    let responses = export(&store, &older_session, Provider::Responses);
    assert_eq!(encrypted_in(&responses), source.encrypted);

    // The CLI: `auto` takes it, and every export format answers with the calls and results.
    let db = dir.path().join("cli.db");
    let output = session_store(&db, &["import", older_path.to_str().expect("utf-8")]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let id = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    for (format, provider) in [
        ("anthropic", Provider::Anthropic),
        ("openai", Provider::OpenAi),
        ("responses", Provider::Responses),
        ("gemini", Provider::Gemini),
    ] {
        let output = session_store(&db, &["export", &id, "--format", format]);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let body: Value = serde_json::from_slice(&output.stdout).expect("JSON");
        assert_eq!(check(provider, &body), vec![], "{format}");
        let (calls, results) = calls_and_results(provider, &body);
        assert_eq!(calls.len(), 16, "{format}");
        assert_eq!(results.len(), 16, "{format}");
    }
}

/// Gemini's REST API takes every field under its proto name (`function_call`) as well as its
/// JSON name (`functionCall`); llm-gemini sent `function_call` and `function_response` beside
/// `thoughtSignature`, and gemini-3-flash-preview answered 200. `import` refused the body
/// ("a part holds exactly one of text, inlineData, ... (found none)"). It must import as the
/// same body spelled the JSON way, keep the signature on its call, and export valid bodies.
#[test]
fn a_gemini_body_with_snake_case_fields_imports_as_the_api_took_it() {
    let path = crate::util::transcripts()
        .join("llm-gemini/extracted/test_tools_with_gemini_3_thought_signatures.request2.json");
    let text = read(&path);
    assert_eq!(detect_format(&text), Ok(Format::Gemini));
    for other in session_store::import::FORMATS
        .iter()
        .filter(|f| **f != Format::Gemini)
    {
        assert!(
            session_store::import::confirm(*other, &text).is_err(),
            "{other}"
        );
    }
    let source: Value = serde_json::from_str(&text).expect("JSON");
    let signature = source["contents"][1]["parts"][1]["thoughtSignature"]
        .as_str()
        .expect("the signature");

    let imported = import_transcript(Format::Gemini, &text).expect("the snake_case body imports");
    let camel = text
        .replace("\"function_call\"", "\"functionCall\"")
        .replace("\"function_response\"", "\"functionResponse\"");
    assert_ne!(camel, text);
    let from_camel = import_transcript(Format::Gemini, &camel).expect("imports");
    assert_eq!(imported.messages, from_camel.messages);
    let roles: Vec<Role> = imported.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::Tool]);
    let Part::ToolUse {
        id,
        name,
        input,
        provider_metadata,
    } = &imported.messages[1].parts[1]
    else {
        panic!("{:?}", imported.messages[1].parts);
    };
    assert_eq!(
        (name.as_str(), input),
        ("multiply", &json!({"y": 3, "x": 5}))
    );
    assert_eq!(
        provider_metadata
            .as_ref()
            .and_then(|m| m.pointer("/gemini/thoughtSignature")),
        Some(&json!(signature))
    );
    assert_eq!(
        imported.messages[2].parts,
        [Part::tool_result(id.clone(), "15")]
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("s.db")).expect("open");
    let session = store.import(&imported).expect("stored").session;
    let gemini = export(&store, &session, Provider::Gemini);
    let call = &gemini["contents"][1]["parts"][0];
    assert_eq!(call["functionCall"]["name"], "multiply");
    assert_eq!(call["thoughtSignature"], signature);
    assert_eq!(
        gemini["contents"][2]["parts"][0]["functionResponse"]["response"],
        json!({"output": "15"})
    );
    for provider in [Provider::Anthropic, Provider::OpenAi, Provider::Responses] {
        let (calls, results) = calls_and_results(provider, &export(&store, &session, provider));
        assert_eq!(calls, [(id.clone(), "multiply".to_owned())], "{provider}");
        assert_eq!(results, std::slice::from_ref(id), "{provider}");
    }

    let db = dir.path().join("cli.db");
    let output = session_store(&db, &["import", path.to_str().expect("utf-8")]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The user texts of an import, in order.
fn user_texts(imported: &session_store::import::Imported) -> Vec<&str> {
    imported
        .messages
        .iter()
        .filter(|m| m.role == Role::User)
        .flat_map(|m| &m.parts)
        .filter_map(|p| match p {
            Part::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// A rollout whose prompt is only an `event_msg` `user_message` (no `response_item` message
/// carries it) lost the prompt: the session began with the assistant's call. The prompt is
/// imported from the event where no item of its turn carries it, and once where one does,
/// whichever comes first (the 0.40 rollouts write the item, then the event; the
/// claude-code-log fixture the event, then the item).
#[test]
fn a_codex_prompt_only_in_a_user_message_event_is_imported_once() {
    let dir = crate::util::transcripts().join("claude-code-log/codex");
    let only_event =
        read(&dir.join("rollout-2026-01-03T04-05-06-22222222-2222-4222-8222-222222222222.jsonl"));
    let imported = import_transcript(Format::Codex, &only_event).expect("imports");
    let roles: Vec<Role> = imported.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::Tool]);
    assert_eq!(user_texts(&imported), ["Spawn a synthetic researcher."]);
    assert_eq!(
        imported.messages[0].created_at.map(|t| t.to_rfc3339()),
        Some("2026-01-03T04:05:07+00:00".to_owned())
    );

    let event_then_item =
        read(&dir.join("rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl"));
    let imported = import_transcript(Format::Codex, &event_then_item).expect("imports");
    assert_eq!(user_texts(&imported), ["List the synthetic files."]);

    // The real rollouts: as many user texts as their user items' texts, none from the events.
    for path in codex_rollouts() {
        let text = read(&path);
        let items = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|l| l["type"] == "response_item" && l["payload"]["role"] == "user")
            .flat_map(|l| {
                l["payload"]["content"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .filter(|part| part["type"] == "input_text")
            .count();
        let imported = import_transcript(Format::Codex, &text).expect("imports");
        assert_eq!(user_texts(&imported).len(), items, "{}", path.display());
    }
}
