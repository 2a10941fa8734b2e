//! Tool pairing on write: what the next message of a session may be.
//!
//! A tool_use is answered by the tool_result with its id in the block of `tool` messages that
//! directly follows its assistant message. The write path keeps every session healthy by
//! checking each new message against the [`Tail`] of the session before it is stored, and by
//! refusing, with a [`Refusal`] that names the ids involved, anything that would break a pair.

use std::collections::HashSet;

use crate::model::{NewMessage, Part, PartKind, Role};

/// What the end of a session looks like, as far as pairing is concerned.
///
/// `system` messages are invisible here: they never break a pair.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Tail {
    /// No user or assistant message yet.
    #[default]
    Empty,
    /// The last user-or-assistant message is a user message.
    User,
    /// The last user-or-assistant message is an assistant message; its tool block follows.
    Assistant(ToolBlock),
}

/// The tool_uses of the last assistant message and which of them are answered so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolBlock {
    /// tool_use ids of the assistant message, in part order.
    pub calls: Vec<String>,
    /// ids among `calls` that already have a tool_result.
    pub answered: HashSet<String>,
}

impl ToolBlock {
    /// The calls that still wait for a result, in part order.
    pub fn pending(&self) -> Vec<String> {
        self.calls
            .iter()
            .filter(|id| !self.answered.contains(*id))
            .cloned()
            .collect()
    }
}

impl Tail {
    /// The tool_uses still waiting for a result, in part order.
    pub fn pending(&self) -> Vec<String> {
        match self {
            Tail::Assistant(block) => block.pending(),
            Tail::Empty | Tail::User => Vec::new(),
        }
    }
}

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
}

/// Checks that `message` may follow `tail`, and returns the tail after it.
///
/// `used_ids` holds every tool_use id already in the session (including earlier messages of
/// the same batch); the ids of `message` are added to it when it is accepted.
pub fn check_append(
    tail: &Tail,
    message: &NewMessage,
    used_ids: &mut HashSet<String>,
) -> Result<Tail, Refusal> {
    if message.parts.is_empty() {
        return Err(Refusal::EmptyMessage);
    }
    check_parts_fit_role(message)?;
    match message.role {
        Role::Tool => answer_tool_block(tail, &message.parts),
        role => {
            let pending = tail.pending();
            if !pending.is_empty() {
                return Err(Refusal::PendingToolUses { ids: pending, role });
            }
            match role {
                Role::System => Ok(tail.clone()),
                Role::User => Ok(Tail::User),
                _ => open_tool_block(&message.parts, used_ids).map(Tail::Assistant),
            }
        }
    }
}

fn check_parts_fit_role(message: &NewMessage) -> Result<(), Refusal> {
    let role = message.role;
    for (ordinal, part) in message.parts.iter().enumerate() {
        let fits = match part {
            Part::Text { .. } => true,
            Part::ToolResult { tool_use_id, .. } => {
                if role != Role::Tool {
                    return Err(Refusal::MisplacedToolResult {
                        tool_use_id: tool_use_id.clone(),
                        role,
                    });
                }
                true
            }
            Part::Reasoning { .. } | Part::RedactedReasoning { .. } | Part::ToolUse { .. } => {
                role == Role::Assistant
            }
        };
        if !fits {
            return Err(Refusal::MisplacedPart {
                role,
                kind: part.kind(),
                ordinal,
            });
        }
    }
    Ok(())
}

fn answer_tool_block(tail: &Tail, parts: &[Part]) -> Result<Tail, Refusal> {
    let mut block = match tail {
        Tail::Assistant(block) => block.clone(),
        Tail::Empty | Tail::User => ToolBlock::default(),
    };
    let mut results = 0;
    for tool_use_id in parts.iter().filter_map(Part::answers) {
        results += 1;
        if !block.calls.iter().any(|call| call == tool_use_id) {
            return Err(Refusal::UnexpectedToolResult {
                tool_use_id: tool_use_id.to_owned(),
                pending: block.pending(),
            });
        }
        if !block.answered.insert(tool_use_id.to_owned()) {
            return Err(Refusal::DuplicateToolResult {
                tool_use_id: tool_use_id.to_owned(),
            });
        }
    }
    if results == 0 {
        return Err(Refusal::ToolMessageWithoutResult);
    }
    Ok(Tail::Assistant(block))
}

fn open_tool_block(parts: &[Part], used_ids: &mut HashSet<String>) -> Result<ToolBlock, Refusal> {
    let mut calls = Vec::new();
    for (ordinal, part) in parts.iter().enumerate() {
        let Part::ToolUse {
            id, name, input, ..
        } = part
        else {
            continue;
        };
        if id.is_empty() {
            return Err(Refusal::ToolUseWithoutId { ordinal });
        }
        if name.is_empty() {
            return Err(Refusal::ToolUseWithoutName { id: id.clone() });
        }
        if !input.is_object() {
            return Err(Refusal::ToolInputNotObject { id: id.clone() });
        }
        if used_ids.contains(id) || calls.contains(id) {
            return Err(Refusal::DuplicateToolUseId { id: id.clone() });
        }
        calls.push(id.clone());
    }
    used_ids.extend(calls.iter().cloned());
    Ok(ToolBlock {
        calls,
        answered: HashSet::new(),
    })
}

/// The tool message that cancels every pending call of `tail`: one tombstone tool_result
/// (`is_error`) per pending id, whose text says it was cancelled and why.
pub fn tombstones(tail: &Tail, reason: &str) -> Option<NewMessage> {
    let pending = tail.pending();
    if pending.is_empty() {
        return None;
    }
    let parts = pending
        .into_iter()
        .map(|id| Part::tool_error(id, tombstone_text(reason)))
        .collect();
    Some(NewMessage::tool(parts))
}

/// The text of a tombstone result; never empty, since providers reject error results without content.
pub fn tombstone_text(reason: &str) -> String {
    let reason = reason.trim();
    if reason.is_empty() {
        "Tool call cancelled before it returned a result.".to_owned()
    } else {
        format!("Tool call cancelled before it returned a result: {reason}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(messages: &[NewMessage]) -> Result<Tail, (usize, Refusal)> {
        let mut tail = Tail::Empty;
        let mut used = HashSet::new();
        for (index, message) in messages.iter().enumerate() {
            tail = check_append(&tail, message, &mut used).map_err(|e| (index, e))?;
        }
        Ok(tail)
    }

    fn call(id: &str) -> Part {
        Part::tool_use(id, "bash", json!({"cmd": "ls"}))
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
        assert!(tail.is_ok_and(|t| t.pending().is_empty()));
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
            err,
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
    fn system_message_while_calls_are_pending_is_refused() {
        let err = run(&[
            NewMessage::assistant(vec![call("a")]),
            NewMessage::system("note"),
        ]);
        assert!(matches!(err, Err((1, Refusal::PendingToolUses { .. }))));
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
        let tail = run(&[
            NewMessage::assistant(vec![call("a"), call("b"), call("c")]),
            NewMessage::tool(vec![Part::tool_result("b", "ok")]),
        ])
        .expect("valid");
        let message = tombstones(&tail, "user pressed ctrl-c").expect("pending calls");
        let answered: Vec<_> = message.parts.iter().filter_map(Part::answers).collect();
        assert_eq!(answered, ["a", "c"]);
        let mut used = HashSet::new();
        let after = check_append(&tail, &message, &mut used).expect("tombstones fit");
        assert!(after.pending().is_empty());
        assert!(tombstones(&after, "again").is_none());
    }
}
