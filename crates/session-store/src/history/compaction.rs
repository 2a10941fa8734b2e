//! Compaction planning: which head of a session a summary may replace without splitting a turn.
//!
//! A provider rejects a history whose tool_result lost its tool_use, and a turn (a `user`
//! message and everything up to the next one) is 8 messages with three tool calls and 22 with
//! ten. So a cut by message count ("keep the last N") lands inside a tool-heavy turn about half
//! the time, hides the tool_use in the summarised head and leaves its result in the visible
//! tail: a permanent 400 for that session. [`plan_compaction`] starts at the naive cut
//! `len - min_keep_tail` and walks left to the start of that turn, so the tail is *at least*
//! `min_keep_tail` messages, never fewer, and only whole turns are ever compacted.
//!
//! A second compaction is planned over the whole session, the already compacted head included.
//! Because a healthy compacted head is a prefix of whole turns, this gives the same cut as
//! planning over the visible part alone; it reports [`NothingToCompact::AlreadyCompacted`]
//! when the turn-aligned cut does not reach past the old head. The provider sees only the
//! latest summary, so each new summary replaces the whole head (turn 0 through its last turn)
//! and its writer folds the previous summary into it; every summary stays stored with the turn
//! range it covers.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::turns::turn_indexes;
use crate::model::{Message, Role};

/// A message as the planner sees it: its role, and whether it is already compacted.
///
/// Implemented for [`Role`] (never compacted), `(Role, bool)` and [`Message`], so the planner
/// runs on plain vectors in tests and on stored rows in the store.
pub trait TurnItem {
    /// Who wrote the message; `user` messages open turns.
    fn role(&self) -> Role;
    /// True when the message is already replaced by a summary.
    fn compacted(&self) -> bool {
        false
    }
}

impl TurnItem for Role {
    fn role(&self) -> Role {
        *self
    }
}

impl TurnItem for (Role, bool) {
    fn role(&self) -> Role {
        self.0
    }
    fn compacted(&self) -> bool {
        self.1
    }
}

impl TurnItem for Message {
    fn role(&self) -> Role {
        self.role
    }
    fn compacted(&self) -> bool {
        self.compacted
    }
}

/// What a compaction of a history would do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "plan", rename_all = "snake_case")]
pub enum CompactionPlan {
    /// Leave the history as it is.
    Nothing {
        /// Why there is nothing to compact.
        reason: NothingToCompact,
    },
    /// Mark the messages before [`Cut::cut`] compacted.
    Compact(Cut),
}

impl CompactionPlan {
    /// The cut, when there is something to compact.
    pub fn cut(&self) -> Option<&Cut> {
        match self {
            CompactionPlan::Compact(cut) => Some(cut),
            CompactionPlan::Nothing { .. } => None,
        }
    }
}

/// Why a compaction changes nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum NothingToCompact {
    /// The history has no messages.
    EmptyHistory,
    /// The history is not longer than the tail to keep.
    TailCoversHistory,
    /// The walk left from the naive cut reached the first turn: the history is one unbroken
    /// turn, or everything after the first turn must stay visible.
    ReachedFirstTurn,
    /// The turn-aligned cut does not reach past the messages already compacted.
    AlreadyCompacted {
        /// How many leading messages are compacted already.
        compacted: usize,
    },
}

/// A turn-aligned cut: messages `[0, cut)` become the compacted head.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cut {
    /// Index of the first message kept: a `user` message that opens a turn after the first.
    pub cut: usize,
    /// How many leading messages were compacted before this plan.
    pub already_compacted: usize,
    /// The turn that `cut` opens; the head is turns `0..first_kept_turn`.
    pub first_kept_turn: i64,
    /// The first turn this compaction newly marks (the turn of `already_compacted`).
    pub first_new_turn: i64,
}

impl Cut {
    /// The last turn of the compacted head.
    pub fn last_compacted_turn(&self) -> i64 {
        self.first_kept_turn - 1
    }

    /// The message positions this compaction newly marks.
    pub fn newly_compacted(&self) -> std::ops::Range<usize> {
        self.already_compacted..self.cut
    }
}

