//! Importing a whole session at once: the session row and every message in one transaction.
//! [`ImportTarget`] is what a backend's transaction does for an import, so the import logic
//! (compactions, child sessions, the streamed path) is written once for SQLite and PostgreSQL.

use std::io::{BufRead, BufReader, Read, Seek};

use rusqlite::{params, Connection};

use chrono::{DateTime, Utc};

use super::handle::Store;
use super::sql::{values, Sql};
use super::time::{format_time, now};
use super::write::append_in;
use crate::error::Result;
use crate::import::stream::{Halt, Sink, Streamed};
use crate::import::{Format, Imported, ImportedCompaction};
use crate::model::{Appended, NewMessage, Role, SessionId};

const INSERT_SESSION: &str =
    "INSERT INTO sessions (id, created_at, updated_at) VALUES (?1, ?2, ?2)";

impl Store {
    /// Creates a session with a fresh id holding `messages`, in one transaction: if any
    /// message is refused by the pairing rules (or anything else fails), neither the session
    /// nor any message is written.
    ///
    /// Pairs with the importers in [`crate::import::import`], whose output it accepts as is:
    /// `store.import_session(import::import(format, &text)?.into_messages())`.
    pub fn import_session(&self, messages: Vec<NewMessage>) -> Result<SessionId> {
        let id = SessionId::random();
        self.write(|tx| import_session_in(tx, &id, &messages))?;
        Ok(id)
    }
}

/// [`Store::import_session`] in the caller's write transaction, on either engine.
fn import_session_in(
    db: &mut impl Sql,
    id: &SessionId,
    messages: &[NewMessage],
) -> Result<Vec<Appended>> {
    let now = format_time(now());
    db.run(INSERT_SESSION, &values![id.as_str(), now.as_str()])?;
    db.lock_session(id)?;
    append_in(db, id, messages)
}

/// What [`Store::import`] created.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ImportedSessions {
    /// The imported conversation.
    pub session: SessionId,
    /// Its child sessions (sub-agents), in the source's order, depth first.
    pub children: Vec<SessionId>,
    /// The source's other conversations (see [`BranchSession`]), in the source's order.
    pub branches: Vec<BranchSession>,
}

/// A conversation of the source that is not the one it resumes (a Claude Code log's
/// abandoned branch after a rewind or an edited prompt, or another session's lines with a
/// root of their own), stored as a session of its own rather than mixed into the imported
/// one.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BranchSession {
    /// The session holding it: the whole branch, from the conversation's first message.
    pub session: SessionId,
    /// The session it branched from (`sessions.parent_id`, as a [`Store::fork`] records
    /// it); `None` for a conversation that shares no message with another.
    pub forked_from: Option<SessionId>,
    /// The first turn it does not share with `forked_from` (`sessions.forked_at_turn`).
    pub at_turn: Option<i64>,
}

const SET_LINEAGE: &str = "UPDATE sessions SET parent_id = ?2, forked_at_turn = ?3 WHERE id = ?1";

const INSERT_IMPORTED_SESSION: &str = "
    INSERT INTO sessions (id, created_at, updated_at, title, parent_id) VALUES (?1, ?2, ?2, ?3, ?4)";

const SET_TITLE: &str = "UPDATE sessions SET title = ?2 WHERE id = ?1";

const SET_DATES: &str = "UPDATE sessions SET created_at = ?2, updated_at = ?3 WHERE id = ?1";

/// The span of the source's timestamps: an imported session is dated by its transcript
/// (created at the earliest message time, last changed at the latest), not by the import,
/// so that age-based retention (`prune`) sees how old the conversation is. Grows batch by
/// batch; `None` while no message carried a time.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SourceSpan(Option<(DateTime<Utc>, DateTime<Utc>)>);

impl SourceSpan {
    fn extend(&mut self, messages: &[NewMessage]) {
        for at in messages.iter().filter_map(|m| m.created_at) {
            self.0 = Some(match self.0 {
                None => (at, at),
                Some((first, last)) => (first.min(at), last.max(at)),
            });
        }
    }
}

