//! Claude Code session logs (`~/.claude/projects/<project>/<session>.jsonl`, and the
//! `subagents/agent-*.jsonl` files beside them).
//!
//! The log is JSON Lines, one line per event. What becomes history:
//! - `assistant` lines: Claude Code writes **one line per content block**, so the lines of one
//!   API message share `message.id` and are merged back into one assistant message. In 2.1.x
//!   a message's `tool_use` lines are interleaved with the `user` lines carrying the results
//!   of its earlier calls (`assistant[tool_use A]`, `user[result A]`, `assistant[tool_use B]`):
//!   a line continues the assistant message with its `message.id` as long as only tool results
//!   came in between.
//! - `user` lines: `tool_result` blocks become a `tool` message; the rest of the line (text,
//!   images) a `user` message after it. Lines with `isMeta` (caveats, hook reminders) are kept
//!   as user messages, their parts tagged `provider_metadata.claude_code.is_meta`. Interrupt
//!   markers (`[Request interrupted by user...]`) stay user text, tagged `.interrupt`.
//! - A compaction (`compact_boundary`, then the `isCompactSummary` user line) becomes a store
//!   compaction ([`Imported::compactions`]): its summary goes to `summaries`, every turn
//!   before it is compacted, and the summary line stays as an empty user message tagged
//!   `.compact_summary` that opens the next turn. An export sends what Claude Code sent: the
//!   system prompt, the summary, and what follows.
//! - `message.model` becomes `messages.model` (`anthropic/...`), `message.usage` the
//!   message's usage row; the latest legacy `summary` line is the session's title.
//! - Everything else is skipped: `progress`, `file-history-snapshot`, `queue-operation`,
//!   `system` (compact boundaries, hook summaries, local commands) and any line type this
//!   importer does not know.
//! - Sidechains: the `isSidechain` lines of a main session log are a sub-agent's
//!   conversation: each agent (`agentId`) becomes a child session ([`Imported::children`]),
//!   linked to the `Task` call whose prompt started it. A file whose message lines are all
//!   sidechain (a `subagents/agent-*.jsonl` file) is imported as the subagent's own
//!   conversation.
//! - A line whose `uuid` already appeared is a duplicate (written again on resume) and skipped.
//! - Timestamps become the messages' `created_at`.
//!
//! A log records what happened, interruptions and crashes included, so pairing is mended the
//! way `store-repair` would (see [`crate::import`]): a call left unanswered when the
//! conversation moves on gets a tombstone, a result that answers nothing becomes text, and
//! calls unanswered at the very end stay pending.
//!
//! Refused: a line that is not JSON, a message line without `message.content`, a block
//! without its required fields; the error names the line (1-based) and the path in it.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

use super::blocks::{content_blocks, split};
use super::{
    as_object, json as parse, tag, Assembler, ImportError, Imported, ImportedChild,
    ImportedCompaction, Leniency, Location,
};
use crate::model::{NewMessage, Part, Role};

/// One `user` or `assistant` line.
struct Entry<'a> {
    line: usize,
    assistant: bool,
    message: &'a Map<String, Value>,
    fields: &'a Map<String, Value>,
    sidechain: bool,
}

