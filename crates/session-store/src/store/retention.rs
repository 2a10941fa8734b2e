//! Retention and size: deleting sessions, pruning old ones, reporting where the bytes are,
//! and giving freed space back to the file system.
//!
//! Deleting is the only way the library removes a session's rows. One `DELETE` of the
//! session row takes everything with it through the schema's foreign keys: messages, their
//! parts (whose triggers drop the search-index entries), usage rows, summaries, reverts with
//! the reverted rows and their usage. `repair_log` has no foreign key (it outlives what it
//! describes on purpose during a repair) and is deleted by session id. A fork of a deleted
//! session stays, its `parent_id` set to NULL by the delete's own statement (PostgreSQL's
//! lineage is a plain column with no foreign key, so a distributed engine can shard it).
//!
//! SQLite keeps freed pages in the file, and FTS5 keeps deleted rows' entries (with delete
//! markers) until its segments merge. [`Store::reclaim_space`] gives both back: it merges the
//! search index (`optimize`), then the first time switches the file to
//! `auto_vacuum = INCREMENTAL` with one `VACUUM` (a full rewrite); after that
//! `PRAGMA incremental_vacuum` frees pages without rewriting anything.

use chrono::{DateTime, Utc};
use rusqlite::Connection;
use serde::{Deserialize, Serialize};

use super::handle::Store;
use super::pool::SqliteEngine;
use super::reports::{ObjectSize, Reclaimed, SessionSize, SizeReport};
use super::sql::{text_at, values, Sql};
use super::time::parse_time;
use crate::error::{Error, Result};
use crate::model::SessionId;

/// What deleting one session removed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deleted {
    /// The session.
    pub session: SessionId,
    /// When it last changed (as stored).
    pub updated_at: String,
    /// How many live messages it held.
    pub messages: i64,
}

const SESSION_UPDATED: &str = "SELECT updated_at FROM sessions WHERE id = ?1";
const MESSAGE_COUNT: &str = "SELECT COUNT(*) FROM messages WHERE session_id = ?1";
const DELETE_REPAIR_LOG: &str = "DELETE FROM repair_log WHERE session_id = ?1";
/// Cascades to every row of the session (see the module documentation).
const DELETE_SESSION: &str = "DELETE FROM sessions WHERE id = ?1";
/// The session's forks lose their parent (lineage is a plain column on PostgreSQL, with no
/// foreign key to set it NULL; on SQLite the key's ON DELETE SET NULL finds nothing left).
const ORPHAN_FORKS: &str = "UPDATE sessions SET parent_id = NULL WHERE parent_id = ?1 AND id <> ?1";
const ALL_UPDATED: &str = "SELECT id, updated_at FROM sessions ORDER BY updated_at, id";

const OBJECT_SIZES: &str =
    "SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY SUM(pgsize) DESC, name";

/// Bytes per session: every content column of its parts, as stored (`CAST AS BLOB` counts
/// bytes, not characters).
const SESSION_SIZES: &str = "
    SELECT s.id,
           (SELECT COUNT(*) FROM messages c WHERE c.session_id = s.id),
           COALESCE(SUM(COALESCE(length(CAST(p.text AS BLOB)), 0) + COALESCE(length(CAST(p.input AS BLOB)), 0)
                        + COALESCE(length(CAST(p.tool_use_id AS BLOB)), 0) + COALESCE(length(CAST(p.tool_name AS BLOB)), 0)
                        + COALESCE(length(CAST(p.provider_metadata AS BLOB)), 0)), 0) AS bytes,
           COALESCE(SUM(CASE WHEN p.kind IN ('tool_result', 'server_tool_result')
                             THEN COALESCE(length(CAST(p.text AS BLOB)), 0) + COALESCE(length(CAST(p.input AS BLOB)), 0)
                             ELSE 0 END), 0)
    FROM sessions s LEFT JOIN messages m ON m.session_id = s.id LEFT JOIN parts p ON p.message_id = m.id
    GROUP BY s.id ORDER BY bytes DESC, s.id";

