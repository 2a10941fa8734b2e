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

use std::ops::Range;

use serde_json::{json, Map, Value};
use session_store as lib;
use session_store::{NewMessage, Part, Role, SessionId};

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
    /// The item's JSON text.
    item: Text,
    /// Index of the first item of the assistant message whose call this item is or answers:
    /// a window that holds this item must start there or before.
    group_start: Option<usize>,
}

/// Where an item's JSON text is: kept in a stored part's `provider_metadata` (not copied
/// out until the list is written), or built for a tombstone.
enum Text {
    /// `parts[part].provider_metadata[range]`.
    Kept { part: usize, range: Range<usize> },
    /// A `function_call_output` built for a tombstone the store wrote.
    Built(String),
}

impl Text {
    /// The text, out of `parts` (those [`read_items`] read it from).
    fn of<'a>(&'a self, parts: &'a [lib::StoredPart]) -> &'a str {
        match self {
            Text::Kept { part, range } => parts
                .get(*part)
                .and_then(|p| p.provider_metadata.as_deref()?.get(range.clone()))
                .unwrap_or_default(),
            Text::Built(text) => text,
        }
    }
}

/// The part of `provider_metadata` this module reads, borrowed from the stored text.
#[derive(serde::Deserialize)]
struct Kept<'a> {
    #[serde(borrow)]
    openai_agents: Option<KeptItem<'a>>,
}

#[derive(serde::Deserialize)]
struct KeptItem<'a> {
    #[serde(borrow)]
    item: Option<&'a serde_json::value::RawValue>,
}

/// How an item's place in its part's `provider_metadata` is found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Find {
    /// By its shape ([`kept_item_by_shape`]), decoding only where the shape is not there: the
    /// caller checks the list it makes (Python's `json.loads`) and asks again [`Find::Decoded`]
    /// when it is not JSON.
    Shaped,
    /// By decoding the whole metadata ([`kept_item_decoded`]): a part whose metadata is not
    /// JSON keeps no item.
    Decoded,
}

/// Where in its `provider_metadata` the item a part keeps is (its JSON text, not decoded).
fn kept_item(part: &lib::StoredPart, find: Find) -> Option<Range<usize>> {
    let metadata = part.provider_metadata.as_deref()?;
    match find {
        Find::Shaped => kept_item_by_shape(metadata).or_else(|| kept_item_decoded(metadata)),
        Find::Decoded => kept_item_decoded(metadata),
    }
}

/// Where the item is in metadata of the shape [`keep_item`] writes: compact JSON whose last
/// key is `"openai_agents":{"item":ITEM}`, after the importer's keys, ITEM one value (its
/// strings stepped over and its brackets counted, nothing decoded). Where the metadata is JSON
/// the answer is exact; where it is not, ITEM is one balanced run of brackets that the
/// caller's parse of the whole list checks.
fn kept_item_by_shape(metadata: &str) -> Option<Range<usize>> {
    const ITEM_KEY: &[u8] = br#""openai_agents":{"item":"#;
    let bytes = metadata.as_bytes();
    let end = bytes.len().checked_sub(2)?;
    if bytes.first() != Some(&b'{') || bytes.get(end..) != Some(b"}}") {
        return None;
    }
    let mut at = 1;
    loop {
        if bytes.get(at..)?.starts_with(ITEM_KEY) {
            let start = at + ITEM_KEY.len();
            return (skip_value(bytes, start)? == end).then_some(start..end);
        }
        at = skip_string(bytes, at)?;
        (bytes.get(at) == Some(&b':')).then_some(())?;
        at = skip_value(bytes, at + 1)?;
        (bytes.get(at) == Some(&b',')).then_some(())?;
        at += 1;
    }
}

/// Past the JSON string that starts at `at` (its closing quote's next byte).
fn skip_string(bytes: &[u8], at: usize) -> Option<usize> {
    (bytes.get(at) == Some(&b'"')).then_some(())?;
    let mut i = at + 1;
    loop {
        i += memchr::memchr2(b'"', b'\\', bytes.get(i..)?)?;
        match bytes.get(i)? {
            b'"' => return Some(i + 1),
            _ => i += 2,
        }
    }
}

/// Past the compact JSON value that starts at `at`: strings stepped over whole, brackets
/// counted (not checked for kind); a scalar ends at the next `,`, `}` or `]`.
fn skip_value(bytes: &[u8], at: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = at;
    loop {
        match bytes.get(i)? {
            b'"' => i = skip_string(bytes, i)?,
            b'{' | b'[' => {
                depth += 1;
                i += 1;
            }
            b'}' | b']' if depth > 0 => {
                depth -= 1;
                i += 1;
            }
            b',' | b'}' | b']' if depth == 0 => return (i > at).then_some(i),
            _ => i += 1,
        }
        if depth == 0
            && i > at
            && bytes
                .get(at)
                .is_some_and(|b| matches!(b, b'"' | b'{' | b'['))
        {
            return Some(i);
        }
    }
}

