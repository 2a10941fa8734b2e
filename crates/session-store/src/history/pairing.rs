//! Tool pairing on write: what the next message of a session may be.
//!
//! The write policy over the grammar ([`super::grammar`]): a message is accepted only when
//! the walk classifies every part of it as healthy. A tool_use is answered by the tool_result
//! with its id in the block of `tool` messages that directly follows its assistant message
//! (system messages never break a pair). Anything that would break a pair is refused with a
//! [`Refusal`] that names the ids involved, before anything is written.

use super::grammar::{IdState, OrphanWhy, PartClass, ResultState, Resume, Walk};
use super::texts;
use crate::model::{NewMessage, Part, PartKind, Role, Usage};

/// Why a message was refused. Nothing is written when an append is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// A message must hold at least one part.
    #[error("message has no parts")]
    EmptyMessage,
    /// The last assistant message has tool_uses without results.
    #[error("tool_uses {ids:?} of the last assistant message are unanswered: append a tool message with their results or call cancel_pending before a {role} message")]
    PendingToolUses {
        /// The unanswered ids.
        ids: Vec<String>,
        /// The role of the refused message.
        role: Role,
    },
    /// A tool_result that answers no pending tool_use of the directly preceding assistant message.
    #[error("tool_result for {tool_use_id:?} answers no pending tool_use of the directly preceding assistant message (pending: {pending:?})")]
    UnexpectedToolResult {
        /// The id the result claims to answer.
        tool_use_id: String,
        /// What was pending at that point.
        pending: Vec<String>,
    },
    /// A second tool_result for the same tool_use.
    #[error("tool_use {tool_use_id:?} is already answered")]
    DuplicateToolResult {
        /// The id answered twice.
        tool_use_id: String,
    },
    /// A tool_result part in a message whose role is not `tool`.
    #[error("tool_result for {tool_use_id:?} sits in a {role} message; tool results belong in tool messages")]
    MisplacedToolResult {
        /// The id the result answers.
        tool_use_id: String,
        /// The role of the message holding it.
        role: Role,
    },
    /// A server tool result that follows no server tool call with its id in its message.
    #[error("server tool result for {tool_use_id:?} follows no server tool call with that id in its assistant message")]
    UnpairedServerToolResult {
        /// The id it claims to answer.
        tool_use_id: String,
    },
    /// A server tool result whose block is not the provider's result block for its call (an
    /// object whose `type` ends in `_tool_result`, naming the part's `tool_use_id`): the
    /// block goes back verbatim, and the provider would refuse it or pair it with another
    /// call.
    #[error("server tool result for {tool_use_id:?} (part {ordinal}) holds no result block for that call (an object whose type ends in _tool_result, with that tool_use_id)")]
    MalformedServerToolResult {
        /// Position of the part in the message (0-based).
        ordinal: usize,
        /// The id the part claims to answer.
        tool_use_id: String,
    },
    /// A part kind the message's role cannot carry.
    #[error("a {role} message cannot hold a {kind} part (part {ordinal})")]
    MisplacedPart {
        /// The role of the message.
        role: Role,
        /// The kind of the part.
        kind: PartKind,
        /// Its position in the message.
        ordinal: usize,
    },
    /// A tool message without any tool_result.
    #[error("a tool message must hold at least one tool_result")]
    ToolMessageWithoutResult,
    /// A tool_use id already used in the session.
    #[error("tool_use id {id:?} is already used in this session")]
    DuplicateToolUseId {
        /// The repeated id.
        id: String,
    },
    /// Parts that extend an assistant message came when none is open.
    #[error("no assistant message with an open tool block to extend")]
    NoOpenAssistant,
    /// Only an assistant message can be streamed in part by part.
    #[error("a {role} message cannot be streamed; only an assistant message can")]
    NotStreamable {
        /// The role asked for.
        role: Role,
    },
    /// A tool_use with an empty id.
    #[error("tool_use at part {ordinal} has no id")]
    ToolUseWithoutId {
        /// Its position in the message.
        ordinal: usize,
    },
    /// A tool_use with an empty name.
    #[error("tool_use {id:?} has no name")]
    ToolUseWithoutName {
        /// The tool_use id.
        id: String,
    },
    /// A tool_use whose input is not a JSON object.
    #[error("input of tool_use {id:?} is not a JSON object")]
    ToolInputNotObject {
        /// The tool_use id.
        id: String,
    },
    /// A usage count above [`crate::MAX_TOKEN_COUNT`]: the store would have to change it.
    #[error("usage.{field} = {value} is above the largest token count the store keeps exactly ({max})", max = crate::MAX_TOKEN_COUNT)]
    TokenCountOutOfRange {
        /// The field of [`crate::Usage`] (`input_tokens`, ...).
        field: &'static str,
        /// The count given.
        value: u64,
    },
    /// A text field holds a NUL character (U+0000), which PostgreSQL cannot keep: refused on
    /// every engine, so that a session means the same wherever it is stored.
    #[error("{field} of part {ordinal} ({kind}) holds a NUL character (U+0000), which the store cannot keep on every engine")]
    NulInText {
        /// Position of the part in the message (0-based).
        ordinal: usize,
        /// Its kind.
        kind: PartKind,
        /// Which field (`text`, `content`, `id`, ...).
        field: &'static str,
    },
    /// A text of the message itself (its `model`, `usage.model` or `idempotency_key`) holds
    /// a NUL character (U+0000): refused on every engine, as in a part.
    #[error("the message's {field} holds a NUL character (U+0000), which the store cannot keep on every engine")]
    NulInMessageField {
        /// `model`, `usage.model` or `idempotency_key`.
        field: &'static str,
    },
    /// An id longer than [`crate::MAX_ID_BYTES`]: a part's (a tool_use's `id`, a result's
    /// `tool_use_id`) or the message's `idempotency_key`. PostgreSQL cannot index it: refused
    /// on every engine.
    #[error("{field} {place}is {bytes} bytes long, more than the {max} an id may be", place = match ordinal { Some(ordinal) => format!("of part {ordinal} "), None => "of the message ".to_owned() }, max = crate::MAX_ID_BYTES)]
    IdTooLong {
        /// Position of the part in the message (0-based); `None` for the message's own
        /// `idempotency_key`.
        ordinal: Option<usize>,
        /// Which field (`id`, `tool_use_id`, `idempotency_key`).
        field: &'static str,
        /// Its length in bytes of UTF-8.
        bytes: usize,
    },
    /// A time outside the years 0 to 9999, what RFC 3339 writes with its four-digit year:
    /// stored as text, it would sort out of time order and no RFC 3339 reader reads it back.
    #[error("{field} {time:?} is outside the years 0 to 9999 the store keeps times in")]
    TimeOutOfRange {
        /// Which time (`created_at`).
        field: &'static str,
        /// The time given.
        time: chrono::DateTime<chrono::Utc>,
    },
}