const MARK_BEFORE: &str =
    "UPDATE messages SET compacted = 1 WHERE session_id = ?1 AND seq < ?2 AND compacted = 0";

const INSERT_SUMMARY: &str = "
    INSERT INTO summaries
        (session_id, first_turn, last_turn, compacted_from_turn, through_seq, text, created_at)
    VALUES (?1, 0, ?2, ?3, ?4, ?5, ?6)";

/// Records the child session on the call that spawned it.
const LINK_CALL: &str = "
    UPDATE parts SET provider_metadata =
        json_set(COALESCE(provider_metadata, '{}'), '$.session_store.child_session', ?3)
    WHERE kind = 'tool_use' AND tool_use_id = ?2
      AND message_id IN (SELECT id FROM messages WHERE session_id = ?1)";

impl Store {
    /// Sets the session's title (`sessions.title`; `None` clears it), in one transaction.
    /// [`Error::UnknownSession`](crate::Error::UnknownSession) when there is no such session.
    pub fn set_title(&self, session: &SessionId, title: Option<&str>) -> Result<()> {
        self.nameable(session)?;
        self.write(|db| set_title_in(db, session, title))
    }
}

/// [`Store::set_title`] in the caller's write transaction, on either engine.
fn set_title_in(db: &mut impl Sql, session: &SessionId, title: Option<&str>) -> Result<()> {
    super::write::keepable(session, "title", title)?;
    if db.run(SET_TITLE, &values![session.as_str(), title])? == 0 {
        return Err(crate::Error::UnknownSession(session.clone()));
    }
    Ok(())
}

impl Store {
    /// Stores everything an importer produced, in one transaction: the session with its
    /// title and messages (with their usage rows), the compactions the source made (the
    /// turns before each summary compacted, the summary stored), and child sessions for the
    /// conversations run beside it, each named on the call that spawned it under
    /// `provider_metadata.session_store.child_session`.
    ///
    /// A child's `sessions.parent_id` names the imported session (its `forked_at_turn`
    /// stays NULL: it is not a fork). A compaction that would not cut at a turn start is
    /// left out (the importers never make one).
    pub fn import(&self, imported: &Imported) -> Result<ImportedSessions> {
        self.write(|tx| import_tree(tx, imported))
    }

    /// Imports a transcript from `input` into a new session, in one transaction, reading it
    /// as it goes: a request body (Anthropic, OpenAI, Responses, Gemini) is checked whole
    /// first (UTF-8, syntax, duplicate keys: the errors [`crate::import::import_bytes`]
    /// gives), then read again one message at a time, and its messages are appended in
    /// batches as they settle. Peak memory is about one message and the open end of the
    /// conversation, not the file: `benches/memory.rs` measures it. The JSON Lines logs
    /// (Claude Code, Codex) are still read whole, then stored as [`Store::import`] stores them.
    ///
    /// A refused transcript (any [`Error::Import`](crate::Error::Import)) or a refused
    /// message leaves nothing behind, as with [`Store::import`]. `input` is read from its
    /// current position and read more than once (hence `Seek`).
    pub fn import_reader<R: Read + Seek>(&self, format: Format, input: R) -> Result<ImportSummary> {
        self.import_reader_as(format, input, None)
    }

    /// [`Store::import_reader`], naming `model` (`provider/model`) as the writer of every
    /// assistant message the source leaves without one ([`crate::import::name_model`];
    /// `import --model`).
    pub fn import_reader_as<R: Read + Seek>(
        &self,
        format: Format,
        input: R,
        model: Option<&str>,
    ) -> Result<ImportSummary> {
        let mut input = BufReader::with_capacity(READ_BUFFER, input);
        self.write(|tx| import_streamed(tx, format, &mut input, model))
    }
}

