//! [`AsyncStore`]: the [`Store`] for async Rust (cargo feature `tokio`). Each operation is the
//! `Store` operation of the same name and arguments, run on tokio's blocking pool
//! (`spawn_blocking`) with its arguments moved there (a borrowed one cloned first): a
//! runtime worker thread never waits on SQLite's lock, the disk or a PostgreSQL server.
//! The results and errors are `Store`'s, unchanged.

use std::io::{BufRead, Read, Seek};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio::runtime::Handle;

use crate::error::{Error, OpenError, Result};
use crate::history::budget::Budget;
use crate::history::compaction::{ProviderHistory, Summary};
use crate::history::paging::{Page, TurnCursor};
use crate::history::render::Provider;
use crate::history::request::Request;
use crate::history::thinking::ThinkingState;
use crate::import::{Format, Imported};
use crate::model::{
    Appended, Message, NewMessage, Part, Role, SessionId, SessionInfo, Subagent, Usage,
};
use crate::store::repair::{CheckReport, RepairOptions, SessionRepair};
use crate::store::{
    CompactionOutcome, ConnectionSettings, CopyReport, Deleted, ExportOptions, Forked,
    ImportSummary, ImportedSessions, Lineage, OpenMessage, ReadableSession, Reclaimed, Reverted,
    SearchHit, SearchOptions, SessionOverview, SessionRow, SessionUsage, SizeReport, Store,
    StoreOptions, StoredPart, TranscriptFormat,
};

/// A [`Store`] whose operations are `async fn`s that run on tokio's blocking pool.
///
/// `Clone + Send + Sync`; clones share the store's pool. Needs a tokio runtime (either
/// flavour, `current_thread` included) when an operation is awaited.
///
/// ```
/// use session_store::{AsyncStore, NewMessage};
///
/// # fn main() -> session_store::Result<()> {
/// # let dir = tempfile::tempdir().expect("tempdir");
/// # let path = dir.path().join("sessions.db");
/// let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
/// runtime.block_on(async {
///     let store = AsyncStore::open(path).await?;
///     let session = store.create_session().await?;
///     store.append(&session, NewMessage::user("hello")).await?;
///     assert_eq!(store.messages(&session).await?.len(), 1);
///     Ok(())
/// })
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct AsyncStore {
    shared: Arc<Shared>,
}

/// The store the clones of one [`AsyncStore`] share; `Some` until it is dropped.
#[derive(Debug)]
struct Shared(Option<Store>);

/// The last handle can go away inside a task, on a runtime thread: a PostgreSQL client closes
/// its connection with a blocking call there, which tokio refuses (a panic). So the store
/// is dropped on the blocking pool when there is a runtime, and here when there is none.
impl Drop for Shared {
    fn drop(&mut self) {
        if let (Some(store), Ok(runtime)) = (self.0.take(), Handle::try_current()) {
            drop(runtime.spawn_blocking(move || drop(store)));
        }
    }
}

impl From<Store> for AsyncStore {
    fn from(store: Store) -> Self {
        Self {
            shared: Arc::new(Shared(Some(store))),
        }
    }
}

impl AsyncStore {
    /// [`Store::open`], on the blocking pool.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, OpenError> {
        let path = path.as_ref().to_path_buf();
        blocking(move || Store::open(path)).await.map(Self::from)
    }

    /// [`Store::open_with`], on the blocking pool.
    pub async fn open_with(
        path: impl AsRef<Path>,
        options: &StoreOptions,
    ) -> Result<Self, OpenError> {
        let (path, options): (PathBuf, _) = (path.as_ref().to_path_buf(), options.clone());
        blocking(move || Store::open_with(path, &options))
            .await
            .map(Self::from)
    }

    /// The blocking [`Store`] underneath (the same pool), for code that runs outside the
    /// runtime's workers.
    pub fn blocking_store(&self) -> &Store {
        // Taken only by `Shared::drop`, when no handle is left to ask.
        #[allow(clippy::expect_used)]
        self.shared
            .0
            .as_ref()
            .expect("the store outlives its handles")
    }

    /// [`Store::path`] (no I/O).
    pub fn path(&self) -> &Path {
        self.blocking_store().path()
    }

    /// [`Store::is_postgres`] (no I/O).
    pub fn is_postgres(&self) -> bool {
        self.blocking_store().is_postgres()
    }

    /// Runs `operation` on a clone of the store on tokio's blocking pool.
    async fn run<T: Send + 'static>(
        &self,
        operation: impl FnOnce(&Store) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let store = self.blocking_store().clone();
        blocking(move || operation(&store)).await
    }
}

