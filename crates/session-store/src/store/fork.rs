//! Fork: a new session holding the turns of another before a given turn, with its lineage.
//!
//! A fork is addressed by turn, like a revert: it copies every message before the user
//! message that opens turn `N` (the contract's turns, counted from the roles), so it never
//! splits a tool pair. It copies rows, not references: the fork's messages, parts, usage rows
//! and the compaction summaries that cover only copied turns are new rows, and nothing the
//! source does later reaches the fork. Every column is copied, including columns that later
//! migrations add (the column lists are read from the schema), so a fork loses nothing.
//!
//! The fork's own session row is new (its id, times and lineage); it takes the source's
//! thinking-retention latch (`thinking_latched`, `last_completion_at`), so the provider sees
//! the copied turns as the source's export showed them. Other session columns are not copied:
//! a column that counts or names the source's rows would be wrong for the fork.
//!
//! What a fork may have to fix so that it is as healthy as its source:
//! - a summary that covers turns the fork does not hold is not copied; the turns it hid are
//!   un-compacted, as `store-repair` un-compacts a head without its summary, so the provider
//!   sees them instead of a summary of a future the fork never had;
//! - calls still pending at the cut (only possible when the fork copies the whole session)
//!   get tombstones, written by the same path as [`Store::cancel_pending`];
//! - a message still open (streaming) in the source is copied as settling leaves a message
//!   whose writer went away: `interrupted`, with no writer token, its parts as pushed so
//!   far, its unanswered calls answered with tombstones, one `repair_log` row in the fork
//!   (action `interrupt`, cause `forked`). The source's message and its writer are left
//!   as they are.

use rusqlite::Connection;
use serde::{Deserialize, Serialize};

use super::handle::Store;
use super::pool::SqliteEngine;
use super::reports::Lineage;
use super::sql::{int_at, text_at, values, Sql};
use super::stream::{interrupt_in, Cause};
use super::time::{format_time, now};
use super::write::{append_in, stored_tail};
use crate::error::{Error, Result};
use crate::history::grammar::Walk;
use crate::history::{pairing, texts};
use crate::model::{Part, SessionId};

/// What [`Store::fork`] created.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Forked {
    /// The new session.
    pub id: SessionId,
    /// The session it was forked from (`sessions.parent_id`).
    pub parent: SessionId,
    /// The first turn it did not copy (`sessions.forked_at_turn`).
    pub at_turn: i64,
    /// How many messages it copied.
    pub messages: usize,
    /// How many compaction summaries it copied.
    pub summaries: usize,
    /// How many copied messages were un-compacted because their summary was not copied.
    pub uncompacted: usize,
    /// The calls pending at the cut that the fork answered with tombstones.
    pub tombstoned: Vec<String>,
}

/// The statements both engines run (through [`Sql`], in SQLite's dialect).
const USER_COUNT_AND_ANY: &str =
    "SELECT COUNT(*) FILTER (WHERE role = 'user'), COUNT(*) FROM messages WHERE session_id = ?1";

/// The seq of the user message opening turn `?2` (the `?2 + 1`-th user message).
const TURN_START_SEQ: &str =
    "SELECT seq FROM messages WHERE session_id = ?1 AND role = 'user' ORDER BY seq LIMIT 1 OFFSET ?2";

/// The source's thinking-retention latch, read by its key (the fork's row is written by its
/// own, so each statement names one session).
const SOURCE_LATCH: &str =
    "SELECT thinking_latched, last_completion_at FROM sessions WHERE id = ?1";
/// The fork's session row: `?2` its parent, `?4` the turn, `?5` and `?6` the source's latch.
const INSERT_FORK: &str = "
    INSERT INTO sessions (id, created_at, updated_at, parent_id, forked_at_turn, thinking_latched, last_completion_at)
    VALUES (?1, ?3, ?3, ?2, ?4, ?5, ?6)";

const LATEST_COPIED_COVER: &str =
    "SELECT last_turn FROM summaries WHERE session_id = ?1 ORDER BY id DESC LIMIT 1";

/// `?2`: the last turn a copied summary covers, `i64::MIN` when none does.
const UNCOMPACT_UNCOVERED: &str = "
    UPDATE messages SET compacted = 0
    WHERE session_id = ?1 AND compacted = 1 AND turn_index > ?2";

