//! The contract's invariants of a healthy session, checked over a list of stored messages.
//!
//! Databases written by older or other code can hold sessions the write path would never
//! produce. [`check_session`] finds every violation of the contract's rules, by name, with
//! the turn, message and part at fault, so that `store-repair` (and an agent at start-up)
//! can tell what is broken before it renders a request the provider will reject. The
//! definitions follow the contract literally; the forensic views (`store/views.sql`) implement
//! the same definitions for people with the `sqlite3` shell.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};

use super::grammar::{CallState, IdState, OrphanWhy, PartClass, ResultState, Walk};
use super::turns::turn_indexes;
use crate::model::{Message, Part, Role, SessionId};

/// One of the contract's rules, by the name the contract gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HealthRule {
    /// A message's `turn_index` is not `max(u - 1, 0)`.
    TurnIndexMismatch,
    /// One turn holds both compacted and visible messages.
    SplitTurnCompaction,
    /// A compacted turn comes after a turn that is not compacted.
    CompactionGap,
    /// A tool_use that is neither answered nor pending (a tool_use outside an assistant
    /// message can never be answered).
    DanglingToolUse,
    /// A tool_result that answers no tool_use of the assistant message directly before its block.
    OrphanToolResult,
    /// A tool_use id used a second time in the session.
    DuplicateToolUseId,
    /// A tool_result part in a message whose role is not `tool`.
    MisplacedToolResult,
    /// A row of the session is outside the contract (a role or part kind it does not name, a
    /// timestamp that is not one): the session cannot be read, is left as it is, and does
    /// not stop the check of the others. Found by the store's row decoder, never by
    /// the check of the messages.
    UnreadableRow,
    /// A message still `open` (streaming) whose writer went away: the process died or the
    /// handle was dropped. Found by the store's check (only it can ask whether a writer is
    /// there), never by the check of the messages alone; mended by marking the message `interrupted` and
    /// answering its calls with tombstones, as the next write to the session would.
    AbandonedMessage,
}

impl HealthRule {
    /// Every invariant of a healthy session, in the contract's order (each has its forensic
    /// view `problem_<rule>`). [`HealthRule::UnreadableRow`] is not among them: it says that a
    /// session could not be read, so that none of these could be checked.
    pub const ALL: [HealthRule; 7] = [
        HealthRule::TurnIndexMismatch,
        HealthRule::SplitTurnCompaction,
        HealthRule::CompactionGap,
        HealthRule::DanglingToolUse,
        HealthRule::OrphanToolResult,
        HealthRule::DuplicateToolUseId,
        HealthRule::MisplacedToolResult,
    ];

    /// True when `store-repair` mends what breaks this rule; false for
    /// [`HealthRule::UnreadableRow`], whose session is reported and left as it is. A run
    /// whose findings break only rules it does not mend changes nothing (and needs no
    /// backup).
    pub fn is_mended(self) -> bool {
        self != HealthRule::UnreadableRow
    }

    /// The rule's name in the contract (also the `rule` column of the repair log).
    pub fn as_str(self) -> &'static str {
        match self {
            HealthRule::TurnIndexMismatch => "turn_index_mismatch",
            HealthRule::SplitTurnCompaction => "split_turn_compaction",
            HealthRule::CompactionGap => "compaction_gap",
            HealthRule::DanglingToolUse => "dangling_tool_use",
            HealthRule::OrphanToolResult => "orphan_tool_result",
            HealthRule::DuplicateToolUseId => "duplicate_tool_use_id",
            HealthRule::MisplacedToolResult => "misplaced_tool_result",
            HealthRule::UnreadableRow => "unreadable_row",
            HealthRule::AbandonedMessage => "abandoned_message",
        }
    }
}

impl fmt::Display for HealthRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown rule {0:?}")]
pub struct UnknownRule(pub String);

impl FromStr for HealthRule {
    type Err = UnknownRule;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        HealthRule::ALL
            .into_iter()
            .chain([HealthRule::UnreadableRow, HealthRule::AbandonedMessage])
            .find(|rule| rule.as_str() == s)
            .ok_or_else(|| UnknownRule(s.to_owned()))
    }
}

