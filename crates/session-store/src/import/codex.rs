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
//!   (`openai/{model}`); an assistant message still open when the model changes (newer
//!   rollouts write a turn's context before its prompt) is the earlier model's.
//! - `compacted` lines (Codex's compaction marker, `{"message": summary}`): the whole turns
//!   before the marker are the head a store compaction replaces, with the marker's summary
//!   ([`Imported::compactions`]). A remote compaction's marker has an empty `message` and the
//!   history the server gave back (`replacement_history`); its message texts are the
//!   summary. `compaction` items (the encrypted form) are skipped.
//! - `event_msg` lines repeat what the items hold for a UI (`user_message`, `agent_message`,
//!   `agent_reasoning`, `token_count`, `turn_aborted`) and are skipped, as is any line type
//!   this importer does not know; but a `user_message` whose prompt no `response_item` user
//!   message of its turn carries becomes the user message ([`Prompts`]). Real rollouts (the
//!   0.40 fixtures) write the item and, right after it, the event with the same text; a
//!   rollout with the event alone would otherwise lose the prompt. Its `images` are not read.
//! - Timestamps become the messages' `created_at`.
//!
//! The older layout (Codex CLI before the envelope, up to about August-September 2025; its
//! `codex-rs/core/src/rollout.rs` wrote it) is read too: the first line is the session header
//! `{"id", "timestamp", "instructions", "git"?}` (what `session_meta.payload` became), then
//! `{"record_type": "state"}` snapshots (skipped) and the Responses items themselves, one per
//! line with no envelope and no timestamp. The header is read as a `session_meta` payload and
//! each bare item as a `response_item` payload, so both layouts give the same messages for
//! the same items ([`older_header`] tells the layout, here and in `detect`).
//!
//! Sub-agents. The format, as the Codex sources define it (openai/codex,
//! `codex-rs/protocol/src/protocol.rs`: `SessionMeta`, `SessionSource`, `SubAgentSource`;
//! `codex-rs/core/src/tools/handlers/multi_agents` (`collab.rs` in older trees): `spawn_agent`):
//! - `session_meta.payload` holds `id` (the thread id) and `source`, a `SessionSource`
//!   serialised lowercase: `"cli"`, `"vscode"`, `"exec"`, `"mcp"`, ... or, for a sub-agent,
//!   `{"subagent": SubAgentSource}`, itself snake_case: `"review"`, `"compact"`,
//!   `"memory_consolidation"`, `{"other": text}` or `{"thread_spawn": {"parent_thread_id",
//!   "depth", "agent_path"?, "agent_nickname"?, "agent_role"? (alias "agent_type")}}`.
//! - The parent's rollout holds the `spawn_agent` `function_call` (arguments `{"message"?,
//!   "items"?, "agent_type"?, "model"?, ...}`); its `function_call_output` is
//!   `{"agent_id": child thread id}`.
//! - The CLIs of the fixtures (0.40) write no `source` subagent at all.
//!
//! What an import does with it: a rollout whose own `session_meta` has a `subagent` source is
//! a sub-agent's own conversation ([`Imported::subagent`], with the `parent_thread_id` a
//! `thread_spawn` names), and every rollout's own `id` is kept
//! ([`Imported::source_thread_id`], `sessions.source_thread_id`). The store then links a
//! sub-agent to the stored session of its parent thread (`parent_id`, and
//! `parent_tool_use_id`: the parent's call whose output's `agent_id` is the child's thread,
//! which gets `session_store.child_session`) and records its state from the child's own end
//! (`spawn_agent` answers when the thread starts, so its answer says nothing of how it
//! ended); the child keeps its parent's thread id (`sessions.source_parent_thread_id`), so a
//! parent imported after its child links it too. A child rollout may start with records copied from its parent (a
//! `session_meta` of the parent's thread, then the parent's history) before its own
//! `session_meta`: when a `thread_spawn` `session_meta` names as parent the `id` of an
//! earlier `session_meta` of the same file, every line before it is another thread's and
//! is not read as this conversation's history. Where Codex puts the copied records was not
//! found in its sources; this rule skips only what the file itself shows to be copied.
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
use super::{
    as_object, ImportError, Imported, ImportedCompaction, Leniency, Location, SubagentOrigin,
};
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
    /// The line of the rollout's own `session_meta`: lines before it are another thread's.
    first_line: usize,
    /// See [`Imported::subagent`].
    subagent: Option<SubagentOrigin>,
    /// The older layout: bare items after a header line ([`older_header`]).
    older: bool,
    /// The rollout's own thread id ([`Imported::source_thread_id`]).
    thread_id: Option<String>,
    /// `user_message` events and the user items they repeat.
    prompts: Prompts,
}

