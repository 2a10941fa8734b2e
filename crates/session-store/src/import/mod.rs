//! Importers: transcripts written by other tools, turned into messages the store accepts.
//!
//! [`import`] (or [`import_bytes`]) reads a whole transcript of a known [`Format`];
//! [`detect`] names the format of an unknown one; [`validate`] checks one without keeping
//! it; [`Store::import_reader`](crate::Store::import_reader) stores one as it reads.
//!
//! Each format has its own module: `anthropic` (a Messages API request body), `openai` (a
//! Chat Completions request body), `responses` (an OpenAI Responses request body),
//! `gemini` (a Gemini `generateContent` request body), `claude_code` (a Claude Code
//! session log, JSON Lines) and `codex` (a Codex CLI rollout, JSON Lines). Each records
//! the model of the assistant messages where the source names it (`NewMessage::model`).
//! They are functions from `&str` to an [`Imported`]: no clock, no I/O but their input. The
//! messages they return already satisfy the pairing rules , so
//! [`Store::import_session`](crate::Store::import_session) stores them in one transaction.
//! Each also reads from a reader a message (or a line) at a time, handing out batches
//! (`stream`); [`Store::import_reader`](crate::Store::import_reader) stores a transcript
//! that way, and the `&str` functions are that same path, collected.
//!
//! Malformed input is refused with an [`ImportError`] whose [`Location`] names the line
//! (JSON Lines) or the JSON path (`messages[3].content[1]`) at fault.
//!
//! # Decisions shared by every format
//! - Tool results always become `tool` messages: an Anthropic or Claude Code `user` message
//!   that carries `tool_result` blocks is split into a `tool` message (the results, in source
//!   order) followed by a `user` message holding the rest of its blocks, only if there is a rest.
//! - Thinking becomes [`Part::Reasoning`] with the signature under
//!   `provider_metadata.anthropic.signature`; `redacted_thinking` becomes
//!   [`Part::RedactedReasoning`]. Text is kept byte for byte,
//!   including empty and whitespace-only blocks (the renderers decide what to send).
//! - A content block of a type the store has no part for (`image`, `document`, `compaction`,
//!   `server_tool_use`, an OpenAI `image_url` part, ...) is never dropped: it becomes a text
//!   part whose text describes it (for `compaction`, its summary text), and the original block
//!   is kept verbatim under `provider_metadata.anthropic.block` (or `.openai.part`).
//! - A `tool_result` whose content is a list of blocks is stored as the text of those blocks
//!   joined by newlines (other blocks described as above); unless the list is one text block,
//!   the original list is kept under `provider_metadata.anthropic.content`.
//! - Request bodies (Anthropic, OpenAI) are strict about pairing: a body the provider would
//!   reject (a tool_result answering nothing, a call left unanswered before the next message)
//!   is refused at the index at fault. Claude Code logs record what happened, interruptions
//!   and crashes included, so their import mends instead, the way `store-repair` does: a call
//!   left unanswered before the conversation moves on gets a tombstone result (`is_error`,
//!   text saying why, listed in [`Imported::tombstoned`]), and a result that answers nothing
//!   becomes a text part (counted in [`Imported::orphans_as_text`]). A call unanswered at the
//!   very end of any transcript is legal and imported as pending.

use std::collections::HashSet;
use std::fmt;
use std::io::{BufRead, BufReader, Read, Seek};
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

use self::stream::{Halt, Sink, Streamed};
use crate::history::grammar::Walk;
use crate::history::pairing::{self, Refusal};
use crate::history::texts;
use crate::model::{NewMessage, Part, Role};

pub(crate) mod anthropic;
mod blocks;
pub(crate) mod claude_code;
mod claude_tree;
pub(crate) mod codex;
pub(crate) mod detect;
pub(crate) mod gemini;
mod json;
pub(crate) mod openai;
pub(crate) mod responses;
pub(crate) mod stream;
mod usage;

pub use anthropic::message as anthropic_message;
pub use detect::{
    confirm, confirm_sample, detect, detect_sample, DetectError, Evidence, Sample,
    CANDIDATES as FORMATS,
};
pub use responses::item_message as responses_item;

/// A transcript format [`import`] understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// An Anthropic Messages API request body: `{"system"?, "messages": [...]}`.
    Anthropic,
    /// An OpenAI Chat Completions request body: `{"messages": [...]}`.
    OpenAi,
    /// A Claude Code session log (`~/.claude/projects/.../*.jsonl`).
    ClaudeCode,
    /// An OpenAI Responses request body: `{"instructions"?, "input": [...]}`.
    Responses,
    /// A Gemini `generateContent` request body: `{"systemInstruction"?, "contents": [...]}`.
    Gemini,
    /// A Codex CLI rollout (`~/.codex/sessions/.../rollout-*.jsonl`).
    Codex,
}