const LINEAGE: &str = "SELECT id, parent_id, forked_at_turn FROM sessions ORDER BY created_at, id";

impl Store {
    /// Forks `source` at turn `at_turn`: a new session (fresh id) holding turns
    /// `0..at_turn` of it, in one `BEGIN IMMEDIATE` transaction.
    ///
    /// `at_turn` ranges over `0..=turns` (the number of turns of the source): 0 makes an
    /// empty fork, `turns` copies the whole session (its pending calls, if any, get
    /// tombstones). Anything else is refused with [`Error::NoSuchTurn`], an unknown source
    /// with [`Error::UnknownSession`], and nothing is written. A fork of a fork works the
    /// same way; [`Store::lineage`] returns the tree.
    ///
    /// ```
    /// use session_store::{NewMessage, Part, Store};
    ///
    /// # fn main() -> session_store::Result<()> {
    /// # let dir = tempfile::tempdir().expect("tempdir");
    /// let store = Store::open(dir.path().join("sessions.db"))?;
    /// let session = store.create_session()?;
    /// store.append(&session, NewMessage::user("first"))?;
    /// store.append(&session, NewMessage::assistant(vec![Part::text("one")]))?;
    /// store.append(&session, NewMessage::user("second"))?;
    /// store.append(&session, NewMessage::assistant(vec![Part::text("two")]))?;
    ///
    /// let fork = store.fork(&session, 1)?;
    /// assert_eq!(fork.messages, 2);
    /// assert_eq!(store.messages(&fork.id)?.len(), 2);
    /// assert!(store.fork(&session, 3).is_err()); // the session has 2 turns
    /// # Ok(())
    /// # }
    /// ```
    pub fn fork(&self, source: &SessionId, at_turn: i64) -> Result<Forked> {
        self.write(|tx| fork_in(tx, source, at_turn, |db, table| db.columns(table)))
    }

    /// Every session with its place in the fork tree, depth first: each root (a session
    /// that is not a fork, or whose parent was deleted) followed by its forks, oldest first.
    pub fn lineage(&self) -> Result<Vec<Lineage>> {
        self.engine.lineage()
    }
}

impl SqliteEngine {
    /// [`Store::lineage`] on SQLite.
    pub(super) fn lineage(&self) -> Result<Vec<Lineage>> {
        let rows = self.read(|conn| {
            let mut stmt = conn.prepare_cached(LINEAGE)?;
            let rows = stmt.query_map([], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, Option<String>>(1)?,
                    row.get::<_, Option<i64>>(2)?,
                ))
            })?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })?;
        Ok(tree(rows))
    }
}

/// [`Store::fork`] inside the caller's transaction, on either engine: [`fork_rows`] with the
/// engine's column lists, then tombstones for the calls pending at the cut.
pub(crate) fn fork_in<D: Sql>(
    db: &mut D,
    source: &SessionId,
    at_turn: i64,
    columns: impl Fn(&mut D, &str) -> Result<Vec<String>>,
) -> Result<Forked> {
    let copied = fork_rows(db, source, at_turn, columns)?;
    // A message still open in the source is copied as its writer's leaving would leave
    // it: no writer writes the copy.
    let mut tombstoned = interrupt_in(db, &copied.id, Cause::Forked)?.answered;
    let walk = Walk::resume(stored_tail(db, &copied.id)?.resume);
    if let Some(message) = pairing::tombstones(&walk, texts::FORK_REASON) {
        tombstoned.extend(answered_by(&message));
        append_in(db, &copied.id, &[message])?;
    }
    Ok(copied.forked(source, at_turn, tombstoned))
}

/// What [`fork_rows`] wrote: the new session and what was copied into it.
pub(crate) struct Copied {
    pub(crate) id: SessionId,
    messages: usize,
    summaries: usize,
    uncompacted: usize,
}

impl Copied {
    /// The [`Forked`] report, once the calls pending at the cut are answered.
    pub(crate) fn forked(
        self,
        source: &SessionId,
        at_turn: i64,
        tombstoned: Vec<String>,
    ) -> Forked {
        Forked {
            id: self.id,
            parent: source.clone(),
            at_turn,
            messages: self.messages,
            summaries: self.summaries,
            uncompacted: self.uncompacted,
            tombstoned,
        }
    }
}