/// The prompts of `user_message` events, against the `response_item` user messages of the same
/// turn: an event is the item's echo when an item of its turn (before the next model item, or
/// after the previous one) has a text equal to its message; otherwise it is the prompt, a user
/// message placed where the event was (before the next item that is not a user message or an
/// output, so a call and its output stay together).
#[derive(Default)]
struct Prompts {
    /// The texts of the user items since the last model item.
    recent: Vec<String>,
    /// An event no item carried yet: where, when, its message.
    pending: Option<(Location, Option<DateTime<Utc>>, String)>,
}

impl Prompts {
    /// A `user_message` event.
    fn event(
        &mut self,
        items: &mut Items,
        at: Location,
        message: &str,
        created_at: Option<DateTime<Utc>>,
    ) -> Result<(), ImportError> {
        if self.recent.iter().any(|text| same_prompt(text, message)) {
            return Ok(());
        }
        self.flush(items)?;
        self.pending = Some((at, created_at, message.to_owned()));
        Ok(())
    }

    /// Before a response item: a user message clears the event it carries; an item of the
    /// model first places the event no item carried.
    fn before(&mut self, items: &mut Items, item: &Value) -> Result<(), ImportError> {
        let kind = item.get("type").and_then(Value::as_str);
        if kind == Some("message") && item.get("role").and_then(Value::as_str) == Some("user") {
            let texts = item
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|part| part.get("text").and_then(Value::as_str));
            for text in texts {
                if self
                    .pending
                    .as_ref()
                    .is_some_and(|(_, _, message)| same_prompt(text, message))
                {
                    self.pending = None;
                }
                self.recent.push(text.to_owned());
            }
            return Ok(());
        }
        if kind.is_some_and(|kind| kind.ends_with("_output")) {
            return Ok(());
        }
        self.recent.clear();
        self.flush(items)
    }

    /// Places the event no item carried, as the user message it was.
    fn flush(&mut self, items: &mut Items) -> Result<(), ImportError> {
        let Some((at, created_at, message)) = self.pending.take() else {
            return Ok(());
        };
        let item = serde_json::json!({"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": message}]});
        items.item(&at, &item, created_at)
    }
}

/// An event's message is its item's text, up to the whitespace at its ends.
fn same_prompt(text: &str, message: &str) -> bool {
    text == message || text.trim() == message.trim()
}

/// A `session_meta` line of a rollout: its line number and payload.
struct Meta {
    line: usize,
    payload: Value,
}

/// Every `session_meta` line of a rollout, in order (of the older layout: its header).
struct Metas {
    metas: Vec<Meta>,
    /// The rollout is of the older layout (no envelope).
    older: bool,
}

