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
//!   part is never blank, except a single space `" "` in a message with signed reasoning,
//!   which stands for an empty text part so the thinking blocks keep their positions;
//! - every tool_use is answered in the `tool` message directly after its assistant message
//!   (system messages aside), by a real result or a synthetic tombstone;
//! - `tool` messages hold tool_results only, each answering a tool_use of the assistant
//!   message directly before; an error result is never empty;
//! - tool_use ids are unique, tool names non-empty, inputs JSON objects;
//! - no message is empty.
//!
//! The view is a function of the messages alone and of nothing after them, except that a
//! tombstone for a call that has no answer yet is replaced once the answer is stored: this is
//! what keeps rendering prefix-stable.

use serde::{Deserialize, Serialize};

use crate::model::{Message, Part, Role};

/// The text of the synthetic tombstone the view gives a tool_use that has no answer.
pub const MISSING_RESULT_TEXT: &str =
    "Tool call has no result: it was interrupted or its result was lost.";

/// The content given to an error result stored with empty content.
pub const EMPTY_ERROR_TEXT: &str = "Tool call failed without output.";

/// One message of the provider's view.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ViewMessage {
    /// `System`, `User`, `Assistant` or `Tool` (tool results only).
    pub role: Role,
    /// The parts to send, already repaired.
    pub parts: Vec<Part>,
    /// The `seq` of the stored messages it was made from; empty when it is synthetic.
    pub seqs: Vec<i64>,
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
    /// A tool_use id repeated an earlier one (or was empty) and was renamed with its answer.
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
}

/// Builds the provider's view of `messages` (in `seq` order, already restricted to what the
/// provider sees: no compacted messages).
pub fn sanitize(messages: &[Message]) -> View {
    let _ = messages;
    todo!()
}

/// The description a part gets when it cannot be sent as what it is (an orphan result, a
/// tool_use in a user message). Deterministic: the same part always reads the same.
pub fn describe(part: &Part) -> String {
    let _ = part;
    todo!()
}
