//! Transcripts for people: a stored session as Markdown ([`markdown`]) or as one
//! self-contained HTML page ([`html`]).
//!
//! Both renderers show the same [`layout`]: turn headers, each message with its time, model
//! and token usage, every tool call with its result beside it (the grammar walk says which
//! result answers which call, so a call and its answer are read together and the tool message
//! that carried the answer is not shown a second time), tombstones and compacted messages
//! marked, and each compaction summary where its compacted head ends. What the store itself
//! wrote (tombstones, parts described as text) is recognised through `texts`, never restated.
//! Pure: no I/O, no clock; the same session gives the same bytes.

mod html;
mod markdown;

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::history::compaction::Summary;
use crate::history::grammar::{At, CallState, PartClass, ResultState, ServerCallState, Walk};
use crate::history::texts::{describe, is_tombstone};
use crate::model::{Message, Part, Role, SessionId, Usage};

pub use html::html;
pub use markdown::markdown;

/// What a transcript is made from: the session's stored rows, as the store reads them.
#[derive(Clone, Copy, Debug)]
pub struct Transcript<'a> {
    /// The session.
    pub session: &'a SessionId,
    /// Its title, when it has one.
    pub title: Option<&'a str>,
    /// The session it was forked from and the first turn it did not copy, when it is a fork.
    pub forked_from: Option<(&'a str, i64)>,
    /// Every live message, compacted ones included, in `seq` order.
    pub messages: &'a [Message],
    /// Every compaction summary, oldest first.
    pub summaries: &'a [Summary],
    /// Token usage by message `seq`.
    pub usage: &'a [(i64, Usage)],
}

/// One thing a transcript shows, in reading order.
#[derive(Debug)]
pub(crate) enum Entry<'a> {
    /// The first shown message of a turn (its `turn_index`).
    Turn(i64),
    /// A message and what is shown of it.
    Message(Shown<'a>),
    /// A compaction summary, after the last message it replaces.
    Summary(&'a Summary),
}

/// A message as shown: the blocks left once its results moved beside their calls.
#[derive(Debug)]
pub(crate) struct Shown<'a> {
    pub(crate) message: &'a Message,
    pub(crate) usage: Option<&'a Usage>,
    pub(crate) blocks: Vec<Block<'a>>,
}

/// One shown part.
#[derive(Debug)]
pub(crate) enum Block<'a> {
    /// Text as written.
    Text(&'a str),
    /// Model thinking (folded in HTML).
    Reasoning(&'a str),
    /// A part shown as the store describes it (redacted reasoning, images, documents,
    /// provider blocks kept verbatim), or reasoning where it cannot stand.
    Described(String),
    /// A tool call (client or server) and what became of it.
    Call(Call<'a>),
    /// A result not shown beside a call: it answers nothing here.
    Stray(Answer),
}

/// A tool call beside its outcome.
#[derive(Debug)]
pub(crate) struct Call<'a> {
    pub(crate) id: &'a str,
    pub(crate) name: &'a str,
    pub(crate) input: &'a Value,
    /// Run by the provider (a server tool), not the client.
    pub(crate) server: bool,
    pub(crate) outcome: Outcome,
}

/// What became of a call.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Its result.
    Answered(Answer),
    /// Its block ends the session: a result may still come.
    Pending,
    /// A later message moved on without a result.
    Unanswered,
    /// Nothing can answer it (no id, or outside an assistant message).
    Unanswerable,
}

/// A result's content and marks.
#[derive(Debug)]
pub(crate) struct Answer {
    /// The id it names.
    pub(crate) tool_use_id: String,
    /// Its content as text (a server result's block as indented JSON).
    pub(crate) content: String,
    pub(crate) is_error: bool,
    /// A tombstone the store wrote for a call that never returned.
    pub(crate) tombstone: bool,
    /// It stands in the user message after its block (misplaced), or answers no call.
    pub(crate) note: Option<&'static str>,
}

/// Results longer than this many lines are folded in HTML.
pub(crate) const FOLD_LINES: usize = 12;
/// Results longer than this many bytes are folded in HTML.
pub(crate) const FOLD_BYTES: usize = 1200;