impl Store {
    /// One import run of several transcripts (a folder of logs; a Codex parent's rollout and
    /// its sub-agents'), in one transaction: each `(format, input)` imported as
    /// [`Store::import_reader_as`] imports one, in the order given, with `model` named as
    /// there. A sub-agent's log and its parent's are linked whichever comes first. One
    /// refused input leaves nothing of any of them behind. The summaries follow the inputs'
    /// order.
    pub fn import_readers_as<R: Read + Seek>(
        &self,
        inputs: Vec<(Format, R)>,
        model: Option<&str>,
    ) -> Result<Vec<ImportSummary>> {
        let mut inputs: Vec<(Format, BufReader<R>)> = inputs
            .into_iter()
            .map(|(format, input)| (format, BufReader::with_capacity(READ_BUFFER, input)))
            .collect();
        self.write(|tx| {
            inputs
                .iter_mut()
                .map(|(format, input)| import_streamed(tx, *format, input, model))
                .collect()
        })
    }
}

/// How much of the input a streamed import reads at once.
const READ_BUFFER: usize = 64 * 1024;

/// What [`Store::import_reader`] stored.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ImportSummary {
    /// The imported conversation.
    pub session: SessionId,
    /// Its child sessions (sub-agents), in the source's order.
    pub children: Vec<SessionId>,
    /// Messages stored in `session`, its system prompt included.
    pub messages: usize,
    /// See [`Imported::tombstoned`].
    pub tombstoned: Vec<String>,
    /// See [`Imported::orphans_as_text`]: in the session and its child sessions alike (a
    /// sub-agent's result answering nothing is kept as text too).
    pub orphans_as_text: usize,
    /// See [`Imported::warnings`].
    pub warnings: Vec<String>,
    /// The source's other conversations, each a session of its own (see
    /// [`BranchSession`]), in the source's order.
    pub branches: Vec<BranchSession>,
}

/// A backend's open write transaction, as an import writes into it: the one import logic
/// below runs on SQLite and PostgreSQL alike. Everything but [`ImportTarget::link_call`] is
/// written once over the engine seam ([`ImportTarget::db`]).
pub(crate) trait ImportTarget {
    /// The engine seam of this transaction.
    type Db: Sql;

    /// This transaction, as the engine seam.
    fn db(&mut self) -> &mut Self::Db;

    /// Records `child` on the call that spawned it (JSON edited in SQL on SQLite, in Rust on
    /// PostgreSQL).
    fn link_call(&mut self, session: &SessionId, call: &str, child: &SessionId) -> Result<()>;

    /// A new session with a fresh id, its title and parent set, its row locked.
    fn create_session(
        &mut self,
        created: &str,
        title: Option<&str>,
        parent: Option<&SessionId>,
    ) -> Result<SessionId> {
        let id = SessionId::random();
        super::write::keepable(&id, "title", title)?;
        let db = self.db();
        db.run(
            INSERT_IMPORTED_SESSION,
            &values![id.as_str(), created, title, parent.map(SessionId::as_str)],
        )?;
        db.lock_session(&id)?;
        Ok(id)
    }

    /// Dates the session by its source (see [`SourceSpan`]); without a time, leaves it.
    fn set_dates(&mut self, session: &SessionId, span: SourceSpan) -> Result<()> {
        if let SourceSpan(Some((first, last))) = span {
            let (first, last) = (format_time(first), format_time(last));
            self.db().run(
                SET_DATES,
                &values![session.as_str(), first.as_str(), last.as_str()],
            )?;
        }
        Ok(())
    }

    /// Sets the session's title.
    fn set_title(&mut self, session: &SessionId, title: &str) -> Result<()> {
        super::write::keepable(session, "title", Some(title))?;
        self.db()
            .run(SET_TITLE, &values![session.as_str(), title])?;
        Ok(())
    }

    /// Checks `messages` against the session's tail and appends them.
    fn append(&mut self, session: &SessionId, messages: &[NewMessage]) -> Result<Vec<Appended>> {
        append_in(self.db(), session, messages)
    }

