//! `session_store._native`: the Rust library behind the Python package `session_store`.
//!
//! Everything crosses the FFI line as JSON text (the Python side runs `json.dumps` and
//! `json.loads`, both in C) or as plain strings, so no Python object is walked here. Every
//! store call runs with the GIL released ([`Python::detach`]); every library error becomes a
//! Python exception of the `session_store.Error` family (`failure`), and nothing here
//! unwraps input or I/O.

use std::sync::{Arc, RwLock};

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use serde_json::Value;
use session_store as lib;
use session_store::SessionId;

mod agents;
mod claude;

create_exception!(
    session_store,
    Error,
    PyException,
    "Anything the session store refused or failed to do; nothing was written."
);
create_exception!(
    session_store,
    Refused,
    Error,
    "A write the pairing rules refuse: `rule` names the rule, `ids` the tool_use ids involved."
);
create_exception!(
    session_store,
    InvalidInput,
    Error,
    "Input that is not what the call takes (a dict that is not a message, an item without a type)."
);
create_exception!(
    session_store,
    UnknownSession,
    Error,
    "No session with that id in the store."
);
create_exception!(session_store, ClosedStore, Error, "The store was closed.");

/// Why a call failed, built without the GIL and raised with it ([`failure`]).
#[derive(Debug)]
pub(crate) enum Failure {
    /// The library said no.
    Store(lib::Error),
    /// The input is not what the call takes.
    Input(String),
    /// The store was closed.
    Closed,
}

impl From<lib::Error> for Failure {
    fn from(error: lib::Error) -> Self {
        Failure::Store(error)
    }
}

/// The Python exception for `failure`: `Refused` (with `rule`, `ids`, `index`) for a pairing
/// refusal, `UnknownSession`, `InvalidInput`, `ClosedStore`, else `Error`.
fn failure(py: Python<'_>, failure: Failure) -> PyErr {
    match failure {
        Failure::Store(lib::Error::Refused {
            session,
            index,
            reason,
        }) => {
            let message = format!(
                "refused ({}) in session {session}, message {index}: {reason}",
                reason.rule()
            );
            let error = Refused::new_err(message);
            let value = error.value(py);
            let attributes = [
                value.setattr("rule", reason.rule()),
                value.setattr("ids", reason.ids()),
                value.setattr("index", index),
                value.setattr("session", session.as_str()),
            ];
            match attributes.into_iter().find_map(Result::err) {
                Some(setattr_failed) => setattr_failed,
                None => error,
            }
        }
        Failure::Store(lib::Error::UnknownSession(session)) => {
            UnknownSession::new_err(format!("unknown session {session}"))
        }
        Failure::Store(
            error @ (lib::Error::Import(_)
            | lib::Error::InvalidSessionId { .. }
            | lib::Error::TimeOutOfRange { .. }),
        ) => InvalidInput::new_err(error.to_string()),
        Failure::Store(error) => Error::new_err(error.to_string()),
        Failure::Input(message) => InvalidInput::new_err(message),
        Failure::Closed => ClosedStore::new_err("the store is closed"),
    }
}

/// Creates the session unless it exists (another writer creating it first is fine).
pub(crate) fn ensure_session(store: &lib::Store, session: &SessionId) -> Result<(), Failure> {
    if store.has_session(session)? {
        return Ok(());
    }
    match store.create_session_with_id(session) {
        Ok(()) | Err(lib::Error::SessionExists(_)) => Ok(()),
        Err(error) => Err(error.into()),
    }
}

/// JSON text from Python, parsed; what is not JSON is [`Failure::Input`].
pub(crate) fn parse(text: &str, what: &str) -> Result<Value, Failure> {
    serde_json::from_str(text).map_err(|e| Failure::Input(format!("{what} is not JSON: {e}")))
}

/// JSON text for Python.
pub(crate) fn dump(value: &Value) -> Result<String, Failure> {
    serde_json::to_string(value).map_err(|e| Failure::Input(format!("cannot write JSON: {e}")))
}

/// A store opened on a file path or a `postgres://` URL. Thread-safe: the handle is shared,
/// and `close` waits for no call (calls in flight finish on their own handle).
#[pyclass(module = "session_store._native", frozen)]
struct Store {
    inner: RwLock<Option<Arc<lib::Store>>>,
    /// Where the Claude adapter's mirror of each session stands ([`claude::append`]).
    claude_cursors: claude::Cursors,
}

impl Store {
    /// The open store, or [`Failure::Closed`].
    fn handle(&self) -> Result<Arc<lib::Store>, Failure> {
        match self.inner.read() {
            Ok(guard) => guard.clone().ok_or(Failure::Closed),
            Err(poisoned) => poisoned.into_inner().clone().ok_or(Failure::Closed),
        }
    }