/// The ids a tombstone message answers.
pub(crate) fn answered_by(message: &crate::model::NewMessage) -> Vec<String> {
    message
        .parts
        .iter()
        .filter_map(Part::answers)
        .map(str::to_owned)
        .collect()
}

/// A fork up to its tombstones, written once for both engines over [`Sql`]: takes the
/// source's write lock, cuts, creates the new session, copies messages, parts, usage and
/// summaries (`columns` lists a table's columns in schema order, generated ones left out),
/// and un-compacts what no copied summary covers. The caller answers the calls pending at
/// the cut through its engine's append path.
pub(crate) fn fork_rows<D: Sql>(
    db: &mut D,
    source: &SessionId,
    at_turn: i64,
    columns: impl Fn(&mut D, &str) -> Result<Vec<String>>,
) -> Result<Copied> {
    db.lock_session(source)?;
    let cut = cut_seq(db, source, at_turn)?;
    let id = SessionId::random();
    let now = format_time(now());
    let mut latch = (None, None);
    db.each_row(SOURCE_LATCH, &values![source.as_str()], &mut |row| {
        latch = (int_at(row, 0)?, text_at(row, 1)?);
        Ok(())
    })?;
    db.run(
        INSERT_FORK,
        &values![
            id.as_str(),
            source.as_str(),
            now.as_str(),
            at_turn,
            latch.0,
            latch.1.as_deref()
        ],
    )?;
    db.lock_session(&id)?;
    let [messages, summaries] = match db.copy_fork(&id, source, cut, at_turn)? {
        Some(copied) => copied,
        None => copy_shared(db, &id, source, [cut, at_turn], columns)?,
    };
    super::write::recount_messages(db, &id)?;
    let cover = db.optional_int(LATEST_COPIED_COVER, &values![id.as_str()])?;
    let uncompacted = db.run(
        UNCOMPACT_UNCOVERED,
        &values![id.as_str(), cover.unwrap_or(i64::MIN)],
    )?;
    Ok(Copied {
        id,
        messages,
        summaries,
        uncompacted: usize::try_from(uncompacted).unwrap_or(usize::MAX),
    })
}

/// The copy of [`fork_rows`] in the statements both engines run (one `INSERT ... SELECT` per
/// table, source and fork in one statement), where the engine has none of its own
/// ([`Sql::copy_fork`]); how many messages and summaries it copied. `bounds`: the cut's seq,
/// then the turn.
fn copy_shared<D: Sql>(
    db: &mut D,
    fork: &SessionId,
    source: &SessionId,
    [cut, at_turn]: [i64; 2],
    columns: impl Fn(&mut D, &str) -> Result<Vec<String>>,
) -> Result<[usize; 2]> {
    let copy = |db: &mut D, table: &str, sql: fn(Vec<String>) -> String, bound: i64| {
        let statement = sql(columns(db, table)?);
        let copied = db.run(&statement, &values![fork.as_str(), source.as_str(), bound])?;
        Ok::<_, crate::Error>(usize::try_from(copied).unwrap_or(usize::MAX))
    };
    let messages = copy(db, CopyMessages::TABLE, copy_sql::<CopyMessages>, cut)?;
    copy(db, CopyParts::TABLE, copy_sql::<CopyParts>, cut)?;
    copy(db, CopyUsage::TABLE, copy_sql::<CopyUsage>, cut)?;
    let summaries = copy(db, CopySummaries::TABLE, copy_sql::<CopySummaries>, at_turn)?;
    Ok([messages, summaries])
}

/// The seq before which a fork at `at_turn` copies: the user message opening that turn,
/// `i64::MIN` for turn 0, `i64::MAX` for the turn after the last.
fn cut_seq(db: &mut impl Sql, session: &SessionId, at_turn: i64) -> Result<i64> {
    let counts = db.int_rows::<2>(USER_COUNT_AND_ANY, &values![session.as_str()])?;
    let [users, messages] = counts.first().copied().unwrap_or([0, 0]);
    match cut_bound(session, users, messages, at_turn)? {
        Some(bound) => Ok(bound),
        // `cut_bound` asks only for a turn below the user count: that user message exists
        // (were it gone, the whole session is copied).
        None => Ok(db
            .optional_int(TURN_START_SEQ, &values![session.as_str(), at_turn])?
            .unwrap_or(i64::MAX)),
    }
}