impl Refusal {
    /// The name of the rule the refused write would have broken: the contract's rule name
    /// (`dangling_tool_use`, `orphan_tool_result`, `duplicate_tool_use_id`,
    /// `misplaced_tool_result`) where the refusal protects one, else the refusal's own name
    /// (`empty_message`, `misplaced_part`, ...).
    pub fn rule(&self) -> &'static str {
        match self {
            Refusal::EmptyMessage => "empty_message",
            Refusal::PendingToolUses { .. } => "dangling_tool_use",
            Refusal::UnexpectedToolResult { .. } | Refusal::DuplicateToolResult { .. } => {
                "orphan_tool_result"
            }
            Refusal::MisplacedToolResult { .. } => "misplaced_tool_result",
            Refusal::UnpairedServerToolResult { .. } => "unpaired_server_tool_result",
            Refusal::MalformedServerToolResult { .. } => "malformed_server_tool_result",
            Refusal::MisplacedPart { .. } => "misplaced_part",
            Refusal::ToolMessageWithoutResult => "tool_message_without_result",
            Refusal::DuplicateToolUseId { .. } => "duplicate_tool_use_id",
            Refusal::NoOpenAssistant => "no_open_assistant",
            Refusal::ToolUseWithoutId { .. } => "tool_use_without_id",
            Refusal::ToolUseWithoutName { .. } => "tool_use_without_name",
            Refusal::ToolInputNotObject { .. } => "tool_input_not_object",
            Refusal::NulInText { .. } | Refusal::NulInMessageField { .. } => "nul_in_text",
            Refusal::TokenCountOutOfRange { .. } => "token_count_out_of_range",
            Refusal::IdTooLong { .. } => "id_too_long",
            Refusal::TimeOutOfRange { .. } => "time_out_of_range",
            Refusal::NotStreamable { .. } => "not_streamable",
        }
    }

    /// The tool_use ids the refusal names (the unanswered calls, the id a result claims to
    /// answer, the reused id); empty when it names none.
    pub fn ids(&self) -> Vec<String> {
        match self {
            Refusal::PendingToolUses { ids, .. } => ids.clone(),
            Refusal::UnexpectedToolResult { tool_use_id, .. }
            | Refusal::DuplicateToolResult { tool_use_id }
            | Refusal::MisplacedToolResult { tool_use_id, .. }
            | Refusal::UnpairedServerToolResult { tool_use_id }
            | Refusal::MalformedServerToolResult { tool_use_id, .. } => vec![tool_use_id.clone()],
            Refusal::DuplicateToolUseId { id }
            | Refusal::ToolUseWithoutName { id }
            | Refusal::ToolInputNotObject { id } => vec![id.clone()],
            Refusal::EmptyMessage
            | Refusal::MisplacedPart { .. }
            | Refusal::ToolMessageWithoutResult
            | Refusal::NoOpenAssistant
            | Refusal::ToolUseWithoutId { .. }
            | Refusal::NulInText { .. }
            | Refusal::TokenCountOutOfRange { .. }
            | Refusal::NulInMessageField { .. }
            | Refusal::IdTooLong { .. }
            | Refusal::TimeOutOfRange { .. }
            | Refusal::NotStreamable { .. } => Vec::new(),
        }
    }
}

