//! Mend planning: what to change in a broken session so that it passes every rule of
//! [`super::rules`], without deleting a message or a part.
//!
//! [`plan_mend`] returns the session as it should be ([`MendPlan::messages`], every original
//! part exactly once, plus new tombstone and split-off messages) and the list of
//! [`Change`]s that lead there, one per message or part touched, each with the rule it
//! mends and the before and after values as JSON for the repair log. The storage layer
//! applies the plan in one transaction; this module only decides.
//!
//! The phases run in an order where no later phase can undo an earlier one:
//! 1. tool_results in non-`tool` messages: a `user` message is split into a `tool` message
//!    (the results its assistant message asked for) followed by a `user` message (the rest,
//!    if any); results nobody asked for become text;
//! 2. a reused tool_use id is renamed in the later tool_use and in its answer;
//! 3. orphan tool_results in `tool` messages become text that says what they were;
//! 4. unanswered calls that are not pending get a tombstone `tool` message directly after
//!    their tool block (a call outside an assistant message, which nothing can answer,
//!    becomes text instead);
//! 5. compaction: the visible tail starts at the start of the turn of the first visible
//!    message (a split turn is un-compacted, a gap is closed by un-compacting what follows);
//! 6. `seq` shifts after inserted messages, and turn indexes are recomputed.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::blank::is_blank;
use super::grammar::{CallState, IdState, PartClass, ResultState, Walk};
use super::rules::{turn_spans, CheckOptions, HealthRule};
use super::texts::{self, Renamer};
use super::turns::turn_indexes;
use crate::model::{Message, Part, Role};

/// A message of the mended session: one already stored, or one the mend adds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MessageRef {
    /// The stored message with this `messages.id`.
    Existing(i64),
    /// The n-th message the plan adds (numbered from 0 in the order they are created).
    New(usize),
}

/// A part of the mended session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PartRef {
    /// A stored part: position `index` in the parts of stored message `message_id`.
    Existing {
        /// `messages.id` of the message it was loaded with.
        message_id: i64,
        /// Its position in that message's parts (ordinal order).
        index: usize,
    },
    /// Position `index` of new message `message` ([`MessageRef::New`]).
    New {
        /// The new message's number.
        message: usize,
        /// Position in its parts.
        index: usize,
    },
}

/// What a change does, as recorded in the repair log's `action` column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// `compacted` 1 -> 0.
    Uncompact,
    /// The message's role changed (a `user` message holding tool_results became `tool`).
    ChangeRole,
    /// A new message holding what a split message kept besides its tool_results.
    SplitOff,
    /// A part moved to another message or position.
    MovePart,
    /// A tool_result became a text part.
    ResultToText,
    /// A tool_use outside an assistant message became a text part.
    UseToText,
    /// A tool_use id (in a tool_use or in the tool_result answering it) was renamed.
    RenameToolUseId,
    /// A tombstone tool_result was added.
    Tombstone,
    /// `seq` moved to make room for inserted messages.
    ShiftSeq,
    /// `turn_index` recomputed.
    SetTurnIndex,
}

impl Action {
    /// The value stored in the repair log.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Uncompact => "uncompact",
            Action::ChangeRole => "change_role",
            Action::SplitOff => "split_off",
            Action::MovePart => "move_part",
            Action::ResultToText => "result_to_text",
            Action::UseToText => "use_to_text",
            Action::RenameToolUseId => "rename_tool_use_id",
            Action::Tombstone => "tombstone",
            Action::ShiftSeq => "shift_seq",
            Action::SetTurnIndex => "set_turn_index",
        }
    }
}

/// One change of a mend: one row of the repair log.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    /// The rule it mends.
    pub rule: HealthRule,
    /// What it does.
    pub action: Action,
    /// The message changed (or added).
    pub message: MessageRef,
    /// The part changed (or added), if the change is about a part.
    pub part: Option<PartRef>,
    /// The values before, as JSON (`None` for something added).
    pub before: Option<Value>,
    /// The values after, as JSON.
    pub after: Value,
}

/// One part of the mended session.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedPart {
    /// Where it comes from.
    pub origin: PartRef,
    /// Its content after the mend.
    pub part: Part,
}

