//! The OpenAI Agents SDK's session items, kept as the store's messages.
//!
//! Each Responses input item is read by the library's Responses importer
//! ([`lib::import::responses_item`]) into the parts a request body's item becomes, and the item itself
//! is kept verbatim on its first part, under `provider_metadata.openai_agents.item`, so that
//! reading the session gives every item back deep-equal. Consecutive assistant-side items
//! (reasoning, text, calls) form one assistant message and consecutive outputs one tool
//! message, as in a request body. A call still unanswered when a user item (or a new
//! assistant message) arrives gets a tombstone result first, the store's own
//! ([`lib::request::tombstone_text`]); reading gives it back as a `function_call_output`.

use serde_json::{json, Map, Value};
use session_store as lib;
use session_store::{Message, NewMessage, Part, Role, SessionId};

use crate::{dump, ensure_session, parse, Failure};

/// The `provider_metadata` key that holds an item.
const KEY: &str = "openai_agents";

/// Why a call is answered with a tombstone.
const REASON: &str = "the conversation moved on before the tool returned";

/// Stores `items` (a JSON list) at the end of the session, creating it if needed, in one
/// transaction.
pub(crate) fn add_items(
    store: &lib::Store,
    session: &SessionId,
    items: &str,
) -> Result<(), Failure> {
    let Value::Array(items) = parse(items, "the items")? else {
        return Err(Failure::Input("the items are not a list".to_owned()));
    };
    if items.is_empty() {
        return Ok(());
    }
    ensure_session(store, session)?;
    let pending = store.pending_tool_uses(session)?;
    let messages = messages_of(items, pending)?;
    store.append_batch(session, messages)?;
    Ok(())
}

/// The messages for `items`, after a session whose calls `pending` are unanswered.
fn messages_of(items: Vec<Value>, mut pending: Vec<String>) -> Result<Vec<NewMessage>, Failure> {
    let mut messages: Vec<NewMessage> = Vec::new();
    for (index, item) in items.into_iter().enumerate() {
        let mut message = lib::import::responses_item(&item).map_err(|e| {
            Failure::Input(format!("items[{index}] is not a Responses input item: {e}"))
        })?;
        if let Some(first) = message.parts.first_mut() {
            keep_item(first, item);
        }
        let continues = messages.last().is_some_and(|last| {
            last.role == message.role && matches!(message.role, Role::Assistant | Role::Tool)
        });
        match message.role {
            Role::Tool => {
                for part in &message.parts {
                    if let Some(id) = part.answers() {
                        pending.retain(|p| p != id);
                    }
                }
            }
            Role::User | Role::Assistant if !continues && !pending.is_empty() => {
                messages.push(tombstones(std::mem::take(&mut pending)));
            }
            _ => {}
        }
        if message.role == Role::Assistant {
            pending.extend(message.parts.iter().filter_map(call_of).map(str::to_owned));
        }
        match messages.last_mut() {
            Some(last) if continues => last.parts.append(&mut message.parts),
            _ => messages.push(message),
        }
    }
    Ok(messages)
}

/// The id of a client tool call.
fn call_of(part: &Part) -> Option<&str> {
    match part {
        Part::ToolUse { id, .. } => Some(id),
        _ => None,
    }
}

/// A tool message answering every id in `pending` with a tombstone.
fn tombstones(pending: Vec<String>) -> NewMessage {
    let text = lib::request::tombstone_text(REASON);
    NewMessage::tool(
        pending
            .into_iter()
            .map(|id| Part::tool_error(id, text.clone()))
            .collect(),
    )
}

/// Keeps `item` verbatim on `part`, beside the metadata the importer gave it.
fn keep_item(part: &mut Part, item: Value) {
    let metadata = part.provider_metadata_mut();
    let mut object = match metadata.take() {
        Some(Value::Object(object)) => object,
        Some(other) => Map::from_iter([("value".to_owned(), other)]),
        None => Map::new(),
    };
    object.insert(KEY.to_owned(), json!({ "item": item }));
    *metadata = Some(Value::Object(object));
}

/// One item read back, with what `limit` must keep together.
struct Read {
    item: Value,
    /// Index of the first item of the assistant message whose call this item is or answers:
    /// a window that holds this item must start there or before.
    group_start: Option<usize>,
}

/// The items of `messages`, in order: each kept item, and a `function_call_output` for each
/// tombstone the store wrote.
fn read_items(messages: &[Message]) -> Vec<Read> {
    let mut items: Vec<Read> = Vec::new();
    let mut call_groups: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for message in messages {
        let first = items.len();
        for part in &message.parts {
            let kept = part
                .provider_metadata()
                .and_then(|m| m.get(KEY))
                .and_then(|m| m.get("item"));
            let item = match (kept, part) {
                (Some(item), _) => item.clone(),
                (
                    None,
                    Part::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                        ..
                    },
                ) if lib::is_tombstone(content, *is_error) => json!({
                    "type": "function_call_output",
                    "call_id": tool_use_id,
                    "output": content,
                }),
                _ => continue,
            };
            let group_start = match (call_of(part), part.answers()) {
                (Some(id), _) => {
                    call_groups.insert(id, first);
                    Some(first)
                }
                (None, Some(id)) => call_groups.get(id).copied(),
                (None, None) => None,
            };
            items.push(Read { item, group_start });
        }
    }
    items
}

