//! Every real transcript in `tests/fixtures/transcripts/` imports, and nothing the
//! provider needs is lost on the way: each signature, tool call and tool result counted in the
//! source file (by walking its JSON here, independently of the importers) is found again in
//! the stored parts, byte for byte. Guards against importers that drop blocks they do not
//! understand, lose interleaved Claude Code lines, or split one API message in two.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use serde_json::Value;
use session_store::import::{import as import_transcript, Format, Imported};
use session_store::{
    request::{check_anthropic, check_gemini, check_openai, check_responses, ThinkingConfig},
    ExportOptions, Message, NewMessage, Part, Provider, Refusal, Role, Store,
};

fn fixtures() -> PathBuf {
    crate::util::transcripts()
}

/// Every Claude Code log and every derived request body (Codex rollouts are not a contract format).
/// Whether the file lies in a folder named `codex` or `codex-older-layout` (the rollouts), judged on its own folder
/// and not on the whole path, which holds the clone's location (a clone at `/x/codex/`).
fn in_codex_folder(path: &Path) -> bool {
    path.parent()
        .and_then(Path::file_name)
        .and_then(std::ffi::OsStr::to_str)
        .is_some_and(|name| name == "codex" || name == "codex-older-layout")
}

pub(crate) fn transcripts() -> Vec<(PathBuf, Format)> {
    fn walk(dir: &Path, found: &mut Vec<(PathBuf, Format)>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
            .map(|entry| entry.expect("directory entry").path())
            .collect();
        entries.sort();
        for path in entries {
            let name = path.to_string_lossy().into_owned();
            if path.is_dir() {
                walk(&path, found);
            } else if name.ends_with(".jsonl") && !in_codex_folder(&path) {
                found.push((path, Format::ClaudeCode));
            } else if name.ends_with(".json") && name.contains("/derived/") {
                let body: Value = serde_json::from_str(&read(&path)).expect("derived body is JSON");
                // Chat Completions bodies carry `tool_calls` or role `tool`; Anthropic ones never do.
                let openai = body["messages"].as_array().is_some_and(|messages| {
                    messages
                        .iter()
                        .any(|m| m.get("tool_calls").is_some() || m["role"] == "tool")
                });
                found.push((
                    path,
                    if openai {
                        Format::OpenAi
                    } else {
                        Format::Anthropic
                    },
                ));
            }
        }
    }
    let mut found = Vec::new();
    walk(&fixtures(), &mut found);
    found
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// What must survive an import, gathered from the source or from the stored parts.
#[derive(Debug, Default, PartialEq)]
struct Inventory {
    /// tool_use id -> (name, input).
    calls: BTreeMap<String, (String, Value)>,
    /// tool_use_id -> is_error, for every result.
    results: BTreeMap<String, bool>,
    /// Results whose content was a plain string, with that string.
    result_texts: BTreeMap<String, String>,
    /// Every thinking signature and redacted-thinking payload, in order.
    signatures: Vec<String>,
}

impl Inventory {
    fn add_anthropic_block(&mut self, block: &Value) {
        match block["type"].as_str() {
            Some("tool_use") => {
                self.calls.insert(
                    block["id"].as_str().expect("id").to_owned(),
                    (
                        block["name"].as_str().expect("name").to_owned(),
                        block["input"].clone(),
                    ),
                );
            }
            Some("tool_result") => {
                let id = block["tool_use_id"]
                    .as_str()
                    .expect("tool_use_id")
                    .to_owned();
                self.results
                    .insert(id.clone(), block["is_error"].as_bool().unwrap_or(false));
                if let Some(text) = plain_text(&block["content"]) {
                    self.result_texts.insert(id, text);
                }
            }
            Some("thinking") => {
                self.signatures
                    .push(block["signature"].as_str().expect("signature").to_owned());
            }
            Some("redacted_thinking") => {
                self.signatures
                    .push(block["data"].as_str().expect("data").to_owned());
            }
            _ => {}
        }
    }

    fn add_anthropic_content(&mut self, content: &Value) {
        for block in content.as_array().into_iter().flatten() {
            self.add_anthropic_block(block);
        }
    }

    /// A Claude Code log: message lines only, main conversation only (unless the file is a
    /// subagent's, all sidechain), each uuid once.
    fn of_claude_code(text: &str) -> Self {
        let lines: Vec<Value> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).expect("fixture line is JSON"))
            .filter(|v: &Value| v["type"] == "user" || v["type"] == "assistant")
            .collect();
        let only_sidechain = lines.iter().all(|v| v["isSidechain"] == true);
        let mut seen = HashSet::new();
        let mut inventory = Self::default();
        for line in &lines {
            if (line["isSidechain"] == true && !only_sidechain)
                || !line["uuid"]
                    .as_str()
                    .is_none_or(|u| seen.insert(u.to_owned()))
            {
                continue;
            }
            inventory.add_anthropic_content(&line["message"]["content"]);
        }
        inventory
    }

    fn of_anthropic(text: &str) -> Self {
        let body: Value = serde_json::from_str(text).expect("JSON");
        let mut inventory = Self::default();
        for message in body["messages"].as_array().expect("messages") {
            inventory.add_anthropic_content(&message["content"]);
        }
        inventory
    }

    fn of_openai(text: &str) -> Self {
        let body: Value = serde_json::from_str(text).expect("JSON");
        let mut inventory = Self::default();
        for message in body["messages"].as_array().expect("messages") {
            for call in message["tool_calls"].as_array().into_iter().flatten() {
                let arguments = call["function"]["arguments"].as_str().expect("arguments");
                inventory.calls.insert(
                    call["id"].as_str().expect("id").to_owned(),
                    (
                        call["function"]["name"].as_str().expect("name").to_owned(),
                        serde_json::from_str(arguments).expect("arguments are JSON"),
                    ),
                );
            }
            if message["role"] == "tool" {
                let id = message["tool_call_id"]
                    .as_str()
                    .expect("tool_call_id")
                    .to_owned();
                inventory.results.insert(id.clone(), false);
                if let Some(text) = message["content"].as_str() {
                    inventory.result_texts.insert(id, text.to_owned());
                }
            }
        }
        inventory
    }

    /// The stored parts, leaving out the tombstones the import added on purpose.
    fn of_stored(messages: &[Message], tombstoned: &[String]) -> Self {
        let tombstoned: HashSet<&str> = tombstoned.iter().map(String::as_str).collect();
        let mut inventory = Self::default();
        for part in messages.iter().flat_map(|m| &m.parts) {
            match part {
                Part::ToolUse {
                    id, name, input, ..
                } => {
                    inventory
                        .calls
                        .insert(id.clone(), (name.clone(), input.clone()));
                }
                Part::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                    provider_metadata,
                    ..
                } if !tombstoned.contains(tool_use_id.as_str()) => {
                    inventory.results.insert(tool_use_id.clone(), *is_error);
                    // Content with images is described, not copied: compare text only.
                    let kept = provider_metadata
                        .as_ref()
                        .map_or(&Value::Null, |m| &m["anthropic"]["content"]);
                    if kept.is_null() || plain_text(kept).is_some() {
                        inventory
                            .result_texts
                            .insert(tool_use_id.clone(), content.clone());
                    }
                }
                Part::Reasoning {
                    provider_metadata: Some(meta),
                    ..
                } => {
                    if let Some(signature) = meta["anthropic"]["signature"].as_str() {
                        inventory.signatures.push(signature.to_owned());
                    }
                }
                Part::RedactedReasoning { data, .. } => inventory.signatures.push(data.clone()),
                _ => {}
            }
        }
        inventory
    }
}