impl Format {
    /// The name used on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Anthropic => "anthropic",
            Format::OpenAi => "openai",
            Format::ClaudeCode => "claude-code",
            Format::Responses => "responses",
            Format::Gemini => "gemini",
            Format::Codex => "codex",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no [`Format`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown import format {0:?} (expected anthropic, openai, responses, gemini, claude-code or codex)"
)]
pub struct UnknownFormat(pub String);

impl FromStr for Format {
    type Err = UnknownFormat;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "anthropic" => Ok(Format::Anthropic),
            "openai" => Ok(Format::OpenAi),
            "claude-code" => Ok(Format::ClaudeCode),
            "responses" => Ok(Format::Responses),
            "gemini" => Ok(Format::Gemini),
            "codex" => Ok(Format::Codex),
            other => Err(UnknownFormat(other.to_owned())),
        }
    }
}

impl Format {
    /// Imports `input` with this format's importer, handing the messages to `sink` in
    /// batches. `input` is read from its current position, more than once.
    pub(crate) fn stream<R: BufRead + Seek, S: Sink>(
        self,
        input: &mut R,
        sink: &mut S,
    ) -> Result<Streamed, Halt<S::Error>> {
        stream::require_utf8(input)?;
        match self {
            Format::Anthropic => stream::document::<anthropic::Body, _, _>(input, sink),
            Format::OpenAi => stream::document::<openai::Body, _, _>(input, sink),
            Format::Responses => stream::document::<responses::Body, _, _>(input, sink),
            Format::Gemini => stream::document::<gemini::Body, _, _>(input, sink),
            Format::Codex => stream::log::<codex::Rollout, _, _>(input, sink),
            Format::ClaudeCode => stream::log::<claude_code::Session, _, _>(input, sink),
        }
    }
}

/// A sink that only counts (a dry run).
#[derive(Default)]
struct Count(usize);

impl Sink for Count {
    type Error = std::convert::Infallible;

    fn batch(&mut self, _: usize, messages: Vec<NewMessage>) -> Result<(), Self::Error> {
        self.0 += messages.len();
        Ok(())
    }
}

/// Reads `input` as [`crate::Store::import_reader`] would and stores nothing: the error it
/// would refuse the transcript with, or how many messages it would store (its system prompt
/// included).
pub fn validate<R: Read + Seek>(format: Format, input: R) -> Result<usize, ImportError> {
    let mut input = BufReader::with_capacity(64 * 1024, input);
    let mut sink = Count::default();
    match format.stream(&mut input, &mut sink) {
        Ok(streamed) => Ok(streamed.messages),
        Err(Halt::Import(error)) => Err(error),
        Err(Halt::Sink(never)) => match never {},
    }
}

/// Imports `bytes` in the given format, after checking they are UTF-8 (an error names the
/// line and byte offset of the first invalid sequence).
pub fn import_bytes(format: Format, bytes: &[u8]) -> Result<Imported, ImportError> {
    import(format, json::utf8(bytes)?)
}

/// Imports `text` in the given format.
pub fn import(format: Format, text: &str) -> Result<Imported, ImportError> {
    json::refuse_bom(text.as_bytes())?;
    match format {
        Format::Anthropic => anthropic::import(text),
        Format::OpenAi => openai::import(text),
        Format::ClaudeCode => claude_code::import(text),
        Format::Responses => responses::import(text),
        Format::Gemini => gemini::import(text),
        Format::Codex => codex::import(text),
    }
}

/// What an importer produced: messages ready for [`Store::import_session`](crate::Store::import_session).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Imported {
    /// The session-level system prompt (Anthropic's top-level `system`), as a `system` message.
    pub system: Option<NewMessage>,
    /// The conversation, in order; already valid under the pairing rules.
    pub messages: Vec<NewMessage>,
    /// tool_use ids that had no result before the conversation moved on and were answered
    /// with a tombstone (Claude Code only).
    pub tombstoned: Vec<String>,
    /// tool_results that answered no call of the assistant message before them and were kept
    /// as text parts instead (logs only).
    pub orphans_as_text: usize,
    /// What was left out and why, for a person to read (a log's last line cut off by a
    /// crash, ...); the import itself succeeded.
    pub warnings: Vec<String>,
    /// The session's title, where the source names one (`sessions.title`).
    pub title: Option<String>,
    /// Compactions the source made, oldest first: each hides every message before `at`.
    pub compactions: Vec<ImportedCompaction>,
    /// Conversations the source ran beside this one (Claude Code sub-agents), stored as child
    /// sessions.
    pub children: Vec<ImportedChild>,
    /// Set when the source records this conversation as a sub-agent's own (a Codex rollout
    /// whose `session_meta.payload.source` is `{"subagent": ...}`): the store records its
    /// `sessions.state`.
    pub subagent: Option<SubagentOrigin>,
    /// The id the source gives the conversation (a Codex rollout's thread id), kept in
    /// `sessions.source_thread_id` so that its sub-agents' logs find it.
    pub source_thread_id: Option<String>,
}

