//! What an SQLite write connection remembers between its own writes: the tail state each of
//! its appends wrote ([`TailMemory`]), so the next append to that session need not read it
//! back (`store/write.rs`, [`Sql::remembered_tail`](super::sql::Sql::remembered_tail)); and
//! the call ids of the sessions it appended to ([`CallMemory`]), so that an append's check
//! that its calls are new in the session reads no index of every call (whose random leaves
//! were a page each in every commit, BENCHMARKS.md).
//!
//! The tails are true only while nothing but this connection's appends has written the
//! database. Two facts keep them so, and nothing else is trusted:
//! - another connection's commit (another pool, another process, the `sqlite3` shell) moves
//!   the file's `PRAGMA data_version`, which the append reads under its write lock
//!   ([`TailMemory::since`]): a new version forgets everything;
//! - any other write of this connection (a revert, a compaction, a mend, an import, a failed
//!   or refused append) runs without the memory, which the pool then drops
//!   (`store/pool.rs`).
//!
//! An append changes only its own session's rows, so it keeps the other sessions' tails and
//! replaces its own.
//!
//! The call ids outlive both: each session's are kept under the run of appends they were
//! read in ([`TailState::epoch`]), which whatever removes or rewrites a call ends (it clears
//! the state the session row keeps, and the append after it starts a new run). While the
//! state names the same run, the session only grew at its end: the ids of its messages
//! from the last one read on ([`Calls::through_seq`]) are read again and added, whoever
//! wrote them (an append, a streamed part, another process), and nothing else can be
//! missing.

use std::collections::HashMap;

use foldhash::fast::RandomState;

use crate::history::tail::TailState;
use crate::model::SessionId;

/// How many sessions a connection remembers; one more forgets them all (an agent process
/// writes a handful of sessions at a time, and a forgotten tail is only read again).
const SESSIONS: usize = 256;

/// The tails a write connection's own appends left, as of `PRAGMA data_version`.
#[derive(Debug, Default)]
pub(crate) struct TailMemory {
    /// The file's `data_version` the tails were kept at.
    data_version: i64,
    /// The largest part id in the database after this connection's last append: while no
    /// other write ran, every remembered tail is checked against it (its `parts_through`).
    parts_max: i64,
    /// Each remembered session's tail, as its last append wrote it.
    sessions: HashMap<SessionId, TailState, RandomState>,
}

impl TailMemory {
    /// The memory at `data_version` (read in the write transaction): kept when the file is
    /// as this connection last left it, else forgotten.
    pub(crate) fn since(mut self, data_version: i64) -> Self {
        if self.data_version != data_version {
            self = Self {
                data_version,
                ..Self::default()
            };
        }
        self
    }

    /// The tail of `session` this connection's last append to it left, taken out (an append
    /// puts its new tail back with [`TailMemory::keep`]).
    pub(crate) fn take(&mut self, session: &SessionId) -> Option<TailState> {
        let mut tail = self.sessions.remove(session)?;
        // Other sessions' appends on this connection may have raised the largest part id.
        tail.parts_through = self.parts_max;
        Some(tail)
    }

    /// Whether a tail of `session` is remembered.
    pub(crate) fn remembers(&self, session: &SessionId) -> bool {
        self.sessions.contains_key(session)
    }

    /// Keeps `tail`, which an append of `session` just wrote: its `parts_through` is the
    /// database's largest part id now.
    pub(crate) fn keep(&mut self, session: &SessionId, tail: TailState) {
        if self.sessions.len() >= SESSIONS && !self.sessions.contains_key(session) {
            self.sessions.clear();
        }
        self.parts_max = tail.parts_through;
        self.sessions.insert(session.clone(), tail);
    }
}

/// The call ids of the sessions a write connection appended to, each session's under the
/// run of appends it was read in.
#[derive(Debug, Default)]
pub(crate) struct CallMemory {
    sessions: HashMap<SessionId, Calls, RandomState>,
    /// How many ids `sessions` holds in all.
    ids: usize,
}

/// How many call ids a connection keeps in all (about 100 bytes each); past it the other
/// sessions' are forgotten (read again on their next append) rather than grow.
const IDS: usize = 1 << 18;

impl CallMemory {
    /// The calls of `session` kept under the run `epoch`, taken out (put back with
    /// [`CallMemory::keep`]); `None` when none are, or they are another run's.
    pub(crate) fn take(&mut self, session: &SessionId, epoch: i64) -> Option<Calls> {
        let calls = self.sessions.remove(session)?;
        self.ids -= calls.ids.len();
        (calls.epoch == epoch).then_some(calls)
    }

    /// Keeps `calls` for `session`; one session more than [`SESSIONS`], or ids past [`IDS`],
    /// forget the others.
    pub(crate) fn keep(&mut self, session: &SessionId, calls: Calls) {
        if let Some(old) = self.sessions.remove(session) {
            self.ids -= old.ids.len();
        }
        if self.sessions.len() >= SESSIONS || self.ids + calls.ids.len() > IDS {
            self.sessions.clear();
            self.ids = 0;
        }
        self.ids += calls.ids.len();
        self.sessions.insert(session.clone(), calls);
    }
}

