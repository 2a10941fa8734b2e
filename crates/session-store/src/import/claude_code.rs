//! Claude Code session logs (`~/.claude/projects/<project>/<session>.jsonl`, and the
//! `subagents/agent-*.jsonl` files beside them).
//!
//! The log is JSON Lines, one line per event. What becomes history:
//! - `assistant` lines: Claude Code writes **one line per content block**, so the lines of one
//!   API message share `message.id` and are merged back into one assistant message. In 2.1.x
//!   a message's `tool_use` lines are interleaved with the `user` lines carrying the results
//!   of its earlier calls (`assistant[tool_use A]`, `user[result A]`, `assistant[tool_use B]`):
//!   a line continues the assistant message with its `message.id` as long as only tool results
//!   came in between.
//! - `user` lines: `tool_result` blocks become a `tool` message; the rest of the line (text,
//!   images) a `user` message after it. Lines with `isMeta` (caveats, hook reminders) are kept
//!   as user messages, their parts tagged `provider_metadata.claude_code.is_meta`. Interrupt
//!   markers (`[Request interrupted by user...]`) stay user text, tagged `.interrupt`.
//! - Which lines make the conversation is read from the log's `parentUuid` tree
//!   ([`super::claude_tree`]), as Claude Code resumes it: the chain from the latest leaf back
//!   to its root. Each abandoned branch (a rewind, an edited earlier prompt) is a child
//!   conversation of its own ([`Imported::children`] with [`super::ImportedChild::branch`]),
//!   the whole branch from the root, stored as a fork of the conversation it left; another
//!   session's lines with a root of their own likewise, with no parent. A log whose lines name
//!   no parent is read in file order.
//! - A compaction (`compact_boundary`, then the `isCompactSummary` user line) becomes a store
//!   compaction ([`Imported::compactions`]): its summary goes to `summaries`, every turn
//!   before it is compacted, and the summary line stays as an empty user message tagged
//!   `.compact_summary` that opens the next turn. An export sends what Claude Code sent: the
//!   system prompt, the summary, and what follows. The messages a partial compaction keeps
//!   (`compactMetadata.preservedMessages` / `preservedSegment`) follow the summary, visible.
//! - `message.model` becomes `messages.model` (`anthropic/...`), `message.usage` the
//!   message's usage row; the latest legacy `summary` line is the session's title.
//! - Everything else is skipped: `progress`, `file-history-snapshot`, `queue-operation`,
//!   `system` (compact boundaries, hook summaries, local commands) and any line type this
//!   importer does not know.
//! - Sidechains: the `isSidechain` lines of a main session log are a sub-agent's
//!   conversation: each agent (`agentId`) becomes a child session ([`Imported::children`]),
//!   linked to the `Task` call whose prompt started it. A file whose message lines are all
//!   sidechain (a `subagents/agent-*.jsonl` file) is imported as the subagent's own
//!   conversation.
//! - A line whose `uuid` already appeared is a duplicate (written again on resume) and skipped.
//! - Timestamps become the messages' `created_at`.
//!
//! A log records what happened, interruptions and crashes included, so pairing is mended the
//! way `store-repair` would (see [`crate::import`]): a call left unanswered when the
//! conversation moves on gets a tombstone, a result that answers nothing becomes text, and
//! calls unanswered at the very end stay pending.
//!
//! Refused: a line that is not JSON, a message line without `message.content`, a block
//! without its required fields; the error names the line (1-based) and the path in it.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

use std::io::BufRead;

use super::blocks::{content_blocks, split};
use super::claude_tree::{self, Boundary, Node, Plan};
use super::stream::{Batches, Log, Streamed, StreamedChild};
use super::{
    as_object, json as parse, tag, Assembler, ImportError, Imported, ImportedCompaction, Leniency,
    Location,
};
use crate::history::subagents::spawn_prompt;
use crate::model::{NewMessage, Part, Role};

/// One `user` or `assistant` line.
struct Entry<'a> {
    line: usize,
    assistant: bool,
    message: &'a Map<String, Value>,
    fields: &'a Map<String, Value>,
    sidechain: bool,
}

/// Imports a Claude Code session log.
pub fn import(text: &str) -> Result<Imported, ImportError> {
    super::stream::collect_log::<Session>(text)
}

/// A log being read, one line at a time ([`super::stream`]).
///
/// Pass one ([`Log::begin`]) finds what the whole-file reading found before assembling
/// anything, in the same order: every line that is not JSON (a cut-off last line a warning),
/// then the first line that is not a log entry; the title; whether every message line is a
/// sidechain (the file is a sub-agent's own log); the sub-agents in order of appearance.
/// Pass two assembles the main conversation and each sub-agent's beside it; a sub-agent's
/// refusal is kept and reported only after the main conversation ended well, as the
/// whole-file reading assembled the main conversation first.
pub(crate) struct Session {
    only_sidechain: bool,
    /// The sub-agents (their `agentId`), in order of first appearance.
    agents: Vec<String>,
    title: Option<String>,
    warnings: Vec<String>,
    /// The last line that is JSON: where the end of the log is.
    last_line: usize,
    /// A cut-off last line, left out.
    cut_line: Option<usize>,
    /// `uuid`s seen, for the duplicates a resumed session writes again.
    seen_uuids: HashSet<String>,
    main: Conversation,
    children: Vec<Conversation>,
    /// The first `prompt` of each call of the main conversation, to the call's id: how a
    /// sub-agent is linked to the call that started it.
    prompts: std::collections::HashMap<String, String>,
    /// Which conversation of the tree ([`claude_tree`]) each line goes to, and when.
    routes: Routes,
    /// The conversations of the tree but the main one (abandoned branches, other roots).
    branches: Vec<Conversation>,
}

