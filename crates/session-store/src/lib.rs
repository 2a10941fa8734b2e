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

// The modules are private: the API is the flat list below, so the insides can move freely.
mod error;
mod fnv;
mod history;
mod import;
mod model;
mod store;

// The vocabulary.
pub use error::{Error, Result, StorageError};
pub use model::{
    Appended, Message, MessageState, NewMessage, Part, PartKind, Role, SessionId, SessionInfo,
    UnknownPartKind, UnknownRole,
};

// The store: opening, writing, reading, turns, compaction, revert, export.
pub use history::budget::{
    estimate_message, estimate_part, plan_budget, Budget, Reported, SummaryNote, SUMMARY_TOKENS,
};
pub use history::compaction::{
    plan_compaction, CompactionPlan, Cut, NothingToCompact, ProviderHistory, Summary, TurnItem,
};
pub use history::paging::{page_last_turn, Page, TurnCursor};
pub use history::pairing::Refusal;
pub use history::turns::turn_indexes;
pub use import::stream::validate as validate_transcript;
pub use model::Usage;
pub use store::ImportSummary;
pub use store::{
    clock, latest_schema_version, schema_version, CompactionOutcome, ConnectionSettings,
    Durability, ExportOptions, ImportedSessions, OpenMessage, PathProblem, Reverted,
    SessionOverview, Store, StoreOptions,
};
pub use store::{is_database_url, redact_database_url, CopyReport};
pub use store::{
    Deleted, Forked, Lineage, ObjectSize, Reclaimed, SearchHit, SearchOptions, SessionSize,
    SessionUsage, SizeReport, TokenTotals, TurnUsage,
};

// Health: the contract's rules over stored sessions, and store-repair's mend.
pub use history::rules::{check_session, CheckOptions, HealthRule, Problem, UnknownRule};
pub use store::repair::{
    backup_database, default_backup_path, inspect_database_file, inspect_database_url, CheckReport,
    DatabaseFile, LoggedChange, RepairOptions, SessionRepair,
};

// Provider requests: the defensive loader, renderers and the providers' contracts.
pub use history::contract::{
    check as check_request, check_anthropic, check_gemini, check_openai, check_responses,
    check_signed_by_target, ProviderRule, ProviderViolation,
};
pub use history::models::{bind_to_model, latest_model};
pub use history::render::{digests, first_divergence, render, render_for, MessageDigest, Provider};
pub use history::request::Request;
pub use history::sanitize::{sanitize, Repair, RepairKind, View, ViewMessage};
pub use history::signed::signature;
pub use history::texts::{describe, is_tombstone};
pub use history::thinking::{ThinkingConfig, ThinkingState};

// Import: transcripts in, messages that pass the pairing rules out.
pub use import::detect::{
    confirm as confirm_format, confirm_sample as confirm_format_of, detect as detect_format,
    detect_sample as detect_format_of, DetectError, Evidence, Sample, CANDIDATES as FORMATS,
};
pub use import::{
    import as import_transcript, import_bytes as import_transcript_bytes,
    text_of as transcript_text, Format, ImportError, Imported, ImportedChild, ImportedCompaction,
    Location, UnknownFormat,
};
