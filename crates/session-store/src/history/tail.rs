//! The tail state of a session: what the write path needs of a stored session to place and
//! check the next message (its last `seq`, the turn of its last user message, and the open
//! tool block as [`Walk::resume`] takes it), in the compact text the session row keeps
//! (`sessions.tail_state`, migration V10).
//!
//! The state is a cache of the rows, never a second truth. The store uses it only when its
//! `last_seq` is the session's real `MAX(seq)` (a message another writer appends changes
//! that) and no part went into the session's open block since it was written: the messages
//! from the last user or assistant message on, all the pairing check reads. That is known
//! cheaply when the largest part id in the database is still `parts_through` (no part went
//! anywhere), and otherwise by counting the block's parts against `block_parts`; on
//! PostgreSQL, which has no trigger, by the session's largest part id and its parts above
//! `block_after` counted, in the statement that writes. SQLite's triggers clear it on every
//! update or delete of messages or tool parts, whoever makes it, as do the store's reverts,
//! undos and mends on both engines; when it is missing or stale the store feeds the rows of
//! the open block to the walk (`store/write.rs`, `walk_open_block`) and writes the state back
//! with the append. After an append it is taken from the walk that checked the append
//! ([`Walk::resume_point`]), so either way it states the grammar's own decision.

use super::grammar::{Resume, Walk};
use crate::model::Role;

/// The end of a stored session, as the write path needs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TailState {
    /// The highest `seq` (0 for an empty session).
    pub last_seq: i64,
    /// The `turn_index` of the last user message, if any.
    pub last_user_turn: Option<i64>,
    /// The role of the last user or assistant message, if any.
    pub speaker: Option<Role>,
    /// When that message is an assistant message: its calls not answered yet, in part order.
    pub open: Vec<String>,
    /// And the ids of its calls answered so far, sorted, each once.
    pub answered: Vec<String>,
    /// How many parts the open block holds: the messages from the last user or assistant
    /// message on (every message when there is none).
    pub block_parts: i64,
    /// The largest part id of the session (SQLite: of the database) before the open block's
    /// first message went in, where the appends that wrote the state saw that message go in
    /// (`None`: not known): the block's parts are then the session's parts above it, which
    /// PostgreSQL's append counts by key to check the state (`TailCheck` in `store/write.rs`).
    pub block_after: Option<i64>,
    /// Which unbroken run of appends wrote the state: a random number drawn when an append
    /// found no state to go on from (none kept, or none it could read), and carried by every
    /// append after it, also past a state that is stale (the rows are then read, the epoch
    /// kept). Whatever may remove or rewrite a call clears the state (SQLite's triggers on a
    /// delete or an update of a message or a tool part, a revert, an undo, a mend), so while a
    /// session's state names the same epoch its calls were only added to, at its end:
    /// SQLite's write connection keeps the session's call ids under it
    /// (`store/memory.rs`). 0: not known (a state written before epochs).
    pub epoch: i64,
    /// The largest part id in the database when the state was written: while it still is,
    /// no part went anywhere since, so the block's count needs no reading.
    pub parts_through: i64,
}

/// The encoding's version, the first element of the stored array (4: with `epoch`; a
/// version 3 state, without it, is read with the epoch unknown; a version 2 state, without
/// `block_after` either, with both unknown; a version 1 state is read as unknown, and the
/// next append writes version 4).
const VERSION: i64 = 4;

impl TailState {
    /// The state after `walk` (which resumed from a state and walked the appended messages),
    /// with the appended messages' last `seq` and last user turn, the block's part count (see
    /// [`block_parts_after`]), the run's `epoch` and the largest part id; normalised: open
    /// calls in part order, answered ids sorted and once.
    pub fn after(
        walk: &Walk,
        last_seq: i64,
        last_user_turn: Option<i64>,
        (block_parts, block_after): (i64, Option<i64>),
        (epoch, parts_through): (i64, i64),
    ) -> Self {
        let resume = walk.resume_point();
        let speaker = resume
            .speaker
            .filter(|role| matches!(role, Role::User | Role::Assistant));
        let mut open = Vec::new();
        let mut answered = Vec::new();
        if speaker == Some(Role::Assistant) {
            for (id, done) in resume.calls {
                if done {
                    answered.push(id);
                } else {
                    open.push(id);
                }
            }
        }
        answered.sort_unstable();
        answered.dedup();
        TailState {
            last_seq,
            last_user_turn,
            speaker,
            open,
            answered,
            block_parts,
            block_after,
            epoch,
            parts_through,
        }
    }