/// Checks that `message` may follow what `walk` has seen, and feeds it to the walk.
///
/// On a refusal the walk may hold part of the message: drop it, as the write path drops its
/// transaction.
pub fn check_append(walk: &mut Walk, message: &NewMessage) -> Result<(), Refusal> {
    check_append_with(walk, message, Texts::Scan)
}

/// [`check_append`] for a message whose texts passed [`check_texts`] already: the write path
/// scans every text of an append once, before its idempotency keys are looked up, and the
/// same refusals come in the same order without a second scan.
pub(crate) fn check_append_scanned(walk: &mut Walk, message: &NewMessage) -> Result<(), Refusal> {
    check_append_with(walk, message, Texts::Scanned)
}

/// Whether [`check_shape`] scans the message's texts for NUL ([`check_texts`]) or its caller
/// did.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Texts {
    Scan,
    Scanned,
}

fn check_append_with(walk: &mut Walk, message: &NewMessage, texts: Texts) -> Result<(), Refusal> {
    if message.parts.is_empty() {
        return Err(Refusal::EmptyMessage);
    }
    if let Some((field, value)) = message.usage.as_ref().and_then(Usage::unkeepable_count) {
        return Err(Refusal::TokenCountOutOfRange { field, value });
    }
    if let Some(time) = message
        .created_at
        .filter(|&time| !crate::model::keepable_time(time))
    {
        return Err(Refusal::TimeOutOfRange {
            field: "created_at",
            time,
        });
    }
    check_shape(message, texts)?;
    // Listing the pending calls costs their number: only a refusal does it, so a block of n
    // tool messages is checked in time linear in n.
    if matches!(message.role, Role::User | Role::Assistant) && walk.has_pending() {
        return Err(Refusal::PendingToolUses {
            ids: walk.pending(),
            role: message.role,
        });
    }
    // The calls an unexpected result is refused against, listed before the walk moves on,
    // and only when some result may be one.
    let pending = may_answer_nothing(walk, message).then(|| walk.pending());
    let index = walk.walked();
    walk.feed(message.role, &message.parts);
    let Some(class) = walk.class(index) else {
        return Ok(());
    };
    for (ordinal, (part, class)) in message.parts.iter().zip(&class.parts).enumerate() {
        match (part, class) {
            (Part::ToolUse { id, .. }, PartClass::Call { id: state, .. }) => match state {
                IdState::Fresh => {}
                IdState::Missing => return Err(Refusal::ToolUseWithoutId { ordinal }),
                IdState::Repeated { .. } => {
                    return Err(Refusal::DuplicateToolUseId { id: id.clone() })
                }
            },
            (Part::ToolResult { tool_use_id, .. }, PartClass::Result(state)) => match state {
                ResultState::Answers { .. } => {}
                ResultState::Orphan(OrphanWhy::AlreadyAnswered { .. }) => {
                    return Err(Refusal::DuplicateToolResult {
                        tool_use_id: tool_use_id.clone(),
                    })
                }
                ResultState::Orphan(_) | ResultState::WouldAnswer { .. } => {
                    return Err(Refusal::UnexpectedToolResult {
                        tool_use_id: tool_use_id.clone(),
                        pending: pending.clone().unwrap_or_else(|| walk.pending()),
                    })
                }
            },
            (
                Part::ServerToolResult { tool_use_id, .. },
                PartClass::ServerResult { call: None },
            ) => {
                return Err(Refusal::UnpairedServerToolResult {
                    tool_use_id: tool_use_id.clone(),
                })
            }
            _ => {}
        }
    }
    Ok(())
}