/// One message of the mended session.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedMessage {
    /// Where it comes from.
    pub origin: MessageRef,
    /// Its `seq` after the mend.
    pub seq: i64,
    /// Its `turn_index` after the mend.
    pub turn_index: i64,
    /// Its role after the mend.
    pub role: Role,
    /// Its `compacted` flag after the mend.
    pub compacted: bool,
    /// When it was written (new messages: the mend's `now`, or the message split from).
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// Its parts in ordinal order.
    pub parts: Vec<PlannedPart>,
}

/// A session after the mend and the changes that lead there.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct MendPlan {
    /// The whole session as it should be, in `seq` order.
    pub messages: Vec<PlannedMessage>,
    /// What changes, in the order the phases decided it.
    pub changes: Vec<Change>,
}

/// The working copy: messages with where each one and each of its parts came from.
struct Work {
    messages: Vec<Message>,
    origins: Vec<MessageRef>,
    part_origins: Vec<Vec<PartRef>>,
    /// For each new message, the rule it was added for.
    new_rules: Vec<HealthRule>,
    changes: Vec<Change>,
}

impl Work {
    fn change(
        &mut self,
        rule: HealthRule,
        action: Action,
        at: usize,
        part: Option<usize>,
        before: Option<Value>,
        after: Value,
    ) {
        let part = part.map(|p| self.part_origins[at][p]);
        self.changes.push(Change {
            rule,
            action,
            message: self.origins[at],
            part,
            before,
            after,
        });
    }

    /// Inserts a new message at `at`; its parts are new parts.
    fn insert(&mut self, at: usize, message: Message, rule: HealthRule) -> MessageRef {
        let number = self.new_rules.len();
        self.new_rules.push(rule);
        let origin = MessageRef::New(number);
        let part_origins = (0..message.parts.len())
            .map(|index| PartRef::New {
                message: number,
                index,
            })
            .collect();
        self.messages.insert(at, message);
        self.origins.insert(at, origin);
        self.part_origins.insert(at, part_origins);
        origin
    }

    /// Turns the tool_result at (`at`, `part`) into a text part that says what it was.
    fn result_to_text(&mut self, rule: HealthRule, at: usize, part: usize) {
        let old = self.messages[at].parts[part].clone();
        let Part::ToolResult {
            tool_use_id,
            content,
            is_error,
            provider_metadata,
            ..
        } = &old
        else {
            return;
        };
        let text = texts::describe(&old);
        self.messages[at].parts[part] = Part::Text {
            text: text.clone(),
            provider_metadata: provider_metadata.clone(),
        };
        self.change(
            rule,
            Action::ResultToText,
            at,
            Some(part),
            Some(json!({"kind": "tool_result", "tool_use_id": tool_use_id, "is_error": is_error, "text": content})),
            json!({"kind": "text", "text": text}),
        );
    }
}

/// Plans the mend of one session (messages in `seq` order, parts in ordinal order).
///
/// `options.now` stamps the messages the mend adds, and with `options.stale_after` decides
/// which pending calls are old enough to tombstone. A session that passes
/// [`super::rules::check_session`] gets an empty plan.
pub fn plan_mend(messages: &[Message], options: &CheckOptions) -> MendPlan {
    let mut work = Work {
        origins: messages
            .iter()
            .map(|m| MessageRef::Existing(m.id))
            .collect(),
        part_origins: messages
            .iter()
            .map(|m| {
                (0..m.parts.len())
                    .map(|index| PartRef::Existing {
                        message_id: m.id,
                        index,
                    })
                    .collect()
            })
            .collect(),
        messages: messages.to_vec(),
        new_rules: Vec::new(),
        changes: Vec::new(),
    };
    mend_pairing(&mut work, options);
    close_compaction(&mut work);
    renumber(work, messages)
}