/// What a sub-agent's own log says of where it came from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubagentOrigin {
    /// The source's id of the conversation that spawned it (Codex's
    /// `thread_spawn.parent_thread_id`), when the source names one.
    pub parent_thread_id: Option<String>,
}

/// A compaction recorded in the source: the messages before `at` are replaced by `summary`
/// in what the provider sees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportedCompaction {
    /// Index in [`Imported::messages`] of the first message left visible (a user message
    /// that opens a turn).
    pub at: usize,
    /// The summary text.
    pub summary: String,
}

/// A conversation run beside the imported one: a Claude Code sub-agent, or (with
/// [`ImportedChild::branch`]) a branch of the log that is not the conversation resumed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ImportedChild {
    /// The id of the call (a `Task` tool_use) that spawned it, when the source says.
    pub spawned_by: Option<String>,
    /// Set when it is not a sub-agent but another conversation of the same log: an abandoned
    /// branch (a rewind, an edited prompt), stored as a fork, or a conversation with a root of
    /// its own, stored as a session of its own.
    pub branch: Option<Branch>,
    /// The conversation.
    pub imported: Imported,
}

/// Where a conversation of a log that is not the one resumed comes from (see
/// [`ImportedChild::branch`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Branch {
    /// The conversation it branched from, which it repeats up to where it left it: `0` the
    /// imported one, `k` its `k`-th child. `None` when it shares no message with any (lines
    /// of another session with a root of their own).
    pub parent: Option<usize>,
    /// How many of its first messages it shares with that conversation (`0` without one).
    pub shared: usize,
}

#[cfg(test)]
impl Imported {
    /// The model of each message, in order (tests).
    pub(crate) fn models(&self) -> Vec<Option<&str>> {
        self.messages.iter().map(|m| m.model.as_deref()).collect()
    }
}

impl Imported {
    /// All messages to store: the system prompt first, then the conversation.
    pub fn into_messages(self) -> Vec<NewMessage> {
        self.system.into_iter().chain(self.messages).collect()
    }
}

/// Where in the input an [`ImportError`] lies.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Location {
    /// 1-based line (JSON Lines input, or the line of a JSON syntax error).
    pub line: Option<usize>,
    /// Byte offset in the input, where the error was found by the parse layer (a syntax
    /// error, a duplicate key, bytes that are not UTF-8).
    pub byte: Option<usize>,
    /// JSON path within the document or line, e.g. `messages[3].content[1]`; empty for the whole.
    pub path: String,
}

impl Location {
    /// A JSON path in a single document.
    pub fn path(path: impl Into<String>) -> Self {
        Self {
            line: None,
            byte: None,
            path: path.into(),
        }
    }

    /// A whole line of a JSON Lines file.
    pub fn line(line: usize) -> Self {
        Self {
            line: Some(line),
            byte: None,
            path: String::new(),
        }
    }

    /// This location, one step deeper: `messages[3]` + `content[1]`.
    pub fn join(&self, step: &str) -> Self {
        let path = if self.path.is_empty() {
            step.to_owned()
        } else if step.starts_with('[') {
            format!("{}{step}", self.path)
        } else {
            format!("{}.{step}", self.path)
        };
        Self {
            line: self.line,
            byte: self.byte,
            path,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.path.is_empty()) {
            (Some(line), true) => write!(f, "line {line}")?,
            (Some(line), false) => write!(f, "line {line}, {}", self.path)?,
            (None, false) => f.write_str(&self.path)?,
            (None, true) => f.write_str("document")?,
        }
        match self.byte {
            Some(byte) => write!(f, " (byte {byte})"),
            None => Ok(()),
        }
    }
}