impl Metas {
    /// Reads the `session_meta` lines up to the end, or up to a line naming `session_meta`
    /// that is not JSON (the import is refused there later).
    fn read(input: &mut dyn BufRead) -> Result<Self, ImportError> {
        let mut metas = Vec::new();
        let mut line = String::new();
        let mut number = 0;
        let mut first = true;
        loop {
            line.clear();
            if input
                .read_line(&mut line)
                .map_err(|source| ImportError::Io { source })?
                == 0
            {
                break;
            }
            number += 1;
            if first && !line.trim().is_empty() {
                first = false;
                // The older layout's header: the whole line is what `payload` became.
                if let Ok(Value::Object(header)) = serde_json::from_str::<Value>(&line) {
                    if older_header(&header) {
                        return Ok(Self {
                            metas: vec![Meta {
                                line: number,
                                payload: Value::Object(header),
                            }],
                            older: true,
                        });
                    }
                }
            }
            if !line.contains("session_meta") {
                continue;
            }
            let Ok(mut value) = serde_json::from_str::<Value>(&line) else {
                break;
            };
            if value.get("type").and_then(Value::as_str) == Some("session_meta") {
                let payload = value
                    .get_mut("payload")
                    .map(Value::take)
                    .unwrap_or_default();
                metas.push(Meta {
                    line: number,
                    payload,
                });
            }
        }
        Ok(Self {
            metas,
            older: false,
        })
    }

    /// The rollout's own `session_meta`: the last one that names an earlier one's thread
    /// as its `thread_spawn` parent (what comes before it was copied from its ancestors),
    /// else the first.
    fn own(&self) -> Option<&Meta> {
        let spawned = self.metas.iter().enumerate().rev().find(|(k, meta)| {
            let parent = meta
                .payload
                .pointer("/source/subagent/thread_spawn/parent_thread_id")
                .and_then(Value::as_str);
            parent.is_some_and(|parent| {
                self.metas[..*k].iter().any(|earlier| {
                    earlier.payload.get("id").and_then(Value::as_str) == Some(parent)
                })
            })
        });
        spawned.map(|(_, meta)| meta).or_else(|| self.metas.first())
    }
}

/// Refuses a rollout whose own thread id, or its parent's, the store could not keep on every
/// engine (`sessions.source_thread_id` and `source_parent_thread_id` are indexed:
/// [`crate::MAX_ID_BYTES`], no NUL), at the `session_meta` line that names it.
fn keepable_thread_ids(meta: &Meta) -> Result<(), ImportError> {
    let ids = [
        ("payload.id", "/id"),
        (
            "payload.source.subagent.thread_spawn.parent_thread_id",
            "/source/subagent/thread_spawn/parent_thread_id",
        ),
    ];
    for (path, pointer) in ids {
        let id = meta.payload.pointer(pointer).and_then(Value::as_str);
        if let Some(reason) = id.and_then(crate::model::unkeepable_id) {
            return Err(ImportError::Malformed {
                at: Location {
                    path: path.to_owned(),
                    ..Location::line(meta.line)
                },
                problem: format!("the thread id {reason}"),
            });
        }
    }
    Ok(())
}

/// A `session_meta` payload's sub-agent origin: set when its `source` is `{"subagent": ..}`.
fn subagent(payload: &Value) -> Option<SubagentOrigin> {
    let source = payload.pointer("/source/subagent")?;
    let parent_thread_id = source
        .pointer("/thread_spawn/parent_thread_id")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Some(SubagentOrigin { parent_thread_id })
}

impl Log for Rollout {
    /// The system prompt (the first instructions of a `session_meta` from the rollout's own
    /// on) and where the rollout's own records start ([`Metas`]; only lines
    /// that name `session_meta` are parsed; one that is not JSON ends the search, the import
    /// is refused at it or before).
    fn begin(input: &mut dyn BufRead) -> Result<Self, ImportError> {
        let metas = Metas::read(input)?;
        let own = metas.own();
        if let Some(meta) = own {
            keepable_thread_ids(meta)?;
        }
        let first_line = own.map_or(1, |meta| meta.line);
        let system = metas
            .metas
            .iter()
            .filter(|meta| meta.line >= first_line)
            .find_map(|meta| instructions(&meta.payload))
            .map(|text| NewMessage::new(Role::System, vec![Part::text(text)]));
        let mut items = Items::new(Leniency::MEND);
        items.log = true;
        items.assembler.set_system(system);
        Ok(Self {
            items,
            markers: Vec::new(),
            lines: 0,
            first_line,
            subagent: own.and_then(|meta| subagent(&meta.payload)),
            older: metas.older,
            prompts: Prompts::default(),
            thread_id: own
                .and_then(|meta| meta.payload.get("id"))
                .and_then(Value::as_str)
                .map(str::to_owned),
        })
    }

