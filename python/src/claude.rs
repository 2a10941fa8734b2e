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
//!
//! Only the last turn is read again on an append while this handle's [`Cursors`] entry shows
//! the session where its last append left it and the new entries cannot change what comes
//! before that turn (no repeated `uuid`, compaction, title entry or first main line); where
//! the last turn's own entries do not read as its stored messages (an entry of it lands in
//! the turn before), or any of that is not so, the whole transcript is read.

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
/// to the messages. Where `cursors` knows the session as this process last left it, only its
/// last turn is read again ([`append_at_end`]); else the whole transcript ([`append_whole`]).
pub(crate) fn append(
    store: &lib::Store,
    cursors: &Cursors,
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
    let cursor = cursors.take(session);
    if let Some(mut cursor) = cursor.filter(|c| c.continues_with(&new_entries)) {
        let last_turn = store.last_turns(session, 1)?;
        if cursor.at.is_some() && cursor.at == mark_of(store, session, &last_turn)? {
            if let Some(outcome) = append_at_end(store, session, &last_turn, &new_entries)? {
                // Written: a cursor that cannot be brought up to date is dropped (the next
                // append reads the whole transcript), not reported as a failed append.
                if cursor.note(&new_entries, store, session).is_ok() {
                    cursors.put(session, cursor);
                }
                return Ok(outcome);
            }
        }
    }
    cursors
        .whole_reads
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (outcome, cursor) = append_whole(store, session, new_entries)?;
    cursors.put(session, cursor);
    Ok(outcome)
}

/// [`append`] reading the whole transcript: the messages all entries make, compared with the
/// stored ones; the turns from the first that differs are rewritten. The cursor it leaves.
fn append_whole(
    store: &lib::Store,
    session: &SessionId,
    new_entries: Vec<Value>,
) -> Result<(&'static str, Cursor), Failure> {
    let stored = store.messages(session)?;
    let all: Vec<&Value> = stored
        .iter()
        .filter(|m| is_ledger(m))
        .flat_map(|m| m.parts.iter().filter_map(entry_of))
        .chain(new_entries.iter())
        .collect();
    let (target, imported_title) = read_transcript(&all)?;
    let title = title_of(&all, imported_title, &target);
    let mut cursor = Cursor::default();
    cursor.see(all.iter().copied());
    let outcome = write_from(store, session, &stored, &target, new_entries)?;
    if let Some(title) = &title {
        store.set_title(session, Some(title))?;
    }
    cursor.titled = title.is_some();
    // As in `append`: after the write, a mark that cannot be read leaves no cursor.
    cursor.at = mark(store, session).ok().flatten();
    Ok((outcome, cursor))
}

/// Writes `target` (the messages the transcript reads as, from the first of `stored`'s turns)
/// over `stored`: the new messages appended with `new_entries`' ledger when `stored`'s
/// messages are the start of `target`, else the turns from the first that differs rewritten,
/// the entries they held moved along.
fn write_from(
    store: &lib::Store,
    session: &SessionId,
    stored: &[Message],
    target: &[NewMessage],
    new_entries: Vec<Value>,
) -> Result<&'static str, Failure> {
    let mirror: Vec<&Message> = stored.iter().filter(|m| !is_ledger(m)).collect();
    let same = mirror
        .iter()
        .zip(target)
        .take_while(|(stored, new)| same_message(stored, new))
        .count();
    let new_parts = new_entries.into_iter().map(|e| Part::opaque(PROVIDER, e));
    if same == mirror.len() {
        let mut batch = target.get(same..).unwrap_or_default().to_vec();
        let outcome = if batch.is_empty() {
            "unchanged"
        } else {
            "appended"
        };
        batch.push(NewMessage::new(Role::System, new_parts.collect()));
        store.append_batch(session, batch)?;
        return Ok(outcome);
    }
    let turn = mirror[same].turn_index;
    let first = mirror
        .iter()
        .position(|m| m.turn_index >= turn)
        .unwrap_or(same);
    let moved = stored
        .iter()
        .filter(|m| m.turn_index >= turn && is_ledger(m))
        .flat_map(|m| m.parts.iter().cloned());
    let mut batch = target.get(first..).unwrap_or_default().to_vec();
    batch.push(NewMessage::new(
        Role::System,
        moved.chain(new_parts).collect(),
    ));
    store.replace_from_turn(session, turn, batch)?;
    Ok("rewrote")
}

/// [`append`] reading only the session's last turn (`last_turn`, its messages): the entries
/// its ledger holds and the new ones are read as a transcript of their own, which is what the
/// whole transcript reads from that turn on when the turn's entries alone read as its stored
/// messages (a turn starts with a user line, and nothing before it reaches past it). `None`
/// (nothing written) when they do not (an entry of the turn lands in the one before), or
/// when they are not a transcript alone.
fn append_at_end(
    store: &lib::Store,
    session: &SessionId,
    last_turn: &[Message],
    new_entries: &[Value],
) -> Result<Option<&'static str>, Failure> {
    let held: Vec<&Value> = last_turn
        .iter()
        .filter(|m| is_ledger(m))
        .flat_map(|m| m.parts.iter().filter_map(entry_of))
        .collect();
    // Entries the whole transcript reads (or refuses) in other ways: it decides.
    let Ok((alone, _)) = read_transcript(&held) else {
        return Ok(None);
    };
    let mirror: Vec<&Message> = last_turn.iter().filter(|m| !is_ledger(m)).collect();
    let reads_as_stored =
        mirror.len() == alone.len() && mirror.iter().zip(&alone).all(|(s, n)| same_message(s, n));
    if !reads_as_stored {
        return Ok(None);
    }
    let all: Vec<&Value> = held.into_iter().chain(new_entries).collect();
    let Ok((target, _)) = read_transcript(&all) else {
        return Ok(None);
    };
    write_from(store, session, last_turn, &target, new_entries.to_vec()).map(Some)
}