/// Why an import was refused. Nothing is written when an import is refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// The text (or one line of it) is not JSON, or nests deeper than the store reads back.
    #[error("{at}: {}", json::problem(source))]
    Json {
        /// The line at fault.
        at: Location,
        /// What the parser said.
        #[source]
        source: serde_json::Error,
    },
    /// The JSON does not have the shape the format requires.
    #[error("{at}: {problem}")]
    Malformed {
        /// The value at fault.
        at: Location,
        /// What was expected and what was found.
        problem: String,
    },
    /// The messages break the pairing rules (a tool_result answering nothing, a call left
    /// unanswered before the next message, a repeated tool_use id, ...).
    #[error("{at}: breaks the tool pairing rules")]
    Refused {
        /// The message at fault.
        at: Location,
        /// The rule it breaks.
        #[source]
        reason: Refusal,
    },
    /// The input is not UTF-8; the location names the line and byte offset of the first
    /// invalid sequence.
    #[error("{at}: not valid UTF-8")]
    InvalidUtf8 {
        /// Where the invalid bytes start.
        at: Location,
    },
    /// An object holds the same key twice (JSON parsers disagree on which value counts).
    #[error("{at}: duplicate key {key:?}")]
    DuplicateKey {
        /// The second occurrence (its JSON path, line and byte offset).
        at: Location,
        /// The repeated key.
        key: String,
    },
    /// The transcript holds no message at all.
    #[error("the transcript holds no messages")]
    Empty,
    /// The transcript could not be read (a streamed import reads its input as it goes).
    #[error("cannot read the transcript")]
    Io {
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
}

impl ImportError {
    /// Where the error lies, when it lies somewhere in particular.
    pub fn location(&self) -> Option<&Location> {
        match self {
            ImportError::Json { at, .. }
            | ImportError::Malformed { at, .. }
            | ImportError::Refused { at, .. }
            | ImportError::InvalidUtf8 { at }
            | ImportError::DuplicateKey { at, .. } => Some(at),
            ImportError::Empty | ImportError::Io { .. } => None,
        }
    }

    pub(crate) fn malformed(at: &Location, problem: impl Into<String>) -> Self {
        ImportError::Malformed {
            at: at.clone(),
            problem: problem.into(),
        }
    }
}

/// The reason written into tombstones for calls a transcript never answered.
pub(crate) const UNANSWERED_REASON: &str = texts::IMPORT_REASON;

/// How the assembler treats a source that breaks pairing.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Leniency {
    /// Answer calls left unanswered before the next message with tombstones (else refuse).
    pub(crate) tombstone_unanswered: bool,
    /// Keep tool_results that answer nothing as text parts (else refuse).
    pub(crate) orphans_as_text: bool,
}

impl Leniency {
    /// Request bodies: refuse what the provider would refuse.
    pub(crate) const STRICT: Self = Self {
        tombstone_unanswered: false,
        orphans_as_text: false,
    };
    /// Logs: mend the way `store-repair` does.
    pub(crate) const MEND: Self = Self {
        tombstone_unanswered: true,
        orphans_as_text: true,
    };
}

/// Builds the message list one source message at a time, holding it to the pairing rules as
/// it goes, so that a refusal names the source location rather than an output index.
pub(crate) struct Assembler {
    leniency: Leniency,
    out: Vec<NewMessage>,
    walk: Walk,
    tombstoned: Vec<String>,
    orphans_as_text: usize,
    /// Orphan results kept as text, waiting for the open tool block to close.
    deferred: Vec<Part>,
    /// The time of the first line the deferred text came from: the message it becomes is
    /// dated by its source, not by the import.
    deferred_at: Option<DateTime<Utc>>,
    /// Every call id stored so far, and the one renaming scheme for reused ones.
    ids: texts::Renamer,
    /// Calls of the open block stored under a fresh id: original id to the fresh ids, in
    /// call order, that results naming the original still answer.
    renamed: std::collections::HashMap<String, std::collections::VecDeque<String>>,
    /// The session's system prompt when it is known before the conversation (a streamed
    /// import hands it out first), until it is handed out.
    system: Option<NewMessage>,
    has_system: bool,
    /// Messages handed out by [`Assembler::take_ready`] (`out` holds the ones after them).
    taken: usize,
    /// The index (counted from the first message assembled, like [`Assembler::len`]) of the
    /// latest assistant message: found in constant time, where a search back from the end
    /// would pass over every tool message of its block, once per source message.
    latest_assistant: Option<usize>,
    has_user: bool,
    /// The role of the latest message that is not a tool message.
    last_not_tool: Option<Role>,
    /// The check of the whole output from the start, as the store will check it (what
    /// `finish` re-checks), fed as messages are handed out; its first refusal.
    recheck: Walk,
    rechecked: Option<Refusal>,
    /// The role of every message assembled, in order (a log's compactions are placed by
    /// them once the messages are handed out).
    roles: Vec<Role>,
}

