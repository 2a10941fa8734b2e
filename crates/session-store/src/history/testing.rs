//! Test-only builders: histories as plain vectors of stored messages.

use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::{json, Value};

use crate::history::turns::turn_indexes;
use crate::model::{Message, Part, Role};

/// A fixed instant every test history starts at.
pub(crate) fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5)
        .single()
        .unwrap_or_default()
}

/// Stored messages with `seq` 1.., contract turn indexes, one second apart from [`t0`].
pub(crate) fn history(messages: Vec<(Role, Vec<Part>)>) -> Vec<Message> {
    let turns = turn_indexes(messages.iter().map(|(role, _)| *role));
    messages
        .into_iter()
        .zip(turns)
        .enumerate()
        .map(|(at, ((role, parts), turn_index))| {
            let seq = i64::try_from(at).unwrap_or(i64::MAX) + 1;
            Message {
                id: seq,
                seq,
                turn_index,
                role,
                compacted: false,
                created_at: t0() + Duration::seconds(seq),
                parts,
            }
        })
        .collect()
}

pub(crate) fn user(text: &str) -> (Role, Vec<Part>) {
    (Role::User, vec![Part::text(text)])
}

pub(crate) fn system(text: &str) -> (Role, Vec<Part>) {
    (Role::System, vec![Part::text(text)])
}

pub(crate) fn assistant(parts: Vec<Part>) -> (Role, Vec<Part>) {
    (Role::Assistant, parts)
}

pub(crate) fn tool(parts: Vec<Part>) -> (Role, Vec<Part>) {
    (Role::Tool, parts)
}

pub(crate) fn call(id: &str) -> Part {
    Part::tool_use(id, "bash", json!({"cmd": "ls"}))
}

/// A reasoning part signed under `namespace`.
pub(crate) fn signed(text: &str, namespace: &str, signature: &str) -> Part {
    Part::reasoning(text, Some(json!({ namespace: {"signature": signature} })))
}

/// The `content` array of message `index` of a rendered body.
pub(crate) fn content(body: &Value, index: usize) -> &Vec<Value> {
    static EMPTY: Vec<Value> = Vec::new();
    body["messages"][index]["content"]
        .as_array()
        .unwrap_or(&EMPTY)
}