    /// Marks every message before `seq` compacted and stores the summary.
    fn compact(&mut self, session: &SessionId, c: &Compaction<'_>) -> Result<()> {
        let db = self.db();
        db.run(MARK_BEFORE, &values![session.as_str(), c.seq])?;
        db.run(
            INSERT_SUMMARY,
            &values![
                session.as_str(),
                c.last_turn,
                c.compacted_from,
                c.through_seq,
                c.text,
                c.created
            ],
        )?;
        Ok(())
    }
}

/// One compaction to store (the `summaries` row and the messages it hides).
pub(crate) struct Compaction<'a> {
    /// `seq` of the first message left visible.
    pub(crate) seq: i64,
    /// The last turn the summary covers.
    pub(crate) last_turn: i64,
    /// The first turn it covers that an earlier summary did not.
    pub(crate) compacted_from: i64,
    /// `seq` of the last message it covers.
    pub(crate) through_seq: i64,
    /// The summary text.
    pub(crate) text: &'a str,
    /// When.
    pub(crate) created: &'a str,
}

/// Every engine's transaction is an import target: [`Sql::link_call`] is its own.
impl<S: Sql> ImportTarget for S {
    type Db = S;

    fn db(&mut self) -> &mut S {
        self
    }

    fn link_call(&mut self, session: &SessionId, call: &str, child: &SessionId) -> Result<()> {
        Sql::link_call(self, session, call, child)
    }
}

/// [`Sql::link_call`] on SQLite: the call's metadata edited with `json_set`.
pub(crate) fn link_call(
    conn: &Connection,
    session: &SessionId,
    call: &str,
    child: &SessionId,
) -> Result<()> {
    conn.prepare_cached(LINK_CALL)?
        .execute(params![session.as_str(), call, child.as_str()])?;
    Ok(())
}

/// [`Store::import`] inside the caller's transaction.
pub(crate) fn import_tree<T: ImportTarget>(
    target: &mut T,
    imported: &Imported,
) -> Result<ImportedSessions> {
    let mut children = Vec::new();
    let mut branches = Vec::new();
    let session = import_in(target, imported, None, &mut children, &mut branches)?;
    Ok(ImportedSessions {
        session,
        children,
        branches,
    })
}

fn import_in<T: ImportTarget>(
    target: &mut T,
    imported: &Imported,
    parent: Option<&SessionId>,
    children: &mut Vec<SessionId>,
    branches: &mut Vec<BranchSession>,
) -> Result<SessionId> {
    let (id, _) = import_one(target, imported, parent, children, branches)?;
    Ok(id)
}

/// [`import_in`], also handing back the rows appended.
fn import_one<T: ImportTarget>(
    target: &mut T,
    imported: &Imported,
    parent: Option<&SessionId>,
    children: &mut Vec<SessionId>,
    branches: &mut Vec<BranchSession>,
) -> Result<(SessionId, Vec<(Role, Appended)>)> {
    let created = format_time(now());
    let id = target.create_session(&created, imported.title.as_deref(), parent)?;
    let messages: Vec<NewMessage> = imported
        .system
        .iter()
        .chain(&imported.messages)
        .cloned()
        .collect();
    let appended = target.append(&id, &messages)?;
    let mut span = SourceSpan::default();
    span.extend(&messages);
    target.set_dates(&id, span)?;
    let rows: Vec<(Role, Appended)> = messages.iter().map(|m| m.role).zip(appended).collect();
    let offset = usize::from(imported.system.is_some());
    compact_in(target, &id, &rows, offset, &imported.compactions, &created)?;
    if parent.is_none() {
        super::subagents::record_source_in(
            target.db(),
            &id,
            super::subagents::SourceIds::of(imported),
        )?;
    }
    // Each conversation by its index in a branch's `parent`: 0 this one, k its k-th child.
    let mut conversations = vec![(id.clone(), rows.clone())];
    for child in &imported.children {
        let (child_id, child_rows) =
            import_one(target, &child.imported, Some(&id), children, branches)?;
        conversations.push((child_id.clone(), child_rows));
        if let Some(branch) = child.branch {
            let k = conversations.len() - 1;
            branches.push(set_lineage(target, &conversations, k, branch)?);
            continue;
        }
        if let Some(call) = &child.spawned_by {
            target.link_call(&id, call, &child_id)?;
        }
        super::subagents::record_in(
            target.db(),
            Some(&id),
            &child_id,
            child.spawned_by.as_deref(),
        )?;
        children.push(child_id);
    }
    Ok((id, rows))
}

