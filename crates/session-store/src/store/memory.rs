//! What an SQLite write connection remembers between its own appends: the tail state each of
//! its appends wrote, so the next append to that session need not read it back
//! (`store/write.rs`, [`Sql::remembered_tail`](super::sql::Sql::remembered_tail)).
//!
//! The memory is true only while nothing but this connection's appends has written the
//! database. Two facts keep it so, and nothing else is trusted:
//! - another connection's commit (another pool, another process, the `sqlite3` shell) moves
//!   the file's `PRAGMA data_version`, which the append reads under its write lock
//!   ([`TailMemory::since`]): a new version forgets everything;
//! - any other write of this connection (a revert, a compaction, a mend, an import, a failed
//!   or refused append) runs without the memory, which the pool then drops
//!   (`store/pool.rs`).
//!
//! An append changes only its own session's rows, so it keeps the other sessions' tails and
//! replaces its own.

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
}