/// The plan of the log's tree as pass two follows it: conversation 0 is `main`, `k` is
/// `branches[k - 1]`.
#[derive(Default)]
struct Routes {
    plan: Option<Plan>,
    /// The conversations each message line goes to.
    of_line: std::collections::HashMap<usize, Vec<usize>>,
    /// Per conversation, how many of its lines were fed.
    fed: Vec<usize>,
    /// Per conversation, lines read before their turn (the kept messages of a partial
    /// compaction, fed after its summary), by line number.
    held: Vec<std::collections::BTreeMap<usize, String>>,
    /// Per branch conversation, how many messages it had when its first line of its own
    /// came: the messages it shares with the conversation it left.
    shared: Vec<Option<usize>>,
}

/// One conversation of the log being assembled.
struct Conversation {
    assembler: Assembler,
    open_message_id: Option<String>,
    compactions: Vec<ImportedCompaction>,
    /// The first text of the first user message handed out (`None` until one is).
    first_text: Option<Option<String>>,
    /// A sub-agent's refusal, kept until the main conversation ends.
    refused: Option<ImportError>,
}

impl Conversation {
    fn new() -> Self {
        Self {
            assembler: Assembler::new(Leniency::MEND),
            open_message_id: None,
            compactions: Vec::new(),
            first_text: None,
            refused: None,
        }
    }
}

/// The entry a line holds, or `None` for lines that are not messages; the title and
/// duplicate `uuid`s as the whole-file reading found them.
fn entry<'a>(
    line: usize,
    value: &'a Value,
    seen_uuids: &mut HashSet<String>,
    title: &mut Option<String>,
) -> Result<Option<Entry<'a>>, ImportError> {
    let at = Location::line(line);
    let fields = as_object(value, &at, "a log entry")?;
    match fields.get("type").and_then(Value::as_str) {
        Some("assistant" | "user") => {}
        // The title Claude Code gives a session (the latest one wins).
        Some("summary") => {
            if let Some(summary) = fields.get("summary").and_then(Value::as_str) {
                if !crate::history::blank::is_blank(summary) {
                    *title = Some(summary.to_owned());
                }
            }
            return Ok(None);
        }
        _ => return Ok(None),
    }
    if let Some(uuid) = fields.get("uuid").and_then(Value::as_str) {
        if !seen_uuids.insert(uuid.to_owned()) {
            return Ok(None);
        }
    }
    message_entry(line, value)
}

/// The entry a `user` or `assistant` line holds (`None` for other lines), duplicates not
/// looked for: a line held back and read again.
fn message_entry(line: usize, value: &Value) -> Result<Option<Entry<'_>>, ImportError> {
    let at = Location::line(line);
    let fields = as_object(value, &at, "a log entry")?;
    let assistant = match fields.get("type").and_then(Value::as_str) {
        Some("assistant") => true,
        Some("user") => false,
        _ => return Ok(None),
    };
    let Some(message) = fields.get("message") else {
        return Err(ImportError::malformed(&at, "missing \"message\""));
    };
    let message = as_object(message, &at.join("message"), "a message")?;
    Ok(Some(Entry {
        line,
        assistant,
        message,
        fields,
        sidechain: fields.get("isSidechain") == Some(&Value::Bool(true)),
    }))
}