/// [`OpenMessage`] for [`AsyncStore`]: each push and the finish run on tokio's blocking pool.
///
/// Dropped unfinished (or while a push is still running, when its future is dropped), the
/// message is marked `interrupted` as [`OpenMessage`]'s drop does, on the blocking pool.
#[derive(Debug)]
pub struct AsyncOpenMessage {
    /// `None` only while a push runs, or after a push whose future was dropped.
    open: Option<OpenMessage>,
}

impl AsyncOpenMessage {
    /// [`OpenMessage::appended`]; `None` after a push whose future was dropped.
    pub fn appended(&self) -> Option<&Appended> {
        self.open.as_ref().map(OpenMessage::appended)
    }

    /// [`OpenMessage::session`]; `None` after a push whose future was dropped.
    pub fn session(&self) -> Option<&SessionId> {
        self.open.as_ref().map(OpenMessage::session)
    }

    /// [`OpenMessage::len`]: how many parts are stored so far.
    pub fn len(&self) -> usize {
        self.open.as_ref().map_or(0, OpenMessage::len)
    }

    /// [`OpenMessage::is_empty`].
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// [`OpenMessage::push`], on the blocking pool. [`Error::TaskCancelled`] after an earlier
    /// push whose future was dropped: that push's message was marked `interrupted`.
    pub async fn push(&mut self, part: Part) -> Result<()> {
        self.on_pool(move |open| open.push(part)).await
    }

    /// [`OpenMessage::set_model`], on the blocking pool.
    pub async fn set_model(&mut self, model: impl Into<String>) -> Result<()> {
        let model = model.into();
        self.on_pool(move |open| open.set_model(model)).await
    }

    /// [`OpenMessage::keep_alive`], on the blocking pool.
    pub async fn keep_alive(&mut self) -> Result<()> {
        self.on_pool(OpenMessage::keep_alive).await
    }

    /// Runs `work` on the open message on the blocking pool; the handle comes back unless
    /// the future is dropped meanwhile ([`Error::TaskCancelled`] for every call after).
    async fn on_pool(
        &mut self,
        work: impl FnOnce(&mut OpenMessage) -> Result<()> + Send + 'static,
    ) -> Result<()> {
        let mut open = self.open.take().ok_or(Error::TaskCancelled)?;
        let (open, done) = blocking(move || {
            let done = work(&mut open);
            Ok::<_, Error>((open, done))
        })
        .await?;
        self.open = Some(open);
        done
    }

    /// [`OpenMessage::finish`], on the blocking pool.
    pub async fn finish(mut self) -> Result<Appended> {
        let open = self.open.take().ok_or(Error::TaskCancelled)?;
        blocking(move || open.finish()).await
    }
}

impl Drop for AsyncOpenMessage {
    fn drop(&mut self) {
        let Some(open) = self.open.take() else {
            return;
        };
        // `OpenMessage`'s drop writes (it marks the message interrupted): not on a worker.
        match Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(move || drop(open))),
            Err(_) => drop(open),
        }
    }
}

/// The runtime shut down before a blocking task ran to its end; each error type the async
/// operations return says so in its own `TaskCancelled`.
struct Cancelled;

impl From<Cancelled> for Error {
    fn from(_: Cancelled) -> Self {
        Error::TaskCancelled
    }
}

impl From<Cancelled> for OpenError {
    fn from(_: Cancelled) -> Self {
        OpenError::TaskCancelled
    }
}

/// Runs `work` on tokio's blocking pool. A panic in it goes on in the caller (as it would
/// have in a blocking call); a runtime shutting down under it is [`Error::TaskCancelled`].
async fn blocking<T: Send + 'static, E: From<Cancelled> + Send + 'static>(
    work: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<T, E> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        Err(_) => Err(E::from(Cancelled)),
    }
}

// One `async fn` per `Store` operation, in the order of the `Store` docs' modules. Each
// clones what it borrows and moves it to the blocking pool.
impl AsyncStore {
    /// [`Store::connection_settings`].
    pub async fn connection_settings(&self) -> Result<ConnectionSettings> {
        self.run(|store| store.connection_settings()).await
    }

    /// [`Store::create_session`].
    pub async fn create_session(&self) -> Result<SessionId> {
        self.run(|store| store.create_session()).await
    }

