//! Compaction and the provider's view of a compacted session.
//!
//! [`Store::compact`] plans the cut with the pure [`TailSearch`] (the plan of
//! [`crate::plan_compaction`], found from the session's last messages and the end of its
//! compacted head instead of every message's role), then marks the head `compacted = 1` and stores the summary with the turn range it
//! covers, in one `BEGIN IMMEDIATE` transaction: a reader sees either the old history or the
//! compacted one with its summary, never a head hidden without a summary. Nothing is deleted:
//! compacted messages stay in the database, and every summary is kept.

use serde::{Deserialize, Serialize};

use super::handle::Store;
use super::rows::{Cells, Range};
use super::sql::{int_at, text_at, values, Sql};
use super::time::{format_time, now, parse_time};
use crate::error::{Error, Result};
use crate::history::compaction::{
    Head, NothingToCompact, ProviderHistory, Summary, TailCut, TailSearch,
};
use crate::model::{Role, SessionId};

/// What [`Store::compact`] did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum CompactionOutcome {
    /// The head was marked compacted and the summary stored.
    Compacted {
        /// The stored summary, with the turns it covers.
        summary: Summary,
        /// How many messages this compaction newly marked.
        newly_compacted: usize,
        /// How many messages stay visible after the summary (at least `min_keep_tail`).
        kept: usize,
    },
    /// Nothing changed and no summary was stored.
    NothingToCompact {
        /// Why.
        reason: NothingToCompact,
    },
}

impl CompactionOutcome {
    /// True when the compaction changed nothing.
    pub fn is_nothing(&self) -> bool {
        matches!(self, CompactionOutcome::NothingToCompact { .. })
    }
}

/// The planner's walk back from the end, a page at a time: seq, role (1 user, 0 another
/// role of the contract, -1 none) and id, newest first.
const TAIL_ROWS: &str = "
    SELECT seq,
           CAST(CASE WHEN role = 'user' THEN 1
                     WHEN role IN ('assistant', 'tool', 'system') THEN 0 ELSE -1 END AS BIGINT),
           id
    FROM messages WHERE session_id = ?1 AND seq < ?2 ORDER BY seq DESC LIMIT ?3";

/// The head's walk from the start, a page at a time, up to its first message not compacted.
const HEAD_ROWS: &str = "
    SELECT seq, compacted FROM messages WHERE session_id = ?1 AND seq > ?2
    ORDER BY seq LIMIT ?3";

/// User messages up to a seq: on SQLite through `messages_user_starts`.
const USERS_THROUGH: &str =
    "SELECT COUNT(*) FROM messages WHERE session_id = ?1 AND role = 'user' AND seq <= ?2";

const MARK_HEAD: &str =
    "UPDATE messages SET compacted = 1 WHERE session_id = ?1 AND seq < ?2 AND compacted = 0";

const INSERT_SUMMARY: &str = "
    INSERT INTO summaries
        (session_id, first_turn, last_turn, compacted_from_turn, through_seq, text, created_at)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

const TOUCH_SESSION: &str = "UPDATE sessions SET updated_at = ?2 WHERE id = ?1";

const LATEST_SUMMARY: &str = "
    SELECT id, first_turn, last_turn, compacted_from_turn, through_seq, text, created_at
    FROM summaries WHERE session_id = ?1 AND reverted_by IS NULL ORDER BY id DESC LIMIT 1";

const ALL_SUMMARIES: &str = "
    SELECT id, first_turn, last_turn, compacted_from_turn, through_seq, text, created_at
    FROM summaries WHERE session_id = ?1 AND reverted_by IS NULL ORDER BY id";