/// Where the session stands, as a cursor knows it: when it was created (microseconds), how
/// many messages it holds, and its last message's `(id, seq)`.
type Mark = (i64, i64, Option<(i64, i64)>);

/// The session's [`Mark`], with `last_turn` its last turn's messages.
fn mark_of(
    store: &lib::Store,
    session: &SessionId,
    last_turn: &[Message],
) -> Result<Option<Mark>, Failure> {
    Ok(store.session(session)?.map(|info| {
        (
            info.created_at.timestamp_micros(),
            info.message_count,
            last_turn.last().map(|m| (m.id, m.seq)),
        )
    }))
}

/// The session's [`Mark`] now.
fn mark(store: &lib::Store, session: &SessionId) -> Result<Option<Mark>, Failure> {
    mark_of(store, session, &store.last_turns(session, 1)?)
}

/// What this process knows of each session it mirrored, so that the next append reads only the
/// last turn: valid while the session stands where this process's last append left it
/// ([`Mark`]).
#[derive(Default)]
pub(crate) struct Cursors {
    known: std::sync::Mutex<std::collections::HashMap<SessionId, Cursor>>,
    /// How many appends read the whole transcript ([`append_whole`]).
    whole_reads: std::sync::atomic::AtomicUsize,
}

/// Most sessions [`Cursors`] keeps (a session without one is read whole once, then has one).
const MAX_CURSORS: usize = 256;

impl Cursors {
    /// How many appends so far read the whole transcript.
    pub(crate) fn whole_reads(&self) -> usize {
        self.whole_reads.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The session's cursor, taken out (put back by [`Cursors::put`] after the append).
    fn take(&self, session: &SessionId) -> Option<Cursor> {
        match self.known.lock() {
            Ok(mut map) => map.remove(session),
            Err(poisoned) => poisoned.into_inner().remove(session),
        }
    }

    /// Keeps the session's cursor (forgetting every other one when [`MAX_CURSORS`] are kept).
    fn put(&self, session: &SessionId, cursor: Cursor) {
        let mut map = match self.known.lock() {
            Ok(map) => map,
            Err(poisoned) => poisoned.into_inner(),
        };
        if map.len() >= MAX_CURSORS {
            map.clear();
        }
        map.insert(session.clone(), cursor);
    }
}

/// One session's [`Cursors`] entry.
#[derive(Default)]
pub(crate) struct Cursor {
    /// The session's [`Mark`] after this process's last append: another writer's append,
    /// rewrite, or delete and re-creation changes it.
    at: Option<Mark>,
    /// Every entry's `uuid` so far: a new entry repeating one is skipped by the whole
    /// transcript's reading, wherever the first one is.
    uuids: std::collections::HashSet<String>,
    /// Whether some message line so far is not a sidechain's (else the transcript is read as
    /// a sub-agent's own, and a first main line changes that for every line).
    main_lines: bool,
    /// Whether the session has its title: from then on only a `customTitle` or `summary`
    /// entry changes it.
    titled: bool,
}

impl Cursor {
    /// Whether `new_entries` after what the cursor saw read the same from the last turn on
    /// as in the whole transcript: no repeated `uuid`, no compaction (it compacts the turns
    /// before it), nothing that sets the title, no first main line after sidechain ones.
    fn continues_with(&self, new_entries: &[Value]) -> bool {
        self.titled
            && new_entries.iter().all(|entry| {
                let uuid = entry.get("uuid").and_then(Value::as_str);
                let kind = entry.get("type").and_then(Value::as_str);
                uuid.is_none_or(|u| !self.uuids.contains(u))
                    && entry.get("customTitle").is_none()
                    && kind != Some("summary")
                    && entry.get("isCompactSummary").is_none()
                    && entry.get("subtype").and_then(Value::as_str) != Some("compact_boundary")
                    && (self.main_lines || !is_main_line(entry))
            })
    }

    /// Takes in entries that were read.
    fn see<'a>(&mut self, entries: impl IntoIterator<Item = &'a Value>) {
        for entry in entries {
            if let Some(uuid) = entry.get("uuid").and_then(Value::as_str) {
                self.uuids.insert(uuid.to_owned());
            }
            self.main_lines |= is_main_line(entry);
        }
    }

    /// Takes in `new_entries`, just written, and the session's new last message.
    fn note(
        &mut self,
        new_entries: &[Value],
        store: &lib::Store,
        session: &SessionId,
    ) -> Result<(), Failure> {
        self.see(new_entries);
        self.at = mark(store, session)?;
        Ok(())
    }
}

/// A `user` or `assistant` line that is not a sidechain's.
fn is_main_line(entry: &Value) -> bool {
    matches!(
        entry.get("type").and_then(Value::as_str),
        Some("user" | "assistant")
    ) && entry.get("isSidechain") != Some(&Value::Bool(true))
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