    /// [`Store::create_session_with_id`].
    pub async fn create_session_with_id(&self, id: &SessionId) -> Result<()> {
        let id = id.clone();
        self.run(move |store| store.create_session_with_id(&id))
            .await
    }

    /// [`Store::append`].
    pub async fn append(&self, session: &SessionId, message: NewMessage) -> Result<Appended> {
        let session = session.clone();
        self.run(move |store| store.append(&session, message)).await
    }

    /// [`Store::append_batch`].
    pub async fn append_batch(
        &self,
        session: &SessionId,
        messages: Vec<NewMessage>,
    ) -> Result<Vec<Appended>> {
        let session = session.clone();
        self.run(move |store| store.append_batch(&session, messages))
            .await
    }

    /// [`Store::cancel_pending`].
    pub async fn cancel_pending(&self, session: &SessionId, reason: &str) -> Result<Vec<String>> {
        let (session, reason) = (session.clone(), reason.to_owned());
        self.run(move |store| store.cancel_pending(&session, &reason))
            .await
    }

    /// [`Store::pending_tool_uses`].
    pub async fn pending_tool_uses(&self, session: &SessionId) -> Result<Vec<String>> {
        let session = session.clone();
        self.run(move |store| store.pending_tool_uses(&session))
            .await
    }

    /// [`Store::messages`].
    pub async fn messages(&self, session: &SessionId) -> Result<Vec<Message>> {
        let session = session.clone();
        self.run(move |store| store.messages(&session)).await
    }

    /// [`Store::session`].
    pub async fn session(&self, session: &SessionId) -> Result<Option<SessionInfo>> {
        let session = session.clone();
        self.run(move |store| store.session(&session)).await
    }

    /// [`Store::sessions`].
    pub async fn sessions(&self) -> Result<Vec<SessionInfo>> {
        self.run(|store| store.sessions()).await
    }

    /// [`Store::has_session`].
    pub async fn has_session(&self, session: &SessionId) -> Result<bool> {
        let session = session.clone();
        self.run(move |store| store.has_session(&session)).await
    }

    /// [`Store::session_ids`].
    pub async fn session_ids(&self) -> Result<Vec<SessionId>> {
        self.run(|store| store.session_ids()).await
    }

    /// [`Store::session_overviews`].
    pub async fn session_overviews(&self) -> Result<Vec<SessionOverview>> {
        self.run(|store| store.session_overviews()).await
    }

    /// [`Store::session_overview`].
    pub async fn session_overview(&self, session: &SessionId) -> Result<Option<SessionOverview>> {
        let session = session.clone();
        self.run(move |store| store.session_overview(&session))
            .await
    }

    /// [`Store::sessions_with_prefix`].
    pub async fn sessions_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<SessionId>> {
        let prefix = prefix.to_owned();
        self.run(move |store| store.sessions_with_prefix(&prefix, limit))
            .await
    }

    /// [`Store::page`].
    pub async fn page(
        &self,
        session: &SessionId,
        after: Option<TurnCursor>,
        max_messages: usize,
    ) -> Result<Page> {
        let session = session.clone();
        self.run(move |store| store.page(&session, after, max_messages))
            .await
    }

    /// [`Store::turns`].
    pub async fn turns(
        &self,
        session: &SessionId,
        turns: impl RangeBounds<i64> + Send + 'static,
    ) -> Result<Vec<Message>> {
        let session = session.clone();
        self.run(move |store| store.turns(&session, turns)).await
    }

    /// [`Store::last_turns`].
    pub async fn last_turns(&self, session: &SessionId, k: usize) -> Result<Vec<Message>> {
        let session = session.clone();
        self.run(move |store| store.last_turns(&session, k)).await
    }

    /// [`Store::compact`].
    pub async fn compact(
        &self,
        session: &SessionId,
        min_keep_tail: usize,
        summary: &str,
    ) -> Result<CompactionOutcome> {
        let (session, summary) = (session.clone(), summary.to_owned());
        self.run(move |store| store.compact(&session, min_keep_tail, &summary))
            .await
    }

    /// [`Store::provider_history`].
    pub async fn provider_history(&self, session: &SessionId) -> Result<ProviderHistory> {
        let session = session.clone();
        self.run(move |store| store.provider_history(&session))
            .await
    }

    /// [`Store::summaries`].
    pub async fn summaries(&self, session: &SessionId) -> Result<Vec<Summary>> {
        let session = session.clone();
        self.run(move |store| store.summaries(&session)).await
    }