/// Phases 1 to 4, from one walk of the grammar: every pairing problem the walk classifies is
/// mended by the policy "mend" (ARCHITECTURE.md, the policy table).
fn mend_pairing(work: &mut Work, options: &CheckOptions) {
    let walk = Walk::of(&work.messages);
    let classes = walk.classes().to_vec();
    let mut renamer = Renamer::with_taken(work.messages.iter().flat_map(|m| {
        m.parts
            .iter()
            .filter_map(|p| p.tool_use_id())
            .map(str::to_owned)
    }));
    // Where each assistant message's tool block ends (its tombstones go right after), and
    // which parts of each user message answer calls (they move into a tool message).
    let mut block_end: HashMap<usize, usize> = HashMap::new();
    let mut claimed: HashMap<usize, Vec<usize>> = HashMap::new();
    for (at, class) in classes.iter().enumerate() {
        match work.messages[at].role {
            Role::Assistant => {
                block_end.insert(at, at);
            }
            Role::Tool => {
                if let Some(assistant) = class.in_block_of {
                    block_end.insert(assistant, at);
                }
            }
            Role::User => {
                for (part, c) in class.parts.iter().enumerate() {
                    if let PartClass::Result(ResultState::Answers { call: Some(call) }) = c {
                        block_end.insert(call.message, at);
                        claimed.entry(at).or_default().push(part);
                    }
                }
            }
            Role::System => {}
        }
    }
    let mut tombstones: HashMap<usize, Vec<String>> = HashMap::new();
    for (at, class) in classes.iter().enumerate() {
        let role = work.messages[at].role;
        for (part, c) in class.parts.iter().enumerate() {
            match *c {
                PartClass::Call { .. } if role != Role::Assistant => uses_to_text(work, at, part),
                PartClass::Call { id, state } => {
                    if id != IdState::Fresh {
                        let old = work.messages[at].parts[part]
                            .call_id()
                            .unwrap_or_default()
                            .to_owned();
                        let fresh = renamer.fresh(&old);
                        rename(work, at, part, &old, &fresh);
                        if let CallState::Answered { by } | CallState::AnsweredFromUser { by } =
                            state
                        {
                            rename(work, by.message, by.part, &old, &fresh);
                        }
                    }
                    let stale = matches!(state, CallState::Pending)
                        && options.is_stale(work.messages[at].created_at);
                    if matches!(state, CallState::Unanswered | CallState::Unanswerable) || stale {
                        let id = work.messages[at].parts[part].call_id().unwrap_or_default();
                        let after = block_end.get(&at).copied().unwrap_or(at);
                        tombstones.entry(after).or_default().push(id.to_owned());
                    }
                }
                PartClass::Result(ResultState::Orphan(_)) => {
                    work.result_to_text(HealthRule::OrphanToolResult, at, part);
                }
                PartClass::Result(ResultState::WouldAnswer { .. }) => {
                    work.result_to_text(HealthRule::MisplacedToolResult, at, part);
                }
                PartClass::Result(ResultState::Answers { .. }) if role == Role::System => {
                    work.result_to_text(HealthRule::MisplacedToolResult, at, part);
                }
                _ => {}
            }
        }
    }
    if claimed.is_empty() && tombstones.is_empty() {
        return;
    }
    rebuild(work, &claimed, &tombstones, options);
}

/// Splits the user messages that answer calls (a `tool` message with the results, then the
/// rest as a `user` message) and inserts the tombstone messages, in one pass.
fn rebuild(
    work: &mut Work,
    claimed: &HashMap<usize, Vec<usize>>,
    tombstones: &HashMap<usize, Vec<String>>,
    options: &CheckOptions,
) {
    let old_messages = std::mem::take(&mut work.messages);
    let old_origins = std::mem::take(&mut work.origins);
    let old_part_origins = std::mem::take(&mut work.part_origins);
    let text = texts::tombstone(texts::REPAIR_REASON);
    for (at, ((message, origin), part_origins)) in old_messages
        .into_iter()
        .zip(old_origins)
        .zip(old_part_origins)
        .enumerate()
    {
        let rest = match claimed.get(&at) {
            Some(moved) => push_claimed(work, message, origin, part_origins, moved),
            None => {
                work.messages.push(message);
                work.origins.push(origin);
                work.part_origins.push(part_origins);
                None
            }
        };
        let last = work.messages.len() - 1;
        if let Some(ids) = tombstones.get(&at) {
            push_tombstone(work, last, ids, &text, options);
        }
        if let Some((split, origins)) = rest {
            push_split_off(work, last, split, origins);
        }
    }
}