/// Where a fork at `at_turn` cuts a session of `users` user messages among `messages`:
/// `i64::MIN` for turn 0, `i64::MAX` for the turn after the last, `None` when the cut is
/// the seq of the user message opening `at_turn` ([`TURN_START_SEQ`]); [`Error::NoSuchTurn`]
/// outside `0..=turns`.
fn cut_bound(session: &SessionId, users: i64, messages: i64, at_turn: i64) -> Result<Option<i64>> {
    // Turn 0 runs to the second user message: u user messages make max(u, 1) turns.
    let turns = if messages == 0 { 0 } else { users.max(1) };
    if !(0..=turns).contains(&at_turn) {
        return Err(Error::NoSuchTurn {
            session: session.clone(),
            turn: at_turn,
            turns,
        });
    }
    Ok(if at_turn == 0 {
        Some(i64::MIN)
    } else if at_turn == turns {
        Some(i64::MAX)
    } else {
        None
    })
}

/// One table a fork copies: which columns the copy sets itself, and how the rows are chosen.
trait CopySpec {
    /// The table.
    const TABLE: &'static str;
    /// Columns not copied as they are (ids, keys the copy rewrites).
    const SKIP: &'static [&'static str];
    /// The statement, given the copied column list once plain and once prefixed with `src.`.
    /// Binds: ?1 the fork, ?2 the source, ?3 the bound (a seq, or a turn for summaries).
    fn sql(columns: &str, source_columns: &str) -> String;
}

struct CopyMessages;
impl CopySpec for CopyMessages {
    const TABLE: &'static str = "messages";
    const SKIP: &'static [&'static str] = &["id", "session_id"];
    fn sql(columns: &str, source_columns: &str) -> String {
        format!(
            "INSERT INTO messages (session_id, {columns})
             SELECT ?1, {source_columns} FROM messages src
             WHERE src.session_id = ?2 AND src.seq < ?3 ORDER BY src.seq"
        )
    }
}

/// The statement copying `table`'s rows of the source's messages before the bound to the
/// fork's messages of the same seqs, in `order` (SQLite's rows name their message only;
/// PostgreSQL copies its own way: [`Sql::copy_fork`]).
fn copy_by_message(table: &str, columns: &str, source_columns: &str, order: &str) -> String {
    format!(
        "INSERT INTO {table} (message_id, {columns})
         SELECT n.id, {source_columns}
         FROM messages o JOIN {table} src ON src.message_id = o.id
         JOIN messages n ON n.session_id = ?1 AND n.seq = o.seq
         WHERE o.session_id = ?2 AND o.seq < ?3 ORDER BY {order}"
    )
}

struct CopyParts;
impl CopySpec for CopyParts {
    const TABLE: &'static str = "parts";
    const SKIP: &'static [&'static str] = &["id", "message_id", "session_id"];
    fn sql(columns: &str, source_columns: &str) -> String {
        copy_by_message(Self::TABLE, columns, source_columns, "o.seq, src.ordinal")
    }
}

struct CopyUsage;
impl CopySpec for CopyUsage {
    const TABLE: &'static str = "usage";
    const SKIP: &'static [&'static str] = &["message_id", "session_id"];
    fn sql(columns: &str, source_columns: &str) -> String {
        copy_by_message(Self::TABLE, columns, source_columns, "o.seq")
    }
}

/// Live summaries that cover only copied turns (`last_turn < at_turn`), in their order.
struct CopySummaries;
impl CopySpec for CopySummaries {
    const TABLE: &'static str = "summaries";
    const SKIP: &'static [&'static str] = &["id", "session_id", "reverted_by"];
    fn sql(columns: &str, source_columns: &str) -> String {
        format!(
            "INSERT INTO summaries (session_id, {columns})
             SELECT ?1, {source_columns} FROM summaries src
             WHERE src.session_id = ?2 AND src.reverted_by IS NULL AND src.last_turn < ?3
             ORDER BY src.id"
        )
    }
}

