//! A session store for LLM agents: conversations with tool calls, persisted in SQLite so that
//! the stored history always passes the provider's contract.
//!
//! Providers reject a request whose history breaks their rules: a tool_use without its
//! tool_result right after it, a tool_result whose tool_use is gone, an empty text block, a
//! signed thinking block that moved. Once such a history is stored, every retry rebuilds the
//! same broken request. This crate refuses to store one: the write path checks every message
//! against the pairing rules ([`history::pairing`]) inside the same `BEGIN IMMEDIATE`
//! transaction that writes it, and [`Store::cancel_pending`] answers interrupted calls with
//! tombstones.
//!
//! ```
//! use serde_json::json;
//! use session_store::{NewMessage, Part, Store};
//!
//! # fn main() -> session_store::Result<()> {
//! let dir = tempfile::tempdir().expect("tempdir");
//! let store = Store::open(dir.path().join("sessions.db"))?;
//! let session = store.create_session()?;
//! store.append(&session, NewMessage::user("What is in /tmp?"))?;
//! store.append(&session, NewMessage::assistant(vec![
//!     Part::tool_use("call_1", "bash", json!({"cmd": "ls /tmp"})),
//! ]))?;
//!
//! // A new user message while call_1 is unanswered is refused, and nothing is written.
//! let refused = store.append(&session, NewMessage::user("never mind"));
//! assert!(refused.is_err_and(|e| e.refusal().is_some()));
//!
//! // The turn was interrupted: answer the call with a tombstone, then carry on.
//! assert_eq!(store.cancel_pending(&session, "user interrupted")?, ["call_1"]);
//! store.append(&session, NewMessage::user("never mind"))?;
//! assert_eq!(store.messages(&session)?.len(), 4);
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

pub mod error;
pub mod history;
pub mod import;
pub mod model;
pub mod store;

pub use error::{Error, Result};
pub use history::compaction::{CompactionPlan, NothingToCompact, ProviderHistory, Summary};
pub use history::paging::{Page, TurnCursor};
pub use history::pairing::Refusal;
pub use model::{Appended, Message, NewMessage, Part, PartKind, Role, SessionId, SessionInfo};
pub use store::{CompactionOutcome, ImportedSessions, Reverted};
pub use store::{ConnectionSettings, Store, StoreOptions};

pub use history::contract::{
    check_anthropic, check_gemini, check_openai, check_responses, check_signed_by_target, Rule,
    Violation,
};
pub use history::render::Provider;
pub use history::request::Request;
pub use history::thinking::{ThinkingConfig, ThinkingState};
pub use store::ExportOptions;