/// What [`Assembler::take_ready`] waits for before it hands out a batch.
pub(crate) const BATCH: usize = 64;

/// The end of an assembly: the messages not handed out yet and what was mended on the way.
pub(crate) struct Rest {
    /// The messages not handed out by [`Assembler::take_ready`], the system prompt first if
    /// it was not handed out either.
    pub(crate) messages: Vec<NewMessage>,
    /// Whether a system prompt was set (handed out before or first in `messages`).
    pub(crate) has_system: bool,
    /// See [`Imported::tombstoned`].
    pub(crate) tombstoned: Vec<String>,
    /// See [`Imported::orphans_as_text`].
    pub(crate) orphans_as_text: usize,
    /// The role of every message of the conversation (the system prompt not counted).
    pub(crate) roles: Vec<Role>,
}

impl Assembler {
    pub(crate) fn new(leniency: Leniency) -> Self {
        Self {
            leniency,
            out: Vec::new(),
            walk: Walk::default(),
            tombstoned: Vec::new(),
            orphans_as_text: 0,
            deferred: Vec::new(),
            deferred_at: None,
            ids: texts::Renamer::default(),
            renamed: std::collections::HashMap::new(),
            system: None,
            has_system: false,
            taken: 0,
            latest_assistant: None,
            has_user: false,
            last_not_tool: None,
            recheck: Walk::default(),
            rechecked: None,
            roles: Vec::new(),
        }
    }

    /// The session's system prompt, known before the conversation; set before anything is
    /// taken.
    pub(crate) fn set_system(&mut self, system: Option<NewMessage>) {
        self.has_system = system.is_some();
        self.system = system;
    }

    /// Hands out the messages no later source message can change, once at least [`BATCH`]
    /// are waiting: every message before the latest assistant message (which a log may
    /// still extend, and whose tool block may still be answered). Empty when nothing is ready.
    pub(crate) fn take_ready(&mut self) -> Vec<NewMessage> {
        if self.out.len() < BATCH {
            return Vec::new();
        }
        let keep_from = self.latest_assistant_slot().unwrap_or(self.out.len());
        if keep_from == 0 {
            return Vec::new();
        }
        let mut batch: Vec<NewMessage> = self.system.take().into_iter().collect();
        batch.extend(self.out.drain(..keep_from));
        self.taken += keep_from;
        self.recheck(&batch);
        if self.rechecked.is_some() {
            // The import is refused at its end; nothing more needs storing.
            return Vec::new();
        }
        batch
    }

    fn recheck(&mut self, messages: &[NewMessage]) {
        for message in messages {
            if self.rechecked.is_some() {
                return;
            }
            if let Err(reason) = pairing::check_append(&mut self.recheck, message) {
                self.rechecked = Some(reason);
            }
        }
    }

    /// A source that reuses a call id in a later turn (real OpenAI runs do, and the API
    /// accepts it) keeps every call: the reused one is stored under a fresh id
    /// (`{id}__{n}`), the original kept in `provider_metadata.import.original_id`, and the
    /// results of its block that name the original are pointed at the fresh id.
    fn rename_reused(&mut self, parts: &mut [Part], new_block: bool) {
        if new_block {
            self.renamed.clear();
        }
        for part in parts {
            let Part::ToolUse { id, .. } = part else {
                continue;
            };
            if id.is_empty() || self.ids.take(id) {
                continue;
            }
            let fresh = self.ids.fresh(id);
            let original = std::mem::replace(id, fresh.clone());
            tag(part, json!({"import": {"original_id": original}}));
            self.renamed.entry(original).or_default().push_back(fresh);
        }
    }

    /// Points a result at the fresh id of a renamed call when its original id answers no
    /// open call itself.
    fn rename_result(&mut self, part: &mut Part) {
        let Part::ToolResult { tool_use_id, .. } = part else {
            return;
        };
        if self.walk.would_answer(tool_use_id) {
            return;
        }
        let Some(fresh) = self
            .renamed
            .get_mut(tool_use_id.as_str())
            .and_then(std::collections::VecDeque::pop_front)
        else {
            return;
        };
        let original = std::mem::replace(tool_use_id, fresh);
        tag(part, json!({"import": {"original_id": original}}));
    }

    /// Appends a system, user or assistant message.
    pub(crate) fn push(&mut self, at: &Location, message: NewMessage) -> Result<(), ImportError> {
        debug_assert!(
            message.role != Role::Tool,
            "tool messages go through results()"
        );
        // A system message never breaks a pair: it does not close the open tool block.
        if message.role != Role::System {
            self.close_tool_block(at, message.created_at)?;
            self.flush_deferred(at)?;
        }
        let mut message = message;
        if message.role == Role::Assistant {
            self.rename_reused(&mut message.parts, true);
        }
        self.accept(at, message)
    }