/// Records where conversation `k` of `conversations` (its session and rows) branched off:
/// the session it left and the first turn it does not share, or no parent at all.
fn set_lineage<T: ImportTarget>(
    target: &mut T,
    conversations: &[(SessionId, Vec<(Role, Appended)>)],
    k: usize,
    branch: crate::import::Branch,
) -> Result<BranchSession> {
    let (session, rows) = &conversations[k];
    let forked_from = branch
        .parent
        .filter(|&p| p < k)
        .and_then(|p| conversations.get(p))
        .map(|(id, _)| id.clone());
    let at_turn = forked_from
        .as_ref()
        .and_then(|_| rows.get(branch.shared))
        .map(|(_, row)| row.turn_index);
    target.db().run(
        SET_LINEAGE,
        &values![
            session.as_str(),
            forked_from.as_ref().map(SessionId::as_str),
            at_turn
        ],
    )?;
    Ok(BranchSession {
        session: session.clone(),
        forked_from,
        at_turn,
    })
}

/// Appends each batch a streamed import hands out to its session (a child's session is
/// created with its first batch), keeping what placing compactions needs.
struct Appender<'a, T> {
    target: &'a mut T,
    created: &'a str,
    /// The session of each conversation (0: the imported one), once created.
    sessions: Vec<Option<SessionId>>,
    /// Per conversation, the role, `seq` and turn of every message appended.
    rows: Vec<Vec<(Role, Appended)>>,
    /// The model named for assistant messages that name none (`import --model`).
    model: Option<&'a str>,
    /// Per conversation, the span of its messages' times.
    spans: Vec<SourceSpan>,
}

impl<T: ImportTarget> Sink for Appender<'_, T> {
    type Error = crate::Error;

    fn batch(&mut self, stream: usize, mut messages: Vec<NewMessage>) -> Result<()> {
        if let Some(model) = self.model {
            crate::import::name_model(&mut messages, model);
        }
        if self.sessions.len() <= stream {
            self.sessions.resize(stream + 1, None);
            self.rows.resize_with(stream + 1, Vec::new);
            self.spans.resize(stream + 1, SourceSpan::default());
        }
        let session = match &self.sessions[stream] {
            Some(session) => session.clone(),
            None => {
                let parent = self.sessions.first().cloned().flatten();
                let session = self
                    .target
                    .create_session(self.created, None, parent.as_ref())?;
                self.sessions[stream] = Some(session.clone());
                session
            }
        };
        let appended = self.target.append(&session, &messages)?;
        self.spans[stream].extend(&messages);
        self.rows[stream].extend(messages.iter().map(|m| m.role).zip(appended));
        Ok(())
    }
}

/// Stores the compactions of one conversation, placed on the rows appended (`offset`: 1 when
/// the first row is the system prompt, which compaction indexes do not count).
fn compact_in<T: ImportTarget>(
    target: &mut T,
    session: &SessionId,
    rows: &[(Role, Appended)],
    offset: usize,
    compactions: &[ImportedCompaction],
    created: &str,
) -> Result<()> {
    let mut compacted_from = 0;
    for compaction in compactions {
        let index = offset + compaction.at;
        let (Some((role, cut)), Some((_, before))) = (
            rows.get(index),
            index.checked_sub(1).and_then(|i| rows.get(i)),
        ) else {
            continue;
        };
        let opens_turn = *role == Role::User && cut.turn_index > before.turn_index;
        if !opens_turn || cut.turn_index < 1 || cut.turn_index <= compacted_from {
            continue;
        }
        target.compact(
            session,
            &Compaction {
                seq: cut.seq,
                last_turn: cut.turn_index - 1,
                compacted_from,
                through_seq: before.seq,
                text: &compaction.summary,
                created,
            },
        )?;
        compacted_from = cut.turn_index;
    }
    Ok(())
}

