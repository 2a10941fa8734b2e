//! The defensive loader: turns stored messages, healthy or not, into a [`View`] that every
//! renderer can send as it is.
//!
//! The rows are never trusted: a database written by older code, another writer or a crash
//! can hold dangling tool_uses, orphan results, repeated ids, results in user messages, empty
//! texts and inputs that are not objects. None of that is changed in the database here
//! (`store-repair` does that); the view is repaired instead, and each repair is reported.
//!
//! What the view guarantees, whatever the input:
//! - `system` messages hold text only and never sit inside a tool pair (one that came between
//!   a tool_use and its block is moved to just after the block);
//! - `user` messages hold non-blank text only;
//! - `assistant` messages hold text, reasoning, redacted reasoning and tool_use parts; a text
//!   part is never blank, except a single space `" "` between signed reasoning parts,
//!   which stands for an empty text part so the thinking blocks keep their positions;
//! - every tool_use is answered in the `tool` message directly after its assistant message
//!   (system messages aside), by a real result or a synthetic tombstone;
//! - `tool` messages hold tool_results only, each answering a tool_use of the assistant
//!   message directly before; an error result is never empty;
//! - tool_use ids are unique, match `^[a-zA-Z0-9_-]+$` and are at most 40 characters long
//!   (`Provider::shortest_call_id_max`), tool names are non-empty, inputs are JSON objects;
//! - no message is empty.
//!
//! A user or assistant message that holds only blank text (a turn the source left empty,
//! such as a Gemini `{"text": ""}`) has nothing any provider takes, so it is not among the
//! messages; its place is kept in [`View::blank_turns`], and whether it is sent as a
//! stand-in text is the renderer's policy for each provider
//! ([`crate::history::render::blank_turn_text`]), decided there once.
//!
//! The view is a function of the messages alone and of nothing after them, except that a
//! tombstone for a call that has no answer yet is replaced once the answer is stored: this is
//! what keeps rendering prefix-stable.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::history::blank::is_blank;
use crate::history::grammar::{MessageClass, PartClass, ResultState, Walk};
use crate::history::provider::Provider;
use crate::history::signed::is_position_validated;
use crate::history::texts::{self, describe, Renamer, EMPTY_ERROR, SUMMARY_PREFIX, UNNAMED_TOOL};
use crate::model::{Message, Part, Role};

/// One message of the provider's view.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ViewMessage {
    /// `System`, `User`, `Assistant` or `Tool` (tool results only).
    pub role: Role,
    /// The parts to send, already repaired.
    pub parts: Vec<Part>,
    /// The `seq` of the stored messages it was made from; empty when it is synthetic.
    pub seqs: Vec<i64>,
    /// True when it starts at a stored `user` message, i.e. opens a turn. Renderers never
    /// join such a message onto the one before, so appending a turn never changes the bytes
    /// of what was rendered before it.
    pub opens_turn: bool,
    /// The model that wrote the stored message it starts with (`messages.model`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// What the loader changed in the view, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RepairKind {
    /// A message with no parts, or with nothing sendable left, was left out.
    DroppedMessage,
    /// A part that cannot be sent where it is (reasoning outside an assistant message, a
    /// blank text) was left out.
    DroppedPart,
    /// A tool_use without an answer got a synthetic tombstone result.
    Tombstone,
    /// A tool_result whose tool_use is not directly before its block became text.
    OrphanResult,
    /// A tool_use id repeated an earlier one (or was empty, or used characters outside
    /// `[A-Za-z0-9_-]`) and was renamed with its answer.
    RenamedToolUse,
    /// A user message holding tool_results was split into a tool block and the user's text.
    SplitUserResults,
    /// A part in a message of the wrong role (tool_use outside an assistant message,
    /// tool_result in an assistant or system message, text in a tool message) became text
    /// after the block.
    MovedPart,
    /// A system message inside a tool pair was moved to just after the tool block.
    MovedSystem,
    /// An error result with empty content was given content.
    FilledErrorContent,
    /// A tool_use input that is not a JSON object was wrapped in one.
    WrappedInput,
    /// A tool_use with an empty name was given one.
    NamedTool,
    /// An empty text part in a message with signed reasoning is sent as a single space.
    SignedSpace,
}

impl RepairKind {
    /// A stable snake_case name, for reports.
    pub fn as_str(self) -> &'static str {
        match self {
            RepairKind::DroppedMessage => "dropped_message",
            RepairKind::DroppedPart => "dropped_part",
            RepairKind::Tombstone => "tombstone",
            RepairKind::OrphanResult => "orphan_result",
            RepairKind::RenamedToolUse => "renamed_tool_use",
            RepairKind::SplitUserResults => "split_user_results",
            RepairKind::MovedPart => "moved_part",
            RepairKind::MovedSystem => "moved_system",
            RepairKind::FilledErrorContent => "filled_error_content",
            RepairKind::WrappedInput => "wrapped_input",
            RepairKind::NamedTool => "named_tool",
            RepairKind::SignedSpace => "signed_space",
        }
    }
}

/// One repair, located at the stored message (and part) it concerns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Repair {
    /// What was done.
    pub kind: RepairKind,
    /// The `seq` of the stored message concerned.
    pub seq: i64,
    /// The part's position in that message, when one part is concerned.
    pub ordinal: Option<usize>,
    /// A sentence for people: ids involved, what became of them.
    pub detail: String,
}

/// The provider's view of a history, and what was repaired to build it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct View {
    /// The messages to render, in order.
    pub messages: Vec<ViewMessage>,
    /// Every repair, in the order it was made.
    pub repairs: Vec<Repair>,
    /// Where a stored user or assistant message holding only blank text stood, in order:
    /// left out of `messages`, its place kept for a provider that sends a stand-in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blank_turns: Vec<BlankTurn>,
}

/// A stored user or assistant message that holds only blank text, and where it stood.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlankTurn {
    /// The index in [`View::messages`] it stands before (the length when it is last).
    pub position: usize,
    /// `User` or `Assistant`.
    pub role: Role,
    /// The `seq` of the stored message.
    pub seq: i64,
}