    /// How many messages were assembled so far (the index the next one gets, unless
    /// tombstones go first).
    pub(crate) fn len(&self) -> usize {
        self.taken + self.out.len()
    }

    /// True when a user message was assembled already.
    pub(crate) fn has_user(&self) -> bool {
        self.has_user
    }

    /// True when the last user-or-assistant message is an assistant message and only tool
    /// (or system) messages follow it: its tool block is still open.
    pub(crate) fn assistant_is_open(&self) -> bool {
        self.walk.after_assistant() && self.last_not_tool == Some(Role::Assistant)
    }

    /// The latest assistant message, while it may still change (see [`Assembler::take_ready`]).
    pub(crate) fn last_assistant(&mut self) -> Option<&mut NewMessage> {
        let slot = self.latest_assistant_slot()?;
        self.out.get_mut(slot)
    }

    /// Where the latest assistant message sits in `out`, while it is there.
    fn latest_assistant_slot(&self) -> Option<usize> {
        self.latest_assistant
            .and_then(|index| index.checked_sub(self.taken))
            .filter(|&slot| slot < self.out.len())
    }

    /// Adds parts to the open assistant message (Claude Code writes one line per block, and
    /// may interleave a message's tool_use lines with the result lines of its earlier calls).
    pub(crate) fn extend_assistant(
        &mut self,
        at: &Location,
        parts: Vec<Part>,
    ) -> Result<(), ImportError> {
        let Some(index) = self.latest_assistant_slot() else {
            return Err(ImportError::malformed(at, "no assistant message to extend"));
        };
        let mut parts = parts;
        self.rename_reused(&mut parts, false);
        pairing::check_extension(&mut self.walk, &parts).map_err(|reason| refused(at, reason))?;
        self.out[index].parts.extend(parts);
        Ok(())
    }

    /// Appends a tool message holding `results` (tool_result parts, in source order).
    pub(crate) fn results(
        &mut self,
        at: &Location,
        results: Vec<Part>,
        created_at: Option<DateTime<Utc>>,
    ) -> Result<(), ImportError> {
        let mut answers = Vec::with_capacity(results.len());
        let mut orphans = Vec::new();
        let mut seen = HashSet::new();
        for mut part in results {
            self.rename_result(&mut part);
            let id = part.answers().unwrap_or_default().to_owned();
            let answers_a_call = self.walk.would_answer(&id) && seen.insert(id);
            if answers_a_call {
                answers.push(part);
            } else if self.leniency.orphans_as_text {
                orphans.push(orphan_text(part));
            } else {
                // Let the pairing check name the rule.
                answers.push(part);
            }
        }
        self.orphans_as_text += orphans.len();
        if answers.is_empty() {
            // Text cannot go into a tool message of its own, and a user message now would cut
            // off calls whose results may still come: keep it for when the block closes.
            if self.deferred.is_empty() {
                self.deferred_at = created_at;
            }
            self.deferred.extend(orphans);
            if !self.walk.has_pending() {
                self.flush_deferred(at)?;
            }
            return Ok(());
        }
        answers.extend(orphans);
        let mut message = NewMessage::tool(answers);
        message.created_at = created_at;
        self.accept(at, message)
    }

    /// The end of a streamed assembly: the messages not handed out yet, the whole output
    /// checked from the start as the store will check it (the first refusal named at
    /// `at_end`).
    pub(crate) fn finish_rest(mut self, at_end: &Location) -> Result<Rest, ImportError> {
        if !self.deferred.is_empty() {
            self.close_tool_block(at_end, None)?;
            self.flush_deferred(at_end)?;
        }
        if self.taken == 0 && self.out.is_empty() && !self.has_system {
            return Err(ImportError::Empty);
        }
        let mut messages: Vec<NewMessage> = self.system.take().into_iter().collect();
        messages.append(&mut self.out);
        self.recheck(&messages);
        if let Some(reason) = self.rechecked {
            return Err(refused(at_end, reason));
        }
        Ok(Rest {
            messages,
            has_system: self.has_system,
            tombstoned: self.tombstoned,
            orphans_as_text: self.orphans_as_text,
            roles: self.roles,
        })
    }

    fn flush_deferred(&mut self, at: &Location) -> Result<(), ImportError> {
        if self.deferred.is_empty() {
            return Ok(());
        }
        let parts = std::mem::take(&mut self.deferred);
        let mut message = NewMessage::new(Role::User, parts);
        message.created_at = self.deferred_at.take();
        self.accept(at, message)
    }