/// Pushes a user message whose parts `moved` answer calls as a `tool` message. When the
/// parts that stay are not all blank text, the pushed message keeps only the moved parts and
/// the rest comes back as a `user` message (with its part origins) to insert after.
fn push_claimed(
    work: &mut Work,
    mut message: Message,
    origin: MessageRef,
    part_origins: Vec<PartRef>,
    moved: &[usize],
) -> Option<(Message, Vec<PartRef>)> {
    message.role = Role::Tool;
    let mut is_moved = vec![false; message.parts.len()];
    for &i in moved {
        is_moved[i] = true;
    }
    let stays: Vec<usize> = (0..message.parts.len()).filter(|&i| !is_moved[i]).collect();
    let rest_is_blank = stays
        .iter()
        .all(|&i| matches!(&message.parts[i], Part::Text { text, .. } if is_blank(text)));
    work.messages.push(message.clone());
    work.origins.push(origin);
    work.part_origins.push(part_origins.clone());
    let index = work.messages.len() - 1;
    work.change(
        HealthRule::MisplacedToolResult,
        Action::ChangeRole,
        index,
        None,
        Some(json!({"role": "user"})),
        json!({"role": "tool"}),
    );
    if rest_is_blank {
        return None;
    }
    work.messages[index].parts = moved.iter().map(|&i| message.parts[i].clone()).collect();
    work.part_origins[index] = moved.iter().map(|&i| part_origins[i]).collect();
    let split = Message {
        id: 0,
        role: Role::User,
        parts: stays.iter().map(|&i| message.parts[i].clone()).collect(),
        ..message
    };
    let origins = stays.iter().map(|&i| part_origins[i]).collect();
    Some((split, origins))
}

/// Inserts, after the message at `last`, one `tool` message answering each call in `ids`
/// with the tombstone `text`, and records a change per answer.
fn push_tombstone(
    work: &mut Work,
    last: usize,
    ids: &[String],
    text: &str,
    options: &CheckOptions,
) {
    let tombstone = Message {
        id: 0,
        seq: work.messages[last].seq,
        turn_index: work.messages[last].turn_index,
        role: Role::Tool,
        compacted: work.messages[last].compacted,
        created_at: options.now,
        model: None,
        state: crate::model::MessageState::Complete,
        parts: ids
            .iter()
            .map(|id| Part::tool_error(id.clone(), text))
            .collect(),
    };
    let index = work.messages.len();
    work.insert(index, tombstone, HealthRule::DanglingToolUse);
    for (part, id) in ids.iter().enumerate() {
        work.change(
            HealthRule::DanglingToolUse,
            Action::Tombstone,
            index,
            Some(part),
            None,
            json!({"kind": "tool_result", "tool_use_id": id, "is_error": true, "text": text}),
        );
    }
}

/// Appends the `user` message split off the message at `last`, and records the split and
/// where each of its parts came from.
fn push_split_off(work: &mut Work, last: usize, split: Message, origins: Vec<PartRef>) {
    let from = work.origins[last];
    let count = split.parts.len();
    let index = work.messages.len();
    work.insert(index, split, HealthRule::MisplacedToolResult);
    let source_id = match from {
        MessageRef::Existing(id) => json!(id),
        MessageRef::New(_) => Value::Null,
    };
    work.part_origins[index] = origins;
    work.change(
        HealthRule::MisplacedToolResult,
        Action::SplitOff,
        index,
        None,
        None,
        json!({"role": "user", "split_from": source_id, "parts": count}),
    );
    for position in 0..count {
        let before = match work.part_origins[index][position] {
            PartRef::Existing { message_id, index } => {
                json!({"message_id": message_id, "position": index})
            }
            PartRef::New { .. } => Value::Null,
        };
        work.change(
            HealthRule::MisplacedToolResult,
            Action::MovePart,
            index,
            Some(position),
            Some(before),
            json!({"message": "split_off", "position": position}),
        );
    }
}

fn rename(work: &mut Work, at: usize, index: usize, from: &str, to: &str) {
    match &mut work.messages[at].parts[index] {
        Part::ToolUse { id, .. } => *id = to.to_owned(),
        Part::ToolResult { tool_use_id, .. } => *tool_use_id = to.to_owned(),
        _ => return,
    }
    work.change(
        HealthRule::DuplicateToolUseId,
        Action::RenameToolUseId,
        at,
        Some(index),
        Some(json!({"tool_use_id": from})),
        json!({"tool_use_id": to}),
    );
}

