//! The grammar of a conversation: one walk over a message list that classifies every part.
//!
//! A conversation is a sequence of messages. An assistant message may call tools; the `tool`
//! messages that directly follow it (system messages skipped, they never break a pair) are its
//! **tool block**, and each call is answered by the first result for its id in that block.
//! Everything the store decides about pairing is a question about this structure: may this
//! message be written (the write path), is this session healthy (the check and the forensic
//! views), how is it mended (`store-repair`), what does a provider see (the loader), how is a
//! transcript assembled (the importers). They all ask [`Walk`], and differ only in *policy*:
//! what they do with a class (refuse, report, mend, or send as something else). The policy
//! table is in ARCHITECTURE.md.
//!
//! The walk is incremental and linear: each part is looked at once, ids are found through
//! hash maps, and the open tool block is updated in place. A message of 20,000 parallel calls,
//! or 20,000 calls sharing one id or having none, costs what 20,000 parts cost.

use std::collections::VecDeque;

/// The walk's maps, keyed by tool_use ids: foldhash (seeded per process) rather than std's
/// SipHash, which was 2% of an append's instructions (BENCHMARKS.md).
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

use crate::model::{Message, NewMessage, Part, Role};

/// Anything the walk can read a role and parts from: stored and new messages alike.
pub trait Entry {
    /// Who wrote it.
    fn role(&self) -> Role;
    /// Its parts, in ordinal order.
    fn parts(&self) -> &[Part];
}

impl Entry for Message {
    fn role(&self) -> Role {
        self.role
    }
    fn parts(&self) -> &[Part] {
        &self.parts
    }
}

impl Entry for NewMessage {
    fn role(&self) -> Role {
        self.role
    }
    fn parts(&self) -> &[Part] {
        &self.parts
    }
}

/// Where a part sits: the index of its message in the walked list, and its ordinal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct At {
    /// Index of the message in the list walked (not its `seq`).
    pub message: usize,
    /// Position of the part within the message.
    pub part: usize,
}

/// The id of a tool_use, as far as uniqueness goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdState {
    /// First use of a non-empty id in the session.
    Fresh,
    /// An empty id (NULL in the row): no result can name it.
    Missing,
    /// An earlier tool_use of the session used this id (`first` is `None` when that use
    /// came before the part of the session walked here).
    Repeated {
        /// The first use, when it was walked.
        first: Option<At>,
    },
}

/// What became of a tool_use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallState {
    /// Answered by the first result for its id in its tool block.
    Answered {
        /// The result.
        by: At,
    },
    /// Its only answer sits in the `user` message that closed its block (a result where a
    /// tool message should be): misplaced, so not an answer by the contract's letter, but
    /// one the loader and the mend can move into place.
    AnsweredFromUser {
        /// The result.
        by: At,
    },
    /// Its block was closed by the next user or assistant message without an answer.
    Unanswered,
    /// Its block runs to the end of the walk: it may still be answered (legal).
    Pending,
    /// Nothing can ever answer it: it sits outside an assistant message, or has no id.
    Unanswerable,
}

/// Why a tool_result answers nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OrphanWhy {
    /// No user or assistant message comes before it.
    NothingBefore,
    /// The last user-or-assistant message before it is a user message (at this index).
    NoAssistantBefore {
        /// The user message.
        speaker: usize,
    },
    /// The assistant message before its block (at this index) made no call with its id.
    NotCalled {
        /// The assistant message.
        assistant: usize,
    },
    /// The call was answered already: a call has exactly one answer.
    AlreadyAnswered {
        /// The first answer, when it was walked.
        first: Option<At>,
    },
    /// It has no id, so it can name no call.
    NoId,
}

/// What a tool_result is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultState {
    /// It answers this call (in a `tool` message; or, in a `user` message, as the call's
    /// misplaced answer: see [`CallState::AnsweredFromUser`]).
    Answers {
        /// The call, when it was walked (`None`: a call stored before the walk began).
        call: Option<At>,
    },
    /// In an assistant or system message: it would answer this open call if it stood in a
    /// tool message, but where it is it answers nothing.
    WouldAnswer {
        /// The call, when it was walked.
        call: Option<At>,
    },
    /// It answers nothing.
    Orphan(OrphanWhy),
}