/// Checks parts that extend the open assistant message (a log that writes one line per
/// content block), and feeds them to the walk.
pub fn check_extension(walk: &mut Walk, parts: &[Part]) -> Result<(), Refusal> {
    let probe = NewMessage::assistant(parts.to_vec());
    check_shape(&probe, Texts::Scan)?;
    let Some(index) = walk.open_assistant() else {
        return Err(Refusal::NoOpenAssistant);
    };
    let start = walk.class(index).map_or(0, |c| c.parts.len());
    if !walk.extend_assistant(parts) {
        return Err(Refusal::NoOpenAssistant);
    }
    let classes = walk
        .class(index)
        .map(|c| &c.parts[start..])
        .unwrap_or_default();
    for (offset, (part, class)) in parts.iter().zip(classes).enumerate() {
        match (part, class) {
            (
                _,
                PartClass::Call {
                    id: IdState::Missing,
                    ..
                },
            ) => {
                return Err(Refusal::ToolUseWithoutId {
                    ordinal: start + offset,
                })
            }
            (
                Part::ToolUse { id, .. },
                PartClass::Call {
                    id: IdState::Repeated { .. },
                    ..
                },
            ) => return Err(Refusal::DuplicateToolUseId { id: id.clone() }),
            _ => {}
        }
    }
    Ok(())
}

/// What a message must be on its own, before pairing: parts that fit its role, calls with a
/// name and an object input, a tool message with a result.
/// Refuses a part with a text no engine can keep (a NUL character, [`Part::nul_field`]).
/// Part of [`check_append`]; the write path also asks it before any statement binds the
/// message's texts (PostgreSQL would refuse the statement with its own error).
pub fn check_texts(message: &NewMessage) -> Result<(), Refusal> {
    let own = [
        ("model", message.model.as_deref()),
        (
            "usage.model",
            message.usage.as_ref().and_then(|u| u.model.as_deref()),
        ),
        ("idempotency_key", message.idempotency_key.as_deref()),
    ];
    if let Some((field, _)) = own
        .into_iter()
        .find(|(_, text)| text.is_some_and(|t| t.contains('\0')))
    {
        return Err(Refusal::NulInMessageField { field });
    }
    let key = message.idempotency_key.as_deref();
    if let Some(bytes) = key.and_then(crate::model::id_too_long) {
        return Err(Refusal::IdTooLong {
            ordinal: None,
            field: "idempotency_key",
            bytes,
        });
    }
    for (ordinal, part) in message.parts.iter().enumerate() {
        if let Some(field) = part.nul_field() {
            return Err(Refusal::NulInText {
                ordinal,
                kind: part.kind(),
                field,
            });
        }
        if let Some((field, bytes)) = part.long_id() {
            return Err(Refusal::IdTooLong {
                ordinal: Some(ordinal),
                field,
                bytes,
            });
        }
    }
    Ok(())
}