/// Builds the provider's view of `messages` (in `seq` order, already restricted to what the
/// provider sees: no compacted messages).
pub fn sanitize(messages: &[Message]) -> View {
    sanitize_with_summary(None, messages)
}

/// [`sanitize`], with the summary of the compacted head (if any) sent first as a user
/// message ([`SUMMARY_PREFIX`] and the text) that opens a turn of its own.
///
/// System messages carry instructions, not history: those of the compacted head (passed
/// with `compacted` set) are sent before the summary, in their order.
pub fn sanitize_with_summary(summary: Option<&str>, messages: &[Message]) -> View {
    sanitize_owned(summary, messages.to_vec())
}

/// [`sanitize_with_summary`] over messages the caller gives up: their parts move into the
/// view instead of being copied (the export's way, issue 16).
pub(crate) fn sanitize_owned(summary: Option<&str>, mut messages: Vec<Message>) -> View {
    let walk = Walk::of(&messages);
    let mut loader = Loader {
        classes: walk.classes(),
        ..Loader::default()
    };
    let kept_instruction = |m: &Message| m.compacted && m.role == Role::System;
    for (index, message) in messages.iter_mut().enumerate() {
        if kept_instruction(message) {
            loader.index = index;
            loader.load(message);
        }
    }
    if let Some(summary) = summary.filter(|text| !is_blank(text)) {
        loader.push(
            Role::User,
            vec![Part::text(format!("{SUMMARY_PREFIX}{summary}"))],
            Vec::new(),
            true,
        );
    }
    for (index, message) in messages.iter_mut().enumerate() {
        if kept_instruction(message) {
            continue;
        }
        loader.index = index;
        loader.load(message);
    }
    loader.close_block();
    let models: HashMap<i64, &str> = messages
        .iter()
        .filter_map(|m| Some((m.seq, m.model.as_deref()?)))
        .collect();
    let mut out = loader.out;
    for message in &mut out {
        message.model = message
            .seqs
            .first()
            .and_then(|seq| models.get(seq))
            .map(|model| (*model).to_owned());
    }
    View {
        messages: out,
        repairs: loader.repairs,
        blank_turns: loader.blank_turns,
    }
}

/// The tool block being collected after an assistant message with tool_uses.
#[derive(Default)]
struct Block {
    /// `seq` of the assistant message.
    assistant_seq: i64,
    /// Index of the assistant message in the list loaded.
    assistant: usize,
    /// Each call: (stored id, view id, answered in the view), in part order.
    calls: Vec<(String, String, bool)>,
    /// Position in `calls` of each call's part ordinal.
    slot: Vec<Option<usize>>,
    /// Results so far, with view ids, in the order they were stored.
    results: Vec<Part>,
    /// `seq` of the messages the results came from.
    result_seqs: Vec<i64>,
    /// True when the block's first message opens a turn (a user message holding results).
    opens_turn: bool,
    /// Text sent after the results: orphans, and text parts of tool messages.
    after: Vec<Part>,
    /// `seq` of the messages the text came from.
    after_seqs: Vec<i64>,
    /// True when the text starts with orphans of a user message (which opens a turn).
    after_opens_turn: bool,
    /// System messages that sat inside the block, sent after it.
    systems: Vec<ViewMessage>,
}

#[derive(Default)]
struct Loader<'w> {
    out: Vec<ViewMessage>,
    repairs: Vec<Repair>,
    /// The grammar's class of every message loaded.
    classes: &'w [MessageClass],
    /// Index of the message being loaded.
    index: usize,
    /// Every tool_use id used in the view so far, and the one renaming scheme.
    ids: Renamer,
    block: Option<Block>,
    /// Where messages holding only blank text stood ([`View::blank_turns`]).
    blank_turns: Vec<BlankTurn>,
}