/// [`Store::import_reader`] inside the caller's transaction.
fn import_streamed<T: ImportTarget, R: BufRead + Seek>(
    target: &mut T,
    format: Format,
    input: &mut R,
    model: Option<&str>,
) -> Result<ImportSummary> {
    let created = format_time(now());
    let session = target.create_session(&created, None, None)?;
    let mut sink = Appender {
        target,
        created: &created,
        sessions: vec![Some(session.clone())],
        rows: vec![Vec::new()],
        model,
        spans: vec![SourceSpan::default()],
    };
    let streamed = match format.stream(input, &mut sink) {
        Ok(streamed) => streamed,
        Err(Halt::Import(error)) => return Err(error.into()),
        Err(Halt::Sink(error)) => return Err(error),
    };
    let Appender {
        target,
        sessions,
        rows,
        spans,
        ..
    } = sink;
    for (stream, span) in spans.into_iter().enumerate() {
        if let Some(Some(id)) = sessions.get(stream) {
            target.set_dates(id, span)?;
        }
    }
    if let Some(title) = &streamed.title {
        target.set_title(&session, title)?;
    }
    let no_rows = Vec::new();
    compact_in(
        target,
        &session,
        rows.first().unwrap_or(&no_rows),
        usize::from(streamed.has_system),
        &streamed.compactions,
        &created,
    )?;
    super::subagents::record_source_in(
        target.db(),
        &session,
        super::subagents::SourceIds {
            thread: streamed.source_thread_id.as_deref(),
            subagent: streamed.subagent.as_ref(),
        },
    )?;
    let (children, branches) =
        finish_children(target, &session, &sessions, &rows, &streamed, &created)?;
    Ok(ImportSummary {
        session,
        children,
        messages: streamed.messages,
        tombstoned: streamed.tombstoned,
        orphans_as_text: streamed.orphans_as_text
            + streamed
                .children
                .iter()
                .map(|c| c.orphans_as_text)
                .sum::<usize>(),
        warnings: streamed.warnings,
        branches,
    })
}

/// The streamed import's child sessions after their rows: their compactions; for a
/// sidechain its link to the call that spawned it and its state, for a branch its lineage.
/// The sub-agents' ids and the branches, in order.
fn finish_children<T: ImportTarget>(
    target: &mut T,
    session: &SessionId,
    sessions: &[Option<SessionId>],
    rows: &[Vec<(Role, Appended)>],
    streamed: &Streamed,
    created: &str,
) -> Result<(Vec<SessionId>, Vec<BranchSession>)> {
    let no_rows = Vec::new();
    let mut children = Vec::new();
    let mut branches = Vec::new();
    for (k, child) in streamed.children.iter().enumerate() {
        let Some(Some(child_id)) = sessions.get(k + 1) else {
            continue;
        };
        compact_in(
            target,
            child_id,
            rows.get(k + 1).unwrap_or(&no_rows),
            0,
            &child.compactions,
            created,
        )?;
        if let Some(branch) = child.branch {
            // The conversations by stream, with the rows each holds, as `set_lineage` reads them.
            let conversations: Vec<(SessionId, Vec<(Role, Appended)>)> = sessions
                .iter()
                .enumerate()
                .take(k + 2)
                .map(|(s, id)| {
                    let id = id.clone().unwrap_or_else(|| session.clone());
                    let rows = if s == k + 1 {
                        rows.get(s).cloned().unwrap_or_default()
                    } else {
                        Vec::new()
                    };
                    (id, rows)
                })
                .collect();
            branches.push(set_lineage(target, &conversations, k + 1, branch)?);
            continue;
        }
        if let Some(call) = &child.spawned_by {
            target.link_call(session, call, child_id)?;
        }
        super::subagents::record_in(
            target.db(),
            Some(session),
            child_id,
            child.spawned_by.as_deref(),
        )?;
        children.push(child_id.clone());
    }
    Ok((children, branches))
}