/// Plans a compaction that keeps at least `min_keep_tail` messages visible and never splits a
/// turn.
///
/// Starts at `len - min_keep_tail` and walks left to the user message that opens that turn.
/// The last turn always stays visible (a `min_keep_tail` of 0 acts as 1): it is the turn the
/// model is working in, and a request needs at least one message after the summary. Turns are
/// counted from the roles as the contract defines them (see [`turn_indexes`]).
///
/// ```
/// use session_store::{plan_compaction, CompactionPlan};
/// use session_store::Role::*;
/// // turn 0: user, assistant(tool_use), tool, assistant; turn 1: user, assistant.
/// let history = [User, Assistant, Tool, Assistant, User, Assistant];
/// // Keeping 3 would cut between the tool message and the final answer of turn 0: walk left
/// // to turn 0's start, which is the first turn, so nothing is compacted.
/// assert!(matches!(plan_compaction(&history, 3), CompactionPlan::Nothing { .. }));
/// // Keeping 2 cuts at turn 1's user message.
/// assert_eq!(plan_compaction(&history, 2).cut().map(|c| c.cut), Some(4));
/// ```
pub fn plan_compaction<T: TurnItem>(history: &[T], min_keep_tail: usize) -> CompactionPlan {
    let nothing = |reason| CompactionPlan::Nothing { reason };
    let len = history.len();
    if len == 0 {
        return nothing(NothingToCompact::EmptyHistory);
    }
    let keep = min_keep_tail.max(1);
    if keep >= len {
        return nothing(NothingToCompact::TailCoversHistory);
    }
    let turns = turn_indexes(history.iter().map(TurnItem::role));
    // A turn after the first starts exactly where a user message has turn index > 0.
    let opens_turn = |i: usize| history[i].role() == Role::User && turns[i] > 0;
    let mut cut = len - keep;
    while cut > 0 && !opens_turn(cut) {
        cut -= 1;
    }
    if !opens_turn(cut) {
        return nothing(NothingToCompact::ReachedFirstTurn);
    }
    let already_compacted = history.iter().take_while(|m| m.compacted()).count();
    if cut <= already_compacted {
        return nothing(NothingToCompact::AlreadyCompacted {
            compacted: already_compacted,
        });
    }
    CompactionPlan::Compact(Cut {
        cut,
        already_compacted,
        first_kept_turn: turns[cut],
        first_new_turn: turns[already_compacted],
    })
}

/// The same plan as [`plan_compaction`], found from the end of a stored session so the store
/// reads the tail and the head's boundary instead of every message.
///
/// The cut lies within the last `min_keep_tail` messages plus one turn, so the store feeds
/// the messages newest first ([`TailSearch::feed`]) until the search has its candidate (the
/// first user message at or before the naive cut) and the message before it; then it counts
/// the user messages up to the candidate (an index-only count) and walks the head from the
/// start to its first message with `compacted = 0` ([`Head`]), and [`TailSearch::plan`]
/// decides. A property test holds it to [`plan_compaction`] on the whole list.
#[derive(Clone, Debug)]
pub struct TailSearch {
    keep: usize,
    seen: usize,
    candidate: Option<(usize, i64)>,
    before: Option<i64>,
}

/// Where the compacted head of a stored session ends, as the store reads it from the start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    /// How many leading messages are compacted.
    pub compacted: usize,
    /// The seq of the first message with `compacted = 0` (`None`: every message is).
    pub first_open_seq: Option<i64>,
    /// How many user messages have a seq up to `first_open_seq` (0 without one).
    pub users_through_first_open: i64,
}

/// A cut planned from the tail, in seqs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TailCut {
    /// The seq of the first message kept (a user message opening a turn after the first).
    pub cut_seq: i64,
    /// The seq of the last message of the head.
    pub through_seq: i64,
    /// How many messages stay visible (those from `cut_seq` on).
    pub kept: usize,
    /// The turn `cut_seq` opens.
    pub first_kept_turn: i64,
    /// The first turn this compaction newly marks.
    pub first_new_turn: i64,
}

impl TailCut {
    /// The last turn of the compacted head.
    pub fn last_compacted_turn(&self) -> i64 {
        self.first_kept_turn - 1
    }
}

impl TailSearch {
    /// A search for the cut that keeps at least `min_keep_tail` messages (and the last turn).
    pub fn new(min_keep_tail: usize) -> Self {
        TailSearch {
            keep: min_keep_tail.max(1),
            seen: 0,
            candidate: None,
            before: None,
        }
    }

    /// Feeds the next message going back from the end; `false` once the search needs no more.
    pub fn feed(&mut self, seq: i64, role: Role) -> bool {
        let from_end = self.seen;
        self.seen += 1;
        if self.candidate.is_some() {
            self.before = Some(seq);
            return false;
        }
        if from_end + 1 >= self.keep && role == Role::User {
            self.candidate = Some((from_end, seq));
        }
        true
    }