/// Where the item is, found by decoding the whole metadata (any JSON layout).
fn kept_item_decoded(metadata: &str) -> Option<Range<usize>> {
    let kept: Kept<'_> = serde_json::from_str(metadata).ok()?;
    let item = kept.openai_agents?.item?.get();
    // A borrowed RawValue is a slice of `metadata`: its place is its address's distance.
    let start = (item.as_ptr() as usize).checked_sub(metadata.as_ptr() as usize)?;
    let range = start..start + item.len();
    (metadata.get(range.clone()) == Some(item)).then_some(range)
}

/// The items of `parts`, in order: each kept item, and a `function_call_output` for each
/// tombstone the store wrote.
fn read_items(parts: &[lib::StoredPart], find: Find) -> Vec<Read> {
    let mut items: Vec<Read> = Vec::new();
    let mut call_groups: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut message: Option<i64> = None;
    let mut first = 0;
    for (index, part) in parts.iter().enumerate() {
        if message != Some(part.seq) {
            message = Some(part.seq);
            first = items.len();
        }
        let text = part.error_text.as_deref().unwrap_or_default();
        let item = match kept_item(part, find) {
            Some(range) => Text::Kept { part: index, range },
            None if part.kind == "tool_result"
                && lib::request::is_tombstone(text, part.is_error) =>
            {
                let output = json!({
                    "type": "function_call_output",
                    "call_id": part.tool_use_id,
                    "output": text,
                });
                Text::Built(output.to_string())
            }
            None => continue,
        };
        let id = part.tool_use_id.as_deref();
        let group_start = match (part.kind.as_str(), id) {
            ("tool_use", Some(id)) => {
                call_groups.insert(id, first);
                Some(first)
            }
            ("tool_result", Some(id)) => call_groups.get(id).copied(),
            _ => None,
        };
        items.push(Read { item, group_start });
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
    find: Find,
) -> Result<String, Failure> {
    // Every item of the adapter's is (or starts) a message of its own or shares one with
    // others: the latest `limit` messages hold at least `limit` items.
    let parts = match store.stored_parts(session, limit) {
        Ok(parts) => parts,
        Err(lib::Error::UnknownSession(_)) => return Ok("[]".to_owned()),
        Err(error) => return Err(error.into()),
    };
    let (parts, items) = match limit {
        None => {
            let items = read_items(&parts, find);
            (parts, items)
        }
        Some(limit) => enough_items(store, session, parts, limit, find)?,
    };
    let start = limit.map_or(0, |limit| window_start(&items, limit));
    let kept = items.get(start..).unwrap_or_default();
    let texts = || kept.iter().map(|read| read.item.of(&parts));
    let mut out = String::with_capacity(texts().map(|t| t.len() + 1).sum::<usize>() + 2);
    out.push('[');
    for (index, text) in texts().enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push_str(text);
    }
    out.push(']');
    Ok(out)
}

/// The parts of enough of the latest whole turns to hold `limit` items (a call and its
/// outputs never span turns: a user item tombstones what is pending), or of the whole
/// session, with their items; `parts` are those of the turns holding the latest `limit`
/// messages, enough unless other writers' messages (no items) sit among them.
fn enough_items(
    store: &lib::Store,
    session: &SessionId,
    mut parts: Vec<lib::StoredPart>,
    limit: usize,
    find: Find,
) -> Result<(Vec<lib::StoredPart>, Vec<Read>), Failure> {
    let mut messages = limit;
    loop {
        let whole = parts.first().is_none_or(|p| p.turn_index == 0);
        let items = read_items(&parts, find);
        if whole || items.len() >= limit {
            return Ok((parts, items));
        }
        messages = messages.saturating_mul(2);
        parts = store.stored_parts(session, Some(messages))?;
    }
}