/// The class of one part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartClass {
    /// Text anywhere, reasoning in an assistant message: content where it may stand.
    Content,
    /// Reasoning outside an assistant message: a kind its role cannot carry.
    Misplaced,
    /// A tool_use.
    Call {
        /// Its id.
        id: IdState,
        /// What became of it (updated as the walk goes on).
        state: CallState,
    },
    /// A tool_result.
    Result(ResultState),
    /// A server tool call (the provider runs it; its result sits in the same assistant
    /// message).
    ServerCall(ServerCallState),
    /// A server tool result: the call it answers in its own message, `None` when it follows
    /// no open server call there (an orphan).
    ServerResult {
        /// The call.
        call: Option<At>,
    },
}

/// What became of a server tool call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerCallState {
    /// Its result follows it in its assistant message.
    Answered {
        /// The result.
        by: At,
    },
    /// No result yet, and its message is still the latest assistant message: a paused turn
    /// (`pause_turn`), or one whose client calls are being answered. Legal.
    Pending,
    /// No result, and a later user or assistant message moved on: no provider takes it back
    /// as a call.
    Unanswered,
}

/// The classes of one message's parts, and where the message stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageClass {
    /// One class per part, in ordinal order.
    pub parts: Vec<PartClass>,
    /// For a `tool` or `system` message: the assistant message whose tool block it is in
    /// (`None` when no assistant message directly precedes it).
    pub in_block_of: Option<usize>,
    /// True for a `system` message inside a tool block that still had unanswered calls: legal,
    /// but a provider needs it after the block.
    pub splits_pair: bool,
}

/// The open tool block: calls of the last assistant message not answered yet.
#[derive(Clone, Debug, Default)]
struct Block {
    /// Index of the assistant message.
    assistant: usize,
    /// Unanswered calls by id, in part order (one id may be called twice in a message).
    open: HashMap<String, VecDeque<usize>>,
    /// Unanswered calls in part order, with a flag cleared when answered.
    order: Vec<(usize, String, bool)>,
    /// Position in `order` of each part ordinal.
    slot: HashMap<usize, usize>,
    /// First answer of each answered id.
    answered: HashMap<String, Option<At>>,
    /// How many calls are still open.
    open_count: usize,
    /// Server calls of the assistant message without a result yet: id to ordinals.
    server_open: HashMap<String, VecDeque<usize>>,
}

/// The incremental walk: feed messages in order, read the classes.
#[derive(Clone, Debug, Default)]
pub struct Walk {
    /// Classes of the messages walked, from index `base` on.
    classes: Vec<MessageClass>,
    /// Index of the first message whose class is kept (messages before were stored earlier).
    base: usize,
    /// The last user or assistant message: its index and role.
    speaker: Option<(usize, Role)>,
    /// The tool block of `speaker`, when it is an assistant message.
    block: Option<Block>,
    /// Every non-empty tool_use id used so far, with its first use when walked.
    used: HashMap<String, Option<At>>,
}

/// Where a walk resumes: the end of a session stored before, as the write path reads it.
#[derive(Clone, Debug, Default)]
pub struct Resume {
    /// How many messages the session holds.
    pub messages: usize,
    /// The role of the last user or assistant message, if any.
    pub speaker: Option<Role>,
    /// When that message is an assistant message: its tool_use ids in part order, and which
    /// of them are answered in its block so far.
    pub calls: Vec<(String, bool)>,
    /// Tool_use ids the stored session already uses (at least those the caller will write).
    pub taken: Vec<String>,
}

/// What one fed message did to the block before it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fed {
    /// Ids of calls the message left unanswered by closing their block, in part order.
    pub closed_unanswered: Vec<String>,
}