    /// Where a walk resumes from this state (no `taken`: the caller adds those).
    pub fn resume(&self) -> Resume {
        let calls = self
            .open
            .iter()
            .map(|id| (id.clone(), false))
            .chain(self.answered.iter().map(|id| (id.clone(), true)))
            .collect();
        Resume {
            messages: usize::try_from(self.last_seq).unwrap_or_default(),
            speaker: self.speaker,
            calls,
            taken: Vec::new(),
        }
    }

    /// The stored text: a JSON array `[4, last_seq, last_user_turn, speaker, open, answered,
    /// block_parts, block_after, epoch, parts_through]`.
    pub fn encode(&self) -> String {
        let stored = (
            VERSION,
            self.last_seq,
            self.last_user_turn,
            self.speaker.map(Role::as_str),
            &self.open,
            &self.answered,
            self.block_parts,
            self.block_after,
            self.epoch,
            self.parts_through,
        );
        // Serialising integers, strings and lists of strings into a String cannot fail.
        serde_json::to_string(&stored).unwrap_or_default()
    }

    /// [`TailState::encode`] without its last element (`parts_through`) and the closing
    /// bracket: the statement that inserts the append's last parts completes it with the
    /// largest id they took (`text || id || ']'`), which is not known before.
    pub fn encode_open_ended(&self) -> String {
        let mut text = self.encode();
        let cut = text.rfind(',').map_or(text.len(), |at| at + 1);
        text.truncate(cut);
        text
    }

    /// Reads a stored text; `None` for anything that is not this version's encoding or the
    /// one before (the store then reads the rows).
    pub fn decode(text: &str) -> Option<Self> {
        type Stored = (
            i64,
            i64,
            Option<i64>,
            Option<String>,
            Vec<String>,
            Vec<String>,
            i64,
            Option<i64>,
            i64,
            i64,
        );
        let stored: Stored = match serde_json::from_str::<Stored>(text) {
            Ok(stored) if stored.0 == VERSION => stored,
            Ok(_) => return None,
            // Version 3 had no epoch, version 2 no `block_after` either: read as unknown.
            Err(_) => {
                use serde_json::Value;
                let mut items: Vec<Value> = serde_json::from_str(text).ok()?;
                match (items.first().and_then(Value::as_i64), items.len()) {
                    (Some(3), 9) => items.insert(8, Value::from(0)),
                    (Some(2), 8) => {
                        items.insert(7, Value::Null);
                        items.insert(8, Value::from(0));
                    }
                    _ => return None,
                }
                items[0] = Value::from(VERSION);
                serde_json::from_value(Value::Array(items)).ok()?
            }
        };
        let (
            _,
            last_seq,
            last_user_turn,
            speaker,
            open,
            answered,
            block_parts,
            block_after,
            epoch,
            parts_through,
        ) = stored;
        let speaker = match speaker.as_deref().map(str::parse::<Role>) {
            None => None,
            Some(Ok(role @ (Role::User | Role::Assistant))) => Some(role),
            Some(_) => return None,
        };
        if speaker != Some(Role::Assistant) && !(open.is_empty() && answered.is_empty()) {
            return None;
        }
        Some(TailState {
            last_seq,
            last_user_turn,
            speaker,
            open,
            answered,
            block_parts,
            block_after,
            epoch,
            parts_through,
        })
    }
}

