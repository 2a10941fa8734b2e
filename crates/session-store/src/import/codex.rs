//! Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`).
//!
//! JSON Lines, each `{"timestamp", "type", "payload"}`. What becomes history:
//! - `response_item` lines: the Responses API items the model saw and made, read as a
//!   Responses body's items are ([`crate::import::responses`]): messages, reasoning with its
//!   `encrypted_content`, `function_call`, `custom_tool_call` and `local_shell_call` with
//!   their outputs. A shell output whose `metadata.exit_code` is not 0 is an error result.
//!   `ghost_snapshot` items (Codex's undo snapshots) are not conversation and are skipped.
//! - `session_meta`: its `instructions` (`base_instructions.text` in newer CLIs), when not
//!   empty, become the first system message.
//! - `turn_context`: its `model` is the model of the assistant messages that follow
//!   (`openai/{model}`).
//! - `compacted` lines (Codex's compaction marker, `{"message": summary}`): the whole turns
//!   before the marker are the head a store compaction replaces, with the marker's summary
//!   ([`Imported::compactions`]). `compaction` items (the encrypted form) are skipped.
//! - `event_msg` lines repeat what the items hold for a UI (`user_message`, `agent_message`,
//!   `agent_reasoning`, `token_count`, `turn_aborted`) and are skipped, as is any line type
//!   this importer does not know.
//! - Timestamps become the messages' `created_at`.
//!
//! Sub-agents: a Codex import fills no sub-agent column (`sessions.parent_id`,
//! `parent_tool_use_id`, `state`), unlike a Claude Code one, because a rollout does not hold
//! what they need. A rollout is one thread: the CLIs of the fixtures (0.40) write no
//! sub-agent information at all; newer ones write a sub-agent's own rollout with
//! `session_meta.payload.source = {"subagent": {"thread_spawn": {"parent_thread_id", "depth",
//! "agent_nickname"?, "agent_role"?}}}` (or `{"subagent": "review" | "compact"}`). That names
//! the parent by its Codex thread id, which the store keeps for no session (there is no
//! column for a source's own id), and names no call: the spawning `spawn_agent`
//! function_call is in the parent's rollout, its output naming the child's thread id. Both
//! links need the two rollouts read together and the thread ids kept, so such a rollout is
//! imported as a session of its own; its `source` is not read.
//!
//! A rollout records what happened, interrupted turns included (the output of an aborted
//! call may be written after the `turn_aborted` event), so pairing is mended the way
//! `store-repair` would: a call left unanswered when the conversation moves on gets a
//! tombstone, an output that answers nothing becomes text, calls unanswered at the very end
//! stay pending.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use std::io::BufRead;

use super::responses::Items;
use super::stream::{Batches, Log, Streamed};
use super::{as_object, ImportError, Imported, ImportedCompaction, Leniency, Location};
use crate::model::{NewMessage, Part, Role};

/// Imports a Codex CLI rollout.
pub fn import(text: &str) -> Result<Imported, ImportError> {
    super::stream::collect_log::<Rollout>(text)
}

/// A rollout being read, one line at a time ([`super::stream`]).
pub(crate) struct Rollout {
    items: Items,
    /// (messages before the marker, summary) of each compaction marker, in order.
    markers: Vec<(usize, String)>,
    /// Non-blank lines read.
    lines: usize,
}

impl Log for Rollout {
    /// The system prompt: the first `session_meta` line with instructions (only lines that
    /// name `session_meta` are parsed; one that is not JSON ends the search, the import is
    /// refused at it or before).
    fn begin(input: &mut dyn BufRead) -> Result<Self, ImportError> {
        let mut system = None;
        let mut line = String::new();
        loop {
            line.clear();
            if input
                .read_line(&mut line)
                .map_err(|source| ImportError::Io { source })?
                == 0
            {
                break;
            }
            if !line.contains("session_meta") {
                continue;
            }
            let Ok(value) = serde_json::from_str::<Value>(&line) else {
                break;
            };
            if value.get("type").and_then(Value::as_str) != Some("session_meta") {
                continue;
            }
            let payload = value.get("payload").unwrap_or(&Value::Null);
            if let Some(instructions) = instructions(payload) {
                system = Some(NewMessage::new(
                    Role::System,
                    vec![Part::text(instructions)],
                ));
                break;
            }
        }
        let mut items = Items::new(Leniency::MEND);
        items.log = true;
        items.assembler.set_system(system);
        Ok(Self {
            items,
            markers: Vec::new(),
            lines: 0,
        })
    }

    fn line(&mut self, number: usize, _: usize, line: &str, _: bool) -> Result<(), ImportError> {
        if line.trim().is_empty() {
            return Ok(());
        }
        self.lines += 1;
        let items = &mut self.items;
        let at = Location::line(number);
        let value: Value = serde_json::from_str(line).map_err(|source| ImportError::Json {
            at: at.clone(),
            source,
        })?;
        let object = as_object(&value, &at, "a rollout line")?;
        let created_at = timestamp(object);
        let kind = object
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let payload = object.get("payload").unwrap_or(&Value::Null);
        let at = at.join("payload");
        match kind {
            // Read by `begin`: the system prompt goes first.
            "session_meta" => {}
            "turn_context" => {
                if let Some(Value::String(model)) = payload.get("model") {
                    items.model = Some(format!("openai/{model}"));
                }
            }
            "compacted" => {
                let summary = payload
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                items.flush()?;
                self.markers.push((items.len(), summary));
            }
            "response_item" => match payload.get("type").and_then(Value::as_str) {
                Some("ghost_snapshot") => {}
                // The encrypted form of a compaction; its summary is the `compacted` line's.
                Some("compaction" | "compaction_summary") => {}
                _ => items.item(&at, payload, created_at)?,
            },
            _ => {}
        }
        Ok(())
    }