impl Walk {
    /// A walk over a whole list.
    pub fn of<E: Entry>(messages: &[E]) -> Self {
        let mut walk = Walk::default();
        for message in messages {
            walk.feed(message.role(), message.parts());
        }
        walk
    }

    /// A walk that continues a stored session (the write path, the importers' assembler).
    pub fn resume(from: Resume) -> Self {
        // A stored speaker needs an index below `base`.
        let base = from.messages.max(usize::from(from.speaker.is_some()));
        let mut walk = Walk {
            base,
            used: from.taken.into_iter().map(|id| (id, None)).collect(),
            ..Walk::default()
        };
        // Stored messages are addressed below `base`; only the last speaker matters.
        let speaker_index = base.saturating_sub(1);
        walk.speaker = from.speaker.map(|role| (speaker_index, role));
        if from.speaker == Some(Role::Assistant) {
            let mut block = Block {
                assistant: speaker_index,
                ..Block::default()
            };
            for (ordinal, (id, answered)) in from.calls.into_iter().enumerate() {
                walk.used.entry(id.clone()).or_insert(None);
                if answered {
                    block.answered.entry(id).or_insert(None);
                } else {
                    block.add(ordinal, id);
                }
            }
            walk.block = Some(block);
        }
        walk
    }

    /// Where a later walk resumes from the end of what this one walked: what [`Walk::resume`]
    /// takes, so `Walk::resume(w.resume_point())` decides every next message as `w` does.
    /// `taken` stays empty (the store finds reused ids by index). The open block's calls come
    /// pending first, in part order, then the answered ids, sorted.
    pub fn resume_point(&self) -> Resume {
        let mut calls = Vec::new();
        if let (Some((_, Role::Assistant)), Some(block)) = (self.speaker, self.block.as_ref()) {
            calls.extend(block.pending().into_iter().map(|id| (id, false)));
            let mut answered: Vec<&String> = block.answered.keys().collect();
            answered.sort_unstable();
            calls.extend(answered.into_iter().map(|id| (id.clone(), true)));
        }
        Resume {
            messages: self.walked(),
            speaker: self.speaker.map(|(_, role)| role),
            calls,
            taken: Vec::new(),
        }
    }

    /// The classes of the walked messages, in order (from the first message fed).
    pub fn classes(&self) -> &[MessageClass] {
        &self.classes
    }

    /// The class of the message at `index` (an index of the walked list).
    pub fn class(&self, index: usize) -> Option<&MessageClass> {
        index
            .checked_sub(self.base)
            .and_then(|i| self.classes.get(i))
    }

    /// How many messages were walked, counting those stored before a resumed walk.
    pub fn walked(&self) -> usize {
        self.base + self.classes.len()
    }

    /// Ids of the calls still waiting for a result, in part order.
    pub fn pending(&self) -> Vec<String> {
        self.block.as_ref().map_or_else(Vec::new, Block::pending)
    }

    /// True when some call is still waiting for a result: [`Walk::pending`] is not empty.
    /// Constant time, where `pending` lists the whole open block.
    pub fn has_pending(&self) -> bool {
        self.block.as_ref().is_some_and(|b| b.open_count > 0)
    }

    /// True when a result for `id` in a tool message now would answer an open call.
    pub fn would_answer(&self, id: &str) -> bool {
        self.block
            .as_ref()
            .is_some_and(|b| b.open.get(id).is_some_and(|q| !q.is_empty()))
    }

    /// True when the last user-or-assistant message is an assistant message.
    pub fn after_assistant(&self) -> bool {
        matches!(self.speaker, Some((_, Role::Assistant)))
    }

    /// Classifies the next message.
    pub fn feed(&mut self, role: Role, parts: &[Part]) -> Fed {
        let index = self.walked();
        let mut class = MessageClass {
            parts: Vec::with_capacity(parts.len()),
            in_block_of: None,
            splits_pair: false,
        };
        let mut fed = Fed::default();
        match role {
            Role::Tool | Role::System => self.feed_tool_or_system(role, parts, index, &mut class),
            Role::User => fed.closed_unanswered = self.feed_user(parts, index, &mut class),
            Role::Assistant => {
                fed.closed_unanswered = self.feed_assistant(parts, index, &mut class);
            }
        }
        self.classes.push(class);
        fed
    }