/// True for a result long enough to be folded.
pub(crate) fn is_long(content: &str) -> bool {
    content.len() > FOLD_BYTES || content.lines().count() > FOLD_LINES
}

/// The transcript's entries in reading order (what both renderers show).
pub(crate) fn layout<'a>(transcript: &Transcript<'a>) -> Vec<Entry<'a>> {
    let messages = transcript.messages;
    let walk = Walk::of(messages);
    let beside = results_beside_calls(&walk);
    let usage: HashMap<i64, &Usage> = transcript.usage.iter().map(|(id, u)| (*id, u)).collect();
    let mut summaries: Vec<&Summary> = transcript.summaries.iter().collect();
    summaries.sort_by_key(|s| (s.through_seq, s.id));
    let mut summaries = summaries.into_iter().peekable();
    let mut entries = Vec::new();
    let mut turn = None;
    for (index, message) in messages.iter().enumerate() {
        while let Some(summary) = summaries.next_if(|s| s.through_seq < message.seq) {
            entries.push(Entry::Summary(summary));
        }
        let blocks = blocks_of(messages, &walk, &beside, index);
        if blocks.is_empty() && !message.parts.is_empty() {
            continue;
        }
        if turn != Some(message.turn_index) {
            turn = Some(message.turn_index);
            entries.push(Entry::Turn(message.turn_index));
        }
        entries.push(Entry::Message(Shown {
            message,
            usage: usage.get(&message.seq).copied(),
            blocks,
        }));
    }
    entries.extend(summaries.map(Entry::Summary));
    entries
}

/// Every result the walk pairs with a call: shown beside that call, not where it is stored.
fn results_beside_calls(walk: &Walk) -> HashSet<At> {
    let mut beside = HashSet::new();
    for class in walk.classes() {
        for part in &class.parts {
            match part {
                PartClass::Call {
                    state: CallState::Answered { by } | CallState::AnsweredFromUser { by },
                    ..
                }
                | PartClass::ServerCall(ServerCallState::Answered { by }) => {
                    beside.insert(*by);
                }
                _ => {}
            }
        }
    }
    beside
}

/// The blocks shown for the message at `index`.
fn blocks_of<'a>(
    messages: &'a [Message],
    walk: &Walk,
    beside: &HashSet<At>,
    index: usize,
) -> Vec<Block<'a>> {
    let message = &messages[index];
    let classes = walk.class(index).map(|c| c.parts.as_slice()).unwrap_or(&[]);
    let mut blocks = Vec::with_capacity(message.parts.len());
    for (ordinal, part) in message.parts.iter().enumerate() {
        if beside.contains(&At {
            message: index,
            part: ordinal,
        }) {
            continue;
        }
        let class = classes.get(ordinal).copied();
        blocks.push(block_of(messages, message.role, part, class));
    }
    blocks
}

/// One part as shown, given its class in the walk.
fn block_of<'a>(
    messages: &'a [Message],
    role: Role,
    part: &'a Part,
    class: Option<PartClass>,
) -> Block<'a> {
    match part {
        Part::Text { text, .. } => Block::Text(text),
        Part::Reasoning { text, .. } if role == Role::Assistant => Block::Reasoning(text),
        Part::ToolUse {
            id, name, input, ..
        }
        | Part::ServerToolUse {
            id, name, input, ..
        } => Block::Call(Call {
            id,
            name,
            input,
            server: matches!(part, Part::ServerToolUse { .. }),
            outcome: outcome_of(messages, class),
        }),
        Part::ToolResult { .. } | Part::ServerToolResult { .. } => {
            let note = match class {
                Some(PartClass::Result(ResultState::WouldAnswer { .. })) => {
                    Some("stored where no result may stand")
                }
                _ => Some("answers no call"),
            };
            Block::Stray(answer_of(part, note))
        }
        _ => Block::Described(describe(part)),
    }
}