/// What the check needs besides the messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckOptions {
    /// The time the check runs at; pending calls are aged against it.
    pub now: DateTime<Utc>,
    /// A pending tool_use whose assistant message is older than this counts as dangling.
    /// `None`: pending is always legal.
    pub stale_after: Option<TimeDelta>,
    /// How long the writer of an open (streaming) message on another host may stay silent
    /// before the message counts as abandoned ([`WRITER_LEASE`] unless a caller says).
    pub writer_lease: TimeDelta,
}

/// How long the writer of an open message on another host may stay silent (no begin, push
/// or keep-alive) before its message counts as abandoned: ten minutes. A writer on this host
/// is asked directly (its process), so this bounds only what cannot be asked.
pub const WRITER_LEASE: TimeDelta = TimeDelta::minutes(10);

impl CheckOptions {
    /// Options for a check at `now` where pending calls never go stale.
    pub fn at(now: DateTime<Utc>) -> Self {
        Self {
            now,
            stale_after: None,
            writer_lease: WRITER_LEASE,
        }
    }

    /// True when a call written at `written` is pending for longer than `stale_after`.
    pub fn is_stale(&self, written: DateTime<Utc>) -> bool {
        self.stale_after
            .is_some_and(|limit| self.now.signed_duration_since(written) > limit)
    }
}

/// One broken invariant: which rule, and where.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// The session.
    pub session_id: SessionId,
    /// The rule broken.
    pub rule: HealthRule,
    /// The contract's turn of the message at fault (`max(u - 1, 0)`, not the stored value);
    /// `None` when it cannot be known (an `unreadable_row` whose role, or an earlier
    /// message's, cannot be read; the session row).
    pub turn: Option<i64>,
    /// `messages.id` of the message at fault; `None` for the session row.
    pub message_id: Option<i64>,
    /// Its `seq`; `None` when it cannot be read.
    pub seq: Option<i64>,
    /// Position of the part at fault within the message (its ordinal), when a part is at fault.
    pub part: Option<usize>,
    /// The tool_use id involved, for the pairing rules.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<String>,
    /// A sentence for people.
    pub detail: String,
}

/// How each message sits in the session: its contract turn.
#[derive(Clone, Debug)]
pub(crate) struct Layout {
    /// The contract's turn of each message.
    pub(crate) turns: Vec<i64>,
}

impl Layout {
    pub(crate) fn of(messages: &[Message]) -> Self {
        Self {
            turns: turn_indexes(messages.iter().map(|m| m.role)),
        }
    }
}

/// Every violation of the contract's rules in one session, in rule order, then `seq` order.
///
/// `messages` are the session's messages in `seq` order with their parts in ordinal order
/// (what the store loads). A pending tool_use (its assistant message, or the tool block
/// after it, ends the session) is legal unless [`CheckOptions::is_stale`] says otherwise;
/// system messages never break a pair.
pub fn check_session(
    session: &SessionId,
    messages: &[Message],
    options: &CheckOptions,
) -> Vec<Problem> {
    let layout = Layout::of(messages);
    let mut found = Vec::new();
    let mut report = |rule: HealthRule,
                      index: usize,
                      part: Option<usize>,
                      tool_use_id: Option<&str>,
                      detail: String| {
        let message = &messages[index];
        found.push(Problem {
            session_id: session.clone(),
            rule,
            turn: Some(layout.turns[index]),
            message_id: Some(message.id),
            seq: Some(message.seq),
            part,
            tool_use_id: tool_use_id.map(str::to_owned),
            detail,
        });
    };

    for (index, message) in messages.iter().enumerate() {
        let expected = layout.turns[index];
        if message.turn_index != expected {
            report(
                HealthRule::TurnIndexMismatch,
                index,
                None,
                None,
                format!(
                    "{} message seq {} has turn_index {}, expected {expected}",
                    message.role, message.seq, message.turn_index
                ),
            );
        }
    }

    check_compaction(messages, &layout, &mut report);
    check_pairing(messages, options, &mut report);
    found.sort_by_key(|v| (v.rule, v.seq, v.part));
    found
}

type Report<'a> = dyn FnMut(HealthRule, usize, Option<usize>, Option<&str>, String) + 'a;

/// One turn's compaction state.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TurnSpan {
    pub(crate) turn: i64,
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) compacted: usize,
}

