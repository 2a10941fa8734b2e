//! Where a sub-agent stands (`sessions.state`), from the call that spawned it and the end
//! of its own conversation: the one rule every importer's children are recorded with.

use serde_json::Value;

use super::texts::is_tombstone;
use crate::model::SubagentState;

/// The prompt a call hands the sub-agent it spawns: its input's `prompt` (Claude Code's
/// `Task` calls). A sub-agent whose first user text is that prompt was spawned by the call.
pub fn spawn_prompt(input: &Value) -> Option<&str> {
    input.get("prompt").and_then(Value::as_str)
}

/// The thread a call's result says it spawned: Codex's `spawn_agent` output,
/// `{"agent_id": thread id}`. A sub-agent's log whose own thread id is that one was spawned
/// by the call.
pub fn spawned_thread(output: &str) -> Option<String> {
    let value: Value = serde_json::from_str(output).ok()?;
    value.get("agent_id")?.as_str().map(str::to_owned)
}

/// What the parent session says of the call that spawned a sub-agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpawnCall<'a> {
    /// No call is known (the source links none), or the parent has no such call.
    Unknown,
    /// The call is still pending in the parent.
    Pending,
    /// The call is answered: the result's text and error flag.
    Answered {
        /// The result's text.
        content: &'a str,
        /// Its error flag.
        is_error: bool,
    },
}

/// The sub-agent's state: `active` while its call is pending; `completed` when the call has
/// a result that is not an error (a tombstone is one); `incomplete` when it has an error or
/// tombstone. With no call known, its own conversation decides: `completed` when it ends
/// with an assistant answer that leaves nothing pending (`finished`), else `incomplete`.
pub fn subagent_state(call: SpawnCall<'_>, finished: bool) -> SubagentState {
    match call {
        SpawnCall::Pending => SubagentState::Active,
        SpawnCall::Answered { content, is_error } => {
            if is_error || is_tombstone(content, is_error) {
                SubagentState::Incomplete
            } else {
                SubagentState::Completed
            }
        }
        SpawnCall::Unknown if finished => SubagentState::Completed,
        SpawnCall::Unknown => SubagentState::Incomplete,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::texts::{tombstone, IMPORT_REASON};

    #[test]
    fn each_end_of_a_spawn_has_its_state() {
        let tomb = tombstone(IMPORT_REASON);
        let cases = [
            (SpawnCall::Pending, true, SubagentState::Active),
            (SpawnCall::Pending, false, SubagentState::Active),
            (
                SpawnCall::Answered {
                    content: "found it",
                    is_error: false,
                },
                false,
                SubagentState::Completed,
            ),
            (
                SpawnCall::Answered {
                    content: "boom",
                    is_error: true,
                },
                true,
                SubagentState::Incomplete,
            ),
            (
                SpawnCall::Answered {
                    content: &tomb,
                    is_error: true,
                },
                true,
                SubagentState::Incomplete,
            ),
            (SpawnCall::Unknown, true, SubagentState::Completed),
            (SpawnCall::Unknown, false, SubagentState::Incomplete),
        ];
        for (call, finished, expected) in cases {
            assert_eq!(
                subagent_state(call, finished),
                expected,
                "{call:?} {finished}"
            );
        }
    }

    #[test]
    fn only_a_spawn_output_names_a_thread() {
        let cases = [
            (r#"{"agent_id":"0199b2a1-0a4f"}"#, Some("0199b2a1-0a4f")),
            (r#"{"agent_id": "T", "nickname": "Robie"}"#, Some("T")),
            (r#"{"agent_id": 3}"#, None),
            (
                r#"{"output": "agent_id T", "metadata": {"exit_code": 0}}"#,
                None,
            ),
            ("agent_id: T", None),
            ("", None),
        ];
        for (output, expected) in cases {
            assert_eq!(spawned_thread(output).as_deref(), expected, "{output}");
        }
    }
}