/// One session's call ids, each with its message's seq, as read under one run of appends.
#[derive(Debug, Default)]
pub(crate) struct Calls {
    /// The run ([`TailState::epoch`]).
    epoch: i64,
    /// Every call of the session's messages up to this seq is in `ids`; the message at it,
    /// the session's last when it was read, may get more (a streamed message), so it is read
    /// again with the ones after it.
    through_seq: i64,
    ids: HashMap<String, i64, RandomState>,
}

impl Calls {
    /// None yet, of the run `epoch`: every message is to be read.
    pub(crate) fn of_run(epoch: i64) -> Self {
        Calls {
            epoch,
            ..Calls::default()
        }
    }

    /// The seq from which the session's messages are to be read to catch up.
    pub(crate) fn through_seq(&self) -> i64 {
        self.through_seq
    }

    /// Adds the call `id` of the message at `seq`.
    pub(crate) fn add(&mut self, id: String, seq: i64) {
        self.ids.insert(id, seq);
    }

    /// Every call up to the session's last message, at `last_seq`, is in.
    pub(crate) fn caught_up_to(&mut self, last_seq: i64) {
        self.through_seq = self.through_seq.max(last_seq);
    }

    /// Whether the session uses `id` in a message other than the one at `except_seq`.
    pub(crate) fn uses(&self, id: &str, except_seq: Option<i64>) -> bool {
        self.ids.get(id).is_some_and(|seq| Some(*seq) != except_seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tail(last_seq: i64, parts_through: i64) -> TailState {
        TailState {
            last_seq,
            parts_through,
            ..TailState::default()
        }
    }

    #[test]
    fn a_new_data_version_forgets_every_tail() {
        let a = SessionId::new("a");
        let mut memory = TailMemory::default().since(7);
        memory.keep(&a, tail(3, 10));
        let mut kept = memory.since(7);
        assert_eq!(kept.take(&a), Some(tail(3, 10)));
        kept.keep(&a, tail(3, 10));
        assert_eq!(kept.since(8).take(&a), None);
    }

    #[test]
    fn a_remembered_tail_is_checked_against_the_largest_part_id_any_append_left() {
        let (a, b) = (SessionId::new("a"), SessionId::new("b"));
        let mut memory = TailMemory::default();
        memory.keep(&a, tail(3, 10));
        memory.keep(&b, tail(5, 14));
        assert_eq!(memory.take(&a), Some(tail(3, 14)));
        assert_eq!(
            memory.take(&a),
            None,
            "taken out until the append keeps it again"
        );
    }

    #[test]
    fn a_full_memory_forgets_everything_rather_than_grow() {
        let mut memory = TailMemory::default();
        for at in 0..SESSIONS {
            memory.keep(&SessionId::new(format!("s{at}")), tail(1, 1));
        }
        memory.keep(&SessionId::new("s0"), tail(2, 2));
        assert_eq!(memory.sessions.len(), SESSIONS);
        memory.keep(&SessionId::new("one more"), tail(1, 3));
        assert_eq!(memory.sessions.len(), 1);
    }

    #[test]
    fn kept_ids_past_their_bound_forget_the_other_sessions() {
        let (a, b) = (SessionId::new("a"), SessionId::new("b"));
        let many = |count: usize| {
            let mut calls = Calls::of_run(1);
            for at in 0..count {
                calls.add(format!("c{at}"), 1);
            }
            calls
        };
        let mut memory = CallMemory::default();
        memory.keep(&a, many(IDS / 2));
        memory.keep(&b, many(IDS / 2));
        assert_eq!(memory.ids, IDS);
        let kept = memory.take(&a, 1).expect("within the bound both stay");
        assert_eq!(memory.ids, IDS / 2);
        memory.keep(&a, kept);
        memory.keep(&a, many(IDS / 2 + 1));
        assert!(memory.take(&b, 1).is_none(), "b forgotten");
        assert_eq!(memory.ids, IDS / 2 + 1);
        assert!(
            memory.take(&a, 2).is_none(),
            "another run's ids are dropped"
        );
        assert_eq!(memory.ids, 0);
    }

    #[test]
    fn calls_are_kept_for_their_run_only() {
        let a = SessionId::new("a");
        let mut memory = CallMemory::default();
        let mut calls = Calls::of_run(5);
        calls.add("c1".into(), 2);
        calls.caught_up_to(4);
        memory.keep(&a, calls);
        assert!(
            memory.take(&a, 6).is_none(),
            "another run's calls are dropped"
        );
        assert!(memory.take(&a, 5).is_none(), "and gone");
        let mut calls = Calls::of_run(5);
        calls.add("c1".into(), 2);
        calls.caught_up_to(4);
        calls.caught_up_to(3);
        memory.keep(&a, calls);
        let calls = memory.take(&a, 5).expect("kept for its run");
        assert_eq!(calls.through_seq(), 4, "never moves back");
        assert!(calls.uses("c1", None));
        assert!(calls.uses("c1", Some(3)));
        assert!(!calls.uses("c1", Some(2)), "its own message is not another");
        assert!(!calls.uses("c2", None));
    }
}