impl Store {
    /// Deletes the session and every row that belongs to it (messages, parts and their
    /// search-index entries, usage, summaries, reverts, its `repair_log` rows) in one
    /// `BEGIN IMMEDIATE` transaction. [`crate::Error::UnknownSession`], with nothing
    /// deleted, when it does not exist. The freed pages stay in the file until
    /// [`Store::reclaim_space`].
    pub fn delete_session(&self, session: &SessionId) -> Result<Deleted> {
        self.write(|tx| {
            tx.lock_session(session)?;
            delete_in(tx, session)
        })
    }

    /// The sessions that [`Store::prune`] would delete: those last changed before `cutoff`,
    /// oldest first. A session whose `updated_at` cannot be read as a time is never a
    /// candidate.
    pub fn prune_candidates(&self, cutoff: DateTime<Utc>) -> Result<Vec<Deleted>> {
        self.read(|db| {
            let mut out = Vec::new();
            for (session, updated_at) in older_than(db, cutoff)? {
                let messages = message_count(db, &session)?;
                out.push(Deleted {
                    session,
                    updated_at,
                    messages,
                });
            }
            Ok(out)
        })
    }

    /// Deletes every session last changed before `cutoff`, each in its own transaction that
    /// checks the time again under the write lock: a session a live writer touched meanwhile
    /// is kept. Returns what was deleted, oldest first.
    pub fn prune(&self, cutoff: DateTime<Utc>) -> Result<Vec<Deleted>> {
        let candidates = self.read(|db| older_than(db, cutoff))?;
        let mut deleted = Vec::new();
        for (session, _) in candidates {
            let done = self.write(|tx| {
                match tx.lock_session(&session) {
                    // Deleted meanwhile: nothing left to prune.
                    Err(Error::UnknownSession(_)) => return Ok(None),
                    other => other?,
                }
                match updated_at(tx, &session)?.as_deref().and_then(parse_time) {
                    Some(time) if time < cutoff => Ok(Some(delete_in(tx, &session)?)),
                    _ => Ok(None),
                }
            })?;
            deleted.extend(done);
        }
        Ok(deleted)
    }

    /// Where the bytes are: the file, its free pages and WAL, each table and index, the
    /// search index, and the `top` largest sessions with how much of each is tool output.
    /// Reads one snapshot; the only write is the search index's catch-up (parts appended
    /// since the last search are indexed first, so the index is measured as a search uses it).
    ///
    /// On PostgreSQL the same report describes the relations of the store's schema (what
    /// each figure is there: `store/pg/retention.rs`, `PgStore::size_report`): `file_bytes`
    /// is their total, `free_bytes` and `wal_bytes` are 0, `objects` are its tables and
    /// indexes, and the per-session figures are the same as SQLite's.
    pub fn size_report(&self, top: usize) -> Result<SizeReport> {
        self.engine.size_report(top)
    }

    /// Gives the database's free pages back to the file system and truncates the WAL,
    /// measuring the file before and after.
    ///
    /// It first merges the search index into one segment (FTS5 `optimize`, a pass over the
    /// whole index), which drops the entries of deleted parts.
    ///
    /// The first call on a file switches it to `auto_vacuum = INCREMENTAL`, which takes one
    /// `VACUUM` (a rewrite of the whole file, needing as much free disk again); later calls
    /// run `PRAGMA incremental_vacuum`, which only moves and drops the free pages. Both wait
    /// for a live writer like any write, and readers keep reading.
    ///
    /// On PostgreSQL it is `VACUUM` of the store's tables (dead rows' space reusable, empty
    /// pages at a table's end given back; `full_vacuum` false), measured in the bytes of the
    /// store's relations.
    pub fn reclaim_space(&self) -> Result<Reclaimed> {
        self.reclaim(false)
    }