/// The open block's part count after appending `appended` (role, part count) to a session
/// whose block held `before`: the parts from the last appended user or assistant message on,
/// or, when the append has none, the old block's and all appended parts.
pub fn block_parts_after(
    before: i64,
    appended: impl DoubleEndedIterator<Item = (Role, usize)>,
) -> i64 {
    let mut parts = 0i64;
    for (role, count) in appended.rev() {
        parts += i64::try_from(count).unwrap_or(i64::MAX);
        if matches!(role, Role::User | Role::Assistant) {
            return parts;
        }
    }
    before + parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Part;
    use serde_json::json;

    #[test]
    fn an_open_ended_state_completed_with_the_last_part_id_reads_back() {
        for (open, parts_through) in [(vec![], 0), (vec!["a".to_owned()], 7), (vec![], 123_456)] {
            let state = TailState {
                last_seq: 12,
                last_user_turn: Some(3),
                speaker: Some(Role::Assistant),
                open: open.clone(),
                answered: vec![],
                block_parts: 4,
                block_after: Some(5),
                epoch: 77,
                parts_through: 1,
            };
            let text = format!("{}{parts_through}]", state.encode_open_ended());
            let read = TailState::decode(&text).expect("the completed state reads");
            assert_eq!(read.parts_through, parts_through);
            assert_eq!(read.open, open);
            assert_eq!(
                (
                    read.last_seq,
                    read.block_parts,
                    read.block_after,
                    read.epoch
                ),
                (12, 4, Some(5), 77)
            );
        }
    }

    fn state() -> TailState {
        TailState {
            last_seq: 7,
            last_user_turn: Some(2),
            speaker: Some(Role::Assistant),
            open: vec!["b".into(), "a\"|,".into()],
            answered: vec!["c".into()],
            block_parts: 4,
            block_after: Some(80),
            epoch: 1 << 62,
            parts_through: 90,
        }
    }

    #[test]
    fn the_encoding_reads_back_and_refuses_what_it_did_not_write() {
        let s = state();
        assert_eq!(TailState::decode(&s.encode()), Some(s));
        let empty = TailState::default();
        assert_eq!(TailState::decode(&empty.encode()), Some(empty));
        for bad in [
            "",
            "null",
            "[]",
            "[1,7,2,\"assistant\",[],[]]",
            "[3,7,2,\"assistant\",[],[],1,9]",
            "[4,7,2,\"assistant\",[],[],1,null,9]",
            "[3,7,2,\"assistant\",[],[],1,null,5,9]",
            "[5,7,2,\"assistant\",[],[],1,null,5,9]",
            "[2,7,2,\"assistant\",[],[],1,null,9]",
            "[3,7,2,\"tool\",[],[],1,null,9]",
            "[2,7,2,\"assistant\",[],[],1]",
            "[2,7,2,\"tool\",[],[],1,9]",
            "[2,7,2,\"user\",[\"a\"],[],1,9]",
            "[2,\"7\",2,\"assistant\",[],[],1,9]",
            "[2,7,2,\"assistant\",[1],[],1,9]",
        ] {
            assert_eq!(TailState::decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_state_written_before_block_after_reads_with_it_unknown() {
        let before = "[2,7,2,\"assistant\",[\"b\"],[\"c\"],4,90]";
        let read = TailState::decode(before).expect("a version 2 state reads");
        assert_eq!((read.block_after, read.epoch), (None, 0));
        assert_eq!(
            (read.last_seq, read.block_parts, read.parts_through),
            (7, 4, 90)
        );
        assert_eq!(
            (read.open.as_slice(), read.answered.as_slice()),
            (&["b".to_owned()][..], &["c".to_owned()][..])
        );
    }

    #[test]
    fn a_state_written_before_epochs_reads_with_the_epoch_unknown() {
        let before = "[3,7,2,\"assistant\",[\"b\"],[\"c\"],4,80,90]";
        let read = TailState::decode(before).expect("a version 3 state reads");
        assert_eq!(
            read,
            TailState {
                open: vec!["b".into()],
                epoch: 0,
                ..state()
            }
        );
    }

    #[test]
    fn a_walk_resumed_from_the_state_after_a_walk_decides_as_that_walk() {
        let call = |id: &str| Part::tool_use(id, "t", json!({}));
        let result = |id: &str| Part::tool_result(id, "ok");
        let mut walk = Walk::default();
        walk.feed(Role::User, &[Part::text("go")]);
        walk.feed(Role::Assistant, &[call("x"), call("y"), call("z")]);
        walk.feed(Role::Tool, &[result("y")]);
        let tail = TailState::after(&walk, 3, Some(0), (4, Some(2)), (5, 9));
        assert_eq!(tail.open, ["x", "z"]);
        assert_eq!(tail.answered, ["y"]);
        let resumed = Walk::resume(tail.resume());
        assert_eq!(resumed.pending(), walk.pending());
        for id in ["x", "y", "z", "w"] {
            assert_eq!(resumed.would_answer(id), walk.would_answer(id), "{id}");
        }
    }

    #[test]
    fn the_block_starts_at_the_last_appended_speaker() {
        use Role::{Assistant, System, Tool, User};
        assert_eq!(block_parts_after(5, [].into_iter()), 5);
        assert_eq!(block_parts_after(5, [(Tool, 1), (Tool, 2)].into_iter()), 8);
        assert_eq!(block_parts_after(5, [(System, 1)].into_iter()), 6);
        assert_eq!(block_parts_after(5, [(User, 1)].into_iter()), 1);
        assert_eq!(
            block_parts_after(
                5,
                [(User, 1), (Assistant, 3), (Tool, 1), (Tool, 1)].into_iter()
            ),
            5
        );
        assert_eq!(
            block_parts_after(5, [(Assistant, 3), (Tool, 1), (User, 2)].into_iter()),
            2
        );
    }
}
