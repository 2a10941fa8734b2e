//! What a PostgreSQL store remembers of the tails its own appends wrote, so that its next
//! append to a session takes the session's lock and writes, with no tail read between
//! (`store/write.rs`, [`Sql::remembered_tail`](crate::store::sql::Sql::remembered_tail)).
//!
//! Other writers (other stores, other processes, `psql`) leave no trace a connection sees
//! before it reads, so the memory is never trusted alone:
//! - it is used only where the session row's `tail_state`, read under the session's lock,
//!   is the very text the remembered append wrote (every write of the store that changes
//!   what the tail says of a session writes or clears that column);
//! - the append's first insert then checks, in the same statement and after that lock, what
//!   [`TailCheck`](crate::store::write::TailCheck) says of the rows (their last seq, largest
//!   part id, open block, the append's call ids), as a read tail is checked; where that does
//!   not hold it inserts nothing and the append reads the tail.
//!
//! What the memory adds to the row's state is where the open block's parts start (the
//! session's largest part id before its last user or assistant message), above which the
//! check counts them by the parts' key.

use std::collections::HashMap;
use std::sync::Mutex;

use foldhash::fast::RandomState;

use crate::model::SessionId;

/// How many sessions a store remembers; one more forgets them all (a forgotten tail is
/// only read again).
const SESSIONS: usize = 4096;

/// A store's remembered tails, shared by its connections.
#[derive(Debug, Default)]
pub(crate) struct Tails {
    kept: Mutex<HashMap<SessionId, Kept, RandomState>>,
}

/// One session's tail as the store's last append to it wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Kept {
    /// The `tail_state` text the append wrote.
    pub(crate) state: String,
    /// The session's largest part id before its last user or assistant message went in
    /// ([`TailCheck::block_after`](crate::store::write::TailCheck::block_after)).
    pub(crate) block_after: i64,
}

impl Tails {
    /// The tail remembered for `session`.
    pub(crate) fn get(&self, session: &SessionId) -> Option<Kept> {
        self.kept.lock().ok()?.get(session).cloned()
    }

    /// Keeps what an append of `session` wrote (`None`: forgets the session, whose open
    /// block's first part the append did not know).
    pub(crate) fn put(&self, session: SessionId, kept: Option<Kept>) {
        // A poisoned lock only loses memory: the tail is read instead.
        let Ok(mut map) = self.kept.lock() else {
            return;
        };
        match kept {
            Some(kept) => {
                if map.len() >= SESSIONS && !map.contains_key(&session) {
                    map.clear();
                }
                map.insert(session, kept);
            }
            None => {
                map.remove(&session);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(state: &str) -> Option<Kept> {
        Some(Kept {
            state: state.to_owned(),
            block_after: 1,
        })
    }

    #[test]
    fn an_append_that_did_not_see_its_block_open_forgets_its_session() {
        let tails = Tails::default();
        let a = SessionId::new("a");
        tails.put(a.clone(), kept("x"));
        assert_eq!(tails.get(&a), kept("x"));
        tails.put(a.clone(), None);
        assert_eq!(tails.get(&a), None);
    }

    #[test]
    fn a_full_memory_forgets_everything_rather_than_grow() {
        let tails = Tails::default();
        for at in 0..SESSIONS {
            tails.put(SessionId::new(format!("s{at}")), kept("x"));
        }
        tails.put(SessionId::new("s0"), kept("y"));
        assert_eq!(tails.kept.lock().map(|m| m.len()).ok(), Some(SESSIONS));
        tails.put(SessionId::new("one more"), kept("z"));
        assert_eq!(tails.kept.lock().map(|m| m.len()).ok(), Some(1));
    }
}