impl Loader<'_> {
    fn repair(&mut self, kind: RepairKind, seq: i64, ordinal: Option<usize>, detail: String) {
        self.repairs.push(Repair {
            kind,
            seq,
            ordinal,
            detail,
        });
    }

    /// Loads `message`, moving the parts it sends out of it.
    fn load(&mut self, message: &mut Message) {
        if message.parts.is_empty() {
            self.repair(
                RepairKind::DroppedMessage,
                message.seq,
                None,
                format!("{} message without parts", message.role),
            );
            return;
        }
        match message.role {
            Role::System => self.load_system(message),
            Role::Assistant => self.load_assistant(message),
            Role::Tool => self.load_tool(message, false),
            Role::User => {
                let has_results = message
                    .parts
                    .iter()
                    .any(|part| matches!(part, Part::ToolResult { .. }));
                if has_results {
                    self.repair(
                        RepairKind::SplitUserResults,
                        message.seq,
                        None,
                        "user message holds tool_results: sent as a tool block, then the user's text"
                            .to_owned(),
                    );
                    self.load_tool(message, true);
                    let rest = texts_outside_tool(self, message, |part| {
                        !matches!(part, Part::ToolResult { .. })
                    });
                    if !rest.is_empty() {
                        self.close_block();
                        self.push(Role::User, rest, vec![message.seq], false);
                    }
                } else {
                    let parts = texts_outside_tool(self, message, |_| true);
                    // A message with nothing to send is invisible: it does not end a block.
                    if parts.is_empty() {
                        self.dropped_nothing_left(message);
                        self.keep_blank_place(message);
                    } else {
                        self.close_block();
                        self.push(Role::User, parts, vec![message.seq], true);
                    }
                }
            }
        }
    }

    fn dropped_nothing_left(&mut self, message: &Message) {
        self.repair(
            RepairKind::DroppedMessage,
            message.seq,
            None,
            format!("{} message with nothing sendable left", message.role),
        );
    }

    /// Keeps the place of a user or assistant `message` that held only blank text (and
    /// was left out). After a tool block's results it ends the block first (an empty answer
    /// after a function response); between calls and their first result it stays invisible,
    /// so nothing comes between them.
    fn keep_blank_place(&mut self, message: &Message) {
        let only_blank_text = message
            .parts
            .iter()
            .all(|part| matches!(part, Part::Text { text, .. } if is_blank(text)));
        if !only_blank_text {
            return;
        }
        match &self.block {
            Some(block) if block.results.is_empty() => return,
            Some(_) => self.close_block(),
            None => {}
        }
        self.blank_turns.push(BlankTurn {
            position: self.out.len(),
            role: message.role,
            seq: message.seq,
        });
    }

    fn push(&mut self, role: Role, parts: Vec<Part>, seqs: Vec<i64>, opens_turn: bool) {
        self.out.push(ViewMessage {
            role,
            parts,
            seqs,
            opens_turn,
            model: None,
        });
    }

    fn load_system(&mut self, message: &mut Message) {
        let parts = texts_outside_tool(self, message, |_| true);
        if parts.is_empty() {
            self.dropped_nothing_left(message);
            return;
        }
        let system = ViewMessage {
            role: Role::System,
            parts,
            seqs: vec![message.seq],
            opens_turn: false,
            model: None,
        };
        if let Some(block) = self.block.as_mut() {
            let assistant_seq = block.assistant_seq;
            block.systems.push(system);
            self.repair(
                RepairKind::MovedSystem,
                message.seq,
                None,
                format!("system message inside the tool block of message {assistant_seq}: sent after the block"),
            );
        } else {
            self.out.push(system);
        }
    }

    fn load_assistant(&mut self, message: &mut Message) {
        if self.left_out_as_blank(message) {
            return;
        }
        self.close_block();
        let seq = message.seq;
        let between_signed = between_validated(&message.parts);
        let mut parts = Vec::with_capacity(message.parts.len());
        let mut calls = Vec::new();
        // The call at each part ordinal, by its position in `calls` (made at the first call).
        let mut slot = Vec::new();
        let part_count = message.parts.len();
        for (ordinal, part) in message.parts.iter_mut().enumerate() {
            match part {
                Part::Text {
                    text,
                    provider_metadata,
                } if is_blank(text) => {
                    if between_signed(ordinal) {
                        parts.push(self.signed_space(seq, ordinal, provider_metadata.take()));
                    } else {
                        self.dropped_blank(seq, ordinal);
                    }
                }
                Part::ServerToolUse { .. } | Part::ServerToolResult { .. }
                    if !self.server_part_stands(ordinal) =>
                {
                    let detail = format!(
                        "{} without its pair in its assistant message: sent as text",
                        part.kind()
                    );
                    parts.push(self.moved_as_text(seq, ordinal, part, detail));
                }
                Part::Text { .. }
                | Part::Reasoning { .. }
                | Part::RedactedReasoning { .. }
                | Part::Image { .. }
                | Part::Document { .. }
                | Part::ServerToolUse { .. }
                | Part::ServerToolResult { .. }
                | Part::Opaque { .. } => {
                    parts.push(take(part));
                }
                Part::ToolUse { .. } => {
                    let (stored_id, view_id, view) = self.view_tool_use(seq, ordinal, part);
                    if slot.is_empty() {
                        slot = vec![None; part_count];
                    }
                    slot[ordinal] = Some(calls.len());
                    calls.push((stored_id, view_id, false));
                    parts.push(view);
                }
                Part::ToolResult { tool_use_id, .. } => {
                    let detail = format!(
                        "tool_result for {tool_use_id:?} in an assistant message: sent as text"
                    );
                    parts.push(self.moved_as_text(seq, ordinal, part, detail));
                }
            }
        }
        if parts.is_empty() {
            self.dropped_nothing_left(message);
            return;
        }
        self.push(Role::Assistant, parts, vec![message.seq], false);
        if !calls.is_empty() {
            self.block = Some(Block {
                assistant_seq: message.seq,
                assistant: self.index,
                calls,
                slot,
                ..Block::default()
            });
        }
    }

    /// An assistant message with nothing to send (blank text only) is left out and
    /// reported, its place kept; it is invisible: it does not end a block.
    fn left_out_as_blank(&mut self, message: &Message) -> bool {
        let sendable = message.parts.iter().any(|part| match part {
            Part::Text { text, .. } => !is_blank(text),
            _ => true,
        });
        if sendable {
            return false;
        }
        for (ordinal, _) in message.parts.iter().enumerate() {
            self.dropped_blank(message.seq, ordinal);
        }
        self.dropped_nothing_left(message);
        self.keep_blank_place(message);
        true
    }

    /// A blank text between signed reasoning, sent as a single space: it keeps the signed
    /// thinking blocks at their positions (rule 7's exception).
    fn signed_space(&mut self, seq: i64, ordinal: usize, metadata: Option<Value>) -> Part {
        self.repair(
            RepairKind::SignedSpace,
            seq,
            Some(ordinal),
            "blank text between signed reasoning sent as a single space".to_owned(),
        );
        Part::Text {
            text: " ".to_owned(),
            provider_metadata: metadata,
        }
    }

    /// A part that cannot stand where it is (a result in an assistant message, a server
    /// part without its pair), sent as text and reported.
    fn moved_as_text(&mut self, seq: i64, ordinal: usize, part: &Part, detail: String) -> Part {
        self.repair(RepairKind::MovedPart, seq, Some(ordinal), detail);
        Part::text(describe(part))
    }

    /// A stored tool_use as the provider is sent it: its view id (fresh when the stored id
    /// was used before), a name, and an object input, each repair reported. Returns the
    /// stored id and the view id beside it.
    fn view_tool_use(
        &mut self,
        seq: i64,
        ordinal: usize,
        part: &mut Part,
    ) -> (String, String, Part) {
        let Part::ToolUse {
            id,
            name,
            input,
            provider_metadata,
        } = part
        else {
            return (String::new(), String::new(), take(part));
        };
        let view_id = self.fresh_id(id, seq, ordinal);
        let name = if is_blank(name) {
            self.repair(
                RepairKind::NamedTool,
                seq,
                Some(ordinal),
                format!("tool_use {id:?} has no tool name"),
            );
            UNNAMED_TOOL.to_owned()
        } else {
            std::mem::take(name)
        };
        let input = match object_input(input) {
            Some(object) => {
                self.repair(
                    RepairKind::WrappedInput,
                    seq,
                    Some(ordinal),
                    format!("input of tool_use {id:?} is not a JSON object"),
                );
                object
            }
            None => std::mem::take(input),
        };
        let view = Part::ToolUse {
            id: view_id.clone(),
            name,
            input,
            provider_metadata: provider_metadata.take(),
        };
        (std::mem::take(id), view_id, view)
    }

    fn dropped_blank(&mut self, seq: i64, ordinal: usize) {
        self.repair(
            RepairKind::DroppedPart,
            seq,
            Some(ordinal),
            "blank text part".to_owned(),
        );
    }

    /// The view id of a tool_use stored as `id`: itself the first time, renamed by the one
    /// scheme ([`Renamer`]) when the id was already used (or is empty). Depends only on the
    /// ids before it, so it never changes when the session grows.
    fn fresh_id(&mut self, id: &str, seq: i64, ordinal: usize) -> String {
        // Anthropic accepts ids matching `^[a-zA-Z0-9_-]+$` only; other providers' ids
        // (e.g. `functions.get_time:0`) are mapped onto that alphabet. Chat Completions
        // takes ids of at most 40 characters: a longer one is cut, its renaming suffix
        // (`__2`) inside the limit too.
        let max = Provider::shortest_call_id_max();
        let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
        let cleaned = if id.len() <= max && id.chars().all(allowed) {
            // The usual id, sent as it is: no copy to make.
            std::borrow::Cow::Borrowed(id)
        } else {
            std::borrow::Cow::Owned(
                id.chars()
                    .map(|c| if allowed(c) { c } else { '_' })
                    .take(max)
                    .collect::<String>(),
            )
        };
        let mut view_id = self.ids.claim(&cleaned);
        if view_id.len() > max {
            // Room for a suffix of up to six digits.
            let cut = &cleaned[..cleaned.len().min(max.saturating_sub(8))];
            view_id = self.ids.claim(cut);
        }
        if view_id != id {
            self.repair(
                RepairKind::RenamedToolUse,
                seq,
                Some(ordinal),
                format!("tool_use id {id:?} is empty, repeated, not [A-Za-z0-9_-] or longer than {max} characters: sent as {view_id:?} with its result"),
            );
        }
        view_id
    }

    /// The view id of the call the result at `ordinal` of the message being loaded answers,
    /// when the grammar says it answers one of the open block; marks it answered.
    /// True when the server tool part at `ordinal` of the message being loaded may be sent
    /// as what it is: a call answered in its message or still pending (a paused turn), a
    /// result that follows its call.
    fn server_part_stands(&self, ordinal: usize) -> bool {
        use crate::history::grammar::ServerCallState;
        matches!(
            self.classes
                .get(self.index)
                .and_then(|c| c.parts.get(ordinal)),
            Some(
                PartClass::ServerCall(ServerCallState::Answered { .. } | ServerCallState::Pending)
                    | PartClass::ServerResult { call: Some(_) }
            )
        )
    }

    fn answered_call(&mut self, ordinal: usize) -> Option<String> {
        let class = self.classes.get(self.index)?.parts.get(ordinal)?;
        let PartClass::Result(ResultState::Answers { call: Some(call) }) = *class else {
            return None;
        };
        let block = self.block.as_mut()?;
        if block.assistant != call.message {
            return None;
        }
        let slot = (*block.slot.get(call.part)?)?;
        let (_, view_id, answered) = block.calls.get_mut(slot)?;
        if *answered {
            return None;
        }
        *answered = true;
        Some(view_id.clone())
    }

    /// A tool message, or the tool_results of a user message (`from_user`).
    fn load_tool(&mut self, message: &mut Message, from_user: bool) {
        let seq = message.seq;
        let mut answered = false;
        let mut after = Vec::new();
        for (ordinal, part) in message.parts.iter_mut().enumerate() {
            match part {
                Part::ToolResult { .. } => {
                    if let Some(orphan) =
                        self.load_result(seq, ordinal, part, from_user, &mut answered)
                    {
                        after.push(orphan);
                    }
                }
                // The user's own text of a user message is loaded after the block.
                _ if from_user => {}
                Part::Text { text, .. } if is_blank(text) => self.dropped_blank(seq, ordinal),
                Part::Reasoning { .. } | Part::RedactedReasoning { .. } => {
                    self.dropped_reasoning(seq, ordinal, Role::Tool);
                }
                Part::Image { .. } | Part::Document { .. } | Part::Opaque { .. } => {
                    self.repair(
                        RepairKind::MovedPart,
                        seq,
                        Some(ordinal),
                        format!(
                            "{} part in a tool message: sent after the tool block",
                            part.kind()
                        ),
                    );
                    after.push(take(part));
                }
                Part::Text { .. }
                | Part::ToolUse { .. }
                | Part::ServerToolUse { .. }
                | Part::ServerToolResult { .. } => {
                    let detail = format!(
                        "{} part in a tool message: sent as text after the tool block",
                        part.kind()
                    );
                    after.push(self.moved_as_text(seq, ordinal, part, detail));
                }
            }
        }
        self.send_after_block(after, seq, from_user);
    }

    /// A tool_result at `ordinal` of the tool or user message `seq`: added to the open
    /// block's results under its call's view id (the first result of the message records
    /// it in `answered`). A result that answers no call of the block comes back, as text,
    /// to be sent after the block.
    fn load_result(
        &mut self,
        seq: i64,
        ordinal: usize,
        part: &mut Part,
        from_user: bool,
        answered: &mut bool,
    ) -> Option<Part> {
        let Some(view_id) = self.answered_call(ordinal) else {
            let detail = match &*part {
                Part::ToolResult { tool_use_id, .. } => format!("tool_result for {tool_use_id:?} answers no tool_use of the assistant message before its block: sent as text"),
                _ => String::new(),
            };
            self.repair(RepairKind::OrphanResult, seq, Some(ordinal), detail);
            return Some(Part::text(describe(part)));
        };
        let Part::ToolResult {
            tool_use_id,
            content,
            is_error,
            blocks,
            provider_metadata,
        } = part
        else {
            return None;
        };
        let content = if *is_error && is_blank(content) {
            self.repair(
                RepairKind::FilledErrorContent,
                seq,
                Some(ordinal),
                format!("error result for {tool_use_id:?} has no content"),
            );
            EMPTY_ERROR.to_owned()
        } else {
            std::mem::take(content)
        };
        if let Some(block) = self.block.as_mut() {
            if block.results.is_empty() {
                block.opens_turn = from_user;
            }
            block.results.push(Part::ToolResult {
                tool_use_id: view_id,
                content,
                is_error: *is_error,
                blocks: blocks.take(),
                provider_metadata: provider_metadata.take(),
            });
            if !*answered {
                block.result_seqs.push(seq);
                *answered = true;
            }
        }
        None
    }

    /// Parts of message `seq` that cannot stand in a tool block: sent after the open block,
    /// or, with no block open, as a user message of their own.
    fn send_after_block(&mut self, after: Vec<Part>, seq: i64, from_user: bool) {
        if after.is_empty() {
            return;
        }
        match self.block.as_mut() {
            Some(block) => {
                if block.after.is_empty() {
                    block.after_opens_turn = from_user;
                }
                block.after.extend(after);
                block.after_seqs.push(seq);
            }
            None => self.push(Role::User, after, vec![seq], from_user),
        }
    }

    fn dropped_reasoning(&mut self, seq: i64, ordinal: usize, role: Role) {
        self.repair(
            RepairKind::DroppedPart,
            seq,
            Some(ordinal),
            format!("reasoning in a {role} message cannot be sent"),
        );
    }

    /// Ends the tool block: unanswered calls get tombstones, then the results are sent, then
    /// the text that came with them, then the system messages that sat inside.
    fn close_block(&mut self) {
        let Some(mut block) = self.block.take() else {
            return;
        };
        let mut text = None;
        for (id, view_id, answered) in std::mem::take(&mut block.calls) {
            if answered {
                continue;
            }
            let text = text.get_or_insert_with(|| texts::tombstone(texts::LOST_REASON));
            self.repair(
                RepairKind::Tombstone,
                block.assistant_seq,
                None,
                format!("tool_use {id:?} has no result: answered with a synthetic tombstone"),
            );
            block.results.push(Part::tool_error(view_id, text.clone()));
        }
        self.push(
            Role::Tool,
            block.results,
            block.result_seqs,
            block.opens_turn,
        );
        if !block.after.is_empty() {
            self.push(
                Role::User,
                block.after,
                block.after_seqs,
                block.after_opens_turn,
            );
        }
        self.out.extend(block.systems);
    }
}

