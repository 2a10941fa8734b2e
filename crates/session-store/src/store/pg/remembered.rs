//! What a PostgreSQL store remembers of its own appends, for the one-statement append
//! (`store/pg/mod.rs`, [`super::PgStore::append`]): per session, the tail state its last
//! append wrote and the version of the session row that append left (the row's `xmin`).
//!
//! The memory is only ever a hint. The statement that uses it holds only while the session
//! row is still that version: every write to a session's rows writes a new version of its
//! row ([`super::lock_session`], the append's own update), so an unchanged version proves
//! that no other writer (another store, another process) has written the session since.
//! A hint that fails costs one statement; sessions whose hints keep failing (several stores
//! writing one session) are not offered one for a while ([`Tails::missed`]).

use std::collections::HashMap;

use crate::history::tail::TailState;
use crate::model::SessionId;

/// How many sessions a store remembers; one more forgets them all (a forgotten tail is
/// only read again).
const SESSIONS: usize = 1024;

/// The most appends a session sits out after failed hints: 2 to the power of its failures
/// in a row, up to this.
const MAX_SKIPPED: u32 = 64;

/// A session's tail as this store's last append to it left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Kept {
    /// The tail state the append wrote.
    pub(crate) tail: TailState,
    /// The session row's version (`xmin`) after the append.
    pub(crate) version: i64,
}

/// One remembered session.
#[derive(Debug, Default)]
struct Entry {
    /// The tail, when one is remembered and not taken by an append under way.
    kept: Option<Kept>,
    /// Failed hints in a row.
    misses: u32,
    /// Appends still to run without a hint.
    skip: u32,
}

/// The tails a store's own appends left, by session.
#[derive(Debug, Default)]
pub(crate) struct Tails {
    sessions: HashMap<SessionId, Entry>,
}

impl Tails {
    /// The tail of `session` for an append to start from, taken out: another append of
    /// this store to the session meanwhile reads its tail instead of racing this one with
    /// the same hint. `None` while the session sits out failed hints.
    pub(crate) fn take(&mut self, session: &SessionId) -> Option<Kept> {
        let entry = self.sessions.get_mut(session)?;
        if entry.skip > 0 {
            entry.skip -= 1;
            entry.kept = None;
            return None;
        }
        entry.kept.take()
    }

    /// Keeps `kept`, which an append of `session` just committed; a hint that held
    /// (`hit`) clears the session's failures.
    pub(crate) fn keep(&mut self, session: &SessionId, kept: Kept, hit: bool) {
        if self.sessions.len() >= SESSIONS && !self.sessions.contains_key(session) {
            self.sessions.clear();
        }
        let entry = self.sessions.entry(session.clone()).or_default();
        entry.kept = Some(kept);
        if hit {
            entry.misses = 0;
        }
    }

    /// A hint for `session` did not hold (another writer wrote the session since): the
    /// session sits out twice as many appends as after its last failure.
    pub(crate) fn missed(&mut self, session: &SessionId) {
        if let Some(entry) = self.sessions.get_mut(session) {
            entry.misses = entry.misses.saturating_add(1);
            entry.skip = 2u32.saturating_pow(entry.misses).min(MAX_SKIPPED);
            entry.kept = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(version: i64) -> Kept {
        Kept {
            tail: TailState {
                last_seq: version,
                ..TailState::default()
            },
            version,
        }
    }

    #[test]
    fn a_kept_tail_is_taken_once() {
        let a = SessionId::new("a");
        let mut tails = Tails::default();
        assert_eq!(tails.take(&a), None);
        tails.keep(&a, kept(7), false);
        assert_eq!(tails.take(&a), Some(kept(7)));
        assert_eq!(tails.take(&a), None, "an append under way holds it");
    }

    #[test]
    fn failed_hints_make_the_session_sit_out_twice_as_long_each_time() {
        let a = SessionId::new("a");
        let mut tails = Tails::default();
        let mut sat_out = Vec::new();
        for round in 0..8 {
            tails.keep(&a, kept(round), false);
            assert_eq!(tails.take(&a), Some(kept(round)));
            tails.missed(&a);
            let mut skipped = 0;
            loop {
                tails.keep(&a, kept(round), false);
                if tails.take(&a).is_some() {
                    break;
                }
                skipped += 1;
            }
            sat_out.push(skipped);
        }
        assert_eq!(sat_out, [2, 4, 8, 16, 32, 64, 64, 64]);
        // A hint that holds clears the failures.
        tails.keep(&a, kept(9), true);
        assert_eq!(tails.take(&a), Some(kept(9)));
        tails.missed(&a);
        tails.keep(&a, kept(10), false);
        assert_eq!(tails.take(&a), None);
        tails.keep(&a, kept(10), false);
        assert_eq!(tails.take(&a), None);
        tails.keep(&a, kept(10), false);
        assert_eq!(tails.take(&a), Some(kept(10)));
    }

    #[test]
    fn one_session_too_many_forgets_them_all() {
        let mut tails = Tails::default();
        for s in 0..SESSIONS {
            tails.keep(&SessionId::new(format!("s{s}")), kept(1), true);
        }
        let last = SessionId::new("one more");
        tails.keep(&last, kept(2), true);
        assert_eq!(tails.take(&SessionId::new("s0")), None);
        assert_eq!(tails.take(&last), Some(kept(2)));
    }
}