/// Imports a Claude Code session log.
pub fn import(text: &str) -> Result<Imported, ImportError> {
    let (values, warnings) = parse_lines(text)?;
    let mut entries = Vec::new();
    let mut seen_uuids = HashSet::new();
    let mut title = None;
    for (line, value) in &values {
        let at = Location::line(*line);
        let fields = as_object(value, &at, "a log entry")?;
        let assistant = match fields.get("type").and_then(Value::as_str) {
            Some("assistant") => true,
            Some("user") => false,
            // The title Claude Code gives a session (the latest one wins).
            Some("summary") => {
                if let Some(summary) = fields.get("summary").and_then(Value::as_str) {
                    if !crate::history::blank::is_blank(summary) {
                        title = Some(summary.to_owned());
                    }
                }
                continue;
            }
            _ => continue,
        };
        if let Some(uuid) = fields.get("uuid").and_then(Value::as_str) {
            if !seen_uuids.insert(uuid) {
                continue;
            }
        }
        let Some(message) = fields.get("message") else {
            return Err(ImportError::malformed(&at, "missing \"message\""));
        };
        let message = as_object(message, &at.join("message"), "a message")?;
        entries.push(Entry {
            line: *line,
            assistant,
            message,
            fields,
            sidechain: fields.get("isSidechain") == Some(&Value::Bool(true)),
        });
    }
    let end = Location::line(values.last().map_or(0, |(line, _)| *line));
    let only_sidechain = entries.iter().all(|e| e.sidechain);
    let main: Vec<&Entry<'_>> = entries
        .iter()
        .filter(|entry| only_sidechain || !entry.sidechain)
        .collect();
    let mut imported = assemble(&main, &end)?;
    if !only_sidechain {
        // Sub-agents written into the main log: one child session per agent, in order of
        // first appearance, linked to the Task call whose prompt started it.
        let mut agents: Vec<(&str, Vec<&Entry<'_>>)> = Vec::new();
        for entry in entries.iter().filter(|entry| entry.sidechain) {
            let agent = entry
                .fields
                .get("agentId")
                .and_then(Value::as_str)
                .unwrap_or("sidechain");
            match agents.iter_mut().find(|(id, _)| *id == agent) {
                Some((_, group)) => group.push(entry),
                None => agents.push((agent, vec![entry])),
            }
        }
        for (_, group) in agents {
            let child = assemble(&group, &end)?;
            let spawned_by = spawning_call(&imported, &child);
            imported.children.push(ImportedChild {
                spawned_by,
                imported: child,
            });
        }
    }
    imported.warnings = warnings;
    imported.title = title;
    Ok(imported)
}

/// The Task call of `parent` whose prompt is the first user text of `child`.
fn spawning_call(parent: &Imported, child: &Imported) -> Option<String> {
    let first_text = child
        .messages
        .iter()
        .find(|m| m.role == Role::User)?
        .parts
        .iter()
        .find_map(|p| match p {
            Part::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })?;
    parent
        .messages
        .iter()
        .flat_map(|m| &m.parts)
        .find_map(|p| match p {
            Part::ToolUse { id, input, .. }
                if input.get("prompt").and_then(Value::as_str) == Some(first_text) =>
            {
                Some(id.clone())
            }
            _ => None,
        })
}

/// One conversation of the log (the main one, or one sub-agent's) as messages.
fn assemble(entries: &[&Entry<'_>], end: &Location) -> Result<Imported, ImportError> {
    let mut assembler = Assembler::new(Leniency::MEND);
    let mut open_message_id: Option<&str> = None;
    let mut compactions = Vec::new();
    // The usage of each assistant message, in order: every line of a message repeats the
    // API response's usage, the last line with the final output count.
    let mut usages: Vec<Option<crate::model::Usage>> = Vec::new();
    for entry in entries {
        let at = Location::line(entry.line);
        let content_at = at.join("message").join("content");
        let Some(content) = entry.message.get("content") else {
            return Err(ImportError::malformed(
                &at.join("message"),
                "missing \"content\"",
            ));
        };
        let (results, parts) = split(content_blocks(content, &content_at)?);
        let created_at = timestamp(entry.fields);
        if entry.assistant {
            if !results.is_empty() {
                return Err(ImportError::malformed(
                    &content_at,
                    "an assistant message cannot hold tool_result blocks",
                ));
            }
            if parts.is_empty() {
                continue;
            }
            let message_id = entry.message.get("id").and_then(Value::as_str);
            let model = super::model_name("anthropic", entry.message.get("model"));
            if message_id.is_some()
                && message_id == open_message_id
                && assembler.assistant_is_open()
            {
                assembler.extend_assistant(&at, parts)?;
                if let Some(usage) = super::usage::anthropic(entry.message) {
                    if let Some(last) = usages.last_mut() {
                        *last = Some(usage);
                    }
                }
            } else {
                let mut message = NewMessage::assistant(parts);
                message.created_at = created_at;
                message.model = model;
                assembler.push(&at, message)?;
                usages.push(super::usage::anthropic(entry.message));
                open_message_id = message_id;
            }
        } else {
            if !results.is_empty() {
                assembler.results(&at, results, created_at)?;
            }
            if parts.is_empty() {
                continue;
            }
            let compact_summary = entry.fields.get("isCompactSummary") == Some(&Value::Bool(true));
            if compact_summary && assembler.has_user() {
                // A compaction: the summary goes to the store's summaries, the turns before
                // it are compacted, and the message that opened the new turn stays (empty,
                // tagged) so the turns keep their boundaries.
                let summary: Vec<&str> = parts
                    .iter()
                    .filter_map(|p| match p {
                        Part::Text { text, .. } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect();
                let summary = summary.join("\n\n");
                if !crate::history::blank::is_blank(&summary) {
                    let mut marker = Part::text("");
                    tag_user_part(&mut marker, entry.fields);
                    let mut message = NewMessage::new(Role::User, vec![marker]);
                    message.created_at = created_at;
                    assembler.push(&at, message)?;
                    open_message_id = None;
                    compactions.push(ImportedCompaction {
                        at: assembler.len() - 1,
                        summary,
                    });
                    continue;
                }
            }
            let parts = parts
                .into_iter()
                .map(|mut part| {
                    tag_user_part(&mut part, entry.fields);
                    part
                })
                .collect();
            let mut message = NewMessage::new(Role::User, parts);
            message.created_at = created_at;
            assembler.push(&at, message)?;
            open_message_id = None;
        }
    }
    let mut imported = assembler.finish(None, end)?;
    imported.compactions = compactions;
    // The assembler adds tool and user messages only, so the k-th assistant message out is
    // the k-th one pushed.
    let assistants = imported
        .messages
        .iter_mut()
        .filter(|m| m.role == Role::Assistant);
    for (message, usage) in assistants.zip(usages) {
        message.usage = usage;
    }
    Ok(imported)
}

/// The parsed lines of a log, each with its 1-based number.
type Lines = Vec<(usize, Value)>;

/// Parses every non-blank line, naming the first one that is not JSON (with its byte offset)
/// and the path of a duplicate key. The last line of a log that does not end with a newline
/// may have been cut off by a crash mid-write: when it is not JSON it is left out, with a
/// warning, and everything before it is imported.
fn parse_lines(text: &str) -> Result<(Lines, Vec<String>), ImportError> {
    let mut values = Vec::new();
    let mut warnings = Vec::new();
    let count = text.lines().count();
    let cut_off = !text.ends_with('\n');
    let mut byte = 0;
    for (index, line) in text.split_inclusive('\n').enumerate() {
        let origin = parse::Origin {
            line: index + 1,
            byte,
        };
        byte += line.len();
        // Without its line break, so an error at the end of the line is on this line.
        let line = line.trim_end_matches(['\n', '\r']);
        if line.trim().is_empty() {
            continue;
        }
        match parse::parse(line, &Location::line(index + 1), Some(origin)) {
            Ok(value) => values.push((index + 1, value)),
            Err(ImportError::Json { source, .. })
                if cut_off && index + 1 == count && source.is_eof() =>
            {
                warnings.push(format!(
                    "line {}: cut off before its end (the log was not finished); imported up to line {}",
                    index + 1,
                    index
                ));
            }
            Err(error) => return Err(error),
        }
    }
    if values.is_empty() {
        return Err(ImportError::Empty);
    }
    Ok((values, warnings))
}

fn timestamp(fields: &Map<String, Value>) -> Option<DateTime<Utc>> {
    let text = fields.get("timestamp")?.as_str()?;
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

fn tag_user_part(part: &mut Part, fields: &Map<String, Value>) {
    let flag = |key: &str| fields.get(key) == Some(&Value::Bool(true));
    let mut tags = Map::new();
    if flag("isMeta") {
        tags.insert("is_meta".into(), json!(true));
    }
    if flag("isCompactSummary") {
        tags.insert("compact_summary".into(), json!(true));
    }
    if let Part::Text { text, .. } = part {
        if text.starts_with("[Request interrupted by user") {
            tags.insert("interrupt".into(), json!(true));
        }
    }
    if !tags.is_empty() {
        tag(part, json!({ "claude_code": Value::Object(tags) }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(values: &[Value]) -> String {
        values
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn user(uuid: &str, content: Value) -> Value {
        json!({"type": "user", "uuid": uuid, "isSidechain": false,
               "timestamp": "2026-02-10T22:57:54.684Z",
               "message": {"role": "user", "content": content}})
    }

    fn assistant(uuid: &str, id: &str, block: Value) -> Value {
        json!({"type": "assistant", "uuid": uuid, "isSidechain": false,
               "message": {"id": id, "role": "assistant", "content": [block]}})
    }

    fn call(id: &str) -> Value {
        json!({"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "ls"}})
    }

    fn result(id: &str) -> Value {
        json!([{"type": "tool_result", "tool_use_id": id, "content": "ok"}])
    }

    fn roles(imported: &Imported) -> Vec<Role> {
        imported.messages.iter().map(|m| m.role).collect()
    }

    #[test]
    fn interleaved_tool_use_lines_merge_into_one_assistant_message_by_message_id() {
        let log = lines(&[
            user("u1", json!("go")),
            json!({"type": "progress", "data": {}}),
            assistant("a1", "msg_1", json!({"type": "text", "text": "\n\n"})),
            assistant(
                "a2",
                "msg_1",
                json!({"type": "thinking", "thinking": "hm", "signature": "S"}),
            ),
            assistant("a3", "msg_1", call("A")),
            user("u2", result("A")),
            assistant("a4", "msg_1", call("B")),
            user("u3", result("B")),
            assistant("a5", "msg_2", json!({"type": "text", "text": "done"})),
        ]);
        let imported = import(&log).expect("imports");
        assert_eq!(
            roles(&imported),
            [
                Role::User,
                Role::Assistant,
                Role::Tool,
                Role::Tool,
                Role::Assistant
            ]
        );
        let ids: Vec<_> = imported.messages[1]
            .parts
            .iter()
            .filter_map(Part::call_id)
            .collect();
        assert_eq!(ids, ["A", "B"]);
        assert_eq!(imported.messages[1].parts.len(), 4);
        assert!(imported.messages[0].created_at.is_some());
    }

    #[test]
    fn usage_comes_from_the_last_line_of_each_assistant_message() {
        let mut first = assistant("a1", "msg_1", json!({"type": "text", "text": "hi"}));
        first["message"]["model"] = json!("claude-opus-4-1");
        first["message"]["usage"] = json!({"input_tokens": 10, "output_tokens": 1});
        let mut second = assistant("a2", "msg_1", call("A"));
        second["message"]["model"] = json!("claude-opus-4-1");
        second["message"]["usage"] = json!({"input_tokens": 10, "output_tokens": 25,
            "cache_read_input_tokens": 500, "cache_creation_input_tokens": 7});
        let log = lines(&[
            user("u1", json!("go")),
            first,
            second,
            user("u2", result("A")),
        ]);
        let imported = import(&log).expect("imports");
        let usage = imported.messages[1].usage.clone().expect("usage");
        assert_eq!(usage.output_tokens, Some(25));
        assert_eq!(usage.cache_read_tokens, Some(500));
        assert_eq!(usage.model.as_deref(), Some("anthropic/claude-opus-4-1"));
        assert!(imported
            .messages
            .iter()
            .filter(|m| m.role != Role::Assistant)
            .all(|m| m.usage.is_none()));
    }

    #[test]
    fn a_trailing_unanswered_call_is_imported_as_pending() {
        let log = lines(&[user("u1", json!("go")), assistant("a1", "m", call("A"))]);
        let imported = import(&log).expect("imports");
        assert_eq!(roles(&imported), [Role::User, Role::Assistant]);
        assert!(imported.tombstoned.is_empty());
    }

    #[test]
    fn a_call_left_unanswered_before_the_next_user_message_gets_a_tombstone() {
        let log = lines(&[
            user("u1", json!("go")),
            assistant("a1", "m", call("A")),
            user("u2", json!("[Request interrupted by user]")),
        ]);
        let imported = import(&log).expect("imports");
        assert_eq!(
            roles(&imported),
            [Role::User, Role::Assistant, Role::Tool, Role::User]
        );
        assert_eq!(imported.tombstoned, ["A"]);
        assert!(matches!(
            &imported.messages[2].parts[0],
            Part::ToolResult { is_error: true, .. }
        ));
        assert_eq!(
            imported.messages[3].parts[0].provider_metadata(),
            Some(&json!({"claude_code": {"interrupt": true}}))
        );
    }

    #[test]
    fn a_result_answering_nothing_is_kept_as_text() {
        let log = lines(&[user("u1", json!("go")), user("u2", result("ghost"))]);
        let imported = import(&log).expect("imports");
        assert_eq!(roles(&imported), [Role::User, Role::User]);
        assert_eq!(imported.orphans_as_text, 1);
        let Part::Text { text, .. } = &imported.messages[1].parts[0] else {
            panic!("expected text");
        };
        assert!(text.contains("ghost") && text.ends_with("ok"));
    }

    #[test]
    fn sidechain_lines_are_skipped_in_a_main_log_but_imported_in_a_subagent_file() {
        let mut side = user("s1", json!("Warmup"));
        side["isSidechain"] = json!(true);
        let imported = import(&lines(&[user("u1", json!("go")), side.clone()])).expect("imports");
        assert_eq!(imported.messages.len(), 1);
        let imported = import(&lines(&[side])).expect("imports");
        assert_eq!(imported.messages.len(), 1);
    }

    #[test]
    fn duplicate_uuids_and_non_message_lines_are_skipped() {
        let log = lines(&[
            json!({"type": "summary", "summary": "old", "leafUuid": "x"}),
            json!({"type": "file-history-snapshot", "snapshot": {}}),
            user("u1", json!("go")),
            user("u1", json!("go")),
            json!({"type": "system", "subtype": "compact_boundary"}),
        ]);
        assert_eq!(import(&log).expect("imports").messages.len(), 1);
    }

    #[test]
    fn malformed_lines_are_refused_with_their_line_number() {
        let log = format!("{}\n\n{{not json\n", user("u1", json!("go")));
        let err = import(&log).expect_err("line 3 is not JSON");
        assert_eq!(err.location().and_then(|l| l.line), Some(3));
        let log = lines(&[
            user("u1", json!("go")),
            json!({"type": "assistant", "message": {"id": "m", "content": [{"type": "tool_use", "id": "A"}]}}),
        ]);
        let err = import(&log).expect_err("tool_use without a name");
        assert_eq!(
            err.to_string(),
            "line 2, message.content[0]: missing \"name\""
        );
        assert!(matches!(import("\n\n"), Err(ImportError::Empty)));
    }

    #[test]
    fn a_log_cut_off_mid_line_imports_up_to_its_last_whole_line_with_a_warning() {
        let whole = lines(&[user("u1", json!("go")), user("u2", json!("more"))]);
        let log = format!("{whole}\n{{\"type\": \"user\", \"mess");
        let imported = import(&log).expect("imports the whole lines");
        assert_eq!(imported.messages.len(), 2);
        assert_eq!(imported.warnings.len(), 1, "{:?}", imported.warnings);
        assert!(imported.warnings[0].starts_with("line 3: cut off"));
        // A broken line that is not the last, or a last line ended by a newline, is refused.
        assert!(import(&format!("{whole}\n{{\"type\": \"user\", \"mess\n")).is_err());
    }

    #[test]
    fn assistant_lines_record_their_model() {
        let mut line = assistant("a1", "m", json!({"type": "text", "text": "hi"}));
        line["message"]["model"] = json!("claude-opus-4-5");
        let imported = import(&lines(&[user("u1", json!("go")), line])).expect("imports");
        assert_eq!(
            imported.messages[1].model.as_deref(),
            Some("anthropic/claude-opus-4-5")
        );
    }
}