    fn ready(&mut self) -> Batches {
        vec![(0, self.items.assembler.take_ready())]
    }

    fn finish(mut self, lines: usize) -> Result<(Batches, Streamed), ImportError> {
        if self.lines == 0 {
            return Err(ImportError::Empty);
        }
        self.items.flush()?;
        let rest = self
            .items
            .assembler
            .finish_rest(&Location::line(lines.max(1)))?;
        let streamed = Streamed {
            has_system: rest.has_system,
            tombstoned: rest.tombstoned,
            orphans_as_text: rest.orphans_as_text,
            compactions: compactions(&rest.roles, self.markers),
            ..Streamed::default()
        };
        Ok((vec![(0, rest.messages)], streamed))
    }
}

/// A `session_meta` payload's instructions: `instructions` (older CLIs) or
/// `base_instructions.text` (newer ones), when not blank.
fn instructions(payload: &Value) -> Option<&str> {
    payload
        .get("instructions")
        .and_then(Value::as_str)
        .filter(|text| !text.trim().is_empty())
        .or_else(|| {
            payload
                .pointer("/base_instructions/text")
                .and_then(Value::as_str)
        })
        .filter(|text| !text.trim().is_empty())
}

/// Each marker as a store compaction: the cut walks back from the marker to the user message
/// that opens its turn (the first turn is never compacted); a marker without summary, or one
/// that would not compact more than the one before, is left out.
fn compactions(roles: &[Role], markers: Vec<(usize, String)>) -> Vec<ImportedCompaction> {
    let first_user = roles.iter().position(|role| *role == Role::User);
    let mut out: Vec<ImportedCompaction> = Vec::new();
    for (before, summary) in markers {
        if summary.trim().is_empty() {
            continue;
        }
        let cut = (0..=before.min(roles.len().saturating_sub(1)))
            .rev()
            .find(|&i| roles[i] == Role::User && Some(i) != first_user);
        if let Some(at) = cut.filter(|at| out.last().is_none_or(|last| last.at < *at)) {
            out.push(ImportedCompaction { at, summary });
        }
    }
    out
}

fn timestamp(fields: &Map<String, Value>) -> Option<DateTime<Utc>> {
    let text = fields.get("timestamp")?.as_str()?;
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rollout(lines: &[Value]) -> String {
        lines
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn item(payload: Value) -> Value {
        json!({"timestamp": "2025-09-25T02:12:23.966Z", "type": "response_item", "payload": payload})
    }

    #[test]
    fn calls_outputs_reasoning_and_the_compaction_marker_are_read() {
        let text = rollout(&[
            json!({"timestamp": "2025-09-25T02:12:23.966Z", "type": "session_meta", "payload": {"id": "x", "instructions": ""}}),
            json!({"timestamp": "2025-09-25T02:12:23.966Z", "type": "turn_context", "payload": {"model": "gpt-5-codex"}}),
            item(
                json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}),
            ),
            item(
                json!({"type": "reasoning", "summary": [], "content": null, "encrypted_content": "E"}),
            ),
            item(
                json!({"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"ls\"]}", "call_id": "c1"}),
            ),
            json!({"timestamp": "2025-09-25T02:12:23.966Z", "type": "event_msg", "payload": {"type": "turn_aborted"}}),
            item(
                json!({"type": "function_call_output", "call_id": "c1", "output": "{\"output\":\"\",\"metadata\":{\"exit_code\":1}}"}),
            ),
            item(
                json!({"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch", "call_id": "c2"}),
            ),
            item(json!({"type": "custom_tool_call_output", "call_id": "c2", "output": "done"})),
            json!({"timestamp": "2025-09-25T02:12:24Z", "type": "compacted", "payload": {"message": "we listed files"}}),
            item(
                json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "next"}]}),
            ),
            item(
                json!({"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c3"}),
            ),
            item(
                json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "stop"}]}),
            ),
        ]);
        let imported = import(&text).expect("imports");
        let roles: Vec<Role> = imported.messages.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [
                Role::User,
                Role::Assistant,
                Role::Tool,
                Role::Assistant,
                Role::Tool,
                Role::User,
                Role::Assistant,
                Role::Tool,
                Role::User
            ]
        );
        assert!(matches!(
            imported.messages[2].parts[0],
            Part::ToolResult { is_error: true, .. }
        ));
        assert_eq!(imported.tombstoned, ["c3"]);
        assert_eq!(
            imported.compactions,
            [ImportedCompaction {
                at: 5,
                summary: "we listed files".into()
            }]
        );
        assert!(imported.system.is_none());
    }

    #[test]
    fn a_broken_line_is_refused_by_number() {
        let err = import("{\"type\": \"session_meta\", \"payload\": {}}\n{oops").expect_err("bad");
        assert_eq!(err.location().and_then(|l| l.line), Some(2));
    }
}
