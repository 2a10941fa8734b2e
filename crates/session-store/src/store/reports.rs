//! What the engines hand back to [`Store`](super::Store) beside messages: a session's
//! overview row, search hits, sizes, lineage and a session's raw rows for a copy. The types
//! sit below the engine seam (`engine.rs`) that returns them and the operations that build
//! them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::model::SessionId;

/// One session's place in the fork tree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lineage {
    /// The session.
    pub id: SessionId,
    /// The session it was forked from, when it is a fork whose parent still exists.
    pub parent: Option<SessionId>,
    /// The first turn it did not copy from its parent, when it is a fork.
    pub forked_at_turn: Option<i64>,
    /// How deep it sits in the tree (0 for a root).
    pub depth: usize,
}

/// Space given back by [`Store::reclaim_space`](crate::Store::reclaim_space), measured on the file system (PostgreSQL:
/// in the bytes of the store's relations, [`SizeReport::file_bytes`](crate::SizeReport::file_bytes)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reclaimed {
    /// Bytes of the database file and its WAL before.
    pub before_bytes: u64,
    /// Bytes of the database file and its WAL after.
    pub after_bytes: u64,
    /// True when this call rewrote the file with a full `VACUUM` (the first reclaim of a file,
    /// which switches it to incremental auto-vacuum, or [`Store::vacuum`](crate::Store::vacuum)). PostgreSQL: true
    /// for `VACUUM FULL` ([`Store::vacuum`](crate::Store::vacuum)), false for `VACUUM`.
    pub full_vacuum: bool,
}

/// Where the bytes of the database are. Each field says what it is on SQLite, then on
/// PostgreSQL, where "the database" is the relations of the store's schema.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SizeReport {
    /// Bytes of the database file (`page_count * page_size`). PostgreSQL: of every table
    /// (with its TOAST data) and index of the store's schema.
    pub file_bytes: u64,
    /// Bytes of free pages inside it, which [`Store::reclaim_space`](crate::Store::reclaim_space) gives back. PostgreSQL:
    /// 0 (the server keeps no such count without an extension).
    pub free_bytes: u64,
    /// Bytes of the write-ahead log beside it. PostgreSQL: 0 (the server's log is shared by
    /// every database on it).
    pub wal_bytes: u64,
    /// Bytes per table or index (SQLite's `dbstat`), largest first. PostgreSQL:
    /// `pg_table_size` per table, `pg_relation_size` per index.
    pub objects: Vec<ObjectSize>,
    /// Bytes of the full-text search index (the `parts_fts` tables). PostgreSQL: the GIN
    /// index `parts_search` (the indexed values are in `parts`).
    pub search_index_bytes: u64,
    /// How many sessions the database holds.
    pub sessions: u64,
    /// Content bytes of every part (text, tool input, ids, provider metadata).
    pub content_bytes: u64,
    /// Of those, the bytes of tool results.
    pub tool_output_bytes: u64,
    /// The largest sessions by content bytes, largest first.
    pub largest: Vec<SessionSize>,
}

/// One table or index.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectSize {
    /// Its name.
    pub name: String,
    /// Bytes of its pages.
    pub bytes: u64,
}

/// One session's size.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSize {
    /// The session.
    pub session: SessionId,
    /// Its live messages.
    pub messages: u64,
    /// Content bytes of its parts.
    pub content_bytes: u64,
    /// Of those, the bytes of tool results.
    pub tool_output_bytes: u64,
}

impl SessionSize {
    /// A row of the per-session size query (both backends): counts as the database gives them.
    pub(crate) fn from_counts(session: String, messages: i64, content: i64, tool: i64) -> Self {
        let count = |v: i64| u64::try_from(v).unwrap_or(0);
        Self {
            session: SessionId::new(session),
            messages: count(messages),
            content_bytes: count(content),
            tool_output_bytes: count(tool),
        }
    }
}

/// What [`Store::search`](crate::Store::search) looks for besides the query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchOptions {
    /// Only this session's parts.
    pub session: Option<SessionId>,
    /// At most this many hits (best first).
    pub limit: usize,
    /// Put before and after each matched term in the snippet.
    pub highlight: (String, String),
    /// About how many tokens of context a snippet shows (at most 64).
    pub snippet_tokens: usize,
    /// When a query matches more parts than this, only the newest `max_ranked` matches are
    /// ranked (by bm25, with the whole index's statistics): ranking reads every candidate, so
    /// this bounds the cost of a common word however large the database grows.
    /// `usize::MAX` ranks every match.
    pub max_ranked: usize,
}

impl Default for SearchOptions {
    fn default() -> Self {
        Self {
            session: None,
            limit: 20,
            highlight: ("[".to_owned(), "]".to_owned()),
            snippet_tokens: 16,
            max_ranked: 1_000,
        }
    }
}

/// One part that matched.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchHit {
    /// The session it belongs to.
    pub session: SessionId,
    /// `messages.id` of its message.
    pub message_id: i64,
    /// The message's `seq`.
    pub seq: i64,
    /// The message's turn.
    pub turn: i64,
    /// The message's role, as stored.
    pub role: String,
    /// `parts.id`.
    pub part_id: i64,
    /// The part's position in its message (`parts.ordinal`, from 0): with `session` and
    /// `seq`, the part's address within its session, which a store sharded by session
    /// reaches on one shard (`message_id` and `part_id` are unique in the database, but
    /// name no session).
    #[serde(default)]
    pub ordinal: i64,
    /// The part's kind, as stored (`text`, `reasoning`, `tool_use`, `tool_result`, ...).
    pub kind: String,
    /// The matched passage with the terms highlighted.
    pub snippet: String,
    /// bm25 relevance: lower is better (SQLite's sign convention). On PostgreSQL: `ts_rank`
    /// normalised by length, negated (lower is better there too; the numbers differ).
    pub score: f64,
}

/// One session's line in a listing, counted in SQL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionOverview {
    /// The session's id.
    pub id: SessionId,
    /// When it was created; `None` when the stored text is not a timestamp (a row written
    /// by other code), so that one such row does not hide every other session.
    pub created_at: Option<DateTime<Utc>>,
    /// When it last changed; `None` as for `created_at`.
    pub updated_at: Option<DateTime<Utc>>,
    /// A person's name for the session (`sessions.title`), where the database has that
    /// column and the session has one.
    pub title: Option<String>,
    /// How many messages it holds (compacted ones included).
    pub messages: i64,
    /// How many distinct turns its messages belong to.
    pub turns: i64,
    /// How many of those turns hold a compacted message.
    pub compacted_turns: i64,
    /// The tool_use ids still waiting for a result at the end of the session (legal).
    pub pending: Vec<String>,
}

/// One value of a copied row.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Cell {
    Null,
    Int(i64),
    Text(String),
}

/// Every row of one session, table by table in `copy::TABLES` order.
pub(crate) type SessionRows = Vec<Vec<Vec<Cell>>>;