impl TurnSpan {
    pub(crate) fn len(&self) -> usize {
        self.end - self.start
    }
    pub(crate) fn all_compacted(&self) -> bool {
        self.compacted == self.len()
    }
    pub(crate) fn is_split(&self) -> bool {
        self.compacted > 0 && !self.all_compacted()
    }
}

/// The turns of a session in order, as index ranges over `messages`.
pub(crate) fn turn_spans(messages: &[Message], turns: &[i64]) -> Vec<TurnSpan> {
    let mut spans: Vec<TurnSpan> = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        let turn = turns[index];
        match spans.last_mut() {
            Some(span) if span.turn == turn => span.end = index + 1,
            _ => spans.push(TurnSpan {
                turn,
                start: index,
                end: index + 1,
                compacted: 0,
            }),
        }
        if message.compacted {
            if let Some(span) = spans.last_mut() {
                span.compacted += 1;
            }
        }
    }
    spans
}

fn check_compaction(messages: &[Message], layout: &Layout, report: &mut Report<'_>) {
    let mut visible_before: Option<i64> = None;
    for span in turn_spans(messages, &layout.turns) {
        let range = span.start..span.end;
        if span.is_split() {
            // Where the visible part starts: the message right after the compaction cut.
            let cut = range
                .clone()
                .find(|&i| !messages[i].compacted)
                .unwrap_or(span.start);
            report(
                HealthRule::SplitTurnCompaction,
                cut,
                None,
                None,
                format!(
                    "turn {}: {} of {} messages compacted; the cut falls inside the turn at seq {}",
                    span.turn,
                    span.compacted,
                    span.len(),
                    messages[cut].seq
                ),
            );
        }
        if span.compacted > 0 {
            if let Some(visible) = visible_before {
                let first = range
                    .clone()
                    .find(|&i| messages[i].compacted)
                    .unwrap_or(span.start);
                report(
                    HealthRule::CompactionGap,
                    first,
                    None,
                    None,
                    format!(
                        "turn {} is compacted but turn {visible} before it is not",
                        span.turn
                    ),
                );
            }
        }
        if !span.all_compacted() && visible_before.is_none() {
            visible_before = Some(span.turn);
        }
    }
}

fn check_pairing(messages: &[Message], options: &CheckOptions, report: &mut Report<'_>) {
    let walk = Walk::of(messages);
    for (index, (message, class)) in messages.iter().zip(walk.classes()).enumerate() {
        let seq = message.seq;
        for (ordinal, (part, class)) in message.parts.iter().zip(&class.parts).enumerate() {
            match (part, *class) {
                (
                    Part::ToolUse { id, .. },
                    PartClass::Call {
                        id: id_state,
                        state,
                    },
                ) => {
                    if let IdState::Repeated { .. } = id_state {
                        let detail = format!(
                            "tool_use id {id:?} at seq {seq} part {ordinal} is used earlier in the session"
                        );
                        report(
                            HealthRule::DuplicateToolUseId,
                            index,
                            Some(ordinal),
                            Some(id),
                            detail,
                        );
                    }
                    let Some(why) = dangling(message, id_state, state, options) else {
                        continue;
                    };
                    let detail = format!("tool_use {id:?} at seq {seq} never got a result: {why}");
                    report(
                        HealthRule::DanglingToolUse,
                        index,
                        Some(ordinal),
                        Some(id),
                        detail,
                    );
                }
                (Part::ToolResult { tool_use_id, .. }, PartClass::Result(state)) => {
                    if message.role != Role::Tool {
                        let detail = format!(
                            "tool_result for {tool_use_id:?} sits in a {} message (seq {seq})",
                            message.role
                        );
                        report(
                            HealthRule::MisplacedToolResult,
                            index,
                            Some(ordinal),
                            Some(tool_use_id),
                            detail,
                        );
                    }
                    if let ResultState::Orphan(why) = state {
                        let why = orphan_why(messages, why);
                        let detail = format!("tool_result for {tool_use_id:?} at seq {seq}: {why}");
                        report(
                            HealthRule::OrphanToolResult,
                            index,
                            Some(ordinal),
                            Some(tool_use_id),
                            detail,
                        );
                    }
                }
                _ => {}
            }
        }
    }
}