/// What the tree ([`claude_tree`]) reads of a line that is not a sidechain's.
fn node(line: usize, fields: &Map<String, Value>, message: bool) -> Node {
    let text = |key: &str| fields.get(key).and_then(Value::as_str).map(str::to_owned);
    let body = fields.get("message").and_then(Value::as_object);
    let assistant = fields.get("type").and_then(Value::as_str) == Some("assistant");
    let tool_result = !assistant
        && body
            .and_then(|m| m.get("content"))
            .and_then(Value::as_array)
            .is_some_and(|blocks| {
                blocks
                    .iter()
                    .any(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
            });
    let is_boundary = fields.get("type").and_then(Value::as_str) == Some("system")
        && fields.get("subtype").and_then(Value::as_str) == Some("compact_boundary");
    let boundary = is_boundary.then(|| {
        let meta = fields.get("compactMetadata");
        let uuid_at = |path: &[&str]| {
            let mut at = meta?;
            for key in path {
                at = at.get(key)?;
            }
            at.as_str().map(str::to_owned)
        };
        Boundary {
            logical_parent: text("logicalParentUuid"),
            preserved: meta
                .and_then(|m| m.pointer("/preservedMessages/uuids"))
                .and_then(Value::as_array)
                .map(|uuids| {
                    uuids
                        .iter()
                        .filter_map(|u| u.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
            segment: uuid_at(&["preservedSegment", "headUuid"])
                .zip(uuid_at(&["preservedSegment", "tailUuid"])),
        }
    });
    Node {
        line,
        uuid: text("uuid"),
        parent: text("parentUuid"),
        message,
        assistant,
        session: text("sessionId"),
        message_id: body
            .filter(|_| assistant)
            .and_then(|m| m.get("id"))
            .and_then(Value::as_str)
            .map(str::to_owned),
        tool_result,
        compact_summary: fields.get("isCompactSummary") == Some(&Value::Bool(true)),
        boundary,
    }
}

/// The lines an import leaves out, counted so that the import can say so: a log of many
/// megabytes may hold few messages.
#[derive(Default)]
struct Skipped {
    /// Message lines whose `uuid` an earlier line had (written again on resume).
    repeated: usize,
    /// Lines that hold no message, by their `type` (`progress`, `file-history-snapshot`...).
    other: std::collections::BTreeMap<String, usize>,
}

impl Skipped {
    /// Counts a line [`entry`] left out. A `summary` line is read (the title), not skipped.
    fn note(&mut self, value: &Value) {
        match value.get("type").and_then(Value::as_str) {
            Some("user" | "assistant") => self.repeated += 1,
            Some("summary") => {}
            kind => {
                *self
                    .other
                    .entry(kind.unwrap_or("(no type)").to_owned())
                    .or_default() += 1
            }
        }
    }

    /// One sentence for the import's warnings, when anything was left out.
    fn warning(&self) -> Option<String> {
        let other: usize = self.other.values().sum();
        let mut said = Vec::new();
        if self.repeated > 0 {
            said.push(format!(
                "{} line(s) that repeat an earlier message (same uuid, written again when a session resumes)",
                self.repeated
            ));
        }
        if other > 0 {
            let kinds: Vec<String> = self
                .other
                .iter()
                .map(|(k, n)| format!("{k}: {n}"))
                .collect();
            said.push(format!(
                "{other} line(s) that hold no message ({})",
                kinds.join(", ")
            ));
        }
        (!said.is_empty()).then(|| format!("skipped {}", said.join(" and ")))
    }
}

fn agent_of(entry: &Entry<'_>) -> String {
    entry
        .fields
        .get("agentId")
        .and_then(Value::as_str)
        .unwrap_or("sidechain")
        .to_owned()
}

/// A line without its line break (a log written on Windows may end lines with `\r\n`).
fn bare(line: &str) -> &str {
    line.trim_end_matches(['\n', '\r'])
}

impl Log for Session {
    fn begin(input: &mut dyn BufRead) -> Result<Self, ImportError> {
        let mut session = Session {
            only_sidechain: true,
            agents: Vec::new(),
            title: None,
            warnings: Vec::new(),
            last_line: 0,
            cut_line: None,
            seen_uuids: HashSet::new(),
            main: Conversation::new(),
            children: Vec::new(),
            prompts: std::collections::HashMap::new(),
            routes: Routes::default(),
            branches: Vec::new(),
        };
        let mut nodes = Vec::new();
        let mut not_an_entry = None;
        let mut skipped = Skipped::default();
        let mut any = false;
        let mut buffer = Vec::new();
        let mut number = 0;
        let mut byte = 0;
        loop {
            buffer.clear();
            let read = input
                .read_until(b'\n', &mut buffer)
                .map_err(|source| ImportError::Io { source })?;
            if read == 0 {
                break;
            }
            number += 1;
            let origin = parse::Origin { line: number, byte };
            byte += read;
            let text = parse::utf8(&buffer)?;
            let ended = text.ends_with('\n');
            let line = bare(text);
            if line.trim().is_empty() {
                continue;
            }
            let value = match parse::parse(line, &Location::line(number), Some(origin)) {
                Ok(value) => value,
                Err(ImportError::Json { source, .. }) if !ended && source.is_eof() => {
                    session.warnings.push(format!(
                        "line {number}: cut off before its end (the log was not finished); imported up to line {}",
                        number - 1
                    ));
                    session.cut_line = Some(number);
                    continue;
                }
                Err(error) => return Err(error),
            };
            any = true;
            session.last_line = number;
            if not_an_entry.is_some() {
                continue;
            }
            match entry(number, &value, &mut session.seen_uuids, &mut session.title) {
                Ok(Some(entry)) if entry.sidechain => {
                    let agent = agent_of(&entry);
                    if !session.agents.contains(&agent) {
                        session.agents.push(agent);
                    }
                }
                Ok(Some(entry)) => {
                    session.only_sidechain = false;
                    nodes.push(node(number, entry.fields, true));
                }
                Ok(None) => {
                    skipped.note(&value);
                    if let Some(fields) = value.as_object() {
                        let message = matches!(
                            fields.get("type").and_then(Value::as_str),
                            Some("user" | "assistant")
                        );
                        let sidechain = fields.get("isSidechain") == Some(&Value::Bool(true));
                        if !message && !sidechain {
                            nodes.push(node(number, fields, false));
                        }
                    }
                }
                Err(error) => not_an_entry = Some(error),
            }
        }
        if !any {
            return Err(ImportError::Empty);
        }
        if let Some(error) = not_an_entry {
            return Err(error);
        }
        session.warnings.extend(skipped.warning());
        session.seen_uuids.clear();
        if session.only_sidechain {
            session.agents.clear();
            nodes.clear();
        }
        session.children = session.agents.iter().map(|_| Conversation::new()).collect();
        session.route(claude_tree::plan(&nodes));
        Ok(session)
    }

    fn line(&mut self, number: usize, byte: usize, line: &str, _: bool) -> Result<(), ImportError> {
        let line = bare(line);
        if line.trim().is_empty() || self.cut_line == Some(number) {
            return Ok(());
        }
        let origin = parse::Origin { line: number, byte };
        let value = parse::parse(line, &Location::line(number), Some(origin))?;
        let mut title = None;
        let Some(entry) = entry(number, &value, &mut self.seen_uuids, &mut title)? else {
            return Ok(());
        };
        if self.only_sidechain || !entry.sidechain {
            return self.feed_routed(number, line, &entry);
        }
        let agent = agent_of(&entry);
        let Some(child) = self
            .agents
            .iter()
            .position(|a| *a == agent)
            .and_then(|k| self.children.get_mut(k))
        else {
            return Ok(());
        };
        if child.refused.is_none() {
            if let Err(error) = feed(child, &entry) {
                child.refused = Some(error);
            }
        }
        Ok(())
    }

    fn ready(&mut self) -> Batches {
        let mut out = vec![(0, self.main.assembler.take_ready())];
        for (k, child) in self.children.iter_mut().enumerate() {
            if child.refused.is_none() {
                out.push((k + 1, child.assembler.take_ready()));
            }
        }
        let first_branch = 1 + self.children.len();
        for (b, branch) in self.branches.iter_mut().enumerate() {
            out.push((first_branch + b, branch.assembler.take_ready()));
        }
        self.observe(&out);
        out
    }

    fn finish(mut self, _: usize) -> Result<(Batches, Streamed), ImportError> {
        let end = Location::line(self.last_line);
        self.feed_held()?;
        let main = std::mem::replace(&mut self.main, Conversation::new());
        let rest = main.assembler.finish_rest(&end)?;
        let mut out = vec![(0, rest.messages)];
        let mut streamed = Streamed {
            has_system: rest.has_system,
            tombstoned: rest.tombstoned,
            orphans_as_text: rest.orphans_as_text,
            warnings: std::mem::take(&mut self.warnings),
            title: self.title.take(),
            compactions: main.compactions,
            ..Streamed::default()
        };
        for (k, child) in self.children.iter_mut().enumerate() {
            if let Some(error) = child.refused.take() {
                return Err(error);
            }
            let assembler = std::mem::replace(&mut child.assembler, Assembler::new(Leniency::MEND));
            let rest = assembler.finish_rest(&end)?;
            out.push((k + 1, rest.messages));
            streamed.children.push(StreamedChild {
                compactions: std::mem::take(&mut child.compactions),
                tombstoned: rest.tombstoned,
                orphans_as_text: rest.orphans_as_text,
                ..StreamedChild::default()
            });
        }
        let first_branch = 1 + self.children.len();
        let stream_of = |k: usize| if k == 0 { 0 } else { first_branch + k - 1 };
        let forks: Vec<Option<claude_tree::Fork>> = self
            .routes
            .plan
            .iter()
            .flat_map(|plan| plan.conversations.iter().skip(1).map(|c| c.fork))
            .collect();
        for (b, branch) in std::mem::take(&mut self.branches).into_iter().enumerate() {
            let rest = branch.assembler.finish_rest(&end)?;
            out.push((first_branch + b, rest.messages));
            let fork = forks.get(b).copied().flatten();
            streamed.children.push(StreamedChild {
                compactions: branch.compactions,
                tombstoned: rest.tombstoned,
                orphans_as_text: rest.orphans_as_text,
                branch: Some(super::Branch {
                    parent: fork.map(|f| stream_of(f.parent)),
                    shared: fork
                        .and_then(|_| self.routes.shared.get(b + 1).copied().flatten())
                        .unwrap_or(0),
                }),
                ..StreamedChild::default()
            });
        }
        self.observe(&out);
        for (streamed, child) in streamed.children.iter_mut().zip(&self.children) {
            streamed.spawned_by = child
                .first_text
                .clone()
                .flatten()
                .and_then(|text| self.prompts.get(&text).cloned());
        }
        Ok((out, streamed))
    }
}

impl Session {
    /// Follows `plan` in pass two: a conversation for each of its branches, and where each
    /// line goes.
    fn route(&mut self, plan: Plan) {
        let count = plan.conversations.len();
        for (k, conversation) in plan.conversations.iter().enumerate() {
            for &line in &conversation.lines {
                self.routes.of_line.entry(line).or_default().push(k);
            }
        }
        self.branches = (1..count).map(|_| Conversation::new()).collect();
        self.routes.fed = vec![0; count];
        self.routes.held = vec![std::collections::BTreeMap::new(); count];
        self.routes.shared = vec![None; count];
        self.routes.plan = Some(plan);
    }

    /// The conversation `k` of the plan.
    fn conversation(&mut self, k: usize) -> Option<&mut Conversation> {
        match k {
            0 => Some(&mut self.main),
            k => self.branches.get_mut(k - 1),
        }
    }

    /// Feeds a message line of the tree to each conversation it belongs to, when its turn
    /// comes; a line read early is held until then.
    fn feed_routed(
        &mut self,
        number: usize,
        line: &str,
        entry: &Entry<'_>,
    ) -> Result<(), ImportError> {
        let Some(targets) = self.routes.of_line.get(&number).cloned() else {
            return feed(&mut self.main, entry);
        };
        for k in targets {
            if self.next_line(k) == Some(number) {
                self.feed_one(k, entry)?;
                self.feed_held_of(k)?;
            } else if let Some(held) = self.routes.held.get_mut(k) {
                held.insert(number, line.to_owned());
            }
        }
        Ok(())
    }

    /// The next line conversation `k` takes.
    fn next_line(&self, k: usize) -> Option<usize> {
        let plan = self.routes.plan.as_ref()?;
        let fed = *self.routes.fed.get(k)?;
        plan.conversations.get(k)?.lines.get(fed).copied()
    }

    /// Feeds one entry to conversation `k`, noting where a branch's own lines begin.
    fn feed_one(&mut self, k: usize, entry: &Entry<'_>) -> Result<(), ImportError> {
        let shared = self
            .routes
            .plan
            .as_ref()
            .and_then(|plan| plan.conversations.get(k))
            .and_then(|c| c.fork)
            .map(|fork| fork.shared);
        let fed = self.routes.fed.get(k).copied().unwrap_or_default();
        let Some(conversation) = self.conversation(k) else {
            return Ok(());
        };
        let len = conversation.assembler.len();
        feed(conversation, entry)?;
        if shared == Some(fed) {
            self.routes.shared[k] = Some(len);
        }
        self.routes.fed[k] += 1;
        Ok(())
    }

    /// Feeds conversation `k` the held lines whose turn has come.
    fn feed_held_of(&mut self, k: usize) -> Result<(), ImportError> {
        while let Some(number) = self.next_line(k) {
            let Some(text) = self.routes.held.get_mut(k).and_then(|h| h.remove(&number)) else {
                break;
            };
            let value = parse::parse(&text, &Location::line(number), None)?;
            if let Some(entry) = message_entry(number, &value)? {
                self.feed_one(k, &entry)?;
            }
        }
        Ok(())
    }

    /// At the end, the lines still held (their turn never came: a plan the lines did not
    /// follow), in order rather than lost.
    fn feed_held(&mut self) -> Result<(), ImportError> {
        for k in 0..self.routes.held.len() {
            self.feed_held_of(k)?;
            let held = std::mem::take(&mut self.routes.held[k]);
            for (number, text) in held {
                let value = parse::parse(&text, &Location::line(number), None)?;
                if let Some(entry) = message_entry(number, &value)? {
                    self.feed_one(k, &entry)?;
                }
            }
        }
        Ok(())
    }

    /// Notes, from the messages handed out, what links a sub-agent to the call that started
    /// it: each prompt of the main conversation's calls, and each sub-agent's first text.
    fn observe(&mut self, batches: &[(usize, Vec<NewMessage>)]) {
        for (stream, batch) in batches {
            if *stream == 0 {
                for part in batch.iter().flat_map(|m| &m.parts) {
                    if let Part::ToolUse { id, input, .. } = part {
                        if let Some(prompt) = spawn_prompt(input) {
                            self.prompts
                                .entry(prompt.to_owned())
                                .or_insert_with(|| id.clone());
                        }
                    }
                }
            } else if let Some(child) = self.children.get_mut(stream - 1) {
                if child.first_text.is_none() {
                    child.first_text = first_user_text(batch);
                }
            }
        }
    }
}

/// The first text of the first user message in `messages`: `None` when there is no user
/// message yet, `Some(None)` when the first one holds no text.
fn first_user_text(messages: &[NewMessage]) -> Option<Option<String>> {
    let first = messages.iter().find(|m| m.role == Role::User)?;
    Some(first.parts.iter().find_map(|p| match p {
        Part::Text { text, .. } => Some(text.clone()),
        _ => None,
    }))
}

/// One entry of a conversation, assembled.
fn feed(conversation: &mut Conversation, entry: &Entry<'_>) -> Result<(), ImportError> {
    let at = Location::line(entry.line);
    let content_at = at.join("message").join("content");
    let Some(content) = entry.message.get("content") else {
        return Err(ImportError::malformed(
            &at.join("message"),
            "missing \"content\"",
        ));
    };
    let (results, parts) = split(content_blocks(content, &content_at)?);
    let created_at = timestamp(entry.fields);
    if entry.assistant {
        if !results.is_empty() {
            return Err(ImportError::malformed(
                &content_at,
                "an assistant message cannot hold tool_result blocks",
            ));
        }
        if parts.is_empty() {
            return Ok(());
        }
        return feed_assistant(conversation, entry, &at, parts, created_at);
    }
    if !results.is_empty() {
        conversation.assembler.results(&at, results, created_at)?;
    }
    if parts.is_empty() {
        return Ok(());
    }
    let compact_summary = entry.fields.get("isCompactSummary") == Some(&Value::Bool(true));
    if compact_summary && conversation.assembler.has_user() {
        // A compaction: the summary goes to the store's summaries, the turns before it are
        // compacted, and the message that opened the new turn stays (empty, tagged) so the
        // turns keep their boundaries.
        let summary: Vec<&str> = parts
            .iter()
            .filter_map(|p| match p {
                Part::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        let summary = summary.join("\n\n");
        if !crate::history::blank::is_blank(&summary) {
            return feed_compaction(conversation, entry, &at, summary, created_at);
        }
    }
    let parts = parts
        .into_iter()
        .map(|mut part| {
            tag_user_part(&mut part, entry.fields);
            part
        })
        .collect();
    let mut message = NewMessage::new(Role::User, parts);
    message.created_at = created_at;
    conversation.assembler.push(&at, message)?;
    conversation.open_message_id = None;
    Ok(())
}

/// The model Claude Code names on the assistant lines it writes itself.
const SYNTHETIC_MODEL: &str = "<synthetic>";

/// An assistant entry's `parts` (not empty): more lines of the open assistant message when
/// it carries that message's id (the last line's usage wins), else a new message.
fn feed_assistant(
    conversation: &mut Conversation,
    entry: &Entry<'_>,
    at: &Location,
    parts: Vec<Part>,
    created_at: Option<DateTime<Utc>>,
) -> Result<(), ImportError> {
    let assembler = &mut conversation.assembler;
    let message_id = entry.message.get("id").and_then(Value::as_str);
    // Claude Code writes the messages it makes itself (an API error, "No response
    // requested.") as assistant lines of the model `<synthetic>`, with zero usage: no model
    // wrote them, and no prompt was read for them.
    let synthetic = entry.message.get("model").and_then(Value::as_str) == Some(SYNTHETIC_MODEL);
    let model = super::model_name("anthropic", entry.message.get("model")).filter(|_| !synthetic);
    let usage = match synthetic {
        true => None,
        false => super::usage::anthropic(entry.message, &at.join("message"))?,
    };
    if message_id.is_some()
        && message_id == conversation.open_message_id.as_deref()
        && assembler.assistant_is_open()
    {
        assembler.extend_assistant(at, parts)?;
        // Every line of a message repeats the API response's usage, the last line with
        // the final output count.
        if let Some(usage) = usage {
            if let Some(last) = assembler.last_assistant() {
                last.usage = Some(usage);
            }
        }
    } else {
        let mut message = NewMessage::assistant(parts);
        message.created_at = created_at;
        message.model = model;
        message.usage = usage;
        assembler.push(at, message)?;
        conversation.open_message_id = message_id.map(str::to_owned);
    }
    Ok(())
}

/// A compact-summary entry whose text `summary` is not blank: the summary goes to the
/// conversation's compactions, and an empty tagged user message keeps the turn's place.
fn feed_compaction(
    conversation: &mut Conversation,
    entry: &Entry<'_>,
    at: &Location,
    summary: String,
    created_at: Option<DateTime<Utc>>,
) -> Result<(), ImportError> {
    let mut marker = Part::text("");
    tag_user_part(&mut marker, entry.fields);
    let mut message = NewMessage::new(Role::User, vec![marker]);
    message.created_at = created_at;
    conversation.assembler.push(at, message)?;
    conversation.open_message_id = None;
    conversation.compactions.push(ImportedCompaction {
        at: conversation.assembler.len() - 1,
        summary,
    });
    Ok(())
}

fn timestamp(fields: &Map<String, Value>) -> Option<DateTime<Utc>> {
    let text = fields.get("timestamp")?.as_str()?;
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

fn tag_user_part(part: &mut Part, fields: &Map<String, Value>) {
    let flag = |key: &str| fields.get(key) == Some(&Value::Bool(true));
    let mut tags = Map::new();
    if flag("isMeta") {
        tags.insert("is_meta".into(), json!(true));
    }
    if flag("isCompactSummary") {
        tags.insert("compact_summary".into(), json!(true));
    }
    if let Part::Text { text, .. } = part {
        if text.starts_with("[Request interrupted by user") {
            tags.insert("interrupt".into(), json!(true));
        }
    }
    if !tags.is_empty() {
        tag(part, json!({ "claude_code": Value::Object(tags) }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(values: &[Value]) -> String {
        values
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn user(uuid: &str, content: Value) -> Value {
        json!({"type": "user", "uuid": uuid, "isSidechain": false,
               "timestamp": "2026-02-10T22:57:54.684Z",
               "message": {"role": "user", "content": content}})
    }

    fn assistant(uuid: &str, id: &str, block: Value) -> Value {
        json!({"type": "assistant", "uuid": uuid, "isSidechain": false,
               "message": {"id": id, "role": "assistant", "content": [block]}})
    }

    fn call(id: &str) -> Value {
        json!({"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "ls"}})
    }

    fn result(id: &str) -> Value {
        json!([{"type": "tool_result", "tool_use_id": id, "content": "ok"}])
    }

    fn roles(imported: &Imported) -> Vec<Role> {
        imported.messages.iter().map(|m| m.role).collect()
    }

    #[test]
    fn interleaved_tool_use_lines_merge_into_one_assistant_message_by_message_id() {
        let log = lines(&[
            user("u1", json!("go")),
            json!({"type": "progress", "data": {}}),
            assistant("a1", "msg_1", json!({"type": "text", "text": "\n\n"})),
            assistant(
                "a2",
                "msg_1",
                json!({"type": "thinking", "thinking": "hm", "signature": "S"}),
            ),
            assistant("a3", "msg_1", call("A")),
            user("u2", result("A")),
            assistant("a4", "msg_1", call("B")),
            user("u3", result("B")),
            assistant("a5", "msg_2", json!({"type": "text", "text": "done"})),
        ]);
        let imported = import(&log).expect("imports");
        assert_eq!(
            roles(&imported),
            [
                Role::User,
                Role::Assistant,
                Role::Tool,
                Role::Tool,
                Role::Assistant
            ]
        );
        let ids: Vec<_> = imported.messages[1]
            .parts
            .iter()
            .filter_map(Part::call_id)
            .collect();
        assert_eq!(ids, ["A", "B"]);
        assert_eq!(imported.messages[1].parts.len(), 4);
        assert!(imported.messages[0].created_at.is_some());
    }

    #[test]
    fn usage_comes_from_the_last_line_of_each_assistant_message() {
        let mut first = assistant("a1", "msg_1", json!({"type": "text", "text": "hi"}));
        first["message"]["model"] = json!("claude-opus-4-1");
        first["message"]["usage"] = json!({"input_tokens": 10, "output_tokens": 1});
        let mut second = assistant("a2", "msg_1", call("A"));
        second["message"]["model"] = json!("claude-opus-4-1");
        second["message"]["usage"] = json!({"input_tokens": 10, "output_tokens": 25,
            "cache_read_input_tokens": 500, "cache_creation_input_tokens": 7});
        let log = lines(&[
            user("u1", json!("go")),
            first,
            second,
            user("u2", result("A")),
        ]);
        let imported = import(&log).expect("imports");
        let usage = imported.messages[1].usage.clone().expect("usage");
        assert_eq!(usage.output_tokens, Some(25));
        assert_eq!(usage.cache_read_tokens, Some(500));
        assert_eq!(usage.model.as_deref(), Some("anthropic/claude-opus-4-1"));
        assert!(imported
            .messages
            .iter()
            .filter(|m| m.role != Role::Assistant)
            .all(|m| m.usage.is_none()));
    }

    #[test]
    fn a_trailing_unanswered_call_is_imported_as_pending() {
        let log = lines(&[user("u1", json!("go")), assistant("a1", "m", call("A"))]);
        let imported = import(&log).expect("imports");
        assert_eq!(roles(&imported), [Role::User, Role::Assistant]);
        assert!(imported.tombstoned.is_empty());
    }

    #[test]
    fn a_call_left_unanswered_before_the_next_user_message_gets_a_tombstone() {
        let log = lines(&[
            user("u1", json!("go")),
            assistant("a1", "m", call("A")),
            user("u2", json!("[Request interrupted by user]")),
        ]);
        let imported = import(&log).expect("imports");
        assert_eq!(
            roles(&imported),
            [Role::User, Role::Assistant, Role::Tool, Role::User]
        );
        assert_eq!(imported.tombstoned, ["A"]);
        assert!(matches!(
            &imported.messages[2].parts[0],
            Part::ToolResult { is_error: true, .. }
        ));
        assert_eq!(
            imported.messages[3].parts[0].provider_metadata(),
            Some(&json!({"claude_code": {"interrupt": true}}))
        );
    }

    #[test]
    fn a_result_answering_nothing_is_kept_as_text() {
        let log = lines(&[user("u1", json!("go")), user("u2", result("ghost"))]);
        let imported = import(&log).expect("imports");
        assert_eq!(roles(&imported), [Role::User, Role::User]);
        assert_eq!(imported.orphans_as_text, 1);
        let Part::Text { text, .. } = &imported.messages[1].parts[0] else {
            panic!("expected text");
        };
        assert!(text.contains("ghost") && text.ends_with("ok"));
    }

    #[test]
    fn sidechain_lines_are_skipped_in_a_main_log_but_imported_in_a_subagent_file() {
        let mut side = user("s1", json!("Warmup"));
        side["isSidechain"] = json!(true);
        let imported = import(&lines(&[user("u1", json!("go")), side.clone()])).expect("imports");
        assert_eq!(imported.messages.len(), 1);
        let imported = import(&lines(&[side])).expect("imports");
        assert_eq!(imported.messages.len(), 1);
    }

    #[test]
    fn duplicate_uuids_and_non_message_lines_are_skipped() {
        let log = lines(&[
            json!({"type": "summary", "summary": "old", "leafUuid": "x"}),
            json!({"type": "file-history-snapshot", "snapshot": {}}),
            user("u1", json!("go")),
            user("u1", json!("go")),
            json!({"type": "system", "subtype": "compact_boundary"}),
        ]);
        let imported = import(&log).expect("imports");
        assert_eq!(imported.messages.len(), 1);
        // Said, not silent: how many lines were left out, and why.
        assert_eq!(
            imported.warnings,
            ["skipped 1 line(s) that repeat an earlier message (same uuid, written again when a session resumes) and 2 line(s) that hold no message (file-history-snapshot: 1, system: 1)"]
        );
        let clean = lines(&[
            json!({"type": "summary", "summary": "title", "leafUuid": "x"}),
            user("u1", json!("go")),
        ]);
        assert!(import(&clean).expect("imports").warnings.is_empty());
        let only_progress = lines(&[
            user("u1", json!("go")),
            json!({"type": "progress", "data": {}}),
            json!({"type": "progress", "data": {}}),
            json!({"no_type": true}),
        ]);
        assert_eq!(
            import(&only_progress).expect("imports").warnings,
            ["skipped 3 line(s) that hold no message ((no type): 1, progress: 2)"]
        );
    }

    #[test]
    fn malformed_lines_are_refused_with_their_line_number() {
        let log = format!("{}\n\n{{not json\n", user("u1", json!("go")));
        let err = import(&log).expect_err("line 3 is not JSON");
        assert_eq!(err.location().and_then(|l| l.line), Some(3));
        let log = lines(&[
            user("u1", json!("go")),
            json!({"type": "assistant", "message": {"id": "m", "content": [{"type": "tool_use", "id": "A"}]}}),
        ]);
        let err = import(&log).expect_err("tool_use without a name");
        assert_eq!(
            err.to_string(),
            "line 2, message.content[0]: missing \"name\""
        );
        assert!(matches!(import("\n\n"), Err(ImportError::Empty)));
    }

    #[test]
    fn a_log_cut_off_mid_line_imports_up_to_its_last_whole_line_with_a_warning() {
        let whole = lines(&[user("u1", json!("go")), user("u2", json!("more"))]);
        let log = format!("{whole}\n{{\"type\": \"user\", \"mess");
        let imported = import(&log).expect("imports the whole lines");
        assert_eq!(imported.messages.len(), 2);
        assert_eq!(imported.warnings.len(), 1, "{:?}", imported.warnings);
        assert!(imported.warnings[0].starts_with("line 3: cut off"));
        // A broken line that is not the last, or a last line ended by a newline, is refused.
        assert!(import(&format!("{whole}\n{{\"type\": \"user\", \"mess\n")).is_err());
    }

    #[test]
    fn assistant_lines_record_their_model() {
        let mut line = assistant("a1", "m", json!({"type": "text", "text": "hi"}));
        line["message"]["model"] = json!("claude-opus-4-5");
        let imported = import(&lines(&[user("u1", json!("go")), line])).expect("imports");
        assert_eq!(
            imported.messages[1].model.as_deref(),
            Some("anthropic/claude-opus-4-5")
        );
    }

    /// Claude Code's own messages (an API error) name the model `<synthetic>` with zero
    /// usage: taken as the model, it made the real model's signed thinking "another model's"
    /// on export, and its usage made the last prompt read 0 tokens.
    #[test]
    fn synthetic_assistant_lines_name_no_model_and_report_no_usage() {
        let mut real = assistant("a1", "msg_1", call("A"));
        real["message"]["model"] = json!("claude-sonnet-4-5");
        real["message"]["usage"] = json!({"input_tokens": 900, "output_tokens": 5});
        let mut error = assistant("a2", "x", json!({"type": "text", "text": "API Error: 500"}));
        error["message"]["model"] = json!("<synthetic>");
        error["message"]["usage"] = json!({"input_tokens": 0, "output_tokens": 0});
        error["isApiErrorMessage"] = json!(true);
        let imported = import(&lines(&[
            user("u1", json!("go")),
            real,
            user("u2", result("A")),
            error,
        ]))
        .expect("imports");
        assert_eq!(
            imported.models(),
            [None, Some("anthropic/claude-sonnet-4-5"), None, None]
        );
        assert!(imported.messages[3].usage.is_none());
        assert_eq!(imported.messages[3].parts, [Part::text("API Error: 500")]);
    }
}