fn check_shape(message: &NewMessage, texts: Texts) -> Result<(), Refusal> {
    if texts == Texts::Scan {
        check_texts(message)?;
    }
    let role = message.role;
    let mut results = 0;
    for (ordinal, part) in message.parts.iter().enumerate() {
        match part {
            Part::Text { .. } => {}
            Part::ToolResult { tool_use_id, .. } => {
                if role != Role::Tool {
                    return Err(Refusal::MisplacedToolResult {
                        tool_use_id: tool_use_id.clone(),
                        role,
                    });
                }
                results += 1;
            }
            Part::Reasoning { .. }
            | Part::RedactedReasoning { .. }
            | Part::ToolUse { .. }
            | Part::ServerToolUse { .. }
            | Part::ServerToolResult { .. }
                if role != Role::Assistant =>
            {
                return Err(Refusal::MisplacedPart {
                    role,
                    kind: part.kind(),
                    ordinal,
                });
            }
            Part::ToolUse {
                id, name, input, ..
            } => {
                if id.is_empty() {
                    return Err(Refusal::ToolUseWithoutId { ordinal });
                }
                if name.is_empty() {
                    return Err(Refusal::ToolUseWithoutName { id: id.clone() });
                }
                if !input.is_object() {
                    return Err(Refusal::ToolInputNotObject { id: id.clone() });
                }
            }
            Part::ServerToolResult {
                tool_use_id, block, ..
            } if !crate::model::answers_server_call(block, tool_use_id) => {
                return Err(Refusal::MalformedServerToolResult {
                    ordinal,
                    tool_use_id: tool_use_id.clone(),
                });
            }
            Part::Reasoning { .. }
            | Part::RedactedReasoning { .. }
            | Part::ServerToolUse { .. }
            | Part::ServerToolResult { .. }
            | Part::Image { .. }
            | Part::Document { .. }
            | Part::Opaque { .. } => {}
        }
    }
    if role == Role::Tool && results == 0 {
        return Err(Refusal::ToolMessageWithoutResult);
    }
    Ok(())
}

/// The streaming rule, first half: may a message of `role` begin streaming after `walk`?
///
/// Only an assistant message streams, and, like any assistant message, only when no call is
/// pending. While it streams it is the session's last message, so the grammar counts its
/// calls as pending (nothing else can answer them), and no other message goes after it: the
/// next write finds it open and either waits for its live writer (refused) or, when the
/// writer is gone, marks it `interrupted` and answers its calls with [`interruption`].
pub fn check_begin(walk: &Walk, role: Role) -> Result<(), Refusal> {
    if role != Role::Assistant {
        return Err(Refusal::NotStreamable { role });
    }
    let pending = walk.pending();
    if !pending.is_empty() {
        return Err(Refusal::PendingToolUses { ids: pending, role });
    }
    Ok(())
}

/// The streaming rule, second half: the next part of an open assistant message. `before`
/// is where the session stood when the message began (nothing pending; `taken` holding the
/// ids the session uses outside this message), `so_far` the parts already pushed. The
/// message with `part` added is checked as one appended whole would be, so a streamed
/// message is refused exactly where the same message written at once would be; the walk
/// after it comes back.
pub fn check_push(before: Resume, so_far: &[Part], part: &Part) -> Result<Walk, Refusal> {
    let mut walk = Walk::resume(before);
    let mut parts = Vec::with_capacity(so_far.len() + 1);
    parts.extend_from_slice(so_far);
    parts.push(part.clone());
    check_append(&mut walk, &NewMessage::assistant(parts))?;
    Ok(walk)
}

/// The streaming rule's end: what is written when an open message's writer went away
/// (after the message is marked `interrupted`): a tombstone for each call it left
/// unanswered, none when it made none. `walk` is the session's end, the open message last.
pub fn interruption(walk: &Walk) -> Option<NewMessage> {
    tombstones(walk, texts::INTERRUPTED_REASON)
}

/// True when a tool_result of `message` may answer no open call of `walk`: its id answers
/// none now, or the message names one id twice. Constant time per part.
fn may_answer_nothing(walk: &Walk, message: &NewMessage) -> bool {
    let mut seen = std::collections::HashSet::new();
    message
        .parts
        .iter()
        .filter_map(Part::answers)
        .any(|id| !walk.would_answer(id) || !seen.insert(id))
}

