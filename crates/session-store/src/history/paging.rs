//! Pages of whole turns.
//!
//! A page that ends inside a turn hands its reader a tool_use whose result is on the next page
//! (or a result whose call was on the previous one); a caller that sends one page to a
//! provider gets a 400. So a page holds whole turns only: as many as fit in the caller's
//! `max_messages`, and always at least one, even a turn longer than `max_messages`. The cursor
//! is a turn index, so the store can seek to it on its `(session_id, turn_index, seq)` index
//! and a page near the end of a long session costs what a page near the start costs.

use serde::{Deserialize, Serialize};

use crate::model::Message;

/// Where the next page starts: after the last turn of the page before.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TurnCursor {
    after_turn: i64,
}

impl TurnCursor {
    /// A cursor whose page starts at the first turn after `turn`.
    pub fn after(turn: i64) -> Self {
        Self { after_turn: turn }
    }

    /// The last turn already read; the page starts after it.
    pub fn last_turn(self) -> i64 {
        self.after_turn
    }
}

/// One page of a session: whole turns, in order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Page {
    /// The messages of the page's turns, in `seq` order, with their parts.
    pub messages: Vec<Message>,
    /// Where the next page starts; `None` when this page reaches the end of the session.
    pub next: Option<TurnCursor>,
}

/// The last turn a page holds, given the turn indexes (ascending) of the first
/// `max_messages + 1` messages from where the page starts, or all of them when fewer remain.
///
/// Returns `None` when nothing remains. The page holds every turn that fits whole in
/// `max_messages`; when even the first turn does not fit, it holds that turn alone.
///
/// Turns 4, 4, 5, 5, 5, 6: a page of at most 3 messages holds turn 4 only; a page of 1
/// still holds all of turn 4.
pub(crate) fn page_last_turn(turns: &[i64], max_messages: usize) -> Option<i64> {
    let first = *turns.first()?;
    let Some(&overflow) = turns.get(max_messages) else {
        // Everything that remains fits.
        return turns.last().copied();
    };
    // The message just past the limit belongs to a turn that would be split: stop before it,
    // unless it is the first turn, which the page holds whole anyway.
    if overflow == first {
        return Some(first);
    }
    turns[..max_messages]
        .iter()
        .rev()
        .find(|&&turn| turn != overflow)
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_stops_before_the_turn_that_would_not_fit() {
        let turns = [0, 0, 0, 1, 1, 2];
        assert_eq!(page_last_turn(&turns[..4], 3), Some(0));
        assert_eq!(page_last_turn(&turns[..6], 5), Some(1));
        assert_eq!(page_last_turn(&turns, 6), Some(2));
        assert_eq!(page_last_turn(&turns, 100), Some(2));
    }

    #[test]
    fn a_turn_longer_than_the_page_is_held_whole() {
        assert_eq!(page_last_turn(&[7, 7, 7], 2), Some(7));
        assert_eq!(page_last_turn(&[7], 0), Some(7));
    }

    #[test]
    fn an_exhausted_session_has_no_page() {
        assert_eq!(page_last_turn(&[], 10), None);
    }
}