/// Where the latest window of at most `limit` items starts, no output without its call and
/// no call without the items of its assistant message before it.
fn window_start(items: &[Read], limit: usize) -> usize {
    let n = items.len();
    // earliest[i]: the earliest index an item at or after i needs.
    let mut earliest = vec![0; n + 1];
    earliest[n] = n;
    for i in (0..n).rev() {
        let need = items[i].group_start.unwrap_or(i).min(i);
        earliest[i] = earliest[i + 1].min(need);
    }
    (n.saturating_sub(limit)..=n)
        .find(|&start| earliest[start] >= start)
        .unwrap_or(n)
}

/// The session's items as a JSON list; with `limit`, the latest window ([`window_start`]).
/// An unknown session has no items.
pub(crate) fn get_items(
    store: &lib::Store,
    session: &SessionId,
    limit: Option<usize>,
) -> Result<String, Failure> {
    if !store.has_session(session)? {
        return Ok("[]".to_owned());
    }
    let messages = match limit {
        None => store.messages(session)?,
        Some(limit) => last_messages(store, session, limit)?,
    };
    let items = read_items(&messages);
    let start = limit.map_or(0, |limit| window_start(&items, limit));
    dump(&Value::Array(
        items
            .into_iter()
            .skip(start)
            .map(|read| read.item)
            .collect(),
    ))
}

/// Enough of the latest whole turns to hold `limit` items (a call and its outputs never
/// span turns: a user item tombstones what is pending), or the whole session.
fn last_messages(
    store: &lib::Store,
    session: &SessionId,
    limit: usize,
) -> Result<Vec<Message>, Failure> {
    let mut turns = 1;
    loop {
        let messages = store.last_turns(session, turns)?;
        let whole = messages.first().is_none_or(|m| m.turn_index == 0);
        if whole || read_items(&messages).len() >= limit {
            return Ok(messages);
        }
        turns = turns.saturating_mul(2);
    }
}

/// Removes the latest item (and the parts read with it) and returns it as JSON; `None` when
/// the session holds none. The latest turn is rewritten without it in one transaction.
pub(crate) fn pop_item(store: &lib::Store, session: &SessionId) -> Result<Option<String>, Failure> {
    if !store.has_session(session)? {
        return Ok(None);
    }
    let mut turns = 1;
    let messages = loop {
        let messages = store.last_turns(session, turns)?;
        let whole = messages.first().is_none_or(|m| m.turn_index == 0);
        if whole || !read_items(&messages).is_empty() {
            break messages;
        }
        turns = turns.saturating_mul(2);
    };
    let Some(last) = read_items(&messages).pop() else {
        return Ok(None);
    };
    let Some(from_turn) = messages.first().map(|m| m.turn_index) else {
        return Ok(None);
    };
    let rest = without_last_item(messages);
    store.replace_from_turn(session, from_turn, rest)?;
    dump(&last.item).map(Some)
}

/// `messages` as new messages, less the latest item: the last part that is an item, with
/// the parts after it in its message; a message left empty is dropped.
fn without_last_item(messages: Vec<Message>) -> Vec<NewMessage> {
    let is_item = |part: &Part| {
        part.provider_metadata().and_then(|m| m.get(KEY)).is_some()
            || matches!(part, Part::ToolResult { content, is_error, .. } if lib::is_tombstone(content, *is_error))
    };
    let mut rest: Vec<NewMessage> = messages
        .into_iter()
        .map(|m| {
            let mut new = NewMessage::new(m.role, m.parts).at(m.created_at);
            new.model = m.model;
            new
        })
        .collect();
    while let Some(last) = rest.last_mut() {
        if let Some(at) = last.parts.iter().rposition(is_item) {
            last.parts.truncate(at);
            if last.parts.is_empty() {
                rest.pop();
            }
            break;
        }
        rest.pop();
    }
    rest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(group_starts: &[Option<usize>]) -> Vec<Read> {
        group_starts
            .iter()
            .map(|&group_start| Read {
                item: Value::Null,
                group_start,
            })
            .collect()
    }

    #[test]
    fn a_window_never_starts_between_a_call_and_its_output() {
        // user, reasoning, call A, call B, out A, out B, text
        let items = read(&[None, None, Some(1), Some(1), Some(1), Some(1), None]);
        let starts: Vec<usize> = (0..=8).map(|limit| window_start(&items, limit)).collect();
        assert_eq!(starts, [7, 6, 6, 6, 6, 6, 1, 0, 0]);
    }

    #[test]
    fn a_window_of_plain_items_is_the_last_limit_of_them() {
        let items = read(&[None, None, None]);
        let starts: Vec<usize> = (0..=4).map(|limit| window_start(&items, limit)).collect();
        assert_eq!(starts, [3, 2, 1, 0, 0]);
    }

    #[test]
    fn a_user_item_after_unanswered_calls_gets_their_tombstones_first() {
        let items = vec![
            json!({"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"}),
            json!({"type": "function_call", "call_id": "b", "name": "f", "arguments": "{}"}),
            json!({"type": "function_call_output", "call_id": "a", "output": "1"}),
            json!({"role": "user", "content": "next"}),
        ];
        let messages = messages_of(items, vec!["z".to_owned()]).expect("converts");
        let roles: Vec<Role> = messages.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [
                Role::Tool,
                Role::Assistant,
                Role::Tool,
                Role::Tool,
                Role::User
            ]
        );
        assert_eq!(messages[0].parts[0].answers(), Some("z"));
        assert_eq!(
            messages[1].parts.len(),
            2,
            "parallel calls share one message"
        );
        assert_eq!(messages[3].parts[0].answers(), Some("b"));
    }
}