    /// Classifies the parts of a tool or system message at `index` into `class`: a result in
    /// a tool message answers its call, one in a system message is only weighed.
    fn feed_tool_or_system(
        &mut self,
        role: Role,
        parts: &[Part],
        index: usize,
        class: &mut MessageClass,
    ) {
        class.in_block_of = match self.speaker {
            Some((i, Role::Assistant)) => Some(i),
            _ => None,
        };
        class.splits_pair =
            role == Role::System && self.block.as_ref().is_some_and(|b| b.open_count > 0);
        for (ordinal, part) in parts.iter().enumerate() {
            let at = At {
                message: index,
                part: ordinal,
            };
            let c = match part {
                Part::ToolResult { tool_use_id, .. } if role == Role::Tool => {
                    PartClass::Result(self.answer(tool_use_id, at, false))
                }
                Part::ToolResult { tool_use_id, .. } => PartClass::Result(self.peek(tool_use_id)),
                _ => self.plain(role, part, at),
            };
            class.parts.push(c);
        }
    }

    /// Classifies the parts of a user message at `index` into `class`, then closes the open
    /// block. Returns the ids of the calls the close left unanswered.
    fn feed_user(&mut self, parts: &[Part], index: usize, class: &mut MessageClass) -> Vec<String> {
        // Results in a user message claim the calls before it, as if they stood in a
        // tool message just before it; then the user message closes the block.
        for (ordinal, part) in parts.iter().enumerate() {
            let at = At {
                message: index,
                part: ordinal,
            };
            let c = match part {
                Part::ToolResult { tool_use_id, .. } => {
                    PartClass::Result(self.answer(tool_use_id, at, true))
                }
                _ => self.plain(Role::User, part, at),
            };
            class.parts.push(c);
        }
        let closed_unanswered = self.close();
        self.speaker = Some((index, Role::User));
        closed_unanswered
    }

    /// Classifies the parts of an assistant message at `index` into `class`: closes the open
    /// block, opens this message's block with its calls, and pairs its server calls with
    /// their results in place. Returns the ids of the calls the close left unanswered.
    fn feed_assistant(
        &mut self,
        parts: &[Part],
        index: usize,
        class: &mut MessageClass,
    ) -> Vec<String> {
        // Results misplaced here are weighed against the block this message closes.
        let results: Vec<PartClass> = parts
            .iter()
            .map(|part| match part {
                Part::ToolResult { tool_use_id, .. } => PartClass::Result(self.peek(tool_use_id)),
                _ => PartClass::Content,
            })
            .collect();
        let closed_unanswered = self.close();
        self.speaker = Some((index, Role::Assistant));
        self.block = Some(Block {
            assistant: index,
            ..Block::default()
        });
        for (ordinal, (part, result)) in parts.iter().zip(results).enumerate() {
            let at = At {
                message: index,
                part: ordinal,
            };
            let c = match part {
                Part::ToolUse { id, .. } => self.open_call(id, at),
                Part::ToolResult { .. } => result,
                Part::ServerToolUse { .. } | Part::ServerToolResult { .. } => {
                    match self.block.as_mut() {
                        Some(block) => server_part(block, part, at),
                        None => PartClass::Content,
                    }
                }
                _ => PartClass::Content,
            };
            class.parts.push(c);
        }
        answer_server_calls(class, index);
        closed_unanswered
    }