impl Store {
    /// Replaces the head of the session with `summary` in what the provider sees, keeping at
    /// least `min_keep_tail` messages (and always the last turn) visible. System messages of
    /// the head are instructions, not history: they stay in what the provider sees, before
    /// the summary.
    ///
    /// The cut is planned as [`crate::plan_compaction`] plans it: it walks left from `len - min_keep_tail` to
    /// the start of that turn, so no turn is ever split and the tail may be longer than asked,
    /// never shorter. When the walk reaches the first turn, or does not reach past an earlier
    /// compaction, nothing changes and the outcome says why. A session can be compacted again
    /// later: the new summary replaces the whole head in the provider's view (so it should
    /// fold in the previous one, which [`Store::provider_history`] returns), and every summary
    /// is kept with the turns it covers ([`Store::summaries`]).
    ///
    /// Refused with [`Error::EmptySummary`] when `summary` has no non-whitespace text.
    ///
    /// ```
    /// use serde_json::json;
    /// use session_store::{CompactionOutcome, NewMessage, Part, Role, Store};
    ///
    /// # fn main() -> session_store::Result<()> {
    /// # let dir = tempfile::tempdir().expect("tempdir");
    /// let store = Store::open(dir.path().join("sessions.db"))?;
    /// let session = store.create_session()?;
    /// store.append(&session, NewMessage::user("hi"))?;
    /// store.append(&session, NewMessage::assistant(vec![Part::text("hello")]))?;
    /// store.append(&session, NewMessage::user("list /tmp"))?;
    /// store.append(&session, NewMessage::assistant(vec![Part::tool_use("c1", "ls", json!({}))]))?;
    /// store.append(&session, NewMessage::tool(vec![Part::tool_result("c1", "a b")]))?;
    /// store.append(&session, NewMessage::assistant(vec![Part::text("a and b")]))?;
    ///
    /// // Keeping 2 would start the tail at the tool result; the cut walks back to "list /tmp".
    /// let outcome = store.compact(&session, 2, "The user said hi.")?;
    /// assert!(matches!(outcome, CompactionOutcome::Compacted { newly_compacted: 2, kept: 4, .. }));
    /// let view = store.provider_history(&session)?;
    /// assert_eq!(view.summary.map(|s| s.text).as_deref(), Some("The user said hi."));
    /// assert_eq!(view.messages[0].role, Role::User);
    /// # Ok(())
    /// # }
    /// ```
    pub fn compact(
        &self,
        session: &SessionId,
        min_keep_tail: usize,
        summary: &str,
    ) -> Result<CompactionOutcome> {
        if crate::history::blank::is_blank(summary) {
            return Err(Error::EmptySummary {
                session: session.clone(),
            });
        }
        super::write::keepable(session, "compaction summary", Some(summary))?;
        self.write(|tx| {
            tx.lock_session(session)?;
            compact_in(tx, session, min_keep_tail, summary)
        })
    }

    /// The history to send to the provider now: the latest summary, then every message that
    /// is not compacted, in `seq` order, from one snapshot and with no truncation.
    pub fn provider_history(&self, session: &SessionId) -> Result<ProviderHistory> {
        self.read(|db| {
            db.require_session(session)?;
            provider_history_in(db, session)
        })
    }

    /// Every summary of the session, oldest first, each with the turns it covers. Summaries
    /// set aside by a revert that can still be undone are not listed.
    pub fn summaries(&self, session: &SessionId) -> Result<Vec<Summary>> {
        self.read(|db| {
            db.require_session(session)?;
            summaries_in(db, ALL_SUMMARIES, session)
        })
    }
}

/// [`Store::compact`] inside the caller's write transaction (the session exists and is
/// locked; the summary is not blank), on either engine: plan the cut, mark the head, store
/// the summary.
pub(crate) fn compact_in(
    tx: &mut impl Sql,
    session: &SessionId,
    min_keep_tail: usize,
    summary: &str,
) -> Result<CompactionOutcome> {
    let cut = match plan_from_tail(tx, session, min_keep_tail)? {
        Ok(cut) => cut,
        Err(reason) => return Ok(CompactionOutcome::NothingToCompact { reason }),
    };
    let (cut_seq, through_seq) = (cut.cut_seq, cut.through_seq);
    let newly_compacted = tx.run(MARK_HEAD, &values![session.as_str(), cut_seq])?;
    let created_at = now();
    let stamp = format_time(created_at);
    let id = tx.insert(
        INSERT_SUMMARY,
        &values![
            session.as_str(),
            0i64,
            cut.last_compacted_turn(),
            cut.first_new_turn,
            through_seq,
            summary,
            &stamp,
        ],
    )?;
    tx.run(TOUCH_SESSION, &values![session.as_str(), &stamp])?;
    Ok(CompactionOutcome::Compacted {
        summary: Summary {
            id,
            first_turn: 0,
            last_turn: cut.last_compacted_turn(),
            compacted_from_turn: cut.first_new_turn,
            through_seq,
            text: summary.to_owned(),
            created_at,
        },
        newly_compacted: usize::try_from(newly_compacted).unwrap_or(usize::MAX),
        kept: cut.kept,
    })
}

/// [`Store::provider_history`] inside the caller's read transaction, on either engine.
pub(crate) fn provider_history_in(
    db: &mut impl Sql,
    session: &SessionId,
) -> Result<ProviderHistory> {
    let summary = summaries_in(db, LATEST_SUMMARY, session)?.pop();
    Ok(ProviderHistory {
        summary,
        messages: db.load_messages(session, Range::Visible)?,
    })
}