/// A result's content as text when it is a string or a list of text blocks only.
fn plain_text(content: &Value) -> Option<String> {
    match content {
        Value::String(text) => Some(text.clone()),
        Value::Null => Some(String::new()),
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| (b["type"] == "text").then(|| b["text"].as_str().map(str::to_owned))?)
            .collect::<Option<Vec<_>>>()
            .map(|texts| texts.join("\n")),
        _ => None,
    }
}

/// Names what differs, without printing whole transcripts.
fn differences(source: &Inventory, stored: &Inventory) -> Vec<String> {
    let mut found = Vec::new();
    for (id, call) in &source.calls {
        if stored.calls.get(id) != Some(call) {
            found.push(format!("tool_use {id} lost or changed"));
        }
    }
    for (id, is_error) in &source.results {
        if stored.results.get(id) != Some(is_error) {
            found.push(format!("tool_result {id} lost or changed"));
        }
    }
    for (id, text) in &source.result_texts {
        if stored.result_texts.get(id) != Some(text) {
            found.push(format!("tool_result {id} text changed"));
        }
    }
    if stored.calls.len() != source.calls.len() || stored.results.len() != source.results.len() {
        found.push(format!(
            "counts differ: {} calls / {} results stored, {} / {} in the source",
            stored.calls.len(),
            stored.results.len(),
            source.calls.len(),
            source.results.len()
        ));
    }
    if stored.signatures != source.signatures {
        found.push(format!(
            "signatures differ: {} stored, {} in the source",
            stored.signatures.len(),
            source.signatures.len()
        ));
    }
    found
}