    /// [`Store::revert_to_turn`].
    pub async fn revert_to_turn(&self, session: &SessionId, turn: i64) -> Result<Reverted> {
        let session = session.clone();
        self.run(move |store| store.revert_to_turn(&session, turn))
            .await
    }

    /// [`Store::undo_revert`].
    pub async fn undo_revert(&self, session: &SessionId) -> Result<Option<Reverted>> {
        let session = session.clone();
        self.run(move |store| store.undo_revert(&session)).await
    }

    /// [`Store::fork`].
    pub async fn fork(&self, source: &SessionId, at_turn: i64) -> Result<Forked> {
        let source = source.clone();
        self.run(move |store| store.fork(&source, at_turn)).await
    }

    /// [`Store::lineage`].
    pub async fn lineage(&self) -> Result<Vec<Lineage>> {
        self.run(|store| store.lineage()).await
    }

    /// [`Store::export`].
    pub async fn export(
        &self,
        session: &SessionId,
        provider: Provider,
        now: DateTime<Utc>,
        options: &ExportOptions,
    ) -> Result<Value> {
        let (session, options) = (session.clone(), options.clone());
        self.run(move |store| store.export(&session, provider, now, &options))
            .await
    }

    /// [`Store::export_now`].
    pub async fn export_now(
        &self,
        session: &SessionId,
        provider: Provider,
        options: &ExportOptions,
    ) -> Result<Value> {
        let (session, options) = (session.clone(), options.clone());
        self.run(move |store| store.export_now(&session, provider, &options))
            .await
    }

    /// [`Store::export_request`].
    pub async fn export_request(
        &self,
        session: &SessionId,
        provider: Provider,
        now: DateTime<Utc>,
        options: &ExportOptions,
    ) -> Result<Request> {
        let (session, options) = (session.clone(), options.clone());
        self.run(move |store| store.export_request(&session, provider, now, &options))
            .await
    }

    /// [`Store::thinking_state`].
    pub async fn thinking_state(&self, session: &SessionId) -> Result<ThinkingState> {
        let session = session.clone();
        self.run(move |store| store.thinking_state(&session)).await
    }

    /// [`Store::record_completion`].
    pub async fn record_completion(&self, session: &SessionId, at: DateTime<Utc>) -> Result<()> {
        let session = session.clone();
        self.run(move |store| store.record_completion(&session, at))
            .await
    }

    /// [`Store::clear_thinking_state`].
    pub async fn clear_thinking_state(&self, session: &SessionId) -> Result<()> {
        let session = session.clone();
        self.run(move |store| store.clear_thinking_state(&session))
            .await
    }

    /// [`Store::search`].
    pub async fn search(&self, query: &str, options: &SearchOptions) -> Result<Vec<SearchHit>> {
        let (query, options) = (query.to_owned(), options.clone());
        self.run(move |store| store.search(&query, &options)).await
    }

    /// [`Store::usage`].
    pub async fn usage(&self, session: &SessionId) -> Result<SessionUsage> {
        let session = session.clone();
        self.run(move |store| store.usage(&session)).await
    }

    /// [`Store::message_usage`].
    pub async fn message_usage(&self, session: &SessionId) -> Result<Vec<(i64, Usage)>> {
        let session = session.clone();
        self.run(move |store| store.message_usage(&session)).await
    }

    /// [`Store::import_session`].
    pub async fn import_session(&self, messages: Vec<NewMessage>) -> Result<SessionId> {
        self.run(move |store| store.import_session(messages)).await
    }

    /// [`Store::import`].
    pub async fn import(&self, imported: &Imported) -> Result<ImportedSessions> {
        let imported = imported.clone();
        self.run(move |store| store.import(&imported)).await
    }

