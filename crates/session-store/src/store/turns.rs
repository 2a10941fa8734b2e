//! Turn-aligned reads: pages and slices that hold whole turns only.
//!
//! Every query here seeks on the `messages_by_turn` index `(session_id, turn_index, seq)`, so
//! a read near the end of a long session costs what a read near its start costs, and none of
//! them stops at a hidden row limit: a page is bounded by the caller's `max_messages` (rounded
//! to whole turns), a slice by the turns asked for.

use std::ops::{Bound, RangeBounds};

use super::handle::Store;
use super::rows::Range;
use super::sql::{int_at, values, Sql};
use crate::error::{Error, Result};
use crate::history::paging::{page_last_turn, Page, TurnCursor};
use crate::model::{Message, SessionId};

/// The turn index of each message from where a page starts, index only (covering scan).
const PAGE_TURNS: &str = "
    SELECT turn_index FROM messages
    WHERE session_id = ?1 AND turn_index > ?2
    ORDER BY turn_index, seq LIMIT ?3";

const HAS_TURNS_AFTER: &str =
    "SELECT 1 FROM messages WHERE session_id = ?1 AND turn_index > ?2 LIMIT 1";

/// The session's last turn: one probe at the end of the index.
/// The session's last turn, in its row: no row for an unknown session, NULL for an empty
/// one (the existence check and the probe in one statement).
const LAST_TURN: &str = "
    SELECT (SELECT MAX(turn_index) FROM messages WHERE session_id = ?1) FROM sessions WHERE id = ?1";

/// The first of the last `k` distinct turns, walking the index backwards.
const LAST_TURNS_START: &str = "
    SELECT MIN(turn_index) FROM (
        SELECT DISTINCT turn_index FROM messages
        WHERE session_id = ?1 ORDER BY turn_index DESC LIMIT ?2) AS last_turns";

impl Store {
    /// One page of the session: whole turns in order, as many as fit in `max_messages`, and
    /// always at least one turn, even one longer than `max_messages` (a turn is never split).
    ///
    /// Start with `after = None`; pass the returned [`Page::next`] to read on. `next` is `None`
    /// on the last page, and the pages together are the whole session.
    ///
    /// ```
    /// # use session_store::{NewMessage, Store};
    /// # fn main() -> session_store::Result<()> {
    /// # let dir = tempfile::tempdir().expect("tempdir");
    /// # let store = Store::open(dir.path().join("s.db"))?;
    /// # let session = store.create_session()?;
    /// # for i in 0..5 { store.append(&session, NewMessage::user(format!("q{i}")))?; }
    /// let mut after = None;
    /// let mut seen = 0;
    /// loop {
    ///     let page = store.page(&session, after, 2)?;
    ///     seen += page.messages.len();
    ///     match page.next {
    ///         Some(next) => after = Some(next),
    ///         None => break,
    ///     }
    /// }
    /// assert_eq!(seen, 5);
    /// # Ok(())
    /// # }
    /// ```
    pub fn page(
        &self,
        session: &SessionId,
        after: Option<TurnCursor>,
        max_messages: usize,
    ) -> Result<Page> {
        let after_turn = after.map_or(i64::MIN, TurnCursor::last_turn);
        self.read(|tx| page_in(tx, session, after_turn, max_messages))
    }

    /// The messages of the turns in `turns`, whole, in `seq` order: `a..=b`, `n..` (turn `n`
    /// onward), `..` (everything), `a..b`. Turns that do not exist are simply absent.
    pub fn turns(&self, session: &SessionId, turns: impl RangeBounds<i64>) -> Result<Vec<Message>> {
        let first = match turns.start_bound() {
            Bound::Included(&n) => n,
            Bound::Excluded(&n) => n.saturating_add(1),
            Bound::Unbounded => i64::MIN,
        };
        let last = match turns.end_bound() {
            Bound::Included(&n) => n,
            Bound::Excluded(&n) => n.saturating_sub(1),
            Bound::Unbounded => i64::MAX,
        };
        self.read(|tx| turns_in(tx, session, first, last))
    }

