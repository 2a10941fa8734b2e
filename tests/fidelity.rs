//! What the issue found lost between a provider's body and what the store sends back, each
//! fixed where it belongs, on bodies shaped like the providers' own documentation. One
//! regression test per loss; the CLIs run as processes.

use serde_json::{json, Value};

/// Runs `session-store` with `args` on `db`, feeding `stdin` when given; stdout on success.
fn cli(db: &std::path::Path, args: &[&str], stdin: Option<&Value>) -> Result<String, String> {
    use std::io::Write;
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_session-store"));
    command
        .arg("--db")
        .arg(db)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().expect("spawn");
    let mut input = child.stdin.take().expect("stdin");
    if let Some(body) = stdin {
        // A command refused on its arguments reads nothing: a closed pipe is its answer.
        let _ = input.write_all(body.to_string().as_bytes());
    }
    drop(input);
    let out = child.wait_with_output().expect("wait");
    if out.status.success() {
        Ok(String::from_utf8(out.stdout).expect("utf-8"))
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Imports `body` (as `format`, with extra import arguments) and returns the session id.
fn import(db: &std::path::Path, format: &str, body: &Value, extra: &[&str]) -> String {
    let mut args = vec!["import", "--format", format];
    args.extend_from_slice(extra);
    args.push("-");
    cli(db, &args, Some(body))
        .unwrap_or_else(|e| panic!("import refused: {e}"))
        .trim()
        .to_owned()
}

/// The export of `session` as `format` (with `--model` when given), checked by the
/// provider's own checks.
fn export(db: &std::path::Path, session: &str, format: &str, model: Option<&str>) -> Value {
    let mut args = vec!["export", session, "--format", format];
    if let Some(model) = model {
        args.extend(["--model", model]);
    }
    let body: Value = serde_json::from_str(&cli(db, &args, None).expect("export")).expect("json");
    let provider = match format {
        "anthropic" => session_store::Provider::Anthropic,
        "openai" => session_store::Provider::OpenAi,
        "responses" => session_store::Provider::Responses,
        _ => session_store::Provider::Gemini,
    };
    let found = session_store::request::check(provider, &body);
    assert!(found.is_empty(), "{format}: {found:#?}\n{body:#}");
    body
}

fn tempdb() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("f.db");
    (dir, db)
}

/// Every signature-like value anywhere in a body.
fn signatures(body: &Value) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![body];
    while let Some(value) = stack.pop() {
        match value {
            Value::Object(map) => {
                for (key, inner) in map {
                    if matches!(
                        key.as_str(),
                        "signature" | "thoughtSignature" | "encrypted_content"
                    ) {
                        if let Some(text) = inner.as_str() {
                            found.push(text.to_owned());
                        }
                    }
                    stack.push(inner);
                }
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    found
}

/// The three signed bodies of the model test: (format, body without a top-level model, the
/// signature it carries, the model that made it).
fn signed_bodies() -> Vec<(&'static str, Value, &'static str, &'static str)> {
    vec![
        (
            "anthropic",
            json!({"messages": [
                {"role": "user", "content": "What is 27 * 453?"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "27 * 453 = 12231", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA"},
                    {"type": "text", "text": "12,231"}
                ]},
                {"role": "user", "content": "And times 2?"}
            ]}),
            "EqQBCgIYAhIM1gbcDa9GJwZA",
            "anthropic/claude-sonnet-4-5",
        ),
        (
            "gemini",
            json!({"contents": [
                {"role": "user", "parts": [{"text": "What is the weather in Paris?"}]},
                {"role": "model", "parts": [
                    {"text": "Let me check.", "thoughtSignature": "CiQB0e2Kb7gXw1"},
                    {"text": "It is sunny."}
                ]},
                {"role": "user", "parts": [{"text": "And tomorrow?"}]}
            ]}),
            "CiQB0e2Kb7gXw1",
            "gemini/gemini-3-pro-preview",
        ),
        (
            "responses",
            json!({"input": [
                {"role": "user", "content": "What is 2 + 2?"},
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAABo-enc"},
                {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                 "content": [{"type": "output_text", "text": "4", "annotations": []}]},
                {"role": "user", "content": "Thanks"}
            ]}),
            "gAAAAABo-enc",
            "openai/gpt-5",
        ),
    ]
}

#[test]
fn import_model_binds_a_modelless_sources_signatures() {
    for (format, body, signature, maker) in signed_bodies() {
        let (_dir, db) = tempdb();
        // Named at import: another model's export drops the signature, the maker's keeps it.
        let named = import(&db, format, &body, &["--model", maker]);
        assert!(
            signatures(&export(&db, &named, format, Some(maker))).contains(&signature.to_owned()),
            "{format}: the maker gets its signature back"
        );
        let other = if maker.starts_with("anthropic") {
            "anthropic/claude-opus-4-6"
        } else if maker.starts_with("gemini") {
            "gemini/gemini-2.5-flash"
        } else {
            "openai/gpt-5-mini"
        };
        assert!(
            !signatures(&export(&db, &named, format, Some(other))).contains(&signature.to_owned()),
            "{format}: another model is not sent {maker}'s signature"
        );
        // A body's own top-level model wins over --model.
        let mut own = body.clone();
        own["model"] = json!(maker.split_once('/').map(|(_, m)| m).unwrap_or(maker));
        let kept = import(&db, format, &own, &["--model", other]);
        assert!(
            signatures(&export(&db, &kept, format, Some(maker))).contains(&signature.to_owned()),
            "{format}: the body's own model wins"
        );
        assert!(
            !signatures(&export(&db, &kept, format, Some(other))).contains(&signature.to_owned())
        );
    }
}

#[test]
fn import_model_must_name_a_provider() {
    let (_dir, db) = tempdb();
    let body = json!({"messages": [{"role": "user", "content": "hi"}]});
    for bad in ["claude-sonnet-4-5", "/x", "anthropic/"] {
        let refused = cli(&db, &["import", "--model", bad, "-"], Some(&body));
        assert!(refused.is_err(), "{bad}");
    }
}

#[test]
fn a_whitespace_placeholder_never_ends_up_in_the_final_assistant_message() {
    // Interleaved thinking as Anthropic documents it, with the empty text block a stream
    // leaves between two thinking blocks, as the last message (a continuation).
    for (between, after) in [
        ("", None),
        (" ", None),
        ("\n", Some("Here it is. ")),
        ("", Some("\t")),
    ] {
        let mut content = vec![
            json!({"type": "thinking", "thinking": "I should check the weather.", "signature": "EuYBCkQYAiJA"}),
            json!({"type": "text", "text": between}),
            json!({"type": "thinking", "thinking": "Now answer.", "signature": "EpYCCkYIBRgC"}),
        ];
        if let Some(text) = after {
            content.push(json!({"type": "text", "text": text}));
        }
        let body = json!({"messages": [
            {"role": "user", "content": "What's the weather in Paris?"},
            {"role": "assistant", "content": content},
        ]});
        let (_dir, db) = tempdb();
        let session = import(
            &db,
            "anthropic",
            &body,
            &["--model", "anthropic/claude-sonnet-4-5"],
        );
        // `export` checks the body with the provider's rules (7b included).
        let sent = export(&db, &session, "anthropic", None);
        let last = &sent["messages"][1]["content"];
        let texts: Vec<&str> = last
            .as_array()
            .into_iter()
            .flatten()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect();
        assert!(
            texts
                .iter()
                .all(|t| !t.trim().is_empty() && !t.ends_with(char::is_whitespace)),
            "{last}"
        );
        assert_eq!(
            signatures(&sent).len(),
            2,
            "the thinking blocks stay: {last}"
        );
    }
}

/// Gemini 3 turns with built-in tools (run by the server: `toolCall` and `toolResponse` in
/// the model content, each signed), as Google's documentation of tool combination shows
/// them: (case, body). Beside a function call; alone before the answer; two in a row.
fn gemini3_server_tools() -> Vec<(&'static str, Value)> {
    let question = json!({"role": "user", "parts": [{"text": "What is the northernmost city in the United States? What's the weather like there today?"}]});
    let call = |id: &str, queries: &str, signature: &str| {
        json!({"toolCall": {"toolType": "GOOGLE_SEARCH_WEB", "args": {"queries": [queries]}, "id": id},
               "thoughtSignature": signature})
    };
    let response = |id: &str, found: &str, signature: &str| {
        json!({"toolResponse": {"toolType": "GOOGLE_SEARCH_WEB", "response": {"search_suggestions": found}, "id": id},
               "thoughtSignature": signature})
    };
    vec![
        (
            "beside a function call",
            json!({"contents": [
                question,
                {"role": "model", "parts": [
                    call("5f3vbd3n", "northernmost city in the United States", "EsIBCr8BAdHtim9v"),
                    response("5f3vbd3n", "Utqiagvik, Alaska", "EpABCo0BAdHtim8x"),
                    {"functionCall": {"name": "getWeather", "args": {"city": "Utqiagvik, Alaska"}, "id": "fc_1"},
                     "thoughtSignature": "Eq0BCqoBAdHtim9w"}
                ]},
                {"role": "user", "parts": [{"functionResponse": {"name": "getWeather", "response": {"response": "Very cold. 22 degrees Fahrenheit."}, "id": "fc_1"}}]},
                {"role": "model", "parts": [{"text": "Utqiagvik, Alaska is the northernmost city; it is 22°F there today."}]}
            ]}),
        ),
        (
            "alone before the answer",
            json!({"contents": [
                question,
                {"role": "model", "parts": [
                    call("a1b2c3d4", "northernmost city in the United States", "EsIBCr8BAdHtim9a"),
                    response("a1b2c3d4", "Utqiagvik, Alaska", "EpABCo0BAdHtim8b"),
                    {"text": "It is Utqiagvik, Alaska."}
                ]},
                {"role": "user", "parts": [{"text": "Thanks."}]}
            ]}),
        ),
        (
            "two in a row",
            json!({"contents": [
                question,
                {"role": "model", "parts": [
                    call("q1", "northernmost city in the United States", "EsIBCr8BAdHtim9c"),
                    response("q1", "Utqiagvik, Alaska", "EpABCo0BAdHtim8d"),
                    call("q2", "Utqiagvik weather today", "EsIBCr8BAdHtim9e"),
                    response("q2", "22 degrees Fahrenheit", "EpABCo0BAdHtim8f"),
                    {"text": "Utqiagvik, Alaska; 22°F today."}
                ]}
            ]}),
        ),
    ]
}

#[test]
fn gemini3_server_side_tool_parts_are_imported_and_go_back_unchanged() {
    for (case, body) in gemini3_server_tools() {
        let (_dir, db) = tempdb();
        let session = import(
            &db,
            "gemini",
            &body,
            &["--model", "gemini/gemini-3-pro-preview"],
        );
        // `export` checks the body with the provider's rules.
        let sent = export(&db, &session, "gemini", None);
        let model_parts = &sent["contents"][1]["parts"];
        let original = body["contents"][1]["parts"].as_array().expect("parts");
        for (at, part) in original.iter().enumerate() {
            if part.get("toolCall").is_some() || part.get("toolResponse").is_some() {
                assert_eq!(model_parts[at], *part, "{case}: {sent:#}");
            }
            if let Some(id) = part.pointer("/functionCall/id") {
                assert_eq!(
                    model_parts[at]["functionCall"]["id"], *id,
                    "{case}: the function call follows the server tool's parts: {sent:#}"
                );
            }
        }
        // Another provider is not sent Gemini's server parts verbatim; its request still passes.
        for other in ["anthropic", "openai", "responses"] {
            let body = export(&db, &session, other, None);
            assert!(
                !body.to_string().contains("\"toolCall\""),
                "{case}: {other}: {body}"
            );
        }
        // A server part with a second data field is still refused, as Gemini refuses it.
        let mut two = body.clone();
        two["contents"][1]["parts"][0]["text"] = json!("and text");
        assert!(
            cli(&db, &["import", "--format", "gemini", "-"], Some(&two)).is_err(),
            "{case}"
        );
    }
}

/// Responses conversations as OpenAI documents their output items: (case, body). A
/// commentary message (`phase`), a function call with its item id, its output, and a final
/// answer whose text cites a URL (`url_citation` annotations), every output item with its
/// `id` and `status`; then two parallel calls and an answer citing two URLs, cut short
/// (`status: incomplete`).
fn responses_round_trips() -> Vec<(&'static str, Value)> {
    vec![
        (
            "commentary, a call, a cited answer",
            json!({"input": [
                {"role": "user", "content": "Find the latest Rust release and summarise it."},
                {"type": "message", "id": "msg_01", "role": "assistant", "status": "completed", "phase": "commentary",
                 "content": [{"type": "output_text", "text": "Let me look that up.", "annotations": []}]},
                {"type": "function_call", "id": "fc_01", "call_id": "call_01", "name": "web_fetch",
                 "arguments": "{\"url\":\"https://blog.rust-lang.org/\"}", "status": "completed"},
                {"type": "function_call_output", "call_id": "call_01", "output": "Rust 1.90.0 released"},
                {"type": "message", "id": "msg_02", "role": "assistant", "status": "completed", "phase": "final_answer",
                 "content": [{"type": "output_text", "text": "Rust 1.90.0 is out.",
                              "annotations": [{"type": "url_citation", "start_index": 0, "end_index": 18,
                                               "url": "https://blog.rust-lang.org/", "title": "Rust Blog"}]}]},
                {"role": "user", "content": "Thanks!"}
            ]}),
        ),
        (
            "parallel calls, two citations, cut short",
            json!({"input": [
                {"role": "user", "content": "Compare the weather in Paris and Rome."},
                {"type": "function_call", "id": "fc_a", "call_id": "call_a", "name": "get_weather",
                 "arguments": "{\"city\":\"Paris\"}", "status": "completed"},
                {"type": "function_call", "id": "fc_b", "call_id": "call_b", "name": "get_weather",
                 "arguments": "{\"city\":\"Rome\"}", "status": "completed"},
                {"type": "function_call_output", "call_id": "call_a", "output": "18C, cloudy"},
                {"type": "function_call_output", "call_id": "call_b", "output": "24C, sunny"},
                {"type": "message", "id": "msg_03", "role": "assistant", "status": "incomplete", "phase": "final_answer",
                 "content": [{"type": "output_text", "text": "Paris is cloudy, Rome sunny.",
                              "annotations": [
                                  {"type": "url_citation", "start_index": 0, "end_index": 15,
                                   "url": "https://weather.example/paris", "title": "Paris"},
                                  {"type": "url_citation", "start_index": 17, "end_index": 27,
                                   "url": "https://weather.example/rome", "title": "Rome"}]}]},
                {"role": "user", "content": "And tomorrow?"}
            ]}),
        ),
    ]
}

#[test]
fn a_responses_round_trip_keeps_items_ids_phase_and_annotations() {
    for (case, body) in responses_round_trips() {
        responses_round_trip_keeps(case, &body);
    }
}

/// [`a_responses_round_trip_keeps_items_ids_phase_and_annotations`] for one body.
fn responses_round_trip_keeps(case: &str, body: &Value) {
    let (_dir, db) = tempdb();
    let session = import(&db, "responses", body, &["--model", "openai/gpt-5"]);
    let sent = export(&db, &session, "responses", None);
    let items = sent["input"].as_array().expect("items");
    let original = body["input"].as_array().expect("items");
    assert_eq!(items.len(), original.len(), "{case}: {sent:#}");
    for (at, (got, want)) in items.iter().zip(original).enumerate() {
        let kind = want["type"].as_str().unwrap_or("message");
        if kind == "message" && want["role"] == "assistant" {
            for key in ["id", "status", "phase"] {
                assert_eq!(got[key], want[key], "{case}: item {at} {key}: {got}");
            }
            assert_eq!(
                got["content"][0]["annotations"], want["content"][0]["annotations"],
                "{case}: item {at}: {got}"
            );
            assert_eq!(
                got["content"][0]["text"], want["content"][0]["text"],
                "{case}"
            );
        }
        if kind == "function_call" {
            for key in ["id", "call_id", "name", "arguments"] {
                assert_eq!(got[key], want[key], "{case}: item {at} {key}: {got}");
            }
        }
    }
    // The other providers are not sent OpenAI's item fields, and their requests pass.
    for other in ["anthropic", "openai", "gemini"] {
        let body = export(&db, &session, other, None);
        assert!(
            !body.to_string().contains("url_citation"),
            "{case}: {other}: {body}"
        );
    }
}

/// Gemini bodies whose turns the source left blank (`{"text": ""}` or whitespace), as a
/// client builds them: (what the case is, the body).
fn gemini_blank_turns() -> Vec<(&'static str, Value)> {
    let user = |text: &str| json!({"role": "user", "parts": [{"text": text}]});
    let model = |text: &str| json!({"role": "model", "parts": [{"text": text}]});
    vec![
        (
            "empty first user part",
            json!({"contents": [user(""), model("Hello! How can I help?"), user("What is 2+2?")]}),
        ),
        (
            "empty model turn in the middle",
            json!({"contents": [user("Hi"), model(""), user("Are you there?"), model("Yes.")]}),
        ),
        (
            "empty model turn at the end",
            json!({"contents": [user("Hi"), model("Hello."), user("Bye"), model("")]}),
        ),
        (
            "whitespace-only turns",
            json!({"contents": [user(" \n"), model("\t"), user("Still there?"), model("Yes.")]}),
        ),
        (
            "a blank part beside text",
            json!({"contents": [
                {"role": "user", "parts": [{"text": ""}, {"text": "Summarise this."}]},
                model("Done."),
            ]}),
        ),
    ]
}

#[test]
fn gemini_blank_turns_are_stored_as_they_came_and_keep_their_places_in_every_export() {
    use session_store::request::blank_turn_text;
    let stand_in = blank_turn_text(session_store::Provider::Gemini).expect("gemini stands in");
    for (case, body) in gemini_blank_turns() {
        let (_dir, db) = tempdb();
        let session = import(&db, "gemini", &body, &[]);
        // The rows say exactly what came in: every part, blank ones included.
        let store = session_store::Store::open(&db).expect("open");
        let id = session_store::SessionId::from(session.as_str());
        let stored: Vec<Vec<String>> = store
            .messages(&id)
            .expect("messages")
            .iter()
            .map(|m| {
                m.parts
                    .iter()
                    .map(|p| match p {
                        session_store::Part::Text { text, .. } => text.clone(),
                        other => panic!("{case}: {other:?}"),
                    })
                    .collect()
            })
            .collect();
        let source: Vec<Vec<String>> = body["contents"]
            .as_array()
            .expect("contents")
            .iter()
            .map(|c| {
                c["parts"]
                    .as_array()
                    .expect("parts")
                    .iter()
                    .map(|p| p["text"].as_str().expect("text").to_owned())
                    .collect()
            })
            .collect();
        assert_eq!(stored, source, "{case}");
        // Every export passes its provider's checks (`export` asserts it).
        for format in ["anthropic", "openai", "responses"] {
            export(&db, &session, format, None);
        }
        // Gemini: one content per source content, in its role and place; a blank turn is
        // sent as the stand-in, every other text as it came; nothing put first.
        let sent = export(&db, &session, "gemini", None);
        let contents = sent["contents"].as_array().expect("contents");
        assert_eq!(contents.len(), source.len(), "{case}: {sent:#}");
        for (index, (content, texts)) in contents.iter().zip(&source).enumerate() {
            assert_eq!(
                content["role"], body["contents"][index]["role"],
                "{case}: {sent:#}"
            );
            let kept: Vec<&str> = texts
                .iter()
                .map(String::as_str)
                .filter(|t| !t.trim().is_empty())
                .collect();
            let expected = if kept.is_empty() {
                vec![stand_in]
            } else {
                kept
            };
            let got: Vec<&str> = content["parts"]
                .as_array()
                .expect("parts")
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect();
            assert_eq!(got, expected, "{case}: content {index}");
        }
    }
}