    /// The seq of the candidate cut, once the walk ended (by `feed` or by running out of
    /// messages): the store counts the user messages up to it. `Err` when the walk already
    /// shows there is nothing to compact.
    pub fn candidate(&self) -> Result<i64, NothingToCompact> {
        if self.seen == 0 {
            return Err(NothingToCompact::EmptyHistory);
        }
        match (self.candidate, self.before) {
            (Some((_, seq)), Some(_)) => Ok(seq),
            // Ran out of messages before a user message with one before it.
            _ if self.seen <= self.keep => Err(NothingToCompact::TailCoversHistory),
            _ => Err(NothingToCompact::ReachedFirstTurn),
        }
    }

    /// The plan, given how many user messages the session has up to the candidate and where
    /// its compacted head ends.
    pub fn plan(&self, users_through_cut: i64, head: &Head) -> Result<TailCut, NothingToCompact> {
        let cut_seq = self.candidate()?;
        let (Some((from_end, _)), Some(through_seq)) = (self.candidate, self.before) else {
            return Err(NothingToCompact::ReachedFirstTurn);
        };
        // The first user message opens no turn, and nothing before it does.
        if users_through_cut < 2 {
            return Err(NothingToCompact::ReachedFirstTurn);
        }
        if head.first_open_seq.is_none_or(|open| open >= cut_seq) {
            return Err(NothingToCompact::AlreadyCompacted {
                compacted: head.compacted,
            });
        }
        Ok(TailCut {
            cut_seq,
            through_seq,
            kept: from_end + 1,
            first_kept_turn: users_through_cut - 1,
            first_new_turn: (head.users_through_first_open - 1).max(0),
        })
    }
}

/// A stored compaction summary: what the provider sees in place of the compacted head.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// `summaries.id`; later summaries have larger ids.
    pub id: i64,
    /// The first turn it replaces (the session's first turn: a summary covers the whole head).
    pub first_turn: i64,
    /// The last turn it replaces.
    pub last_turn: i64,
    /// The first turn that the compaction writing it newly marked (turns before it were
    /// covered by an earlier summary).
    pub compacted_from_turn: i64,
    /// The `seq` of the last message it replaces.
    pub through_seq: i64,
    /// The summary text, as the caller wrote it.
    pub text: String,
    /// When the compaction ran.
    pub created_at: DateTime<Utc>,
}