    /// Tombstones for the calls still pending, dated like the message that moves on.
    fn close_tool_block(
        &mut self,
        at: &Location,
        created_at: Option<DateTime<Utc>>,
    ) -> Result<(), ImportError> {
        if !self.leniency.tombstone_unanswered {
            return Ok(());
        }
        if let Some(mut message) = pairing::tombstones(&self.walk, UNANSWERED_REASON) {
            message.created_at = created_at;
            self.tombstoned.extend(
                message
                    .parts
                    .iter()
                    .filter_map(Part::answers)
                    .map(str::to_owned),
            );
            self.accept(at, message)?;
        }
        Ok(())
    }

    fn accept(&mut self, at: &Location, message: NewMessage) -> Result<(), ImportError> {
        pairing::check_append(&mut self.walk, &message).map_err(|reason| refused(at, reason))?;
        match message.role {
            Role::User => {
                self.has_user = true;
                self.last_not_tool = Some(Role::User);
            }
            Role::Tool => {}
            role => self.last_not_tool = Some(role),
        }
        self.roles.push(message.role);
        if message.role == Role::Assistant {
            self.latest_assistant = Some(self.len());
        }
        self.out.push(message);
        Ok(())
    }
}

fn refused(at: &Location, reason: Refusal) -> ImportError {
    ImportError::Refused {
        at: at.clone(),
        reason,
    }
}

/// A tool_result that answers nothing, kept as text that says what it was.
fn orphan_text(part: Part) -> Part {
    let Part::ToolResult {
        tool_use_id,
        content,
        is_error,
        provider_metadata,
        ..
    } = part
    else {
        return part;
    };
    let mut meta = json!({"import": {"orphan_tool_result": {
        "tool_use_id": tool_use_id,
        "is_error": is_error,
    }}});
    if let Some(original) = provider_metadata {
        merge_into(&mut meta, original);
    }
    let text = texts::describe(&Part::ToolResult {
        tool_use_id,
        content,
        is_error,
        blocks: None,
        provider_metadata: None,
    });
    Part::Text {
        text,
        provider_metadata: Some(meta),
    }
}

/// A source's model name as `messages.model` keeps it: `"provider/model"` (a name that
/// already holds a `/` is kept as it is).
/// Names `model` (`provider/model`) as the writer of every assistant message that names
/// none: what `import --model` does for a source without a model of its own. A message (or
/// a body's top-level `model`, already on its messages) that names one keeps it, so the
/// stored model binds the source's signatures to the model that made them (rule 10c).
pub fn name_model(messages: &mut [NewMessage], model: &str) {
    for message in messages.iter_mut().filter(|m| m.role == Role::Assistant) {
        if message.model.is_none() {
            message.model = Some(model.to_owned());
        }
    }
}

impl Imported {
    /// [`name_model`] over the conversation and its children.
    pub fn name_model(&mut self, model: &str) {
        name_model(&mut self.messages, model);
        for child in &mut self.children {
            child.imported.name_model(model);
        }
    }
}

pub(crate) fn model_name(provider: &str, model: Option<&Value>) -> Option<String> {
    let model = model?.as_str().filter(|m| !m.trim().is_empty())?;
    Some(if model.contains('/') {
        model.to_owned()
    } else {
        format!("{provider}/{model}")
    })
}

/// Deep-merges `extra` into `base` (objects merge key by key; anything else replaces).
pub(crate) fn merge_into(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(base), Value::Object(extra)) => {
            for (key, value) in extra {
                match base.get_mut(&key) {
                    Some(slot) => merge_into(slot, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (base, extra) => *base = extra,
    }
}

/// Merges `extra` into a part's provider metadata.
pub(crate) fn tag(part: &mut Part, extra: Value) {
    let slot = part.provider_metadata_mut();
    match slot {
        Some(existing) => merge_into(existing, extra),
        None => *slot = Some(extra),
    }
}

/// `{namespace: {key: value}}`.
pub(crate) fn metadata(namespace: &str, key: &str, value: Value) -> Value {
    let mut inner = Map::new();
    inner.insert(key.to_owned(), value);
    let mut outer = Map::new();
    outer.insert(namespace.to_owned(), Value::Object(inner));
    Value::Object(outer)
}

/// The JSON type of a value, for error messages.
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Checks that a request body's top level is an object with a `messages` array.
pub(crate) fn messages_of(top: &json::Top) -> Result<(), ImportError> {
    let root = Location::default();
    if let Some(kind) = top.not_an_object {
        return Err(ImportError::malformed(
            &root,
            format!("expected a JSON object, found {kind}"),
        ));
    }
    match &top.stream {
        Some(Value::Array(_)) => Ok(()),
        Some(other) => Err(ImportError::malformed(
            &Location::path("messages"),
            format!("expected an array, found {}", type_name(other)),
        )),
        None => Err(ImportError::malformed(&root, "no \"messages\" array")),
    }
}

/// A required string field.
pub(crate) fn string_field<'a>(
    object: &'a Map<String, Value>,
    key: &str,
    at: &Location,
) -> Result<&'a str, ImportError> {
    match object.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(ImportError::malformed(
            &at.join(key),
            format!("expected a string, found {}", type_name(other)),
        )),
        None => Err(ImportError::malformed(at, format!("missing \"{key}\""))),
    }
}