    /// Runs `work` on the store with the GIL released; its failure raised as a Python error.
    fn run<T, F>(&self, py: Python<'_>, work: F) -> PyResult<T>
    where
        T: Send,
        F: FnOnce(&lib::Store) -> Result<T, Failure> + Send,
    {
        let store = self.handle().map_err(|f| failure(py, f))?;
        py.detach(move || work(&store)).map_err(|f| failure(py, f))
    }
}

#[pymethods]
impl Store {
    /// Opens (creating if needed, and bringing to the current schema) the database at `db`.
    #[new]
    fn new(py: Python<'_>, db: String) -> PyResult<Self> {
        let store = py
            .detach(move || lib::Store::open(&db).map_err(lib::Error::from))
            .map_err(|e| failure(py, e.into()))?;
        Ok(Self {
            inner: RwLock::new(Some(Arc::new(store))),
            claude_cursors: claude::Cursors::default(),
        })
    }

    /// Closes the store: later calls raise `ClosedStore`. Closing twice is fine.
    fn close(&self) {
        let taken = match self.inner.write() {
            Ok(mut guard) => guard.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        drop(taken);
    }

    /// Whether `close` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.handle().is_err()
    }

    /// A new session with a fresh id.
    fn create_session(&self, py: Python<'_>) -> PyResult<String> {
        self.run(py, |store| Ok(store.create_session()?.as_str().to_owned()))
    }

    /// Whether the session exists.
    fn has_session(&self, py: Python<'_>, session: String) -> PyResult<bool> {
        self.run(py, move |store| {
            Ok(store.has_session(&SessionId::new(session))?)
        })
    }

    /// Deletes the session and all its rows; false when there was none.
    fn delete_session(&self, py: Python<'_>, session: String) -> PyResult<bool> {
        self.run(py, move |store| {
            match store.delete_session(&SessionId::new(session)) {
                Ok(_) => Ok(true),
                Err(lib::Error::UnknownSession(_)) => Ok(false),
                Err(error) => Err(error.into()),
            }
        })
    }

    /// Appends one message in the Anthropic Messages shape (JSON text), in one transaction:
    /// a user message's tool_results become a tool message before the rest.
    fn append(&self, py: Python<'_>, session: String, message: String) -> PyResult<()> {
        self.run(py, move |store| {
            let value = parse(&message, "the message")?;
            let messages = lib::import::anthropic_message(&value)
                .map_err(|e| Failure::Input(format!("not an Anthropic message: {e}")))?;
            store.append_batch(&SessionId::new(session), messages)?;
            Ok(())
        })
    }

    /// Tombstones for the session's pending calls; their ids.
    #[pyo3(signature = (session, reason=None))]
    fn cancel_pending(
        &self,
        py: Python<'_>,
        session: String,
        reason: Option<String>,
    ) -> PyResult<Vec<String>> {
        self.run(py, move |store| {
            let id = SessionId::new(session);
            if !store.has_session(&id)? {
                return Err(lib::Error::UnknownSession(id).into());
            }
            Ok(store.cancel_pending(&id, reason.as_deref().unwrap_or(""))?)
        })
    }

    /// The request body the library would send now (the CLI's `export`), as JSON text.
    #[pyo3(signature = (session, format, model=None))]
    fn export(
        &self,
        py: Python<'_>,
        session: String,
        format: String,
        model: Option<String>,
    ) -> PyResult<String> {
        self.run(py, move |store| {
            export(store, &SessionId::new(session), &format, model)
        })
    }

    /// The contract's rules broken by the session, as a JSON list of problems.
    fn check(&self, py: Python<'_>, session: String) -> PyResult<String> {
        self.run(py, move |store| {
            let id = SessionId::new(session);
            if !store.has_session(&id)? {
                return Err(lib::Error::UnknownSession(id).into());
            }
            let report = store.check(
                std::slice::from_ref(&id),
                &lib::repair::RepairOptions::default(),
            )?;
            let problems = serde_json::to_value(&report.violations)
                .map_err(|e| Failure::Input(format!("cannot write JSON: {e}")))?;
            dump(&problems)
        })
    }

    /// The CLI's `sessions --json` rows, as JSON text.
    fn sessions(&self, py: Python<'_>) -> PyResult<String> {
        self.run(py, |store| {
            let mut rows = Vec::new();
            for overview in store.session_overviews()? {
                rows.extend(store.session_row(&overview)?);
            }
            serde_json::to_string(&rows)
                .map_err(|e| Failure::Input(format!("cannot write JSON: {e}")))
        })
    }

    /// Sets (or, with None, clears) the session's title.
    #[pyo3(signature = (session, title=None))]
    fn set_title(&self, py: Python<'_>, session: String, title: Option<String>) -> PyResult<()> {
        self.run(py, move |store| {
            Ok(store.set_title(&SessionId::new(session), title.as_deref())?)
        })
    }

    /// The ids that start with `prefix`, in id order.
    fn sessions_with_prefix(&self, py: Python<'_>, prefix: String) -> PyResult<Vec<String>> {
        self.run(py, move |store| {
            Ok(store
                .sessions_with_prefix(&prefix, usize::MAX)?
                .into_iter()
                .map(|id| id.as_str().to_owned())
                .collect())
        })
    }