/// The tool message that cancels every pending call of the walk: one tombstone tool_result
/// (`is_error`) per pending id, whose text says it was cancelled and why.
pub fn tombstones(walk: &Walk, reason: &str) -> Option<NewMessage> {
    let pending = walk.pending();
    if pending.is_empty() {
        return None;
    }
    let text = texts::tombstone(reason);
    let parts = pending
        .into_iter()
        .map(|id| Part::tool_error(id, text.clone()))
        .collect();
    Some(NewMessage::tool(parts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(messages: &[NewMessage]) -> Result<Walk, (usize, Refusal)> {
        let mut walk = Walk::default();
        for (index, message) in messages.iter().enumerate() {
            check_append(&mut walk, message).map_err(|e| (index, e))?;
        }
        Ok(walk)
    }

    fn call(id: &str) -> Part {
        Part::tool_use(id, "bash", json!({"cmd": "ls"}))
    }

    /// Ids up to `MAX_ID_BYTES` bytes pass (a character of several bytes counts them all);
    /// one byte more is refused, with the part and the field, or the message's key.
    #[test]
    fn an_id_longer_than_max_id_bytes_is_refused_with_where_it_is() {
        let longest = "é".repeat(crate::MAX_ID_BYTES / 2);
        let over = format!("{longest}x");
        let accepted = [
            NewMessage::user("hi").with_idempotency_key(longest.clone()),
            NewMessage::assistant(vec![Part::text("x"), call(&longest)]),
            NewMessage::tool(vec![Part::tool_result(&longest, "ok")]),
        ];
        for message in &accepted {
            assert_eq!(check_texts(message), Ok(()));
        }
        let refused = [
            (
                NewMessage::user("hi").with_idempotency_key(over.clone()),
                None,
                "idempotency_key",
            ),
            (
                NewMessage::assistant(vec![Part::text("x"), call(&over)]),
                Some(1),
                "id",
            ),
            (
                NewMessage::tool(vec![Part::tool_result(&over, "ok")]),
                Some(0),
                "tool_use_id",
            ),
        ];
        for (message, ordinal, field) in refused {
            let bytes = crate::MAX_ID_BYTES + 1;
            assert_eq!(
                check_texts(&message),
                Err(Refusal::IdTooLong {
                    ordinal,
                    field,
                    bytes
                })
            );
        }
    }

    /// Times from the year 0 to the end of 9999 pass; a microsecond outside is refused with
    /// the time given.
    #[test]
    fn a_time_outside_four_digit_years_is_refused_with_the_time() {
        let at = |y, mo, d, h, mi, s| {
            chrono::TimeZone::with_ymd_and_hms(&chrono::Utc, y, mo, d, h, mi, s)
                .single()
                .expect("a time")
        };
        let micro = chrono::Duration::microseconds(1);
        let first = at(0, 1, 1, 0, 0, 0);
        let last = at(9999, 12, 31, 23, 59, 59) + chrono::Duration::microseconds(999_999);
        for time in [first, last, at(2026, 11, 27, 13, 0, 0)] {
            let message = NewMessage::user("hi").at(time);
            assert!(run(&[message]).is_ok(), "{time:?}");
        }
        for time in [first - micro, last + micro, at(200_000, 1, 1, 0, 0, 0)] {
            let message = NewMessage::user("hi").at(time);
            assert_eq!(
                run(&[message]).map(|_| ()),
                Err((
                    0,
                    Refusal::TimeOutOfRange {
                        field: "created_at",
                        time
                    }
                ))
            );
        }
    }

    /// A server tool result goes back to the provider as its block verbatim: a block that is
    /// not a `*_tool_result` object naming the part's call is refused (Anthropic refused the
    /// export of one without `tool_use_id`, of `null`, of a client `tool_result`).
    #[test]
    fn a_server_tool_result_without_its_result_block_is_refused() {
        let with = |block| {
            NewMessage::assistant(vec![
                Part::server_tool_use("srv_1", "web_search", json!({"query": "q"})),
                Part::server_tool_result("srv_1", block),
                Part::text("found"),
            ])
        };
        let good = json!({"type": "web_search_tool_result", "tool_use_id": "srv_1", "content": []});
        assert!(run(&[NewMessage::user("q"), with(good)]).is_ok());
        for block in [
            json!(null),
            json!("web_search_tool_result"),
            json!({"type": "web_search_tool_result", "content": []}),
            json!({"type": "web_search_tool_result", "tool_use_id": "srv_2", "content": []}),
            json!({"type": "tool_result", "tool_use_id": "srv_1"}),
            json!({"type": "text", "text": "t", "tool_use_id": "srv_1"}),
        ] {
            assert_eq!(
                run(&[NewMessage::user("q"), with(block.clone())]).map(|_| ()),
                Err((
                    1,
                    Refusal::MalformedServerToolResult {
                        ordinal: 1,
                        tool_use_id: "srv_1".to_owned()
                    }
                )),
                "{block}"
            );
        }
    }

    #[test]
    fn a_tool_turn_with_parallel_calls_is_accepted() {
        let tail = run(&[
            NewMessage::user("hi"),
            NewMessage::assistant(vec![Part::text("running"), call("a"), call("b")]),
            NewMessage::tool(vec![Part::tool_result("b", "ok")]),
            NewMessage::tool(vec![Part::tool_result("a", "")]),
            NewMessage::system("note"),
            NewMessage::assistant(vec![Part::text("done")]),
        ]);
        assert!(tail.is_ok_and(|w| w.pending().is_empty()));
    }

    #[test]
    fn user_message_while_calls_are_pending_names_them() {
        let err = run(&[
            NewMessage::user("hi"),
            NewMessage::assistant(vec![call("a"), call("b")]),
            NewMessage::tool(vec![Part::tool_result("a", "ok")]),
            NewMessage::user("again"),
        ]);
        assert_eq!(
            err.map(|_| ()),
            Err((
                3,
                Refusal::PendingToolUses {
                    ids: vec!["b".into()],
                    role: Role::User
                }
            ))
        );
    }

    #[test]
    fn system_message_while_calls_are_pending_is_accepted() {
        // A system message never breaks a pair (contract): the loader sends it after the block.
        let walk = run(&[
            NewMessage::assistant(vec![call("a")]),
            NewMessage::system("note"),
            NewMessage::tool(vec![Part::tool_result("a", "ok")]),
        ]);
        assert!(walk.is_ok_and(|w| w.pending().is_empty()));
    }

    #[test]
    fn result_for_an_earlier_turns_call_is_refused() {
        let err = run(&[
            NewMessage::user("hi"),
            NewMessage::assistant(vec![call("a")]),
            NewMessage::tool(vec![Part::tool_result("a", "ok")]),
            NewMessage::assistant(vec![call("b")]),
            NewMessage::tool(vec![Part::tool_result("a", "again")]),
        ]);
        assert!(matches!(
            err,
            Err((4, Refusal::UnexpectedToolResult { ref tool_use_id, .. })) if tool_use_id == "a"
        ));
    }

    #[test]
    fn tool_message_without_an_assistant_before_is_refused() {
        let err = run(&[
            NewMessage::user("hi"),
            NewMessage::tool(vec![Part::tool_result("x", "")]),
        ]);
        assert!(matches!(
            err,
            Err((1, Refusal::UnexpectedToolResult { .. }))
        ));
    }

    #[test]
    fn reusing_an_id_within_one_message_or_session_is_refused() {
        let err = run(&[NewMessage::assistant(vec![call("a"), call("a")])]);
        assert!(matches!(err, Err((0, Refusal::DuplicateToolUseId { .. }))));
        let err = run(&[
            NewMessage::assistant(vec![call("a")]),
            NewMessage::tool(vec![Part::tool_result("a", "")]),
            NewMessage::assistant(vec![call("a")]),
        ]);
        assert!(matches!(err, Err((2, Refusal::DuplicateToolUseId { .. }))));
    }

    #[test]
    fn thinking_and_tool_uses_belong_to_assistant_messages() {
        let err = run(&[NewMessage::new(
            Role::User,
            vec![Part::reasoning("hmm", None)],
        )]);
        assert!(matches!(err, Err((0, Refusal::MisplacedPart { .. }))));
        let err = run(&[NewMessage::new(
            Role::User,
            vec![Part::tool_result("a", "")],
        )]);
        assert!(matches!(err, Err((0, Refusal::MisplacedToolResult { .. }))));
    }

    #[test]
    fn tombstones_answer_exactly_the_pending_calls() {
        let mut walk = run(&[
            NewMessage::assistant(vec![call("a"), call("b"), call("c")]),
            NewMessage::tool(vec![Part::tool_result("b", "ok")]),
        ])
        .expect("valid");
        let message = tombstones(&walk, "user pressed ctrl-c").expect("pending calls");
        let answered: Vec<_> = message.parts.iter().filter_map(Part::answers).collect();
        assert_eq!(answered, ["a", "c"]);
        check_append(&mut walk, &message).expect("tombstones fit");
        assert!(walk.pending().is_empty());
        assert!(tombstones(&walk, "again").is_none());
    }
}