/// The copy statement of one [`CopySpec`], given every column of its table in schema order.
fn copy_sql<S: CopySpec>(columns: Vec<String>) -> String {
    let columns = columns
        .into_iter()
        .filter(|c| !S::SKIP.contains(&c.as_str()))
        .map(|c| format!("\"{}\"", c.replace('"', "\"\"")))
        .collect::<Vec<_>>();
    let plain = columns.join(", ");
    let prefixed = columns
        .iter()
        .map(|c| format!("src.{c}"))
        .collect::<Vec<_>>()
        .join(", ");
    // Column names come from the schema, never from input; values are bound.
    S::sql(&plain, &prefixed)
}

/// The columns of `table`, in schema order.
pub(crate) fn columns_of(conn: &Connection, table: &str) -> Result<Vec<String>> {
    let mut stmt = conn.prepare_cached("SELECT name FROM pragma_table_info(?1) ORDER BY cid")?;
    let rows = stmt.query_map([table], |row| row.get(0))?;
    Ok(rows.collect::<rusqlite::Result<Vec<String>>>()?)
}

/// Orders `(id, parent, forked_at_turn)` rows (oldest first) depth first under their roots.
/// A parent that no longer exists (or a cycle written by other code) makes a root.
pub(crate) fn tree(rows: Vec<(String, Option<String>, Option<i64>)>) -> Vec<Lineage> {
    use std::collections::{HashMap, HashSet};
    let ids: HashSet<&str> = rows.iter().map(|(id, _, _)| id.as_str()).collect();
    let mut children: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut roots = Vec::new();
    for (index, (_, parent, _)) in rows.iter().enumerate() {
        match parent.as_deref().filter(|p| ids.contains(p)) {
            Some(parent) => children.entry(parent).or_default().push(index),
            None => roots.push(index),
        }
    }
    let mut out = Vec::with_capacity(rows.len());
    let mut placed = vec![false; rows.len()];
    let mut stack: Vec<(usize, usize)> = roots.iter().rev().map(|&r| (r, 0)).collect();
    loop {
        while let Some((index, depth)) = stack.pop() {
            if std::mem::replace(&mut placed[index], true) {
                continue;
            }
            let (id, parent, forked_at_turn) = &rows[index];
            out.push(Lineage {
                id: SessionId::new(id.clone()),
                parent: parent
                    .as_deref()
                    .filter(|p| ids.contains(p))
                    .map(SessionId::from),
                forked_at_turn: *forked_at_turn,
                depth,
            });
            if let Some(kids) = children.get(id.as_str()) {
                stack.extend(kids.iter().rev().map(|&k| (k, depth + 1)));
            }
        }
        // Sessions only reachable through a cycle: start from the oldest one left.
        match placed.iter().position(|done| !done) {
            Some(index) => stack.push((index, 0)),
            None => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, parent: Option<&str>) -> (String, Option<String>, Option<i64>) {
        (id.into(), parent.map(Into::into), parent.map(|_| 1))
    }

    #[test]
    fn tree_lists_forks_under_their_parents_and_orphans_as_roots() {
        let rows = vec![
            row("a", None),
            row("b", None),
            row("a1", Some("a")),
            row("a1x", Some("a1")),
            row("gone1", Some("gone")),
            row("a2", Some("a")),
        ];
        let order: Vec<(String, usize)> = tree(rows)
            .into_iter()
            .map(|l| (l.id.to_string(), l.depth))
            .collect();
        let expected = [
            ("a", 0),
            ("a1", 1),
            ("a1x", 2),
            ("a2", 1),
            ("b", 0),
            ("gone1", 0),
        ];
        assert_eq!(
            order,
            expected.map(|(id, depth)| (id.to_owned(), depth)).to_vec()
        );
    }

    #[test]
    fn a_cycle_written_by_other_code_still_lists_every_session_once() {
        let rows = vec![row("x", Some("y")), row("y", Some("x"))];
        let ids: Vec<String> = tree(rows).into_iter().map(|l| l.id.to_string()).collect();
        assert_eq!(ids, ["x", "y"]);
    }
}