/// Exports the session just imported in both shapes, requires zero contract violations, and
/// returns the tool_use ids and signatures of the Anthropic body.
fn exported_inventory(
    store: &Store,
    messages: &[Message],
    path: &Path,
) -> (HashSet<String>, Vec<String>) {
    let session = store
        .sessions()
        .expect("list")
        .into_iter()
        .find(|s| {
            s.message_count == messages.len() as i64
                && store.messages(&s.id).ok().as_deref() == Some(messages)
        })
        .expect("the session just imported")
        .id;
    // Retention off (the fixtures are months old, so the idle latch would strip all but the
    // latest reasoning): then every signature must come back, byte for byte and in order.
    let options = ExportOptions {
        persist_latch: false,
        thinking: ThinkingConfig {
            keep_recent: usize::MAX,
            ..ThinkingConfig::default()
        },
        model: None,
    };
    let defaults = ExportOptions {
        persist_latch: false,
        ..ExportOptions::default()
    };
    for (provider, check) in [
        (
            Provider::Anthropic,
            check_anthropic as fn(&serde_json::Value) -> Vec<_>,
        ),
        (Provider::OpenAi, check_openai),
        (Provider::Responses, check_responses),
        (Provider::Gemini, check_gemini),
    ] {
        let body = store
            .export_now(&session, provider, &defaults)
            .expect("export");
        let violations = check(&body);
        assert!(
            violations.is_empty(),
            "{} as {provider} (default retention): {violations:#?}",
            path.display()
        );
    }
    let mut ids = HashSet::new();
    let mut signatures = Vec::new();
    for (provider, check) in [
        (
            Provider::Anthropic,
            check_anthropic as fn(&serde_json::Value) -> Vec<_>,
        ),
        (Provider::OpenAi, check_openai),
    ] {
        let body = store
            .export_now(&session, provider, &options)
            .expect("export");
        let violations = check(&body);
        assert!(
            violations.is_empty(),
            "{} as {provider}: {violations:#?}",
            path.display()
        );
        if provider == Provider::Anthropic {
            for block in body["messages"]
                .as_array()
                .expect("messages")
                .iter()
                .flat_map(|m| m["content"].as_array().into_iter().flatten())
            {
                match block["type"].as_str() {
                    Some("tool_use") => {
                        ids.insert(block["id"].as_str().expect("id").to_owned());
                    }
                    Some("thinking") => {
                        signatures.push(block["signature"].as_str().expect("signature").to_owned())
                    }
                    Some("redacted_thinking") => {
                        signatures.push(block["data"].as_str().expect("data").to_owned())
                    }
                    _ => {}
                }
            }
        }
    }
    (ids, signatures)
}