    fn line(&mut self, number: usize, _: usize, line: &str, _: bool) -> Result<(), ImportError> {
        if line.trim().is_empty() || number < self.first_line {
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
                    let model = format!("openai/{model}");
                    // Newer rollouts write a turn's context before its prompt: the answer
                    // still open is the earlier turn's, written by the model before (its
                    // reasoning goes to that model alone), so it is closed first.
                    if items.model.as_ref().is_some_and(|before| *before != model) {
                        self.prompts.flush(items)?;
                        items.flush()?;
                    }
                    items.model = Some(model);
                }
            }
            "compacted" => {
                let summary = payload
                    .get("message")
                    .and_then(Value::as_str)
                    .filter(|message| !message.trim().is_empty())
                    .map_or_else(|| replacement_texts(payload), str::to_owned);
                self.prompts.flush(items)?;
                items.flush()?;
                self.markers.push((items.len(), summary));
            }
            "event_msg" if payload.get("type").and_then(Value::as_str) == Some("user_message") => {
                if let Some(message) = payload.get("message").and_then(Value::as_str) {
                    self.prompts.event(items, at, message, created_at)?;
                }
            }
            "response_item" => {
                self.prompts.before(items, payload)?;
                response_item(items, &at, payload, created_at)?
            }
            // The older layout: past its header (read by `begin`) and its state snapshots, a
            // bare item, read as a `response_item`'s payload is.
            _ if self.older
                && number != self.first_line
                && !object.contains_key("payload")
                && !object.contains_key("record_type") =>
            {
                response_item(items, &Location::line(number), &value, created_at)?
            }
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
        self.prompts.flush(&mut self.items)?;
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
            subagent: self.subagent,
            source_thread_id: self.thread_id,
            ..Streamed::default()
        };
        Ok((vec![(0, rest.messages)], streamed))
    }
}

/// One Responses item the model saw or made (a `response_item`'s payload, or a bare line of
/// the older layout), into `items`; Codex's own bookkeeping items are skipped.
fn response_item(
    items: &mut Items,
    at: &Location,
    item: &Value,
    created_at: Option<DateTime<Utc>>,
) -> Result<(), ImportError> {
    match item.get("type").and_then(Value::as_str) {
        Some("ghost_snapshot") => Ok(()),
        // The encrypted form of a compaction; its summary is the `compacted` line's.
        Some("compaction" | "compaction_summary") => Ok(()),
        _ => items.item(at, item, created_at),
    }
}

/// What a remote compaction kept legible: its `compacted` line has an empty `message` and
/// the history the server gave back (`replacement_history`: the user messages it kept and
/// an encrypted `compaction` item no other model reads), whose message texts, joined by a
/// blank line, are the summary; empty when there are none.
fn replacement_texts(payload: &Value) -> String {
    let items = payload.get("replacement_history").and_then(Value::as_array);
    let texts = items
        .into_iter()
        .flatten()
        .filter(|item| item.get("type").is_none_or(|kind| kind == "message"))
        .filter_map(|item| item.get("content")?.as_array())
        .flatten()
        .filter_map(|part| part.get("text")?.as_str())
        .filter(|text| !text.trim().is_empty());
    texts.collect::<Vec<_>>().join("\n\n")
}

