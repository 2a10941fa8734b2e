//! A session store for LLM agents: conversations with tool calls, persisted in SQLite so that
//! the stored history always passes the provider's contract.
//!
//! Providers reject a request whose history breaks their rules: a tool_use without its
//! tool_result right after it, a tool_result whose tool_use is gone, an empty text block, a
//! signed thinking block that moved. Once such a history is stored, every retry rebuilds the
//! same broken request. This crate refuses to store one: the write path checks every message
//! against the pairing rules (see [`Refusal`]) inside the same `BEGIN IMMEDIATE`
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

// The modules are private but for `import`: the API is the list below and four small public
// modules, so the insides can move freely.
#[cfg(feature = "tokio")]
mod async_store;
mod error;
mod fnv;
mod history;
pub mod import;
mod model;
mod store;
mod visible;

// The store for async Rust (cargo feature `tokio`).
#[cfg(feature = "tokio")]
pub use async_store::{AsyncOpenMessage, AsyncStore};

// The vocabulary: sessions, messages, parts, and what can go wrong.
pub use error::{Error, OpenError, PathProblem, Result, StorageError};
pub use history::pairing::Refusal;
pub use model::{token_count, MAX_ID_BYTES, MAX_TOKEN_COUNT};
pub use model::{
    Appended, Message, MessageState, NewMessage, Part, PartKind, Role, SessionId, SessionInfo,
    Subagent, SubagentState, UnknownPartKind, UnknownRole, Usage,
};
pub use visible::{escape_invisible, is_invisible};

// The store and what its operations take and return.
pub use history::budget::{Budget, SUMMARY_TOKENS};
pub use history::compaction::{
    plan_compaction, CompactionPlan, Cut, NothingToCompact, ProviderHistory, Summary, TurnItem,
};
pub use history::paging::{Page, TurnCursor};
pub use history::render::Provider;
pub use history::turns::turn_indexes;
pub use store::{
    clock, is_database_url, latest_schema_version, redact_database_url, schema_version,
    search_notes, validate_bundle, BranchSession, CompactionOutcome, ConnectionSettings,
    CopyReport, Deleted, Durability, ExportOptions, Forked, ImportSummary, ImportedSessions,
    Lineage, ObjectSize, OpenMessage, OverviewRow, Reclaimed, Reverted, SearchHit, SearchOptions,
    SessionHealth, SessionOverview, SessionRow, SessionSize, SessionUsage, SizeReport, Store,
    StoreOptions, TokenTotals, TranscriptFormat, TurnUsage, BUNDLE_FORMAT, BUNDLE_VERSION,
    MAX_SEARCH_TERMS,
};
pub use store::{ReadableSession, StoredPart};

/// Provider requests: the defensive loader, the renderers, and each provider's contract.
///
/// [`Store::export_now`] is the usual way in; these are the pieces it is built from, for
/// a caller that holds messages of its own.
pub mod request {
    pub use crate::history::contract::{
        check, check_anthropic, check_gemini, check_openai, check_responses,
        check_signed_by_target, ProviderRule, ProviderViolation,
    };
    pub use crate::history::render::{blank_turn_text, digests, render, MessageDigest};
    pub use crate::history::request::Request;
    pub use crate::history::sanitize::{
        sanitize, BlankTurn, Repair, RepairKind, View, ViewMessage,
    };
    pub use crate::history::signed::signature;
    pub use crate::history::texts::{describe, is_tombstone, tombstone as tombstone_text};
    pub use crate::history::thinking::{ThinkingConfig, ThinkingState};
}

/// Health: the contract's rules over stored sessions, and what `store-repair` runs.
pub mod repair {
    pub use crate::history::rules::{CheckOptions, HealthRule, Problem, UnknownRule, WRITER_LEASE};
    pub use crate::store::repair::{
        backup_database, default_backup_path, inspect_database_file, inspect_database_url,
        CheckReport, DatabaseFile, LoggedChange, OrphanMend, OrphanRow, RepairOptions,
        SessionRepair, ORPHAN_ROW,
    };
}