    /// Adds parts to the assistant message whose tool block is open (a log that writes one
    /// line per content block, and may interleave a message's calls with the results of its
    /// earlier calls). Returns `false`, changing nothing, when no such message was walked.
    pub fn extend_assistant(&mut self, parts: &[Part]) -> bool {
        let Some(index) = self.block.as_ref().map(|b| b.assistant) else {
            return false;
        };
        let Some(slot) = index.checked_sub(self.base) else {
            return false;
        };
        let start = match self.classes.get(slot) {
            Some(class) => class.parts.len(),
            None => return false,
        };
        for (offset, part) in parts.iter().enumerate() {
            let at = At {
                message: index,
                part: start + offset,
            };
            let c = match part {
                Part::ToolUse { id, .. } => self.open_call(id, at),
                Part::ToolResult { tool_use_id, .. } => PartClass::Result(self.peek(tool_use_id)),
                Part::ServerToolUse { .. } | Part::ServerToolResult { .. } => {
                    match self.block.as_mut() {
                        Some(block) => server_part(block, part, at),
                        None => PartClass::Misplaced,
                    }
                }
                _ => PartClass::Content,
            };
            if let PartClass::ServerResult { call: Some(call) } = c {
                if let Some(PartClass::ServerCall(state)) =
                    self.classes[slot].parts.get_mut(call.part)
                {
                    *state = ServerCallState::Answered { by: at };
                }
            }
            self.classes[slot].parts.push(c);
        }
        true
    }

    /// The index of the assistant message whose tool block is open, if any.
    pub fn open_assistant(&self) -> Option<usize> {
        self.block.as_ref().map(|b| b.assistant)
    }

    /// A call of the assistant message whose block is open: pending until answered, unless
    /// it has no id (then nothing can answer it).
    fn open_call(&mut self, id: &str, at: At) -> PartClass {
        let id_state = self.use_id(id, at);
        let state = match self.block.as_mut() {
            Some(block) if !id.is_empty() => {
                block.add(at.part, id.to_owned());
                CallState::Pending
            }
            _ => CallState::Unanswerable,
        };
        PartClass::Call {
            id: id_state,
            state,
        }
    }

    fn plain(&mut self, role: Role, part: &Part, at: At) -> PartClass {
        match part {
            Part::ToolUse { id, .. } => PartClass::Call {
                id: self.use_id(id, at),
                state: CallState::Unanswerable,
            },
            Part::Reasoning { .. }
            | Part::RedactedReasoning { .. }
            | Part::ServerToolUse { .. }
            | Part::ServerToolResult { .. }
                if role != Role::Assistant =>
            {
                PartClass::Misplaced
            }
            _ => PartClass::Content,
        }
    }

    fn use_id(&mut self, id: &str, at: At) -> IdState {
        if id.is_empty() {
            return IdState::Missing;
        }
        match self.used.get(id) {
            Some(first) => IdState::Repeated { first: *first },
            None => {
                self.used.insert(id.to_owned(), Some(at));
                IdState::Fresh
            }
        }
    }

    /// A result in a tool (or user) message: takes the first open call with its id.
    fn answer(&mut self, id: &str, at: At, from_user: bool) -> ResultState {
        let state = self.peek(id);
        let ResultState::WouldAnswer { call } = state else {
            return state;
        };
        let Some(block) = self.block.as_mut() else {
            return state;
        };
        if let Some(ordinal) = block.take(id, Some(at)) {
            let call_at = (block.assistant >= self.base).then_some(At {
                message: block.assistant,
                part: ordinal,
            });
            if let Some(call_at) = call_at {
                let new_state = if from_user {
                    CallState::AnsweredFromUser { by: at }
                } else {
                    CallState::Answered { by: at }
                };
                self.set_call(call_at, new_state);
            }
        }
        ResultState::Answers { call }
    }