/// The sendable text of a user or system message (the parts `keep` selects): blank text is
/// dropped, reasoning is dropped, tool parts become text. Repairs go to `loader`.
fn texts_outside_tool(
    loader: &mut Loader,
    message: &mut Message,
    keep: impl Fn(&Part) -> bool,
) -> Vec<Part> {
    let mut parts = Vec::new();
    let (seq, role) = (message.seq, message.role);
    for (ordinal, part) in message
        .parts
        .iter_mut()
        .enumerate()
        .filter(|(_, p)| keep(p))
    {
        match part {
            Part::Text { text, .. } if is_blank(text) => {
                loader.dropped_blank(seq, ordinal);
            }
            Part::Text { .. } => parts.push(take(part)),
            Part::Reasoning { .. } | Part::RedactedReasoning { .. } => {
                loader.dropped_reasoning(seq, ordinal, role);
            }
            Part::Image { .. } | Part::Document { .. } | Part::Opaque { .. } => {
                parts.push(take(part));
            }
            Part::ToolUse { .. }
            | Part::ToolResult { .. }
            | Part::ServerToolUse { .. }
            | Part::ServerToolResult { .. } => {
                loader.repair(
                    RepairKind::MovedPart,
                    seq,
                    Some(ordinal),
                    format!("{} part in a {} message: sent as text", part.kind(), role),
                );
                parts.push(Part::text(describe(part)));
            }
        }
    }
    parts
}