    /// [`Store::import_reader`]: `input` is read on the blocking pool.
    pub async fn import_reader<R: Read + Seek + Send + 'static>(
        &self,
        format: Format,
        input: R,
    ) -> Result<ImportSummary> {
        self.run(move |store| store.import_reader(format, input))
            .await
    }

    /// [`Store::transcript`].
    pub async fn transcript(
        &self,
        session: &SessionId,
        format: TranscriptFormat,
    ) -> Result<String> {
        let session = session.clone();
        self.run(move |store| store.transcript(&session, format))
            .await
    }

    /// [`Store::export_bundle`].
    pub async fn export_bundle(&self, session: &SessionId) -> Result<String> {
        let session = session.clone();
        self.run(move |store| store.export_bundle(&session)).await
    }

    /// [`Store::import_bundle`]: `input` is read on the blocking pool.
    pub async fn import_bundle<R: BufRead + Send + 'static>(&self, input: R) -> Result<SessionId> {
        self.run(move |store| store.import_bundle(input)).await
    }

    /// [`Store::copy_to`], into another async store.
    pub async fn copy_to(&self, dest: &AsyncStore, sessions: &[SessionId]) -> Result<CopyReport> {
        let (dest, sessions) = (dest.blocking_store().clone(), sessions.to_vec());
        self.run(move |store| store.copy_to(&dest, &sessions)).await
    }

    /// [`Store::backup_to`].
    pub async fn backup_to(&self, dest: &Path) -> Result<()> {
        let dest = dest.to_path_buf();
        self.run(move |store| store.backup_to(&dest)).await
    }

    /// [`Store::orphan_rows`].
    pub async fn orphan_rows(&self) -> Result<Vec<crate::repair::OrphanRow>> {
        self.run(|store| store.orphan_rows()).await
    }

    /// [`Store::mend_orphan_rows`].
    pub async fn mend_orphan_rows(&self) -> Result<Vec<crate::repair::OrphanMend>> {
        self.run(|store| store.mend_orphan_rows()).await
    }

    /// [`Store::check`].
    pub async fn check(
        &self,
        sessions: &[SessionId],
        options: &RepairOptions,
    ) -> Result<CheckReport> {
        let (sessions, options) = (sessions.to_vec(), *options);
        self.run(move |store| store.check(&sessions, &options))
            .await
    }

    /// [`Store::repair_session`].
    pub async fn repair_session(
        &self,
        session: &SessionId,
        options: &RepairOptions,
    ) -> Result<SessionRepair> {
        let (session, options) = (session.clone(), *options);
        self.run(move |store| store.repair_session(&session, &options))
            .await
    }

    /// [`Store::repair_session_rolled_back`].
    pub async fn repair_session_rolled_back(
        &self,
        session: &SessionId,
        options: &RepairOptions,
    ) -> Result<SessionRepair> {
        let (session, options) = (session.clone(), *options);
        self.run(move |store| store.repair_session_rolled_back(&session, &options))
            .await
    }

    /// [`Store::delete_session`].
    pub async fn delete_session(&self, session: &SessionId) -> Result<Deleted> {
        let session = session.clone();
        self.run(move |store| store.delete_session(&session)).await
    }

    /// [`Store::prune_candidates`].
    pub async fn prune_candidates(&self, cutoff: DateTime<Utc>) -> Result<Vec<Deleted>> {
        self.run(move |store| store.prune_candidates(cutoff)).await
    }

    /// [`Store::prune`].
    pub async fn prune(&self, cutoff: DateTime<Utc>) -> Result<Vec<Deleted>> {
        self.run(move |store| store.prune(cutoff)).await
    }

    /// [`Store::size_report`].
    pub async fn size_report(&self, top: usize) -> Result<SizeReport> {
        self.run(move |store| store.size_report(top)).await
    }

    /// [`Store::reclaim_space`].
    pub async fn reclaim_space(&self) -> Result<Reclaimed> {
        self.run(|store| store.reclaim_space()).await
    }

    /// [`Store::vacuum`].
    pub async fn vacuum(&self) -> Result<Reclaimed> {
        self.run(|store| store.vacuum()).await
    }

    /// [`Store::open_readable`], on the blocking pool.
    pub async fn open_readable(path: impl AsRef<Path>) -> Result<Self, OpenError> {
        let path = path.as_ref().to_path_buf();
        blocking(move || Store::open_readable(path))
            .await
            .map(Self::from)
    }

    /// [`Store::open_readable_with`], on the blocking pool.
    pub async fn open_readable_with(
        path: impl AsRef<Path>,
        options: &StoreOptions,
    ) -> Result<Self, OpenError> {
        let (path, options): (PathBuf, _) = (path.as_ref().to_path_buf(), options.clone());
        blocking(move || Store::open_readable_with(path, &options))
            .await
            .map(Self::from)
    }

    /// [`Store::import_reader_as`]: `input` is read on the blocking pool.
    pub async fn import_reader_as<R: Read + Seek + Send + 'static>(
        &self,
        format: Format,
        input: R,
        model: Option<&str>,
    ) -> Result<ImportSummary> {
        let model = model.map(str::to_owned);
        self.run(move |store| store.import_reader_as(format, input, model.as_deref()))
            .await
    }

    /// [`Store::import_readers_as`]: the inputs are read on the blocking pool.
    pub async fn import_readers_as<R: Read + Seek + Send + 'static>(
        &self,
        inputs: Vec<(Format, R)>,
        model: Option<&str>,
    ) -> Result<Vec<ImportSummary>> {
        let model = model.map(str::to_owned);
        self.run(move |store| store.import_readers_as(inputs, model.as_deref()))
            .await
    }

    /// [`Store::budget`].
    pub async fn budget(&self, session: &SessionId, limit: u64) -> Result<Budget> {
        let session = session.clone();
        self.run(move |store| store.budget(&session, limit)).await
    }

    /// [`Store::subagents`].
    pub async fn subagents(&self, parent: Option<&SessionId>) -> Result<Vec<Subagent>> {
        let parent = parent.cloned();
        self.run(move |store| store.subagents(parent.as_ref()))
            .await
    }

    /// [`Store::settle_open_messages`].
    pub async fn settle_open_messages(&self, session: &SessionId) -> Result<bool> {
        let session = session.clone();
        self.run(move |store| store.settle_open_messages(&session))
            .await
    }

    /// [`Store::begin_message`]: the message's parts are then pushed with
    /// [`AsyncOpenMessage::push`], each on the blocking pool.
    pub async fn begin_message(&self, session: &SessionId, role: Role) -> Result<AsyncOpenMessage> {
        let session = session.clone();
        let open = self
            .run(move |store| store.begin_message(&session, role))
            .await?;
        Ok(AsyncOpenMessage { open: Some(open) })
    }

    /// [`Store::set_title`].
    pub async fn set_title(&self, session: &SessionId, title: Option<&str>) -> Result<()> {
        let (session, title) = (session.clone(), title.map(str::to_owned));
        self.run(move |store| store.set_title(&session, title.as_deref()))
            .await
    }

    /// [`Store::replace_from_turn`].
    pub async fn replace_from_turn(
        &self,
        session: &SessionId,
        turn: i64,
        messages: Vec<NewMessage>,
    ) -> Result<Vec<Appended>> {
        let session = session.clone();
        self.run(move |store| store.replace_from_turn(&session, turn, messages))
            .await
    }

    /// [`Store::session_row`].
    pub async fn session_row(&self, overview: &SessionOverview) -> Result<Option<SessionRow>> {
        let overview = overview.clone();
        self.run(move |store| store.session_row(&overview)).await
    }

    /// [`Store::link_subagent`].
    pub async fn link_subagent(&self, parent: &SessionId, child: &SessionId) -> Result<Subagent> {
        let (parent, child) = (parent.clone(), child.clone());
        self.run(move |store| store.link_subagent(&parent, &child))
            .await
    }

    /// [`Store::pop_part`].
    pub async fn pop_part(
        &self,
        session: &SessionId,
        matches: impl Fn(&Part) -> bool + Send + 'static,
    ) -> Result<Option<Part>> {
        let session = session.clone();
        self.run(move |store| store.pop_part(&session, matches))
            .await
    }

    /// [`Store::readable_messages`].
    pub async fn readable_messages(&self, session: &SessionId) -> Result<ReadableSession> {
        let session = session.clone();
        self.run(move |store| store.readable_messages(&session))
            .await
    }

    /// [`Store::stored_parts`].
    pub async fn stored_parts(
        &self,
        session: &SessionId,
        messages: Option<usize>,
    ) -> Result<Vec<StoredPart>> {
        let session = session.clone();
        self.run(move |store| store.stored_parts(&session, messages))
            .await
    }

    /// [`Store::copy_to_path`].
    pub async fn copy_to_path(&self, to: &Path, sessions: &[SessionId]) -> Result<CopyReport> {
        let (to, sessions) = (to.to_path_buf(), sessions.to_vec());
        self.run(move |store| store.copy_to_path(&to, &sessions))
            .await
    }

    /// [`Store::search_index_behind`].
    pub async fn search_index_behind(&self) -> Result<bool> {
        self.run(|store| store.search_index_behind()).await
    }

    /// [`Store::bytes_on_disk`] (0 when the blocking task could not run, as when the
    /// server cannot say).
    pub async fn bytes_on_disk(&self) -> u64 {
        self.run(|store| Ok(store.bytes_on_disk()))
            .await
            .unwrap_or(0)
    }
}