    /// What a result for `id` would be now, without taking the call.
    fn peek(&self, id: &str) -> ResultState {
        if id.is_empty() {
            return ResultState::Orphan(OrphanWhy::NoId);
        }
        match (self.speaker, self.block.as_ref()) {
            (None, _) => ResultState::Orphan(OrphanWhy::NothingBefore),
            (Some((speaker, Role::User)), _) | (Some((speaker, _)), None) => {
                ResultState::Orphan(OrphanWhy::NoAssistantBefore { speaker })
            }
            (Some(_), Some(block)) => match block.open.get(id).and_then(|q| q.front()) {
                Some(&ordinal) => ResultState::WouldAnswer {
                    call: (block.assistant >= self.base).then_some(At {
                        message: block.assistant,
                        part: ordinal,
                    }),
                },
                None => match block.answered.get(id) {
                    Some(first) => {
                        ResultState::Orphan(OrphanWhy::AlreadyAnswered { first: *first })
                    }
                    None => ResultState::Orphan(OrphanWhy::NotCalled {
                        assistant: block.assistant,
                    }),
                },
            },
        }
    }

    /// Ends the open block: its unanswered calls are unanswered for good.
    fn close(&mut self) -> Vec<String> {
        let Some(block) = self.block.take() else {
            return Vec::new();
        };
        let assistant = block.assistant;
        if assistant >= self.base {
            for &ordinal in block.server_open.values().flatten() {
                let at = At {
                    message: assistant,
                    part: ordinal,
                };
                if let Some(PartClass::ServerCall(state)) = self
                    .classes
                    .get_mut(assistant - self.base)
                    .and_then(|m| m.parts.get_mut(at.part))
                {
                    *state = ServerCallState::Unanswered;
                }
            }
        }
        let mut closed = Vec::new();
        for (ordinal, id, open) in block.order {
            if !open {
                continue;
            }
            if assistant >= self.base {
                let at = At {
                    message: assistant,
                    part: ordinal,
                };
                self.set_call(at, CallState::Unanswered);
            }
            closed.push(id);
        }
        closed
    }

    fn set_call(&mut self, at: At, new_state: CallState) {
        let Some(class) = at
            .message
            .checked_sub(self.base)
            .and_then(|i| self.classes.get_mut(i))
            .and_then(|m| m.parts.get_mut(at.part))
        else {
            return;
        };
        if let PartClass::Call { state, .. } = class {
            *state = new_state;
        }
    }
}

/// Marks each server call in `class` (the assistant message at `index`) that a later part of
/// the same message answers: a result answers its call in place.
fn answer_server_calls(class: &mut MessageClass, index: usize) {
    let answered: Vec<(usize, At)> = class
        .parts
        .iter()
        .enumerate()
        .filter_map(|(ordinal, c)| match c {
            PartClass::ServerResult { call: Some(call) } => Some((
                call.part,
                At {
                    message: index,
                    part: ordinal,
                },
            )),
            _ => None,
        })
        .collect();
    for (call, by) in answered {
        class.parts[call] = PartClass::ServerCall(ServerCallState::Answered { by });
    }
}

/// Classifies a server tool part of the assistant message whose block is `block`.
fn server_part(block: &mut Block, part: &Part, at: At) -> PartClass {
    match part {
        // Without an id nothing can pair with it: never pending, never answered.
        Part::ServerToolUse { id, .. } if id.is_empty() => {
            PartClass::ServerCall(ServerCallState::Unanswered)
        }
        Part::ServerToolResult { tool_use_id, .. } if tool_use_id.is_empty() => {
            PartClass::ServerResult { call: None }
        }
        Part::ServerToolUse { id, .. } => {
            block
                .server_open
                .entry(id.clone())
                .or_default()
                .push_back(at.part);
            PartClass::ServerCall(ServerCallState::Pending)
        }
        Part::ServerToolResult { tool_use_id, .. } => PartClass::ServerResult {
            call: block
                .server_open
                .get_mut(tool_use_id)
                .and_then(VecDeque::pop_front)
                .map(|part| At {
                    message: at.message,
                    part,
                }),
        },
        _ => PartClass::Content,
    }
}

impl Block {
    fn add(&mut self, ordinal: usize, id: String) {
        self.slot.insert(ordinal, self.order.len());
        self.order.push((ordinal, id.clone(), true));
        self.open.entry(id).or_default().push_back(ordinal);
        self.open_count += 1;
    }