/// Removes the latest item (the parts after it in its message, and later messages, go with
/// it) and returns it as JSON; `None` when the session holds none. One write transaction
/// ([`lib::Store::pop_part`]): two poppers never get the same item.
pub(crate) fn pop_item(store: &lib::Store, session: &SessionId) -> Result<Option<String>, Failure> {
    let part = match store.pop_part(session, is_item) {
        Ok(part) => part,
        Err(lib::Error::UnknownSession(_)) => return Ok(None),
        Err(error) => return Err(error.into()),
    };
    let Some(part) = part else {
        return Ok(None);
    };
    let item = match part
        .provider_metadata()
        .and_then(|m| m.get(KEY)?.get("item"))
    {
        Some(item) => dump(item)?,
        None => match &part {
            Part::ToolResult {
                tool_use_id,
                content,
                ..
            } => dump(&json!({
                "type": "function_call_output",
                "call_id": tool_use_id,
                "output": content,
            }))?,
            _ => return Ok(None),
        },
    };
    Ok(Some(item))
}

/// Whether a stored part is an item: it keeps one, or it is a tombstone the adapter wrote.
fn is_item(part: &Part) -> bool {
    part.provider_metadata().and_then(|m| m.get(KEY)).is_some()
        || matches!(part, Part::ToolResult { content, is_error, .. } if lib::request::is_tombstone(content, *is_error))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(group_starts: &[Option<usize>]) -> Vec<Read> {
        group_starts
            .iter()
            .map(|&group_start| Read {
                item: Text::Built(String::new()),
                group_start,
            })
            .collect()
    }

    fn stored(metadata: &str) -> lib::StoredPart {
        lib::StoredPart {
            seq: 1,
            turn_index: 0,
            role: "user".to_owned(),
            kind: "text".to_owned(),
            error_text: None,
            tool_use_id: None,
            is_error: false,
            provider_metadata: Some(metadata.to_owned()),
        }
    }

    #[test]
    fn a_kept_item_is_found_as_stored_wherever_it_sits_in_the_metadata() {
        let item = r#"{"role":"user","content":"a \"quoted\" \u00e9 }]"}"#;
        let cases = [
            format!(r#"{{"openai_agents":{{"item":{item}}}}}"#),
            format!(r#"{{"openai":{{"id":"x"}},"openai_agents":{{"item":{item}}}}}"#),
            format!(
                r#"{{ "openai_agents" : {{ "other": [1, {{"item": 2}}], "item" : {item} }}, "z": "}}" }}"#
            ),
            format!(r#"{{"\u00e9":"é","openai_agents":{{"item":{item}}},"zz":null}}"#),
        ];
        for metadata in &cases {
            let part = stored(metadata);
            let range = kept_item(&part, Find::Decoded).expect("keeps an item");
            assert_eq!(
                Text::Kept { part: 0, range }.of(&[part]),
                item,
                "{metadata}"
            );
        }
        for metadata in [
            r#"{"openai":{"item":{"role":"user"}}}"#,
            r#"{"openai_agents":{"other":1}}"#,
            r#"{"openai_agents":{"item":{"role":"user"}"#,
            "[1]",
        ] {
            assert_eq!(
                kept_item(&stored(metadata), Find::Decoded),
                None,
                "{metadata}"
            );
        }
    }

    #[test]
    fn an_item_found_by_its_shape_is_the_decoded_one_or_none() {
        let item = r#"{"type":"function_call_output","call_id":"c","output":"a\"}{[\\\n"}"#;
        let written = [
            format!(r#"{{"openai_agents":{{"item":{item}}}}}"#),
            format!(r#"{{"openai":{{"id":"x","k":[1,"]}}"]}},"openai_agents":{{"item":{item}}}}}"#),
            format!(r#"{{"n":-1.5e3,"t":true,"openai_agents":{{"item":{item}}}}}"#),
            r#"{"openai_agents":{"item":"text"}}"#.to_owned(),
            r#"{"openai_agents":{"item":17}}"#.to_owned(),
        ];
        for metadata in &written {
            let found = kept_item_by_shape(metadata);
            assert!(found.is_some(), "{metadata}");
            assert_eq!(found, kept_item_decoded(metadata), "{metadata}");
        }
        // Other layouts (still JSON) and broken metadata: not by shape.
        for metadata in [
            format!(r#"{{"openai_agents": {{"item": {item}}}}}"#),
            format!(r#"{{"openai_agents":{{"item":{item}}},"z":{{}}}}"#),
            format!(r#"{{"openai_agents":{{"item":{item},"note":{{}}}}}}"#),
            format!(r#"{{"openai_agents":{{"item":{item},{{"role":"user"}}}}}}"#),
            format!(r#"{{"openai_agents":{{"item":{item}}}"#),
            r#"{"openai_agents":{"item":}}"#.to_owned(),
            r#"{"a":"unterminated}}"#.to_owned(),
            "}}".to_owned(),
        ] {
            assert_eq!(kept_item_by_shape(&metadata), None, "{metadata}");
        }
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