    /// [`Store::reclaim_space`] with a full `VACUUM` every time: the whole file is rewritten,
    /// which also gives back the room in half-empty pages that deleting rows scattered over
    /// the file leaves (incremental vacuum only frees whole pages). Needs as much free disk
    /// as the database, and time in proportion to it.
    ///
    /// On PostgreSQL it is `VACUUM FULL` of the store's tables: each rewritten under an
    /// exclusive lock (readers and writers of it wait).
    pub fn vacuum(&self) -> Result<Reclaimed> {
        self.reclaim(true)
    }

    fn reclaim(&self, always_full: bool) -> Result<Reclaimed> {
        self.engine.reclaim(always_full)
    }

    /// Bytes of the database file and its WAL. On PostgreSQL: the bytes of the store's
    /// relations (tables with their TOAST data, and indexes), 0 when the server cannot say.
    pub fn bytes_on_disk(&self) -> u64 {
        self.engine.bytes_on_disk()
    }
}

impl SqliteEngine {
    /// [`Store::size_report`] on SQLite.
    pub(super) fn size_report(&self, top: usize) -> Result<SizeReport> {
        // The index's share is the share of a current index (parts appended since the last
        // search are indexed first, V12).
        self.catch_up_search_index()?;
        let wal_bytes = file_len(&wal_path(self.path()));
        self.read(|conn| {
            let pragma = |name: &str| -> Result<u64> {
                let value: i64 = conn.query_row(&format!("PRAGMA {name}"), [], |row| row.get(0))?;
                Ok(u64::try_from(value).unwrap_or(0))
            };
            let page_size = pragma("page_size")?;
            let objects = conn
                .prepare_cached(OBJECT_SIZES)?
                .query_map([], |row| {
                    Ok(ObjectSize {
                        name: row.get(0)?,
                        bytes: u64::try_from(row.get::<_, i64>(1)?).unwrap_or(0),
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let search_index_bytes = objects
                .iter()
                .filter(|o| o.name.starts_with("parts_fts"))
                .map(|o| o.bytes)
                .sum();
            let mut stmt = conn.prepare_cached(SESSION_SIZES)?;
            let mut rows = stmt.query([])?;
            let mut totals = SizeTotals::new(top);
            while let Some(row) = rows.next()? {
                totals.add(SessionSize::from_counts(
                    row.get::<_, String>(0)?,
                    row.get(1)?,
                    row.get(2)?,
                    row.get(3)?,
                ));
            }
            let SizeTotals {
                sessions,
                content_bytes,
                tool_output_bytes,
                largest,
                ..
            } = totals;
            Ok(SizeReport {
                file_bytes: pragma("page_count")? * page_size,
                free_bytes: pragma("freelist_count")? * page_size,
                wal_bytes,
                objects,
                search_index_bytes,
                sessions,
                content_bytes,
                tool_output_bytes,
                largest,
            })
        })
    }

    /// [`Store::reclaim_space`] and [`Store::vacuum`] on SQLite.
    pub(super) fn reclaim(&self, always_full: bool) -> Result<Reclaimed> {
        self.catch_up_search_index()?;
        let before_bytes = self.bytes_on_disk();
        let conn = self.pool().get()?;
        let mode: i64 = conn.query_row("PRAGMA auto_vacuum", [], |row| row.get(0))?;
        let full_vacuum = always_full || mode != 2;
        // FTS5 records a deleted row as a delete marker in a new index segment; the entries
        // and their markers only cancel out when the segments are merged. Without this the
        // search index grows with every delete.
        conn.execute("INSERT INTO parts_fts (parts_fts) VALUES ('optimize')", [])?;
        if full_vacuum {
            conn.execute_batch("PRAGMA auto_vacuum = INCREMENTAL; VACUUM;")?;
        } else {
            incremental_vacuum(&conn)?;
        }
        // The freed pages leave the main file at the checkpoint; TRUNCATE empties the WAL.
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        drop(conn);
        Ok(Reclaimed {
            before_bytes,
            after_bytes: self.bytes_on_disk(),
            full_vacuum,
        })
    }

    /// [`Store::bytes_on_disk`] on SQLite.
    pub(super) fn bytes_on_disk(&self) -> u64 {
        file_len(self.path()) + file_len(&wal_path(self.path()))
    }
}

/// The per-session half of a [`SizeReport`], summed over sessions that come largest first:
/// both backends add their rows here.
pub(crate) struct SizeTotals {
    pub(crate) top: usize,
    pub(crate) sessions: u64,
    pub(crate) content_bytes: u64,
    pub(crate) tool_output_bytes: u64,
    pub(crate) largest: Vec<SessionSize>,
}

impl SizeTotals {
    /// Nothing counted yet; `top` sessions kept.
    pub(crate) fn new(top: usize) -> Self {
        Self {
            top,
            sessions: 0,
            content_bytes: 0,
            tool_output_bytes: 0,
            largest: Vec::new(),
        }
    }

    /// Counts one session (the next largest).
    pub(crate) fn add(&mut self, size: SessionSize) {
        self.sessions += 1;
        self.content_bytes += size.content_bytes;
        self.tool_output_bytes += size.tool_output_bytes;
        if self.largest.len() < self.top {
            self.largest.push(size);
        }
    }
}

/// `PRAGMA incremental_vacuum` returns a row per step; run it to the end.
fn incremental_vacuum(conn: &Connection) -> Result<()> {
    let mut stmt = conn.prepare("PRAGMA incremental_vacuum")?;
    let mut rows = stmt.query([])?;
    while rows.next()?.is_some() {}
    Ok(())
}

/// Deletes one session inside the caller's transaction; the session must exist.
fn delete_in(db: &mut impl Sql, session: &SessionId) -> Result<Deleted> {
    let updated_at = updated_at(db, session)?.unwrap_or_default();
    let messages = message_count(db, session)?;
    db.run(DELETE_REPAIR_LOG, &values![session.as_str()])?;
    db.run(ORPHAN_FORKS, &values![session.as_str()])?;
    db.run(DELETE_SESSION, &values![session.as_str()])?;
    Ok(Deleted {
        session: session.clone(),
        updated_at,
        messages,
    })
}

/// The session's `updated_at` as stored; `None` when there is no such session.
fn updated_at(db: &mut impl Sql, session: &SessionId) -> Result<Option<String>> {
    let mut found = None;
    db.each_row(SESSION_UPDATED, &values![session.as_str()], &mut |row| {
        found = text_at(row, 0)?;
        Ok(())
    })?;
    Ok(found)
}

/// How many messages the session holds.
fn message_count(db: &mut impl Sql, session: &SessionId) -> Result<i64> {
    Ok(db
        .optional_int(MESSAGE_COUNT, &values![session.as_str()])?
        .unwrap_or(0))
}

/// Sessions whose `updated_at` reads as a time before `cutoff`, oldest first.
fn older_than(db: &mut impl Sql, cutoff: DateTime<Utc>) -> Result<Vec<(SessionId, String)>> {
    let mut rows = Vec::new();
    db.each_row(ALL_UPDATED, &[], &mut |row| {
        rows.push((
            text_at(row, 0)?.unwrap_or_default(),
            text_at(row, 1)?.unwrap_or_default(),
        ));
        Ok(())
    })?;
    Ok(older_than_in(rows, cutoff))
}

/// Of `(id, updated_at)` rows, the sessions whose `updated_at` reads as a time before
/// `cutoff`, oldest first (ties by id): what both backends prune.
pub(crate) fn older_than_in(
    rows: Vec<(String, String)>,
    cutoff: DateTime<Utc>,
) -> Vec<(SessionId, String)> {
    let mut out = Vec::new();
    for (id, updated_at) in rows {
        if let Some(time) = parse_time(&updated_at) {
            if time < cutoff {
                out.push((time, SessionId::new(id), updated_at));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    out.into_iter().map(|(_, id, at)| (id, at)).collect()
}

fn wal_path(path: &std::path::Path) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-wal");
    std::path::PathBuf::from(name)
}

fn file_len(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}