    /// Takes the first open call with `id`; returns its ordinal.
    fn take(&mut self, id: &str, by: Option<At>) -> Option<usize> {
        let queue = self.open.get_mut(id)?;
        let ordinal = queue.pop_front()?;
        if queue.is_empty() {
            self.open.remove(id);
        }
        self.answered.entry(id.to_owned()).or_insert(by);
        if let Some(&slot) = self.slot.get(&ordinal) {
            self.order[slot].2 = false;
        }
        self.open_count -= 1;
        Some(ordinal)
    }

    fn pending(&self) -> Vec<String> {
        self.order
            .iter()
            .filter(|(_, _, open)| *open)
            .map(|(_, id, _)| id.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use Role::*;

    fn call(id: &str) -> Part {
        Part::tool_use(id, "bash", json!({}))
    }
    fn result(id: &str) -> Part {
        Part::tool_result(id, "ok")
    }
    fn walk(messages: Vec<(Role, Vec<Part>)>) -> Walk {
        let mut w = Walk::default();
        for (role, parts) in &messages {
            w.feed(*role, parts);
        }
        w
    }
    fn at(message: usize, part: usize) -> At {
        At { message, part }
    }

    #[test]
    fn parallel_calls_are_answered_in_any_order_and_systems_do_not_break_the_block() {
        let w = walk(vec![
            (User, vec![Part::text("hi")]),
            (Assistant, vec![call("a"), call("b")]),
            (Tool, vec![result("b")]),
            (System, vec![Part::text("note")]),
            (Tool, vec![result("a")]),
        ]);
        let c = w.classes();
        assert_eq!(
            c[1].parts[0],
            PartClass::Call {
                id: IdState::Fresh,
                state: CallState::Answered { by: at(4, 0) }
            }
        );
        assert_eq!(
            c[2].parts[0],
            PartClass::Result(ResultState::Answers {
                call: Some(at(1, 1))
            })
        );
        assert!(c[3].splits_pair);
        assert_eq!(c[3].in_block_of, Some(1));
        assert!(w.pending().is_empty());
    }

    #[test]
    fn a_second_answer_is_an_orphan() {
        let w = walk(vec![
            (Assistant, vec![call("a")]),
            (Tool, vec![result("a")]),
            (Tool, vec![result("a")]),
        ]);
        assert_eq!(
            w.classes()[2].parts[0],
            PartClass::Result(ResultState::Orphan(OrphanWhy::AlreadyAnswered {
                first: Some(at(1, 0))
            }))
        );
    }

    #[test]
    fn two_calls_with_one_id_take_their_answers_in_order() {
        let w = walk(vec![
            (Assistant, vec![call("a"), call("a")]),
            (Tool, vec![result("a"), result("a")]),
        ]);
        let c = w.classes();
        assert_eq!(
            c[0].parts[1],
            PartClass::Call {
                id: IdState::Repeated {
                    first: Some(at(0, 0))
                },
                state: CallState::Answered { by: at(1, 1) }
            }
        );
    }

    #[test]
    fn a_user_message_closes_the_block_and_its_results_are_answers_from_the_user() {
        let w = walk(vec![
            (Assistant, vec![call("a"), call("b")]),
            (User, vec![result("a"), Part::text("and")]),
        ]);
        let c = w.classes();
        assert_eq!(
            c[0].parts[0],
            PartClass::Call {
                id: IdState::Fresh,
                state: CallState::AnsweredFromUser { by: at(1, 0) }
            }
        );
        assert_eq!(
            c[0].parts[1],
            PartClass::Call {
                id: IdState::Fresh,
                state: CallState::Unanswered
            }
        );
    }

    #[test]
    fn pending_calls_stay_pending_and_id_less_calls_are_unanswerable() {
        let w = walk(vec![(Assistant, vec![call(""), call("a")])]);
        assert_eq!(
            w.classes()[0].parts[0],
            PartClass::Call {
                id: IdState::Missing,
                state: CallState::Unanswerable
            }
        );
        assert_eq!(w.pending(), ["a"]);
    }

    #[test]
    fn a_resumed_walk_knows_the_open_block_and_taken_ids() {
        let mut w = Walk::resume(Resume {
            messages: 2,
            speaker: Some(Assistant),
            calls: vec![("a".into(), true), ("b".into(), false)],
            taken: vec!["x".into()],
        });
        assert_eq!(w.pending(), ["b"]);
        w.feed(Tool, &[result("b")]);
        assert!(w.pending().is_empty());
        let fed = w.feed(Assistant, &[call("x")]);
        assert!(fed.closed_unanswered.is_empty());
        assert_eq!(
            w.class(3).map(|c| c.parts[0]),
            Some(PartClass::Call {
                id: IdState::Repeated { first: None },
                state: CallState::Pending
            })
        );
    }

    #[test]
    fn twenty_thousand_parallel_calls_walk_in_linear_time() {
        // Not a timing assertion: a quadratic walk would take minutes here in a debug build.
        let n = 20_000;
        let calls: Vec<Part> = (0..n).map(|i| call(&format!("c{i}"))).collect();
        let mut w = Walk::default();
        w.feed(Assistant, &calls);
        for i in (0..n).rev() {
            w.feed(Tool, &[result(&format!("c{i}"))]);
        }
        assert!(w.pending().is_empty());
        let same: Vec<Part> = (0..n).map(|_| call("same")).collect();
        w.feed(Assistant, &same);
        w.feed(Tool, &vec![result("same"); n]);
        assert!(w.pending().is_empty());
    }
}

/// The layers agree because they ask one walk; these properties hold them to it.
#[cfg(test)]
mod agreement {
    use proptest::prelude::*;
    use serde_json::json;

    use crate::history::pairing::check_append;
    use crate::history::rules::{check_session, CheckOptions};
    use crate::history::testing::{history, t0};
    use crate::model::{NewMessage, Part, Role, SessionId};

    use super::Walk;

    /// Messages over a small alphabet of ids (with the empty id), healthy and broken.
    /// Left out on purpose: what only the write path's input validation refuses and no rule
    /// of the contract names (an empty message, a tool message without any result, reasoning
    /// outside an assistant message, a nameless tool): the loader drops or fills those.
    fn arb_messages() -> impl Strategy<Value = Vec<(Role, Vec<Part>)>> {
        let id = prop::sample::select(vec!["a", "b", "c", ""]);
        let call = id
            .clone()
            .prop_map(|id| Part::tool_use(id, "bash", json!({})));
        let result = id.prop_map(|id| Part::tool_result(id, "ok"));
        let content = prop_oneof![Just(Part::text("t")), call.clone(), result.clone()];
        let message = prop_oneof![
            prop::collection::vec(content.clone(), 1..4).prop_map(|p| (Role::User, p)),
            prop::collection::vec(content.clone(), 1..4).prop_map(|p| (Role::System, p)),
            prop::collection::vec(
                prop_oneof![content.clone(), Just(Part::reasoning("r", None))],
                1..4
            )
            .prop_map(|p| (Role::Assistant, p)),
            (result, prop::collection::vec(content, 0..3)).prop_map(|(first, mut rest)| {
                rest.insert(0, first);
                (Role::Tool, rest)
            }),
        ];
        prop::collection::vec(message, 0..10)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn the_write_path_accepts_a_list_exactly_when_the_check_calls_it_healthy(
            messages in arb_messages()
        ) {
            let mut walk = Walk::default();
            let accepted = messages.iter().all(|(role, parts)| {
                check_append(&mut walk, &NewMessage::new(*role, parts.clone())).is_ok()
            });
            let stored = history(messages);
            let violations = check_session(&SessionId::new("s"), &stored, &CheckOptions::at(t0()));
            prop_assert_eq!(accepted, violations.is_empty(), "{:#?}", violations);
        }
    }
}