fn import_into(store: &Store, path: &Path, format: Format) -> (Imported, Vec<Message>) {
    let text = read(path);
    let imported = import_transcript(format, &text)
        .unwrap_or_else(|e| panic!("{} refused: {e:#?}", path.display()));
    let session = store
        .import_session(imported.clone().into_messages())
        .unwrap_or_else(|e| panic!("{} not stored: {e:#?}", path.display()));
    let messages = store.messages(&session).expect("read back");
    (imported, messages)
}

/// The log's other conversations (abandoned branches, other roots), each stored as a
/// session of its own: what the main session leaves out is found there.
fn branches_into(store: &Store, imported: &Imported, path: &Path) -> Vec<Vec<Message>> {
    imported
        .children
        .iter()
        .filter(|child| child.branch.is_some())
        .map(|child| {
            let session = store
                .import_session(child.imported.clone().into_messages())
                .unwrap_or_else(|e| panic!("{} branch not stored: {e:#?}", path.display()));
            store.messages(&session).expect("read back")
        })
        .collect()
}

#[test]
fn every_real_transcript_imports_with_every_signature_call_and_result() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("fixtures.db")).expect("open");
    let transcripts = transcripts();
    assert!(
        transcripts.len() >= 16,
        "expected the 11 Claude Code logs and 5 derived bodies, found {transcripts:?}"
    );
    // (calls, results, signatures) counted in the sources: the comparison must have had
    // something to compare.
    let mut totals = (0, 0, 0);
    for (path, format) in transcripts {
        let text = read(&path);
        let source = match format {
            Format::ClaudeCode => Inventory::of_claude_code(&text),
            Format::Anthropic => Inventory::of_anthropic(&text),
            Format::OpenAi => Inventory::of_openai(&text),
            // Codex rollouts are counted in tests/responses_gemini.rs; no fixture is a
            // Responses or Gemini body.
            other => unreachable!("{other} is not in the list"),
        };
        let (imported, messages) = import_into(&store, &path, format);
        let branches = branches_into(&store, &imported, &path);
        let everything: Vec<Message> = messages
            .iter()
            .chain(branches.iter().flatten())
            .cloned()
            .collect();
        let mut tombstoned = imported.tombstoned.clone();
        for child in imported.children.iter().filter(|c| c.branch.is_some()) {
            tombstoned.extend(child.imported.tombstoned.iter().cloned());
        }
        let stored = Inventory::of_stored(&everything, &tombstoned);
        let differences = differences(&source, &stored);
        assert!(
            differences.is_empty(),
            "{}: {differences:#?}",
            path.display()
        );
        let mut exported = exported_inventory(&store, &messages, &path);
        for branch in &branches {
            exported
                .0
                .extend(exported_inventory(&store, branch, &path).0);
        }
        let lost: Vec<&String> = source
            .calls
            .keys()
            .filter(|id| !exported.0.contains(*id))
            .collect();
        assert!(
            lost.is_empty(),
            "{}: tool_use ids missing from the export: {lost:?}",
            path.display()
        );
        assert_eq!(
            exported.1,
            source.signatures,
            "{}: signatures in the export",
            path.display()
        );
        totals.0 += source.calls.len();
        totals.1 += source.results.len();
        totals.2 += source.signatures.len();
        assert_eq!(imported.orphans_as_text, 0, "{}", path.display());
        assert!(
            messages
                .iter()
                .flat_map(|m| m.parts.iter().map(move |p| (m.role, p)))
                .all(|(role, part)| part.answers().is_none() || role == Role::Tool),
            "{}: tool results live in tool messages",
            path.display()
        );
    }
    assert!(
        totals.0 > 0 && totals.1 > 0 && totals.2 > 0,
        "nothing counted: {totals:?}"
    );
}