/// True when `line` is the header of a rollout of the older layout: `{"id", "timestamp",
/// "instructions", "git"?}` with no `type` (Codex's `SessionMeta` then, whose `instructions`
/// was always written, `null` when unset). Nothing else has these three fields without a
/// `type`: an envelope line, a bare item and a state snapshot all differ.
pub(crate) fn older_header(line: &Map<String, Value>) -> bool {
    !line.contains_key("type")
        && !line.contains_key("payload")
        && !line.contains_key("record_type")
        && line.get("id").is_some_and(Value::is_string)
        && line.get("timestamp").is_some_and(Value::is_string)
        && line
            .get("instructions")
            .is_some_and(|i| i.is_string() || i.is_null())
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

    /// Newer rollouts write a turn's `turn_context` before its prompt: the answer of the turn
    /// before, still open then, is its own model's, not the next one's (its reasoning went
    /// to the next model under rule 10c).
    #[test]
    fn a_model_switch_leaves_the_turn_before_with_its_own_model() {
        let context = |model: &str| json!({"timestamp": "2026-01-10T10:00:01Z", "type": "turn_context", "payload": {"turn_id": "t", "model": model}});
        let text = rollout(&[
            context("gpt-5-codex"),
            item(
                json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "2+2?"}]}),
            ),
            item(
                json!({"type": "reasoning", "summary": [], "content": null, "encrypted_content": "E"}),
            ),
            item(
                json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "4"}]}),
            ),
            context("gpt-5-codex"),
            item(
                json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "3+3?"}]}),
            ),
            item(
                json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "6"}]}),
            ),
            context("gpt-5.1-codex-max"),
            item(
                json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "4+4?"}]}),
            ),
            item(
                json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "8"}]}),
            ),
        ]);
        let imported = import(&text).expect("imports");
        assert_eq!(
            imported.models(),
            [
                None,
                Some("openai/gpt-5-codex"),
                None,
                Some("openai/gpt-5-codex"),
                None,
                Some("openai/gpt-5.1-codex-max")
            ]
        );
    }

    /// A remote compaction (an empty `message`, the server's `replacement_history`) compacts
    /// the turns before it, summarised by the texts the server kept; one that kept none
    /// compacts nothing.
    #[test]
    fn a_remote_compaction_is_summarised_by_the_texts_it_kept() {
        let user = |text: &str| {
            item(
                json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}),
            )
        };
        let answer = |text: &str| {
            item(
                json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}),
            )
        };
        let marker = |kept: Value| json!({"timestamp": "2025-10-01T10:00:03Z", "type": "compacted", "payload": {"message": "", "replacement_history": kept}});
        let text = rollout(&[
            user("first"),
            answer("one"),
            user("second"),
            answer("two"),
            marker(json!([
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "first"}]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "second"}]},
                {"type": "compaction", "encrypted_content": "gAAAA"},
            ])),
            user("third"),
            answer("three"),
            marker(json!([{"type": "compaction", "encrypted_content": "gAAAB"}])),
            user("fourth"),
        ]);
        let imported = import(&text).expect("imports");
        assert_eq!(
            imported.compactions,
            [ImportedCompaction {
                at: 4,
                summary: "first\n\nsecond".into()
            }]
        );
    }

    /// The older layout (a header line, state snapshots, bare items) gives what the envelope
    /// gives for the same items, its `instructions` the system prompt; only the timestamps,
    /// which its items do not carry, are missing.
    #[test]
    fn the_older_layout_reads_as_the_envelope_does() {
        let items = [
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "ls"}]}),
            json!({"type": "reasoning", "summary": [], "content": null, "encrypted_content": "E"}),
            json!({"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"}),
            json!({"type": "function_call_output", "call_id": "c1", "output": "a.txt"}),
            json!({"type": "local_shell_call", "call_id": "c2", "status": "completed", "action": {"type": "exec", "command": ["pwd"]}}),
            json!({"type": "function_call_output", "call_id": "c2", "output": "/"}),
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}),
        ];
        let header = json!({"id": "T", "timestamp": "2025-08-01T10:00:00Z", "instructions": "be brief", "git": {"branch": "main"}});
        let mut envelope = vec![
            json!({"timestamp": "2025-08-01T10:00:00Z", "type": "session_meta", "payload": header}),
        ];
        envelope.extend(items.iter().cloned().map(item));
        let mut older = vec![header.clone(), json!({"record_type": "state"})];
        older.extend(items.iter().cloned());
        older.push(json!({"record_type": "state"}));
        let mut from_envelope = import(&rollout(&envelope)).expect("imports");
        for message in &mut from_envelope.messages {
            message.created_at = None;
        }
        let from_older = import(&rollout(&older)).expect("the older layout imports");
        assert_eq!(from_older.messages, from_envelope.messages);
        assert_eq!(from_older.messages.len(), 6);
        assert_eq!(
            from_older.system.as_ref().map(|s| &s.parts),
            Some(&vec![Part::text("be brief")])
        );
        assert_eq!(from_older.system, from_envelope.system);
        assert_eq!(from_older.source_thread_id.as_deref(), Some("T"));
        // A null `instructions` (what Codex wrote when there were none) is no system prompt.
        older[0] = json!({"id": "T", "timestamp": "2025-08-01T10:00:00Z", "instructions": null});
        assert!(import(&rollout(&older)).expect("imports").system.is_none());
    }

    /// Only the first line can be the header; a line of the older layout that is no item is
    /// refused at its number, as an envelope's broken item is.
    #[test]
    fn the_older_layout_refuses_what_is_no_item_by_line() {
        let header = json!({"id": "T", "timestamp": "t", "instructions": null});
        let text = rollout(&[header, json!({"role_of": "user"})]);
        let err = import(&text).expect_err("no item");
        assert_eq!(err.location().and_then(|l| l.line), Some(2));
        let header = json!({"id": "T", "timestamp": "t", "instructions": null});
        assert!(older_header(header.as_object().expect("object")));
        for not_header in [
            json!({"id": "T", "timestamp": "t"}),
            json!({"id": "T", "timestamp": "t", "instructions": null, "type": "message"}),
            json!({"id": 1, "timestamp": "t", "instructions": null}),
            json!({"timestamp": "t", "type": "session_meta", "payload": {"id": "T", "timestamp": "t", "instructions": null}}),
        ] {
            assert!(
                !older_header(not_header.as_object().expect("object")),
                "{not_header}"
            );
        }
    }

    /// A `user_message` event is the prompt only where no user item of its turn has its
    /// text; it is placed before the next model item, never between a call and its output.
    #[test]
    fn a_prompt_event_is_imported_only_where_no_item_carries_it() {
        let event = |text: &str| json!({"timestamp": "2025-09-25T02:12:23.966Z", "type": "event_msg", "payload": {"type": "user_message", "message": text}});
        let call = item(
            json!({"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"}),
        );
        let output = item(json!({"type": "function_call_output", "call_id": "c1", "output": "ok"}));
        let answer = item(
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}),
        );
        let cases: [(Vec<Value>, &[&str]); 4] = [
            // The item, then its echo (the 0.40 rollouts).
            (vec![said("one"), event("one"), answer.clone()], &["one"]),
            // The echo first, then the item.
            (vec![event("one\n"), said("one"), answer.clone()], &["one"]),
            // The event alone, before the call; a later one alone, after an output.
            (
                vec![
                    event("one"),
                    call.clone(),
                    output.clone(),
                    event("two"),
                    answer.clone(),
                ],
                &["one", "two"],
            ),
            // An event arriving between a call and its output waits for the output.
            (
                vec![said("one"), call, event("two"), output, answer],
                &["one", "two"],
            ),
        ];
        for (lines, expected) in cases {
            let imported = import(&rollout(&lines)).expect("imports");
            assert_eq!(
                texts(&imported)
                    .iter()
                    .filter(|t| **t != "done")
                    .copied()
                    .collect::<Vec<_>>(),
                expected,
                "{lines:?}"
            );
            assert!(imported.tombstoned.is_empty(), "{lines:?}");
        }
    }

    #[test]
    fn a_broken_line_is_refused_by_number() {
        let err = import("{\"type\": \"session_meta\", \"payload\": {}}\n{oops").expect_err("bad");
        assert_eq!(err.location().and_then(|l| l.line), Some(2));
    }

    fn meta(id: &str, source: Value) -> Value {
        json!({"timestamp": "2025-10-14T09:00:00Z", "type": "session_meta", "payload": {"id": id, "source": source}})
    }

    fn said(text: &str) -> Value {
        item(
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}),
        )
    }

    fn texts(imported: &Imported) -> Vec<&str> {
        imported
            .messages
            .iter()
            .flat_map(|m| &m.parts)
            .filter_map(|p| match p {
                Part::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn each_session_source_says_whether_the_rollout_is_a_sub_agent() {
        let spawn = json!({"subagent": {"thread_spawn": {"parent_thread_id": "P", "depth": 1, "agent_nickname": "Robie", "agent_role": "explorer"}}});
        let cases = [
            (json!("cli"), None),
            (json!("vscode"), None),
            (json!({"custom": "bot"}), None),
            (Value::Null, None),
            (json!({"subagent": "review"}), Some(None)),
            (json!({"subagent": "compact"}), Some(None)),
            (json!({"subagent": {"other": "x"}}), Some(None)),
            (spawn, Some(Some("P"))),
        ];
        for (source, expected) in cases {
            let text = rollout(&[meta("C", source.clone()), said("hi")]);
            let imported = import(&text).expect("imports");
            assert_eq!(
                imported.subagent,
                expected.map(|parent: Option<&str>| SubagentOrigin {
                    parent_thread_id: parent.map(str::to_owned)
                }),
                "{source}"
            );
        }
    }

    /// A thread id no engine keeps (over `MAX_ID_BYTES`, or with a NUL) is refused at its
    /// `session_meta` line, its own or its parent's, before anything is imported.
    #[test]
    fn a_thread_id_no_engine_keeps_is_refused_at_its_line() {
        let long = "t".repeat(crate::MAX_ID_BYTES + 1);
        let spawn = |parent: &str| json!({"subagent": {"thread_spawn": {"parent_thread_id": parent, "depth": 1}}});
        let cases = [
            (meta(&long, json!("cli")), "payload.id"),
            (meta("a\u{0}b", json!("cli")), "payload.id"),
            (
                meta("C", spawn(&long)),
                "payload.source.subagent.thread_spawn.parent_thread_id",
            ),
        ];
        for (meta_line, expected) in cases {
            let text = rollout(&[meta_line, said("hi")]);
            match import(&text) {
                Err(ImportError::Malformed { at, problem }) => {
                    assert_eq!(
                        (at.line, at.path.as_str()),
                        (Some(1), expected),
                        "{problem}"
                    );
                }
                other => panic!("{other:?}"),
            }
        }
        let longest = "t".repeat(crate::MAX_ID_BYTES);
        let imported = import(&rollout(&[meta(&longest, json!("cli")), said("hi")]));
        assert_eq!(imported.expect("imports").source_thread_id, Some(longest));
    }

    #[test]
    fn only_records_copied_from_the_named_parent_are_skipped() {
        let spawn = |parent: &str| json!({"subagent": {"thread_spawn": {"parent_thread_id": parent, "depth": 1}}});
        let cases: [(Vec<Value>, &[&str]); 4] = [
            // Copied from the parent, then the child's own meta: the copy is skipped.
            (
                vec![
                    meta("P", json!("cli")),
                    said("parent"),
                    meta("C", spawn("P")),
                    said("child"),
                ],
                &["child"],
            ),
            // A parent two levels up and its child, copied: all of it is skipped.
            (
                vec![
                    meta("G", json!("cli")),
                    said("grandparent"),
                    meta("P", spawn("G")),
                    said("parent"),
                    meta("C", spawn("P")),
                    said("child"),
                ],
                &["child"],
            ),
            // The parent is not in the file: nothing is skipped.
            (
                vec![
                    meta("C", spawn("P")),
                    said("one"),
                    meta("C", spawn("P")),
                    said("two"),
                ],
                &["one", "two"],
            ),
            // A second meta of no sub-agent (a resumed rollout): nothing is skipped.
            (
                vec![
                    meta("A", json!("cli")),
                    said("one"),
                    meta("A", json!("cli")),
                    said("two"),
                ],
                &["one", "two"],
            ),
        ];
        for (lines, expected) in cases {
            let imported = import(&rollout(&lines)).expect("imports");
            assert_eq!(texts(&imported), expected, "{lines:?}");
        }
    }
}