/// The part, moved out of its stored message (which keeps an empty text in its place: the
/// loader reads each part once).
fn take(part: &mut Part) -> Part {
    std::mem::replace(part, Part::text(String::new()))
}

/// Rule 7's exception: whether a blank text at an ordinal sits between two parts whose
/// position the provider validates (signed or redacted reasoning), so it is sent as a space.
fn between_validated(parts: &[Part]) -> impl Fn(usize) -> bool {
    let first = parts.iter().position(is_position_validated);
    let last = parts.iter().rposition(is_position_validated);
    move |ordinal| {
        first.is_some_and(|first| first < ordinal) && last.is_some_and(|last| ordinal < last)
    }
}

/// The JSON object a tool_use input that is not one becomes; `None` when it is one.
///
/// A string holding a JSON object (what another writer may have stored) is parsed, `null`
/// becomes `{}`, anything else is wrapped as `{"value": ...}`.
fn object_input(input: &Value) -> Option<Value> {
    match input {
        Value::Object(_) => None,
        Value::Null => Some(Value::Object(Default::default())),
        Value::String(raw) => match serde_json::from_str::<Value>(raw) {
            Ok(parsed @ Value::Object(_)) => Some(parsed),
            _ => Some(wrap(input)),
        },
        _ => Some(wrap(input)),
    }
}