/// The raw history to send to a provider now: the latest summary, then every message that is
/// not compacted, in `seq` order.
///
/// Built from the stored rows with no truncation and no sanitising: renderers and contract
/// checks work on top of it. When `summary` is `Some`, it stands for the compacted head (turns
/// `summary.first_turn..=summary.last_turn`) and goes before `messages`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProviderHistory {
    /// The latest summary of the session, if it was ever compacted.
    pub summary: Option<Summary>,
    /// Every message with `compacted = 0`, and every system message of the compacted head
    /// (`compacted` set: instructions stay in what the provider sees), in `seq` order.
    pub messages: Vec<Message>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use Role::*;

    /// A turn with `tools` tool calls, one call per assistant message: user, then
    /// (assistant, tool) per call, then the final assistant answer.
    fn tool_turn(tools: usize) -> Vec<Role> {
        let mut turn = vec![User];
        for _ in 0..tools {
            turn.extend([Assistant, Tool]);
        }
        turn.push(Assistant);
        turn
    }

    fn check(history: &[Role], min_keep_tail: usize, expect_cut: Option<usize>) {
        let plan = plan_compaction(history, min_keep_tail);
        assert_eq!(plan.cut().map(|c| c.cut), expect_cut, "plan {plan:?}");
        if let Some(cut) = plan.cut() {
            assert_eq!(history[cut.cut], User);
            assert!(history.len() - cut.cut >= min_keep_tail);
        }
    }

    #[test]
    fn the_cut_walks_left_to_the_user_message_of_its_turn() {
        // Turn 0 is 8 messages, turn 1 is 8 messages: keeping 4 lands inside turn 1.
        let history = [tool_turn(3), tool_turn(3)].concat();
        check(&history, 4, Some(8));
        check(&history, 8, Some(8));
        check(&history, 9, None);
    }

    #[test]
    fn a_tail_of_zero_keeps_the_last_turn() {
        let history = [tool_turn(1), tool_turn(1), tool_turn(2)].concat();
        check(&history, 0, Some(8));
        check(&history, 1, Some(8));
    }

    #[test]
    fn system_messages_before_the_first_user_belong_to_the_first_turn() {
        let history = [vec![System, System], tool_turn(1), tool_turn(0)].concat();
        // The first user message (index 2) opens no new turn: it is turn 0.
        check(&history, 3, None);
        check(&history, 2, Some(6));
    }

    #[test]
    fn reasons_for_doing_nothing_are_named() {
        let reason = |history: &[Role], keep| match plan_compaction(history, keep) {
            CompactionPlan::Nothing { reason } => Some(reason),
            CompactionPlan::Compact(_) => None,
        };
        assert_eq!(
            reason(&[], 3),
            Some(NothingToCompact::EmptyHistory),
            "empty"
        );
        assert_eq!(
            reason(&tool_turn(2), 10),
            Some(NothingToCompact::TailCoversHistory)
        );
        assert_eq!(
            reason(&tool_turn(10), 4),
            Some(NothingToCompact::ReachedFirstTurn)
        );
    }

    /// What the store does for [`TailSearch`], over a plain list (seq = position + 1).
    fn plan_by_tail(history: &[(Role, bool)], keep: usize) -> Result<TailCut, NothingToCompact> {
        let mut search = TailSearch::new(keep);
        for (i, (role, _)) in history.iter().enumerate().rev() {
            if !search.feed(i as i64 + 1, *role) {
                break;
            }
        }
        let users_through = |seq: i64| {
            history[..seq as usize]
                .iter()
                .filter(|(role, _)| *role == User)
                .count() as i64
        };
        let cut_seq = search.candidate()?;
        let compacted = history.iter().take_while(|(_, c)| *c).count();
        let first_open_seq = (compacted < history.len()).then_some(compacted as i64 + 1);
        let head = Head {
            compacted,
            first_open_seq,
            users_through_first_open: first_open_seq.map_or(0, users_through),
        };
        search.plan(users_through(cut_seq), &head)
    }

    proptest::proptest! {
        #[test]
        fn planning_from_the_tail_is_planning_over_the_whole_list(
            roles in proptest::collection::vec((0u8..4, 0u8..8), 0..40),
            compacted in 0usize..40,
            keep in 0usize..12,
        ) {
            let history: Vec<(Role, bool)> = roles
                .iter()
                .enumerate()
                // A compacted prefix, and a few flags after it (a gap, as other code may leave).
                .map(|(i, (r, f))| ([User, Assistant, Tool, System][*r as usize], i < compacted || *f == 0))
                .collect();
            let whole = plan_compaction(&history, keep);
            let tail = plan_by_tail(&history, keep);
            match (whole, tail) {
                (CompactionPlan::Nothing { reason }, Err(tail)) => proptest::prop_assert_eq!(reason, tail),
                (CompactionPlan::Compact(cut), Ok(tail)) => {
                    proptest::prop_assert_eq!(tail.cut_seq, cut.cut as i64 + 1);
                    proptest::prop_assert_eq!(tail.through_seq, cut.cut as i64);
                    proptest::prop_assert_eq!(tail.kept, history.len() - cut.cut);
                    proptest::prop_assert_eq!(tail.first_kept_turn, cut.first_kept_turn);
                    proptest::prop_assert_eq!(tail.first_new_turn, cut.first_new_turn);
                }
                (whole, tail) => proptest::prop_assert!(false, "{whole:?} vs {tail:?}"),
            }
        }
    }

    #[test]
    fn a_second_compaction_only_counts_when_it_reaches_past_the_first() {
        let roles = [tool_turn(1), tool_turn(1), tool_turn(1), tool_turn(1)].concat();
        let mut history: Vec<(Role, bool)> = roles.iter().map(|r| (*r, false)).collect();
        let first = *plan_compaction(&history, 8).cut().expect("first cut");
        assert_eq!((first.cut, first.first_new_turn), (8, 0));
        for item in &mut history[..first.cut] {
            item.1 = true;
        }
        assert_eq!(
            plan_compaction(&history, 5),
            CompactionPlan::Nothing {
                reason: NothingToCompact::AlreadyCompacted { compacted: 8 }
            }
        );
        let second = *plan_compaction(&history, 4).cut().expect("second cut");
        assert_eq!(second.cut, 12);
        assert_eq!(second.newly_compacted(), 8..12);
        assert_eq!(
            (second.first_new_turn, second.last_compacted_turn()),
            (2, 2)
        );
    }
}