    /// The messages of the last `k` turns of the session, whole, in `seq` order (all of them
    /// when the session has `k` turns or fewer; none for `k = 0`).
    pub fn last_turns(&self, session: &SessionId, k: usize) -> Result<Vec<Message>> {
        self.nameable(session)?;
        self.read(|tx| last_turns_in(tx, session, k))
    }
}

/// [`Store::page`] in the caller's read transaction, on either engine.
fn page_in(
    db: &mut impl Sql,
    session: &SessionId,
    after_turn: i64,
    max_messages: usize,
) -> Result<Page> {
    db.require_session(session)?;
    // One row past the limit tells whether the last turn that starts in the page fits.
    let probe = i64::try_from(max_messages)
        .unwrap_or(i64::MAX)
        .saturating_add(1);
    let turns: Vec<i64> = db
        .int_rows(PAGE_TURNS, &values![session.as_str(), after_turn, probe])?
        .into_iter()
        .map(|[turn]| turn)
        .collect();
    let Some(last_turn) = page_last_turn(&turns, max_messages) else {
        return Ok(Page {
            messages: Vec::new(),
            next: None,
        });
    };
    let messages = db.load_messages(
        session,
        Range::Turns(after_turn.saturating_add(1), last_turn),
    )?;
    let more = db
        .optional_int(HAS_TURNS_AFTER, &values![session.as_str(), last_turn])?
        .is_some();
    Ok(Page {
        messages,
        next: more.then(|| TurnCursor::after(last_turn)),
    })
}

/// [`Store::turns`] in the caller's read transaction, on either engine.
fn turns_in(db: &mut impl Sql, session: &SessionId, first: i64, last: i64) -> Result<Vec<Message>> {
    db.require_session(session)?;
    if first > last {
        return Ok(Vec::new());
    }
    db.load_messages(session, Range::Turns(first, last))
}

/// [`Store::last_turns`] in the caller's read transaction, on either engine.
pub(super) fn last_turns_in(
    db: &mut impl Sql,
    session: &SessionId,
    k: usize,
) -> Result<Vec<Message>> {
    // Turn indexes are dense in a session that keeps the contract (each user message opens
    // the next one), so the last k turns start at `last - k + 1`: one probe instead of a
    // walk over the distinct turns (BENCHMARKS.md, issue 16).
    let mut row: Option<Option<i64>> = None;
    db.each_row(LAST_TURN, &values![session.as_str()], &mut |r| {
        row = Some(int_at(r, 0)?);
        Ok(())
    })?;
    let Some(last) = row.ok_or_else(|| Error::UnknownSession(session.clone()))? else {
        return Ok(Vec::new());
    };
    let k = i64::try_from(k).unwrap_or(i64::MAX);
    if k == 0 {
        return Ok(Vec::new());
    }
    let first = last.saturating_sub(k - 1);
    let messages = db.load_messages(session, Range::Turns(first, i64::MAX))?;
    if distinct_turns(&messages) == k {
        return Ok(messages);
    }
    // Fewer turns than asked for: a session with fewer than k turns, or gaps in the turn
    // indexes (rows another writer left broken). Walk the distinct turns instead.
    match db.optional_int(LAST_TURNS_START, &values![session.as_str(), k])? {
        Some(first) => db.load_messages(session, Range::Turns(first, i64::MAX)),
        None => Ok(Vec::new()),
    }
}

/// How many distinct turn indexes `messages` (in turn order) hold.
pub(super) fn distinct_turns(messages: &[Message]) -> i64 {
    let mut turns = 0;
    let mut previous = None;
    for message in messages {
        if previous != Some(message.turn_index) {
            turns += 1;
            previous = Some(message.turn_index);
        }
    }
    turns
}