    /// When the session last changed, in Unix epoch milliseconds; None when there is none.
    fn updated_at_ms(&self, py: Python<'_>, session: String) -> PyResult<Option<i64>> {
        self.run(py, move |store| {
            Ok(store
                .session(&SessionId::new(session))?
                .map(|info| info.updated_at.timestamp_millis()))
        })
    }

    /// OpenAI Agents SDK: stores Responses input items (a JSON list) in the session.
    fn agents_add_items(&self, py: Python<'_>, session: String, items: String) -> PyResult<()> {
        self.run(py, move |store| {
            agents::add_items(store, &SessionId::new(session), &items)
        })
    }

    /// OpenAI Agents SDK: the session's items (JSON list), the latest `limit` of them
    /// without splitting calls from their outputs. Each item is found by the shape the
    /// adapter writes, its text not read ([`agents::Find::Shaped`]): the caller parses the
    /// list and, when it is not JSON (a row another writer broke), asks again with `decode`,
    /// which decodes each part's metadata and leaves out what is not JSON.
    #[pyo3(signature = (session, limit=None, decode=false))]
    fn agents_get_items(
        &self,
        py: Python<'_>,
        session: String,
        limit: Option<usize>,
        decode: bool,
    ) -> PyResult<String> {
        let find = if decode {
            agents::Find::Decoded
        } else {
            agents::Find::Shaped
        };
        self.run(py, move |store| {
            agents::get_items(store, &SessionId::new(session), limit, find)
        })
    }

    /// OpenAI Agents SDK: removes the latest item and returns it (JSON), None when empty.
    fn agents_pop_item(&self, py: Python<'_>, session: String) -> PyResult<Option<String>> {
        self.run(py, move |store| {
            agents::pop_item(store, &SessionId::new(session))
        })
    }

    /// Claude Agent SDK: stores transcript entries (a JSON list) verbatim in the session, and
    /// the Claude Code lines among them as its messages. Returns what it did to the messages:
    /// `"appended"`, `"rewrote"` (their end was read differently) or `"unchanged"`.
    fn claude_append(
        &self,
        py: Python<'_>,
        session: String,
        entries: String,
    ) -> PyResult<&'static str> {
        let cursors = &self.claude_cursors;
        self.run(py, move |store| {
            claude::append(store, cursors, &SessionId::new(session), &entries)
        })
    }

    /// Claude Agent SDK: how many `claude_append` calls on this handle read the whole
    /// transcript again (the others read only the session's last turn).
    #[getter]
    fn claude_whole_reads(&self) -> usize {
        self.claude_cursors.whole_reads()
    }

    /// Claude Agent SDK: records `child` (a `subagents/*` subpath's session) as a sub-agent
    /// of `parent` ([`lib::Store::link_subagent`]).
    fn claude_link_subagent(&self, py: Python<'_>, parent: String, child: String) -> PyResult<()> {
        self.run(py, move |store| {
            store.link_subagent(&SessionId::new(parent), &SessionId::new(child))?;
            Ok(())
        })
    }

    /// The sub-agents `parent` spawned (every one with `None`), as a JSON list of
    /// `{"id", "parent", "parent_tool_use_id", "state"}`.
    #[pyo3(signature = (parent=None))]
    fn subagents(&self, py: Python<'_>, parent: Option<String>) -> PyResult<String> {
        self.run(py, move |store| {
            let parent = parent.map(SessionId::new);
            let found = store.subagents(parent.as_ref())?;
            serde_json::to_string(&found)
                .map_err(|e| Failure::Input(format!("cannot write JSON: {e}")))
        })
    }

    /// Claude Agent SDK: the session's entries (JSON list), None when there is no session.
    fn claude_load(&self, py: Python<'_>, session: String) -> PyResult<Option<String>> {
        self.run(py, move |store| {
            claude::load(store, &SessionId::new(session))
        })
    }
}

/// The CLI's export: the body for `format`, refused when it would break a provider rule.
fn export(
    store: &lib::Store,
    session: &SessionId,
    format: &str,
    model: Option<String>,
) -> Result<String, Failure> {
    let provider: lib::Provider = format.parse().map_err(Failure::Input)?;
    if !store.has_session(session)? {
        return Err(lib::Error::UnknownSession(session.clone()).into());
    }
    // As the CLI: the thinking latch is not written back, so an export never changes the session.
    let options = lib::ExportOptions {
        persist_latch: false,
        model,
        ..lib::ExportOptions::default()
    };
    let request = store.export_request(session, provider, lib::clock(), &options)?;
    if let Some(violation) = request.violations.first() {
        return Err(Failure::Input(format!(
            "the {provider} body for session {session} breaks {} provider rule(s), first: {violation}",
            request.violations.len()
        )));
    }
    dump(&request.body)
}

/// The module `session_store._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<Store>()?;
    m.add("Error", py.get_type::<Error>())?;
    m.add("Refused", py.get_type::<Refused>())?;
    m.add("InvalidInput", py.get_type::<InvalidInput>())?;
    m.add("UnknownSession", py.get_type::<UnknownSession>())?;
    m.add("ClosedStore", py.get_type::<ClosedStore>())?;
    Ok(())
}