/// The tool_use at (`at`, `index`), outside an assistant message, becomes text.
fn uses_to_text(work: &mut Work, at: usize, index: usize) {
    let part = work.messages[at].parts[index].clone();
    let Part::ToolUse {
        id,
        name,
        input,
        provider_metadata,
    } = &part
    else {
        return;
    };
    let text = texts::describe(&part);
    work.messages[at].parts[index] = Part::Text {
        text: text.clone(),
        provider_metadata: provider_metadata.clone(),
    };
    work.change(
        HealthRule::DanglingToolUse,
        Action::UseToText,
        at,
        Some(index),
        Some(json!({"kind": "tool_use", "tool_use_id": id, "tool_name": name, "input": input})),
        json!({"kind": "text", "text": text}),
    );
}

/// Phase 5: compacted turns become a prefix of whole turns; the visible tail only grows.
fn close_compaction(work: &mut Work) {
    let turns = turn_indexes(work.messages.iter().map(|m| m.role));
    let Some(first_visible) = work.messages.iter().position(|m| !m.compacted) else {
        return;
    };
    let spans = turn_spans(&work.messages, &turns);
    let Some(start) = spans
        .iter()
        .find(|s| (s.start..s.end).contains(&first_visible))
        .map(|s| s.start)
    else {
        return;
    };
    for span in spans.iter().filter(|s| s.end > start) {
        let rule = if span.is_split() {
            HealthRule::SplitTurnCompaction
        } else {
            HealthRule::CompactionGap
        };
        for at in span.start.max(start)..span.end {
            if !work.messages[at].compacted {
                continue;
            }
            work.messages[at].compacted = false;
            if matches!(work.origins[at], MessageRef::Existing(_)) {
                work.change(
                    rule,
                    Action::Uncompact,
                    at,
                    None,
                    Some(json!({"compacted": true})),
                    json!({"compacted": false}),
                );
            }
        }
    }
}