#[test]
fn interleaved_claude_code_lines_merge_into_one_assistant_message_per_api_message() {
    // spotter/tool_heavy.jsonl: 4 API messages with tool calls, parallel ones interleaved
    // with their results.
    let path = fixtures().join("spotter/tool_heavy.jsonl");
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("t.db")).expect("open");
    let (_, messages) = import_into(&store, &path, Format::ClaudeCode);
    let calls_per_assistant: Vec<usize> = messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .map(|m| m.parts.iter().filter(|p| p.call_id().is_some()).count())
        .filter(|&n| n > 0)
        .collect();
    assert_eq!(calls_per_assistant, [1, 1, 2, 2]);
    // The signed thinking keeps its place after the whitespace-only text block.
    let with_thinking = messages
        .iter()
        .find(|m| m.parts.iter().any(|p| matches!(p, Part::Reasoning { .. })))
        .expect("a message with thinking");
    assert!(matches!(&with_thinking.parts[0], Part::Text { text, .. } if text == "\n\n"));
    assert!(matches!(with_thinking.parts[1], Part::Reasoning { .. }));
}

#[test]
fn trailing_unanswered_calls_are_imported_as_pending() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("t.db")).expect("open");
    for (file, pending) in [
        ("agentcmd/claude/full-session-three.jsonl", 3),
        ("agentcmd/claude/full-session-askuserquestion.jsonl", 1),
    ] {
        let imported =
            import_transcript(Format::ClaudeCode, &read(&fixtures().join(file))).expect("imports");
        let session = store
            .import_session(imported.into_messages())
            .expect("stored");
        assert_eq!(
            store.pending_tool_uses(&session).expect("pending").len(),
            pending,
            "{file}"
        );
    }
}

#[test]
fn subagent_logs_import_their_own_conversation() {
    let text = read(
        &fixtures()
            .join("spotter/258c7280-ae70-4798-800f-63464d01a85d/subagents/agent-a881341.jsonl"),
    );
    let imported = import_transcript(Format::ClaudeCode, &text).expect("imports");
    let roles: HashSet<Role> = imported.messages.iter().map(|m| m.role).collect();
    assert!(roles.contains(&Role::Tool) && roles.contains(&Role::Assistant));
}

#[test]
fn a_refused_import_leaves_no_session_behind() {
    // import_session creates the session and appends in one transaction: a refusal at the
    // last message must not leave an empty (or half-filled) session.
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("t.db")).expect("open");
    let refused = store.import_session(vec![
        NewMessage::user("hi"),
        NewMessage::assistant(vec![Part::tool_use("a", "f", serde_json::json!({}))]),
        NewMessage::tool(vec![Part::tool_result("b", "answers nothing")]),
    ]);
    let error = refused.expect_err("orphan result");
    assert!(
        matches!(error.refusal(), Some(Refusal::UnexpectedToolResult { .. })),
        "{error:?}"
    );
    assert!(store.sessions().expect("list").is_empty());
    let empty = store.import_session(Vec::new());
    assert!(empty.is_err(), "an empty import is refused too");
    assert!(store.sessions().expect("list").is_empty());
}

/// `import --format auto` on real files: every transcript is detected as the format its
/// importer reads, and is refused for every other format; the Codex rollouts too.
#[test]
fn every_real_transcript_is_detected_as_its_format_and_refused_as_any_other() {
    use session_store::import::{confirm, detect, FORMATS as CANDIDATES};
    let transcripts = transcripts();
    assert!(transcripts.len() >= 15, "{transcripts:?}");
    for (path, format) in &transcripts {
        let text = read(path);
        assert_eq!(detect(&text), Ok(*format), "{}", path.display());
        for other in CANDIDATES.iter().filter(|f| *f != format) {
            assert!(
                confirm(*other, &text).is_err(),
                "{} accepted as {other}",
                path.display()
            );
        }
    }
    let codex = ["agentcmd/codex", "agentcmd/codex-older-layout"]
        .iter()
        .flat_map(|folder| std::fs::read_dir(fixtures().join(folder)).expect("codex folder"));
    for entry in codex {
        let path = entry.expect("entry").path();
        let text = read(&path);
        assert_eq!(detect(&text), Ok(Format::Codex), "{}", path.display());
        for format in CANDIDATES.iter().filter(|f| **f != Format::Codex) {
            assert!(
                confirm(*format, &text).is_err(),
                "{} as {format}",
                path.display()
            );
        }
    }
}
