//! The Claude Agent SDK's transcript entries, kept verbatim in a session of the store, and
//! the Claude Code lines among them read into that session's messages.
//!
//! Entries are kept as they came, each an `opaque` part for no provider (`claude_agent_sdk`)
//! in a `system` message of its batch: never sent to a provider, and a system message never
//! breaks a tool pair. The messages are what `import --format claude-code` reads from all
//! entries so far ([`lib::import::import`]). As the log grows, its end may be read
//! differently (Claude Code writes one line per content block, and a later line may extend the
//! assistant message of an earlier batch): then the turns from the first that differs are
//! rewritten in one transaction ([`lib::Store::replace_from_turn`]), the entries they held
//! moved along. Otherwise the new messages are appended with the batch's entries, in one
//! transaction.

use serde_json::Value;
use session_store as lib;
use session_store::import::{Format, ImportError};
use session_store::{Message, NewMessage, Part, Role, SessionId};

use crate::{dump, ensure_session, parse, Failure};

/// The provider named on the parts that keep entries: none that any export sends to.
const PROVIDER: &str = "claude_agent_sdk";

/// Longest title taken from a prompt, in characters.
const TITLE_CHARS: usize = 80;

/// Stores `entries` (a JSON list of objects) and brings the messages up to date; what it did
/// to the messages.
pub(crate) fn append(
    store: &lib::Store,
    session: &SessionId,
    entries: &str,
) -> Result<&'static str, Failure> {
    let Value::Array(new_entries) = parse(entries, "the entries")? else {
        return Err(Failure::Input("the entries are not a list".to_owned()));
    };
    if let Some(index) = new_entries.iter().position(|e| !e.is_object()) {
        return Err(Failure::Input(format!("entries[{index}] is not an object")));
    }
    if new_entries.is_empty() {
        return Ok("unchanged");
    }
    ensure_session(store, session)?;
    let stored = store.messages(session)?;
    let all: Vec<&Value> = stored
        .iter()
        .filter(|m| is_ledger(m))
        .flat_map(|m| m.parts.iter().filter_map(entry_of))
        .chain(new_entries.iter())
        .collect();
    let (target, imported_title) = read_transcript(&all)?;
    let title = title_of(&all, imported_title, &target);
    let mirror: Vec<&Message> = stored.iter().filter(|m| !is_ledger(m)).collect();
    let same = mirror
        .iter()
        .zip(&target)
        .take_while(|(stored, new)| same_message(stored, new))
        .count();
    let new_parts = new_entries.into_iter().map(|e| Part::opaque(PROVIDER, e));
    let outcome = if same == mirror.len() {
        let mut batch = target[same..].to_vec();
        let outcome = if batch.is_empty() {
            "unchanged"
        } else {
            "appended"
        };
        batch.push(NewMessage::new(Role::System, new_parts.collect()));
        store.append_batch(session, batch)?;
        outcome
    } else {
        let turn = mirror[same].turn_index;
        let first = mirror
            .iter()
            .position(|m| m.turn_index >= turn)
            .unwrap_or(same);
        let moved = stored
            .iter()
            .filter(|m| m.turn_index >= turn && is_ledger(m))
            .flat_map(|m| m.parts.iter().cloned());
        let mut batch = target[first..].to_vec();
        batch.push(NewMessage::new(
            Role::System,
            moved.chain(new_parts).collect(),
        ));
        store.replace_from_turn(session, turn, batch)?;
        "rewrote"
    };
    if let Some(title) = title {
        store.set_title(session, Some(&title))?;
    }
    Ok(outcome)
}

/// The session's entries as a JSON list, `None` when there is no such session.
pub(crate) fn load(store: &lib::Store, session: &SessionId) -> Result<Option<String>, Failure> {
    if !store.has_session(session)? {
        return Ok(None);
    }
    let entries: Vec<Value> = store
        .messages(session)?
        .iter()
        .filter(|m| is_ledger(m))
        .flat_map(|m| m.parts.iter().filter_map(entry_of).cloned())
        .collect();
    dump(&Value::Array(entries)).map(Some)
}

/// A message that keeps entries: a system message of entry parts only.
fn is_ledger(message: &Message) -> bool {
    message.role == Role::System && message.parts.iter().all(|p| entry_of(p).is_some())
}

/// The entry a part keeps.
fn entry_of(part: &Part) -> Option<&Value> {
    match part {
        Part::Opaque { block, .. } if part.opaque_provider() == Some(PROVIDER) => Some(block),
        _ => None,
    }
}

/// The messages (and title) `import --format claude-code` reads from `entries` as lines.
fn read_transcript(entries: &[&Value]) -> Result<(Vec<NewMessage>, Option<String>), Failure> {
    let mut text = String::new();
    for entry in entries {
        text.push_str(&dump(entry)?);
        text.push('\n');
    }
    match lib::import::import(Format::ClaudeCode, &text) {
        Ok(imported) => {
            let title = imported.title.clone();
            Ok((imported.into_messages(), title))
        }
        // Entries without a conversation line (titles, tags, modes) make no messages.
        Err(ImportError::Empty) => Ok((Vec::new(), None)),
        Err(error) => Err(Failure::Input(format!(
            "the entries are not a Claude Code transcript: {error}"
        ))),
    }
}

/// Whether a stored message is what the transcript now reads there.
fn same_message(stored: &Message, new: &NewMessage) -> bool {
    stored.role == new.role && stored.parts == new.parts && stored.model == new.model
}

/// The session's title: the latest `customTitle` entry, else the transcript's own title, else
/// the first line of the first prompt.
fn title_of(
    entries: &[&Value],
    imported: Option<String>,
    messages: &[NewMessage],
) -> Option<String> {
    let custom = entries
        .iter()
        .rev()
        .find_map(|e| e.get("customTitle").and_then(Value::as_str))
        .filter(|t| !t.trim().is_empty())
        .map(str::to_owned);
    custom.or(imported).or_else(|| {
        messages
            .iter()
            .filter(|m| m.role == Role::User)
            .flat_map(|m| m.parts.iter())
            .find_map(|p| match p {
                Part::Text { text, .. } if !text.trim().is_empty() => {
                    let line = text.trim().lines().next().unwrap_or_default();
                    Some(line.chars().take(TITLE_CHARS).collect())
                }
                _ => None,
            })
    })
}