/// Phase 6: `seq` after inserted messages, turn indexes, and the plan itself.
fn renumber(mut work: Work, original: &[Message]) -> MendPlan {
    let turns = turn_indexes(work.messages.iter().map(|m| m.role));
    let original_seq: HashMap<i64, i64> = original.iter().map(|m| (m.id, m.seq)).collect();
    let mut shift = 0;
    let mut shift_rule = HealthRule::DanglingToolUse;
    let mut previous: Option<i64> = None;
    let mut planned = Vec::with_capacity(work.messages.len());
    for (at, &turn_index) in turns.iter().enumerate() {
        let seq = match work.origins[at] {
            MessageRef::Existing(id) => {
                let old = original_seq
                    .get(&id)
                    .copied()
                    .unwrap_or(work.messages[at].seq);
                let new = old + shift;
                if new != old {
                    work.change(
                        shift_rule,
                        Action::ShiftSeq,
                        at,
                        None,
                        Some(json!({"seq": old})),
                        json!({"seq": new}),
                    );
                }
                new
            }
            MessageRef::New(number) => {
                shift += 1;
                shift_rule = work.new_rules[number];
                previous.map_or(work.messages[at].seq, |p| p + 1)
            }
        };
        previous = Some(seq);
        if matches!(work.origins[at], MessageRef::Existing(_))
            && work.messages[at].turn_index != turn_index
        {
            let before = work.messages[at].turn_index;
            work.change(
                HealthRule::TurnIndexMismatch,
                Action::SetTurnIndex,
                at,
                None,
                Some(json!({"turn_index": before})),
                json!({"turn_index": turn_index}),
            );
        }
        let message = &work.messages[at];
        planned.push(PlannedMessage {
            origin: work.origins[at],
            seq,
            turn_index,
            role: message.role,
            compacted: message.compacted,
            created_at: message.created_at,
            parts: message
                .parts
                .iter()
                .zip(&work.part_origins[at])
                .map(|(part, origin)| PlannedPart {
                    origin: *origin,
                    part: part.clone(),
                })
                .collect(),
        });
    }
    MendPlan {
        messages: planned,
        changes: work.changes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::rules::check_session;
    use crate::history::rules::tests::{call, result, session, t0, text, three_tool_turn};
    use crate::model::SessionId;
    use proptest::prelude::*;
    use Role::*;

    /// The plan as stored messages (new ones get ids from 10 000).
    fn materialize(plan: &MendPlan) -> Vec<Message> {
        plan.messages
            .iter()
            .map(|m| Message {
                id: match m.origin {
                    MessageRef::Existing(id) => id,
                    MessageRef::New(n) => 10_000 + n as i64,
                },
                seq: m.seq,
                turn_index: m.turn_index,
                role: m.role,
                compacted: m.compacted,
                created_at: m.created_at,
                model: None,
                state: crate::model::MessageState::Complete,
                parts: m.parts.iter().map(|p| p.part.clone()).collect(),
            })
            .collect()
    }

    fn mend(messages: &[Message]) -> (MendPlan, Vec<Message>) {
        let plan = plan_mend(messages, &CheckOptions::at(t0()));
        let after = materialize(&plan);
        (plan, after)
    }

    fn assert_healthy(messages: &[Message]) {
        let left = check_session(&SessionId::new("s"), messages, &CheckOptions::at(t0()));
        assert!(left.is_empty(), "still broken: {left:#?}\n{messages:#?}");
    }

    fn actions(plan: &MendPlan) -> Vec<(HealthRule, Action)> {
        plan.changes.iter().map(|c| (c.rule, c.action)).collect()
    }

    #[test]
    fn a_healthy_session_needs_no_change() {
        let (plan, _) = mend(&three_tool_turn());
        assert!(plan.changes.is_empty());
    }

    #[test]
    fn split_turn_is_uncompacted_back_to_its_start() {
        let mut messages = three_tool_turn();
        for m in &mut messages[..7] {
            m.compacted = true;
        }
        let (plan, after) = mend(&messages);
        assert_healthy(&after);
        // Turn 0 (seq 1-3) stays compacted; the whole three-tool turn becomes visible.
        let flags: Vec<bool> = after.iter().map(|m| m.compacted).collect();
        assert_eq!(&flags[..3], &[true, true, true]);
        assert!(flags[3..].iter().all(|c| !c));
        assert_eq!(
            actions(&plan),
            vec![(HealthRule::SplitTurnCompaction, Action::Uncompact); 4]
        );
    }

    #[test]
    fn tool_only_user_message_with_empty_text_becomes_a_tool_message() {
        let messages = session(vec![
            (User, vec![text("hi")]),
            (Assistant, vec![call("a")]),
            (User, vec![text(""), result("a")]),
            (Assistant, vec![text("done")]),
        ]);
        let (_, after) = mend(&messages);
        assert_healthy(&after);
        assert_eq!(after.len(), 4);
        assert_eq!(after[2].role, Tool);
        assert_eq!(after[2].parts.len(), 2, "the empty text part is kept");
        assert_eq!(after[3].turn_index, 0);
    }

    #[test]
    fn user_message_with_results_and_words_is_split_in_two() {
        let messages = session(vec![
            (User, vec![text("hi")]),
            (Assistant, vec![call("a"), call("b")]),
            (User, vec![result("a"), text("and also this"), result("b")]),
            (Assistant, vec![text("done")]),
        ]);
        let (plan, after) = mend(&messages);
        assert_healthy(&after);
        let roles: Vec<Role> = after.iter().map(|m| m.role).collect();
        assert_eq!(roles, vec![User, Assistant, Tool, User, Assistant]);
        assert_eq!(after[2].parts, vec![result("a"), result("b")]);
        assert_eq!(after[3].parts, vec![text("and also this")]);
        let seqs: Vec<i64> = after.iter().map(|m| m.seq).collect();
        assert_eq!(seqs, vec![1, 2, 3, 4, 5]);
        assert!(plan
            .changes
            .iter()
            .any(|c| c.action == Action::ShiftSeq && c.message == MessageRef::Existing(103)));
    }

    #[test]
    fn dangling_call_mid_history_gets_a_tombstone_after_its_block() {
        let messages = session(vec![
            (User, vec![text("hi")]),
            (Assistant, vec![call("a"), call("b")]),
            (Tool, vec![result("a")]),
            (System, vec![text("note")]),
            (User, vec![text("stop")]),
        ]);
        let (_, after) = mend(&messages);
        assert_healthy(&after);
        assert_eq!(after[3].role, Tool);
        assert_eq!(after[3].parts.len(), 1);
        assert!(
            matches!(&after[3].parts[0], Part::ToolResult { tool_use_id, is_error: true, .. } if tool_use_id == "b")
        );
        assert_eq!(after[4].role, System);
        assert_eq!(after[5].seq, 6);
    }

    #[test]
    fn duplicate_id_is_renamed_with_its_answer() {
        let messages = session(vec![
            (User, vec![text("hi")]),
            (Assistant, vec![call("a")]),
            (Tool, vec![result("a")]),
            (Assistant, vec![call("a"), call("a")]),
            (Tool, vec![result("a"), result("a")]),
        ]);
        let (_, after) = mend(&messages);
        assert_healthy(&after);
        assert_eq!(after[3].parts[0].call_id(), Some("a__2"));
        assert_eq!(after[3].parts[1].call_id(), Some("a__3"));
        assert_eq!(after[4].parts[0].answers(), Some("a__2"));
        assert_eq!(after[4].parts[1].answers(), Some("a__3"));
    }

    #[test]
    fn orphan_after_a_compacted_head_becomes_text() {
        let mut messages = session(vec![
            (User, vec![text("old")]),
            (Assistant, vec![text("old answer")]),
            (User, vec![text("new")]),
            (Tool, vec![result("gone")]),
            (Assistant, vec![text("ok")]),
        ]);
        messages[0].compacted = true;
        messages[1].compacted = true;
        let (plan, after) = mend(&messages);
        assert_healthy(&after);
        assert!(matches!(&after[3].parts[0], Part::Text { text, .. } if text.contains("\"gone\"")));
        assert_eq!(
            actions(&plan),
            vec![(HealthRule::OrphanToolResult, Action::ResultToText)]
        );
    }

    #[test]
    fn a_call_outside_an_assistant_message_becomes_text_even_at_the_end() {
        let messages = session(vec![
            (User, vec![text("hi")]),
            (System, vec![call("s")]),
            (User, vec![text("again")]),
            (System, vec![call("t")]),
        ]);
        let (plan, after) = mend(&messages);
        assert_healthy(&after);
        assert!(matches!(&after[1].parts[0], Part::Text { text, .. } if text.contains("\"s\"")));
        // Not pending either: only an assistant message's call can be.
        assert!(matches!(&after[3].parts[0], Part::Text { text, .. } if text.contains("\"t\"")));
        assert_eq!(
            actions(&plan),
            vec![
                (HealthRule::DanglingToolUse, Action::UseToText),
                (HealthRule::DanglingToolUse, Action::UseToText)
            ]
        );
    }

    fn arb_part() -> impl Strategy<Value = Part> {
        prop_oneof![
            Just(text("t")),
            Just(text("")),
            (0..4u8).prop_map(|i| call(&format!("c{i}"))),
            (0..4u8).prop_map(|i| result(&format!("c{i}"))),
        ]
    }

    fn arb_session() -> impl Strategy<Value = Vec<Message>> {
        let role = prop_oneof![Just(System), Just(User), Just(Assistant), Just(Tool)];
        prop::collection::vec(
            (
                role,
                prop::collection::vec(arb_part(), 1..4),
                any::<bool>(),
                0..3i64,
            ),
            0..14,
        )
        .prop_map(|raw| {
            raw.into_iter()
                .enumerate()
                .map(|(i, (role, parts, compacted, turn))| Message {
                    id: 100 + i as i64,
                    seq: 3 * i as i64 + 1,
                    turn_index: turn,
                    role,
                    compacted,
                    created_at: t0(),
                    model: None,
                    state: crate::model::MessageState::Complete,
                    parts,
                })
                .collect()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn mending_any_session_leaves_it_healthy_and_loses_no_part(messages in arb_session()) {
            let (plan, after) = mend(&messages);
            assert_healthy(&after);
            // Every stored part is still there, exactly once.
            let mut kept: Vec<PartRef> = plan
                .messages
                .iter()
                .flat_map(|m| m.parts.iter().map(|p| p.origin))
                .filter(|o| matches!(o, PartRef::Existing { .. }))
                .collect();
            kept.sort_by_key(|o| format!("{o:?}"));
            let mut want: Vec<PartRef> = messages
                .iter()
                .flat_map(|m| (0..m.parts.len()).map(move |index| PartRef::Existing { message_id: m.id, index }))
                .collect();
            want.sort_by_key(|o| format!("{o:?}"));
            prop_assert_eq!(kept, want);
            // Every stored message is still there, in the same order.
            let ids: Vec<i64> = after.iter().filter(|m| m.id < 10_000).map(|m| m.id).collect();
            let want: Vec<i64> = messages.iter().map(|m| m.id).collect();
            prop_assert_eq!(ids, want);
            // A second mend changes nothing.
            prop_assert!(mend(&after).0.changes.is_empty());
        }
    }
}

/// One compaction summary that follows the mend: its last turn and last covered `seq`
/// before and after.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SummaryMove {
    /// `summaries.id`.
    pub(crate) id: i64,
    /// `messages.id` of the message the summary now ends at.
    pub(crate) message_id: i64,
    /// `(last_turn, through_seq)` before the mend.
    pub(crate) before: (i64, i64),
    /// `(last_turn, through_seq)` after it.
    pub(crate) after: (i64, i64),
    /// The rule whose mend moved it.
    pub(crate) rule: HealthRule,
}

impl SummaryMove {
    /// The repair log's before and after values.
    pub(crate) fn log_values(&self) -> (Value, Value) {
        let json = |(last_turn, through_seq): (i64, i64)| json!({"summary_id": self.id, "last_turn": last_turn, "through_seq": through_seq});
        (json(self.before), json(self.after))
    }
}

/// Keeps compaction summaries pointing at the messages they cover: `through_seq` follows
/// the seq shift, and when the mend un-compacted the end of the head, the summary ends where
/// the compacted prefix now ends; `last_turn` follows the recomputed turn indexes.
/// `summaries` are `(id, last_turn, through_seq)` of the session's live summaries; both
/// storage backends write what this returns.
pub(crate) fn summary_moves(
    original: &[Message],
    plan: &MendPlan,
    summaries: &[(i64, i64, i64)],
) -> Vec<SummaryMove> {
    let planned_seq: HashMap<i64, i64> = plan
        .messages
        .iter()
        .filter_map(|p| match p.origin {
            MessageRef::Existing(id) => Some((id, p.seq)),
            MessageRef::New(_) => None,
        })
        .collect();
    let new_seq: HashMap<i64, i64> = original
        .iter()
        .filter_map(|m| planned_seq.get(&m.id).map(|&seq| (m.seq, seq)))
        .collect();
    let by_seq: HashMap<i64, (i64, i64)> = plan
        .messages
        .iter()
        .filter_map(|p| match p.origin {
            MessageRef::Existing(id) => Some((p.seq, (id, p.turn_index))),
            MessageRef::New(_) => None,
        })
        .collect();
    let head_end = plan
        .messages
        .iter()
        .rev()
        .find(|p| p.compacted)
        .map(|p| p.seq);
    let rule_of = |action: Action| {
        plan.changes
            .iter()
            .find(|c| c.action == action)
            .map(|c| c.rule)
    };
    let mut moves = Vec::new();
    for &(id, last_turn, through_seq) in summaries {
        let Some(&shifted) = new_seq.get(&through_seq) else {
            continue;
        };
        let (through, rule) = match head_end {
            Some(end) if shifted > end => (end, rule_of(Action::Uncompact)),
            _ => (shifted, rule_of(Action::ShiftSeq)),
        };
        let Some(&(message_id, turn)) = by_seq.get(&through) else {
            continue;
        };
        if (turn, through) == (last_turn, through_seq) {
            continue;
        }
        moves.push(SummaryMove {
            id,
            message_id,
            before: (last_turn, through_seq),
            after: (turn, through),
            rule: rule.unwrap_or(HealthRule::TurnIndexMismatch),
        });
    }
    moves
}