/// Why a call counts as dangling, or `None` when it is answered or legally pending.
fn dangling(
    message: &Message,
    id: IdState,
    state: CallState,
    options: &CheckOptions,
) -> Option<String> {
    if id == IdState::Missing {
        return Some("it has no id, so no result can answer it".to_owned());
    }
    match state {
        CallState::Answered { .. } => None,
        CallState::Pending if !options.is_stale(message.created_at) => None,
        CallState::Pending => Some("pending for longer than --stale-after".to_owned()),
        CallState::Unanswerable => Some(format!(
            "it sits in a {} message, where no result can answer it",
            message.role
        )),
        CallState::Unanswered => Some("its tool block ends without a result for it".to_owned()),
        CallState::AnsweredFromUser { .. } => Some(
            "its only result sits in the user message after it, not in a tool message".to_owned(),
        ),
    }
}

/// The reason a result answers nothing, for people.
fn orphan_why(messages: &[Message], why: OrphanWhy) -> String {
    let seq = |i: usize| messages.get(i).map_or(0, |m| m.seq);
    match why {
        OrphanWhy::NothingBefore => "no user or assistant message comes before it".to_owned(),
        OrphanWhy::NoAssistantBefore { speaker } => format!(
            "the message before its block is a user message (seq {})",
            seq(speaker)
        ),
        OrphanWhy::NotCalled { assistant } => format!(
            "the assistant message before its block (seq {}) has no tool_use with that id",
            seq(assistant)
        ),
        OrphanWhy::AlreadyAnswered { first } => match first {
            Some(at) => format!(
                "the call is answered already (seq {}); a call has exactly one answer",
                seq(at.message)
            ),
            None => "the call is answered already; a call has exactly one answer".to_owned(),
        },
        OrphanWhy::NoId => "it has no id, so it answers no call".to_owned(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use chrono::TimeZone;
    use serde_json::json;
    use Role::*;

    pub(crate) fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
            .single()
            .unwrap_or_default()
    }

    /// Messages with seq 1.., ids 100.., correct turn indexes and nothing compacted.
    pub(crate) fn session(messages: Vec<(Role, Vec<Part>)>) -> Vec<Message> {
        let turns = turn_indexes(messages.iter().map(|(r, _)| *r));
        messages
            .into_iter()
            .enumerate()
            .map(|(i, (role, parts))| Message {
                id: 100 + i as i64,
                seq: 1 + i as i64,
                turn_index: turns[i],
                role,
                compacted: false,
                created_at: t0(),
                model: None,
                state: crate::model::MessageState::Complete,
                parts,
            })
            .collect()
    }

    pub(crate) fn call(id: &str) -> Part {
        Part::tool_use(id, "bash", json!({"cmd": "ls"}))
    }

    pub(crate) fn text(t: &str) -> Part {
        Part::text(t)
    }

    pub(crate) fn result(id: &str) -> Part {
        Part::tool_result(id, "ok")
    }

    fn rules(messages: &[Message]) -> Vec<(HealthRule, i64, Option<usize>)> {
        check_session(&SessionId::new("s"), messages, &CheckOptions::at(t0()))
            .into_iter()
            .map(|v| (v.rule, v.seq.unwrap_or(-1), v.part))
            .collect()
    }

    /// A three-tool turn, as the write path stores it.
    pub(crate) fn three_tool_turn() -> Vec<Message> {
        session(vec![
            (System, vec![text("be brief")]),
            (User, vec![text("first")]),
            (Assistant, vec![text("hello")]),
            (User, vec![text("do three things")]),
            (Assistant, vec![call("a")]),
            (Tool, vec![result("a")]),
            (Assistant, vec![call("b")]),
            (Tool, vec![result("b")]),
            (Assistant, vec![call("c")]),
            (Tool, vec![result("c")]),
            (Assistant, vec![text("done")]),
        ])
    }

    #[test]
    fn a_healthy_session_has_no_violations() {
        assert_eq!(rules(&three_tool_turn()), vec![]);
    }

    #[test]
    fn system_message_between_tool_use_and_result_is_healthy() {
        let messages = session(vec![
            (User, vec![text("hi")]),
            (Assistant, vec![call("a")]),
            (System, vec![text("reminder")]),
            (Tool, vec![result("a")]),
            (Assistant, vec![text("done")]),
        ]);
        assert_eq!(rules(&messages), vec![]);
    }

    #[test]
    fn turn_index_follows_max_u_minus_one() {
        let mut messages = three_tool_turn();
        // The first user message is turn 0, not 1.
        messages[1].turn_index = 1;
        messages[6].turn_index = 2;
        assert_eq!(
            rules(&messages),
            vec![
                (HealthRule::TurnIndexMismatch, 2, None),
                (HealthRule::TurnIndexMismatch, 7, None)
            ]
        );
    }

    #[test]
    fn compaction_cut_inside_a_three_tool_turn_is_a_split_turn() {
        let mut messages = three_tool_turn();
        // The seed's shape: cut by message count, landing between tool_use b and its result.
        for m in &mut messages[..7] {
            m.compacted = true;
        }
        assert_eq!(
            rules(&messages),
            vec![(HealthRule::SplitTurnCompaction, 8, None)]
        );
    }

    #[test]
    fn compacted_turn_after_a_visible_one_is_a_gap() {
        let mut messages = three_tool_turn();
        for m in &mut messages[3..] {
            m.compacted = true;
        }
        assert_eq!(rules(&messages), vec![(HealthRule::CompactionGap, 4, None)]);
    }

    #[test]
    fn pending_calls_are_legal_until_stale() {
        let messages = session(vec![
            (User, vec![text("hi")]),
            (Assistant, vec![call("a"), call("b")]),
            (Tool, vec![result("a")]),
        ]);
        assert_eq!(rules(&messages), vec![]);
        let options = CheckOptions {
            stale_after: Some(TimeDelta::hours(1)),
            ..CheckOptions::at(t0() + TimeDelta::hours(2))
        };
        let stale = check_session(&SessionId::new("s"), &messages, &options);
        assert_eq!(stale.len(), 1);
        assert_eq!(stale[0].rule, HealthRule::DanglingToolUse);
        assert_eq!(stale[0].tool_use_id.as_deref(), Some("b"));
        let fresh = CheckOptions {
            now: t0() + TimeDelta::minutes(30),
            ..options
        };
        assert!(check_session(&SessionId::new("s"), &messages, &fresh).is_empty());
    }

    #[test]
    fn cancelled_call_mid_history_is_dangling() {
        let messages = session(vec![
            (User, vec![text("hi")]),
            (Assistant, vec![call("a"), call("b")]),
            (Tool, vec![result("a")]),
            (User, vec![text("stop")]),
            (Assistant, vec![text("ok")]),
        ]);
        assert_eq!(
            rules(&messages),
            vec![(HealthRule::DanglingToolUse, 2, Some(1))]
        );
    }

    #[test]
    fn result_for_an_earlier_call_is_an_orphan() {
        let messages = session(vec![
            (User, vec![text("hi")]),
            (Assistant, vec![call("a")]),
            (Tool, vec![result("a")]),
            (User, vec![text("again")]),
            (Tool, vec![result("a")]),
        ]);
        assert_eq!(
            rules(&messages),
            vec![(HealthRule::OrphanToolResult, 5, Some(0))]
        );
    }

    #[test]
    fn tool_only_user_message_with_empty_text_is_misplaced_not_orphan() {
        let messages = session(vec![
            (User, vec![text("hi")]),
            (Assistant, vec![call("a")]),
            (User, vec![text(""), result("a")]),
            (Assistant, vec![text("done")]),
        ]);
        assert_eq!(
            rules(&messages),
            vec![
                // Literal: the turn indexes count the tool-only user message as a turn.
                (HealthRule::DanglingToolUse, 2, Some(0)),
                (HealthRule::MisplacedToolResult, 3, Some(1)),
            ]
        );
    }

    #[test]
    fn reused_ids_are_reported_at_the_later_use() {
        let messages = session(vec![
            (User, vec![text("hi")]),
            (Assistant, vec![call("a")]),
            (Tool, vec![result("a")]),
            (Assistant, vec![call("a")]),
            (Tool, vec![result("a")]),
        ]);
        assert_eq!(
            rules(&messages),
            vec![(HealthRule::DuplicateToolUseId, 4, Some(0))]
        );
    }
}