fn wrap(input: &Value) -> Value {
    let mut object = serde_json::Map::new();
    object.insert("value".to_owned(), input.clone());
    Value::Object(object)
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::history::contract::{check_anthropic, check_openai};
    use crate::history::render::{anthropic, openai};
    use crate::history::testing::*;

    /// Sanitizes and renders for both providers, requiring zero contract violations.
    fn check(messages: Vec<(Role, Vec<Part>)>) -> (View, Value, Value) {
        let view = sanitize(&history(messages));
        let (a, o) = (anthropic::render(&view), openai::render(&view));
        assert_eq!(check_anthropic(&a), vec![], "anthropic: {a:#}");
        assert_eq!(check_openai(&o), vec![], "openai: {o:#}");
        (view, a, o)
    }

    fn kinds(view: &View) -> Vec<RepairKind> {
        view.repairs.iter().map(|r| r.kind).collect()
    }

    #[test]
    fn results_in_empty_text_user_message() {
        // Older code stored results in a user message whose text was empty.
        let (view, a, o) = check(vec![
            user("list /tmp"),
            assistant(vec![call("a")]),
            (
                Role::User,
                vec![Part::text(""), Part::tool_result("a", "x.txt")],
            ),
            assistant(vec![Part::text("one file")]),
        ]);
        assert_eq!(view.messages[2].role, Role::Tool);
        assert_eq!(
            view.messages[2].parts,
            vec![Part::tool_result("a", "x.txt")]
        );
        assert_eq!(
            content(&a, 2),
            &vec![json!({"type": "tool_result", "tool_use_id": "a", "content": "x.txt"})]
        );
        assert_eq!(o["messages"][2]["role"], "tool");
        assert!(kinds(&view).contains(&RepairKind::SplitUserResults));
    }

    #[test]
    fn tool_message_with_empty_text_keeps_its_results() {
        let (view, ..) = check(vec![
            user("go"),
            assistant(vec![call("a")]),
            tool(vec![Part::text(""), Part::tool_result("a", "ok")]),
        ]);
        assert_eq!(view.messages[2].parts, vec![Part::tool_result("a", "ok")]);
        assert!(!kinds(&view).contains(&RepairKind::Tombstone));
    }

    #[test]
    fn user_results_then_text_become_a_tool_block_then_the_text() {
        let (view, a, _) = check(vec![
            user("go"),
            assistant(vec![call("a")]),
            (
                Role::User,
                vec![Part::text("and then?"), Part::tool_result("a", "ok")],
            ),
        ]);
        assert_eq!(view.messages[2].role, Role::Tool);
        assert_eq!(view.messages[3].role, Role::User);
        // Results first, then the user's text, in one user message (rule 4).
        assert_eq!(content(&a, 2)[0]["type"], "tool_result");
        assert_eq!(
            content(&a, 2)[1],
            json!({"type": "text", "text": "and then?"})
        );
    }

    #[test]
    fn summary_goes_first_as_its_own_user_message() {
        let view = sanitize_with_summary(
            Some("we listed /tmp"),
            &history(vec![user("and now?"), assistant(vec![Part::text("ok")])]),
        );
        let a = anthropic::render(&view);
        assert_eq!(check_anthropic(&a), vec![]);
        assert_eq!(
            content(&a, 0),
            &vec![json!({"type": "text", "text": format!("{SUMMARY_PREFIX}we listed /tmp")})]
        );
        assert_eq!(
            content(&a, 1),
            &vec![json!({"type": "text", "text": "and now?"})]
        );
        assert_eq!(sanitize_with_summary(Some(" "), &[]), View::default());
    }

    #[test]
    fn message_without_parts_is_dropped() {
        let (view, ..) = check(vec![
            user("hi"),
            assistant(vec![]),
            assistant(vec![Part::text("yo")]),
        ]);
        assert_eq!(view.messages.len(), 2);
        assert_eq!(kinds(&view), vec![RepairKind::DroppedMessage]);
    }

    #[test]
    fn tombstone_needed_after_cancellation() {
        // The user interrupted: call b never returned, and the next user message was stored.
        let (view, a, o) = check(vec![
            user("go"),
            assistant(vec![call("a"), call("b")]),
            tool(vec![Part::tool_result("a", "ok")]),
            user("stop"),
        ]);
        assert_eq!(
            view.messages[2].parts,
            vec![
                Part::tool_result("a", "ok"),
                Part::tool_error("b", texts::tombstone(texts::LOST_REASON))
            ]
        );
        assert_eq!(content(&a, 2)[1]["is_error"], true);
        assert_eq!(o["messages"][3]["tool_call_id"], "b");
        assert_eq!(kinds(&view), vec![RepairKind::Tombstone]);
    }

    #[test]
    fn pending_tool_use_at_the_end_gets_a_tombstone() {
        let (view, ..) = check(vec![user("go"), assistant(vec![call("a")])]);
        assert_eq!(view.messages.len(), 3);
        assert_eq!(
            view.messages[2].parts,
            vec![Part::tool_error("a", texts::tombstone(texts::LOST_REASON))]
        );
        assert!(view.messages[2].seqs.is_empty());
    }

    #[test]
    fn system_message_between_tool_use_and_result() {
        let (view, a, o) = check(vec![
            system("be brief"),
            user("go"),
            assistant(vec![call("a")]),
            system("reminder"),
            tool(vec![Part::tool_result("a", "ok")]),
            assistant(vec![Part::text("done")]),
        ]);
        let roles: Vec<Role> = view.messages.iter().map(|m| m.role).collect();
        use Role::*;
        assert_eq!(
            roles,
            vec![System, User, Assistant, Tool, System, Assistant]
        );
        assert_eq!(a["system"], "be brief\n\nreminder");
        assert_eq!(o["messages"][3]["role"], "tool");
        assert_eq!(o["messages"][4]["role"], "system");
        assert!(kinds(&view).contains(&RepairKind::MovedSystem));
    }

    #[test]
    fn orphan_result_after_compaction() {
        // Compaction cut between a tool_use and its result: the result's call is gone.
        let (view, a, o) = check(vec![
            tool(vec![Part::tool_result("gone", "42")]),
            user("what was it?"),
        ]);
        assert_eq!(view.messages[0].role, Role::User);
        let Part::Text { text, .. } = &view.messages[0].parts[0] else {
            panic!("orphan became {:?}", view.messages[0]);
        };
        assert!(text.contains("\"gone\"") && text.contains("42"), "{text}");
        assert_eq!(content(&a, 0)[0]["type"], "text");
        assert_eq!(o["messages"][0]["role"], "user");
        assert_eq!(kinds(&view), vec![RepairKind::OrphanResult]);
    }

    #[test]
    fn result_for_an_earlier_assistant_message_is_an_orphan() {
        let (view, ..) = check(vec![
            user("go"),
            assistant(vec![call("a")]),
            tool(vec![Part::tool_result("a", "ok")]),
            assistant(vec![call("b")]),
            tool(vec![
                Part::tool_result("a", "again"),
                Part::tool_result("b", "ok"),
            ]),
        ]);
        assert_eq!(view.messages[4].parts, vec![Part::tool_result("b", "ok")]);
        assert_eq!(view.messages[5].role, Role::User);
        assert_eq!(kinds(&view), vec![RepairKind::OrphanResult]);
    }

    #[test]
    fn repeated_tool_use_id_is_renamed_with_its_answer() {
        let (view, a, o) = check(vec![
            user("go"),
            assistant(vec![call("a")]),
            tool(vec![Part::tool_result("a", "first")]),
            assistant(vec![call("a"), call("a__2")]),
            tool(vec![
                Part::tool_result("a", "second"),
                Part::tool_result("a__2", "third"),
            ]),
        ]);
        assert_eq!(view.messages[3].parts[0].call_id(), Some("a__2"));
        assert_eq!(view.messages[3].parts[1].call_id(), Some("a__2__2"));
        assert_eq!(
            view.messages[4].parts,
            vec![
                Part::tool_result("a__2", "second"),
                Part::tool_result("a__2__2", "third")
            ]
        );
        assert_eq!(content(&a, 3)[0]["id"], "a__2");
        assert_eq!(o["messages"][4]["tool_call_id"], "a__2");
    }

    #[test]
    fn empty_tool_use_id_and_name_are_filled() {
        // One grammar: an id-less call matches no result (the health check calls it
        // dangling and the result an orphan), so the view answers it with a tombstone and
        // sends the result as text, as store-repair would mend it.
        let (view, ..) = check(vec![
            user("go"),
            assistant(vec![Part::tool_use("", "", json!({}))]),
            tool(vec![Part::tool_result("", "ok")]),
        ]);
        assert_eq!(
            view.messages[1].parts[0],
            Part::tool_use("tool_use", "unknown_tool", json!({}))
        );
        assert_eq!(
            view.messages[2].parts,
            vec![Part::tool_error(
                "tool_use",
                texts::tombstone(texts::LOST_REASON)
            )]
        );
        assert!(kinds(&view).contains(&RepairKind::OrphanResult));
    }

    #[test]
    fn ids_outside_anthropics_alphabet_are_mapped_with_their_answers() {
        let (view, ..) = check(vec![
            user("go"),
            assistant(vec![call("functions.get:0"), call("functions_get_0")]),
            tool(vec![
                Part::tool_result("functions.get:0", "a"),
                Part::tool_result("functions_get_0", "b"),
            ]),
        ]);
        assert_eq!(view.messages[1].parts[0].call_id(), Some("functions_get_0"));
        assert_eq!(
            view.messages[1].parts[1].call_id(),
            Some("functions_get_0__2")
        );
        assert_eq!(
            view.messages[2].parts,
            vec![
                Part::tool_result("functions_get_0", "a"),
                Part::tool_result("functions_get_0__2", "b")
            ]
        );
    }

    #[test]
    fn blank_message_inside_a_tool_pair_breaks_it_as_the_health_check_says() {
        // One grammar: a user message between a call and its result closes the block, blank
        // or not (the contract counts it as a turn), so the view agrees with the check and
        // the mend: a tombstone for the call, the late result as text.
        let (view, ..) = check(vec![
            user("go"),
            assistant(vec![call("a")]),
            user(" "),
            assistant(vec![Part::text("")]),
            tool(vec![Part::tool_result("a", "ok")]),
        ]);
        assert!(kinds(&view).contains(&RepairKind::Tombstone));
        assert!(kinds(&view).contains(&RepairKind::OrphanResult));
    }

    #[test]
    fn broken_parts_anywhere_are_made_sendable() {
        let (view, a, _) = check(vec![
            (
                Role::User,
                vec![
                    Part::text("   "),
                    signed("user thought", "anthropic", "s"),
                    call("in_user"),
                ],
            ),
            assistant(vec![
                Part::text("\n"),
                Part::tool_use("s", "bash", json!("{\"cmd\":\"ls\"}")),
                Part::tool_use("n", "bash", json!(7)),
                Part::tool_use("z", "bash", Value::Null),
            ]),
            tool(vec![
                Part::tool_error("s", ""),
                Part::tool_result("n", ""),
                Part::tool_error("z", "  "),
            ]),
        ]);
        assert_eq!(
            view.messages[0].parts.len(),
            1,
            "only the described tool_use is left"
        );
        assert_eq!(
            view.messages[1].parts,
            vec![
                Part::tool_use("s", "bash", json!({"cmd": "ls"})),
                Part::tool_use("n", "bash", json!({"value": 7})),
                Part::tool_use("z", "bash", json!({})),
            ]
        );
        assert_eq!(content(&a, 2)[0]["content"], EMPTY_ERROR);
        assert_eq!(content(&a, 2)[1].get("content"), None);
        assert_eq!(content(&a, 2)[2]["content"], EMPTY_ERROR);
    }

    fn empty_text_between_signed_thinking(namespace: &str) {
        let (view, a, o) = check(vec![
            user("hi"),
            assistant(vec![
                signed("first", namespace, "sig1"),
                Part::text(""),
                signed("", namespace, "sig2"),
                Part::text("answer"),
                call("a"),
            ]),
        ]);
        assert_eq!(
            content(&a, 1)[..4],
            [
                json!({"type": "thinking", "thinking": "first", "signature": "sig1"}),
                json!({"type": "text", "text": " "}),
                json!({"type": "thinking", "thinking": "", "signature": "sig2"}),
                json!({"type": "text", "text": "answer"}),
            ]
        );
        assert!(kinds(&view).contains(&RepairKind::SignedSpace));
        assert_eq!(o["messages"][1]["content"], "answer");
    }

    /// A session that repeats one tool_use id (or has none) many times renames them
    /// `{id}__2`, `{id}__3`, ..., skipping names already taken (the remembered next suffix
    /// keeps this linear: 15 000 unnamed calls took 22 s to export when it was quadratic).
    #[test]
    fn many_repeated_tool_use_ids_get_the_smallest_free_suffix() {
        let mut messages = vec![user("go"), assistant(vec![call("a__3")])];
        messages.push(tool(vec![Part::tool_result("a__3", "ok")]));
        for _ in 0..2_000 {
            messages.push(assistant(vec![call("a")]));
            messages.push(tool(vec![Part::tool_result("a", "ok")]));
        }
        let view = sanitize(&history(messages));
        let ids: Vec<&str> = view
            .messages
            .iter()
            .flat_map(|m| &m.parts)
            .filter_map(|part| match part {
                Part::ToolUse { id, .. } => Some(id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(ids[..5], ["a__3", "a", "a__2", "a__4", "a__5"]);
        assert_eq!(ids.len(), 2_001);
        assert_eq!(
            ids.iter().collect::<std::collections::HashSet<_>>().len(),
            ids.len()
        );
    }

    /// Text made only of characters some provider counts as whitespace (Python's U+001C..
    /// U+001F, JavaScript's U+FEFF) is blank: never sent as a text block or error content.
    #[test]
    fn separator_or_bom_only_text_is_blank_for_every_provider() {
        let (_, a, o) = check(vec![
            user("q"),
            user("\u{1f}"),
            assistant(vec![Part::text("\u{feff}"), call("a")]),
            tool(vec![Part::tool_error("a", "\u{1c}")]),
            user("\u{1e}\u{feff}"),
            system("\u{1d}"),
        ]);
        for body in [&a, &o] {
            let text = body.to_string();
            for c in ["\\u001f", "\\u001c", "\\u001e", "\\u001d", "\u{feff}"] {
                assert!(!text.contains(c), "{c:?} in {body:#}");
            }
        }
        assert_eq!(content(&a, 2)[0]["content"], EMPTY_ERROR);
    }

    /// Rule 7's exception covers a single space between signed thinking blocks only: a blank
    /// text before the first or after the last one is dropped, not sent as a space.
    #[test]
    fn blank_text_outside_signed_thinking_is_dropped_not_spaced() {
        let (view, a, _) = check(vec![
            user("hi"),
            assistant(vec![
                Part::text(""),
                signed("first", "anthropic", "sig1"),
                Part::text("\n"),
                signed("second", "vertex", "sig2"),
                Part::text(""),
                Part::reasoning("unsigned", None),
                Part::text(" "),
                call("a"),
            ]),
        ]);
        assert_eq!(
            content(&a, 1)[..],
            [
                json!({"type": "thinking", "thinking": "first", "signature": "sig1"}),
                json!({"type": "text", "text": " "}),
                json!({"type": "thinking", "thinking": "second", "signature": "sig2"}),
                json!({"type": "tool_use", "id": "a", "name": "bash", "input": {"cmd": "ls"}}),
            ]
        );
        let spaced = kinds(&view)
            .iter()
            .filter(|k| **k == RepairKind::SignedSpace)
            .count();
        assert_eq!(spaced, 1);
    }

    #[test]
    fn empty_text_between_signed_thinking_anthropic() {
        empty_text_between_signed_thinking("anthropic");
    }

    #[test]
    fn empty_text_between_signed_thinking_bedrock() {
        empty_text_between_signed_thinking("bedrock");
    }

    #[test]
    fn empty_text_between_signed_thinking_vertex() {
        empty_text_between_signed_thinking("vertex");
    }

    #[test]
    fn empty_text_between_unsigned_thinking_is_dropped() {
        let (view, a, _) = check(vec![
            user("hi"),
            assistant(vec![
                Part::reasoning("first", None),
                Part::text(""),
                Part::reasoning("second", Some(json!({"openai": {"signature": "x"}}))),
                Part::text("answer"),
            ]),
        ]);
        assert_eq!(
            view.messages[1].parts,
            vec![
                Part::reasoning("first", None),
                Part::reasoning("second", Some(json!({"openai": {"signature": "x"}}))),
                Part::text("answer"),
            ]
        );
        // Unsigned reasoning cannot be verified by Anthropic and is left out.
        assert_eq!(
            content(&a, 1),
            &vec![json!({"type": "text", "text": "answer"})]
        );
    }

    #[test]
    fn history_starting_with_an_assistant_message_gets_a_placeholder_user_first() {
        let (_, a, o) = check(vec![assistant(vec![Part::text("hello")]), user("hi")]);
        assert_eq!(
            content(&a, 0),
            &vec![json!({"type": "text", "text": texts::PLACEHOLDER_USER})]
        );
        assert_eq!(o["messages"][0]["role"], "assistant");
    }

    #[test]
    fn tool_use_in_an_assistant_message_with_only_reasoning_left_keeps_its_pair() {
        let (_, a, o) = check(vec![
            user("hi"),
            assistant(vec![Part::reasoning("unsigned", None), call("a")]),
            tool(vec![Part::tool_result("a", "ok")]),
        ]);
        assert_eq!(content(&a, 1).len(), 1);
        assert_eq!(o["messages"][1]["content"], Value::Null);
    }
}
