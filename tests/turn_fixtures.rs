//! Builders and checks shared by the turn tests (compaction, revert, pages): tool-heavy
//! sessions in a real SQLite file, and the checks that say a history is whole turns with
//! every tool pair intact.

use std::collections::HashSet;

use serde_json::json;
use session_store::{Message, NewMessage, Part, Result, Role, SessionId, Store};
use tempfile::TempDir;

/// A fresh store in its own temporary directory (kept alive by the returned guard).
pub fn open_store() -> Result<(TempDir, Store)> {
    let dir = tempfile::tempdir().map_err(|source| session_store::Error::Io {
        path: std::env::temp_dir(),
        source,
    })?;
    let store = Store::open(dir.path().join("sessions.db"))?;
    Ok((dir, store))
}

/// The messages of one turn with `tools` tool calls, one per assistant message: the user
/// message, then (assistant tool_use, tool result) per call, then the final answer.
/// `1 + 2 * tools + 1` messages: a three-tool turn is 8, a ten-tool turn 22.
pub fn tool_turn(tag: &str, tools: usize) -> Vec<NewMessage> {
    let mut turn = vec![NewMessage::user(format!("{tag}: go"))];
    for i in 0..tools {
        let id = format!("{tag}_call_{i}");
        turn.push(NewMessage::assistant(vec![Part::tool_use(
            id.clone(),
            "bash",
            json!({"cmd": format!("step {i}")}),
        )]));
        turn.push(NewMessage::tool(vec![Part::tool_result(
            id,
            format!("out {i}"),
        )]));
    }
    turn.push(NewMessage::assistant(vec![Part::text(format!(
        "{tag}: done"
    ))]));
    turn
}

/// A session holding one turn per entry of `tools` (its tool-call count), in order.
pub fn session_of_turns(store: &Store, tools: &[usize]) -> Result<SessionId> {
    let session = store.create_session()?;
    for (turn, &count) in tools.iter().enumerate() {
        store.append_batch(&session, tool_turn(&format!("t{turn}"), count))?;
    }
    Ok(session)
}

/// Asserts the contract's pairing rules on a visible history: every tool_result answers a
/// tool_use of the assistant message directly before its tool block, and every tool_use is
/// answered there, unless it is still pending at the very end.
pub fn assert_pairs_intact(messages: &[Message]) {
    let mut open: Option<(i64, Vec<String>, HashSet<String>)> = None;
    let close = |open: &mut Option<(i64, Vec<String>, HashSet<String>)>| {
        if let Some((seq, calls, answered)) = open.take() {
            let unanswered: Vec<_> = calls.iter().filter(|c| !answered.contains(*c)).collect();
            assert!(
                unanswered.is_empty(),
                "tool_uses {unanswered:?} of seq {seq} have no result in the visible history"
            );
        }
    };
    for message in messages {
        match message.role {
            Role::System => {}
            Role::Tool => {
                let Some((seq, calls, answered)) = open.as_mut() else {
                    panic!("tool message seq {} follows no assistant", message.seq);
                };
                for id in message.parts.iter().filter_map(Part::answers) {
                    assert!(
                        calls.iter().any(|c| c == id),
                        "tool_result {id} at seq {} answers nothing of seq {seq}",
                        message.seq
                    );
                    answered.insert(id.to_owned());
                }
            }
            Role::User | Role::Assistant => {
                close(&mut open);
                if message.role == Role::Assistant {
                    let calls: Vec<String> = message
                        .parts
                        .iter()
                        .filter_map(Part::call_id)
                        .map(str::to_owned)
                        .collect();
                    open = Some((message.seq, calls, HashSet::new()));
                }
            }
        }
    }
    // Whatever is still open at the end is pending, which is legal.
}

/// Asserts the contract's compaction invariants on a whole session: each turn has one
/// `compacted` value (`split_turn_compaction`) and compacted turns are a prefix
/// (`compaction_gap`). Returns how many messages are compacted.
pub fn assert_compacted_prefix_of_whole_turns(messages: &[Message]) -> usize {
    let mut seen_visible = false;
    for pair in messages.windows(2) {
        if pair[0].turn_index == pair[1].turn_index {
            assert_eq!(
                pair[0].compacted, pair[1].compacted,
                "turn {} is split by compaction",
                pair[0].turn_index
            );
        }
    }
    for message in messages {
        if !message.compacted {
            seen_visible = true;
        } else {
            assert!(
                !seen_visible,
                "compacted seq {} after a visible message",
                message.seq
            );
        }
    }
    messages.iter().filter(|m| m.compacted).count()
}

/// Where a naive "keep the last `keep` messages" cut would land, and that message's role.
pub fn naive_cut_role(messages: &[Message], keep: usize) -> Role {
    messages[messages.len() - keep].role
}