/// The summaries a query selected as [`ALL_SUMMARIES`] does (`?1` the session), in its order.
fn summaries_in(db: &mut impl Sql, sql: &str, session: &SessionId) -> Result<Vec<Summary>> {
    let mut summaries = Vec::new();
    db.each_row(sql, &values![session.as_str()], &mut |row| {
        summaries.push(summary_from_row(row)?);
        Ok(())
    })?;
    Ok(summaries)
}

/// Plans the cut with [`TailSearch`]: the session's last messages back to the cut (read in
/// growing pages, newest first), a count of its user messages up to it, and its head up to
/// the first message not compacted (no more than the `UPDATE` that marks the head walks).
fn plan_from_tail(
    tx: &mut impl Sql,
    session: &SessionId,
    min_keep_tail: usize,
) -> Result<std::result::Result<TailCut, NothingToCompact>> {
    let mut search = TailSearch::new(min_keep_tail);
    let mut page = i64::try_from(min_keep_tail)
        .unwrap_or(i64::MAX)
        .saturating_add(16);
    let mut before = i64::MAX;
    'walk: loop {
        let rows: Vec<[i64; 3]> =
            tx.int_rows(TAIL_ROWS, &values![session.as_str(), before, page])?;
        for [seq, role, id] in &rows {
            let role = match role {
                1 => Role::User,
                0 => Role::Assistant,
                _ => {
                    return Err(Error::CorruptRow {
                        table: "messages",
                        row_id: *id,
                        detail: "role outside the contract".to_owned(),
                    })
                }
            };
            before = *seq;
            if !search.feed(*seq, role) {
                break 'walk;
            }
        }
        if i64::try_from(rows.len()).unwrap_or(i64::MAX) < page {
            break;
        }
        page = page.saturating_mul(2);
    }
    let cut_seq = match search.candidate() {
        Ok(seq) => seq,
        Err(reason) => return Ok(Err(reason)),
    };
    let users_through_cut = users_through(tx, session, cut_seq)?;
    let mut head = Head {
        compacted: 0,
        first_open_seq: None,
        users_through_first_open: 0,
    };
    let (mut after, mut page) = (i64::MIN, 16i64);
    'head: loop {
        let rows: Vec<[i64; 2]> =
            tx.int_rows(HEAD_ROWS, &values![session.as_str(), after, page])?;
        for [seq, compacted] in &rows {
            if *compacted == 0 {
                head.first_open_seq = Some(*seq);
                break 'head;
            }
            head.compacted += 1;
            after = *seq;
        }
        if i64::try_from(rows.len()).unwrap_or(i64::MAX) < page {
            break;
        }
        page = page.saturating_mul(2);
    }
    if let Some(seq) = head.first_open_seq.filter(|_| head.compacted > 0) {
        head.users_through_first_open = users_through(tx, session, seq)?;
    }
    Ok(search.plan(users_through_cut, &head))
}

/// How many user messages the session has up to `seq`.
fn users_through(tx: &mut impl Sql, session: &SessionId, seq: i64) -> Result<i64> {
    Ok(tx
        .optional_int(USERS_THROUGH, &values![session.as_str(), seq])?
        .unwrap_or(0))
}

/// Decodes a summaries row selected as in [`LATEST_SUMMARY`], with the row decoder's
/// leniency; a NULL where a value must be, or a time that is not one, is a corrupt row.
fn summary_from_row(row: &dyn Cells) -> Result<Summary> {
    let id = int_at(row, 0)?.unwrap_or_default();
    let corrupt = |detail: String| Error::CorruptRow {
        table: "summaries",
        row_id: id,
        detail,
    };
    let int = |at: usize, column: &str| {
        int_at(row, at)?.ok_or_else(|| corrupt(format!("{column} is NULL")))
    };
    let created_at = text_at(row, 6)?.unwrap_or_default();
    let Some(created_at) = parse_time(&created_at) else {
        return Err(corrupt(format!(
            "created_at {created_at:?} is not RFC 3339"
        )));
    };
    Ok(Summary {
        id,
        first_turn: int(1, "first_turn")?,
        last_turn: int(2, "last_turn")?,
        compacted_from_turn: int(3, "compacted_from_turn")?,
        through_seq: int(4, "through_seq")?,
        text: text_at(row, 5)?.ok_or_else(|| corrupt("text is NULL".to_owned()))?,
        created_at,
    })
}