/// The value as a JSON object, or a refusal naming `what` was expected.
pub(crate) fn as_object<'a>(
    value: &'a Value,
    at: &Location,
    what: &str,
) -> Result<&'a Map<String, Value>, ImportError> {
    value.as_object().ok_or_else(|| {
        ImportError::malformed(
            at,
            format!("expected {what} (an object), found {}", type_name(value)),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_read_like_json_paths() {
        let at = Location::path("messages")
            .join("[3]")
            .join("content")
            .join("[1]");
        assert_eq!(at.to_string(), "messages[3].content[1]");
        assert_eq!(Location::line(7).to_string(), "line 7");
        assert_eq!(
            Location::line(7)
                .join("message")
                .join("content")
                .to_string(),
            "line 7, message.content"
        );
    }

    #[test]
    fn merge_keeps_both_sides_of_nested_objects() {
        let mut base = json!({"anthropic": {"signature": "s"}});
        merge_into(&mut base, json!({"anthropic": {"block": 1}, "x": 2}));
        assert_eq!(
            base,
            json!({"anthropic": {"signature": "s", "block": 1}, "x": 2})
        );
    }

    #[test]
    fn format_names_round_trip() {
        for format in [
            Format::Anthropic,
            Format::OpenAi,
            Format::ClaudeCode,
            Format::Responses,
            Format::Gemini,
            Format::Codex,
        ] {
            assert_eq!(format.as_str().parse::<Format>(), Ok(format));
        }
        assert!("chat".parse::<Format>().is_err());
    }

    mod never_panics {
        use super::super::*;
        use proptest::prelude::*;

        /// JSON built from the words the importers look for, so random input reaches deep.
        fn json_value() -> impl Strategy<Value = Value> {
            let word = prop::sample::select(vec![
                "type",
                "text",
                "role",
                "user",
                "assistant",
                "tool",
                "system",
                "content",
                "messages",
                "tool_use",
                "tool_result",
                "thinking",
                "signature",
                "id",
                "name",
                "input",
                "tool_use_id",
                "is_error",
                "tool_calls",
                "function",
                "arguments",
                "tool_call_id",
                "message",
                "uuid",
                "isSidechain",
                "payload",
                "response_item",
                "function_call",
                "function_call_output",
                "call_id",
                "parts",
                "model",
                "functionCall",
                "functionResponse",
                "response",
                "reasoning",
                "encrypted_content",
                "",
                "{}",
                "[1]",
            ]);
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                (-2i64..3).prop_map(Value::from),
                word.clone().prop_map(Value::from),
            ];
            leaf.prop_recursive(4, 48, 6, move |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                    prop::collection::vec((word.clone(), inner), 0..6).prop_map(|pairs| {
                        Value::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
                    }),
                ]
            })
        }

        fn must_be_valid(result: Result<Imported, ImportError>) {
            if let Ok(imported) = result {
                let mut walk = Walk::default();
                for message in imported.into_messages() {
                    pairing::check_append(&mut walk, &message)
                        .expect("accepted imports pass the pairing rules");
                }
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]

            #[test]
            fn importers_never_panic_and_accept_only_valid_histories(
                messages in prop::collection::vec(json_value(), 0..6),
                system in json_value(),
            ) {
                let body = json!({"system": system, "messages": messages});
                must_be_valid(anthropic::import(&body.to_string()));
                must_be_valid(openai::import(&body.to_string()));
                let lines: Vec<String> = messages.iter().map(Value::to_string).collect();
                must_be_valid(claude_code::import(&lines.join("\n")));
                must_be_valid(codex::import(&lines.join("\n")));
                let other = json!({"instructions": system, "input": messages, "systemInstruction": system});
                must_be_valid(responses::import(&other.to_string()));
                let contents = json!({"contents": messages});
                must_be_valid(gemini::import(&contents.to_string()));
            }
        }
    }
}