/// What became of a call, from its class.
fn outcome_of(messages: &[Message], class: Option<PartClass>) -> Outcome {
    let answer = |by: At, note| {
        messages
            .get(by.message)
            .and_then(|m| m.parts.get(by.part))
            .map_or(Outcome::Unanswered, |part| {
                Outcome::Answered(answer_of(part, note))
            })
    };
    match class {
        Some(PartClass::Call { state, .. }) => match state {
            CallState::Answered { by } => answer(by, None),
            CallState::AnsweredFromUser { by } => answer(by, Some("stored in the user message")),
            CallState::Pending => Outcome::Pending,
            CallState::Unanswered => Outcome::Unanswered,
            CallState::Unanswerable => Outcome::Unanswerable,
        },
        Some(PartClass::ServerCall(state)) => match state {
            ServerCallState::Answered { by } => answer(by, None),
            ServerCallState::Pending => Outcome::Pending,
            ServerCallState::Unanswered => Outcome::Unanswered,
        },
        _ => Outcome::Unanswerable,
    }
}

/// A result part's content and marks.
fn answer_of(part: &Part, note: Option<&'static str>) -> Answer {
    match part {
        Part::ToolResult {
            tool_use_id,
            content,
            is_error,
            ..
        } => Answer {
            tool_use_id: tool_use_id.clone(),
            content: content.clone(),
            is_error: *is_error,
            tombstone: is_tombstone(content, *is_error),
            note,
        },
        Part::ServerToolResult {
            tool_use_id, block, ..
        } => Answer {
            tool_use_id: tool_use_id.clone(),
            content: pretty(block),
            is_error: false,
            tombstone: false,
            note,
        },
        other => Answer {
            tool_use_id: other.tool_use_id().unwrap_or_default().to_owned(),
            content: describe(other),
            is_error: false,
            tombstone: false,
            note,
        },
    }
}

/// JSON indented for reading.
pub(crate) fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// The role as a heading word.
pub(crate) fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "System",
        Role::User => "User",
        Role::Assistant => "Assistant",
        Role::Tool => "Tool",
    }
}

/// Token usage as one line: `1,234 in · 56 out · 7 cache read · 8 cache write`.
pub(crate) fn usage_line(usage: &Usage) -> Option<String> {
    counts_line([
        usage.input_tokens.map(u128::from),
        usage.output_tokens.map(u128::from),
        usage.cache_read_tokens.map(u128::from),
        usage.cache_write_tokens.map(u128::from),
    ])
}

/// The session's total usage as one line (each field summed over the messages that report
/// it), exact: summed in 128 bits, which no count of 64-bit rows can overflow, so a total
/// past 64 bits is shown as it is, never clamped.
pub(crate) fn total_usage_line(usage: &[(i64, Usage)]) -> Option<String> {
    let sum = |field: fn(&Usage) -> Option<u64>| {
        usage
            .iter()
            .filter_map(|(_, u)| field(u))
            .fold(None, |total: Option<u128>, n| {
                Some(total.unwrap_or(0).saturating_add(u128::from(n)))
            })
    };
    counts_line([
        sum(|u| u.input_tokens),
        sum(|u| u.output_tokens),
        sum(|u| u.cache_read_tokens),
        sum(|u| u.cache_write_tokens),
    ])
}

/// Input, output, cache-read and cache-write counts as one line; `None` when none is known.
fn counts_line(counts: [Option<u128>; 4]) -> Option<String> {
    let shown: Vec<String> = counts
        .iter()
        .zip(["in", "out", "cache read", "cache write"])
        .filter_map(|(n, what)| n.map(|n| format!("{} {what}", grouped(n))))
        .collect();
    (!shown.is_empty()).then(|| shown.join(" · "))
}

/// `1234567` as `1,234,567`.
fn grouped(n: u128) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (at, digit) in digits.chars().enumerate() {
        if at > 0 && (digits.len() - at) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// The lineage line of a fork: `forked from SESSION at turn N`.
pub(crate) fn lineage(transcript: &Transcript<'_>) -> Option<String> {
    transcript
        .forked_from
        .map(|(parent, turn)| format!("forked from {parent} at turn {turn}"))
}

/// How many turns the messages span (distinct turn indexes).
pub(crate) fn turn_count(messages: &[Message]) -> usize {
    let mut turns: Vec<i64> = messages.iter().map(|m| m.turn_index).collect();
    turns.dedup();
    turns.len()
}

/// A timestamp as people read it, in UTC to the second.
pub(crate) fn when(at: &chrono::DateTime<chrono::Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

#[cfg(test)]
mod tests;
