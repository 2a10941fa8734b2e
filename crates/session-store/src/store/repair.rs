//! Checking and mending stored sessions against the contract's rules (`store-repair`).
//!
//! [`Store::check`] is read-only: one snapshot, every session (or those named) through
//! [`check_session`]. An agent can call it at start-up. [`Store::repair_session`] mends one
//! session in one `BEGIN IMMEDIATE` transaction: it loads and checks the session again under
//! the write lock (so a session that changed since it was checked is judged as it is now),
//! applies the [`plan_mend`] plan, writes one `repair_log` row per change, and checks once
//! more before it commits. A kill at any moment leaves the session as it was or fully mended.
//!
//! [`backup_database`] takes the consistent copy `store-repair` makes before its first write,
//! and [`inspect_database_file`] refuses, without writing anything, a file the tool must not
//! touch.

use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use rusqlite::{Connection, OpenFlags};
use serde::Serialize;
use serde_json::Value;

use super::apply::apply;
use super::write::require_session;
use super::{not_a_database, now, parse_time, schema, Store};
use crate::error::{Error, Result};
use crate::history::mend::plan_mend;
use crate::history::rules::{check_session, CheckOptions, HealthRule, Problem};
use crate::model::{Message, Part, PartKind, Role, SessionId};

/// How [`Store::check`] and [`Store::repair_session`] judge pending calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RepairOptions {
    /// A pending tool_use older than this is dangling (and gets a tombstone when mended).
    /// `None`: pending calls are always legal.
    pub stale_after: Option<Duration>,
}

impl RepairOptions {
    fn at(&self, now: DateTime<Utc>) -> CheckOptions {
        CheckOptions {
            now,
            stale_after: self
                .stale_after
                .map(|d| TimeDelta::from_std(d).unwrap_or(TimeDelta::MAX)),
        }
    }
}

/// What [`Store::check`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    /// How many sessions were checked.
    pub sessions_checked: usize,
    /// Every violation, session by session.
    pub violations: Vec<Problem>,
}

impl CheckReport {
    /// The sessions with at least one violation, in the order they were checked.
    pub fn broken_sessions(&self) -> Vec<SessionId> {
        let mut sessions: Vec<SessionId> = Vec::new();
        for violation in &self.violations {
            if sessions.last() != Some(&violation.session_id) {
                sessions.push(violation.session_id.clone());
            }
        }
        sessions
    }
}

/// One row of the repair log, as written.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LoggedChange {
    /// The rule the change mends.
    pub rule: HealthRule,
    /// What it did (`uncompact`, `tombstone`, `result_to_text`, ...).
    pub action: &'static str,
    /// `messages.id` of the message changed or added.
    pub message_id: i64,
    /// `parts.id` of the part changed or added, if any.
    pub part_id: Option<i64>,
    /// The values before, as JSON.
    pub before: Option<Value>,
    /// The values after, as JSON.
    pub after: Value,
}

/// What [`Store::repair_session`] found and changed in one session.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionRepair {
    /// The session.
    pub session_id: SessionId,
    /// The violations found under the write lock (what was mended).
    pub found: Vec<Problem>,
    /// The changes made, as logged; empty when the session was healthy.
    pub changes: Vec<LoggedChange>,
}

/// A session as loaded for checking: messages plus the `parts.id` of each part.
pub(crate) struct Loaded {
    pub(crate) messages: Vec<Message>,
    pub(crate) part_ids: Vec<Vec<i64>>,
}

const SESSION_IDS: &str = "SELECT id FROM sessions ORDER BY id";

// Only the columns the rules and the mend's texts look at: tool_use input is kept as raw text
// and provider metadata is not read (the mend never rewrites either; it updates single
// columns), which keeps the check close to the speed of a plain scan.
const SESSION_ROWS: &str = "
    SELECT m.id, m.seq, m.turn_index, m.role, m.compacted, m.created_at,
           p.id, p.kind, p.text, p.tool_use_id, p.is_error, p.tool_name, p.input
    FROM messages m LEFT JOIN parts p ON p.message_id = m.id
    WHERE m.session_id = ?1
    ORDER BY m.seq, p.ordinal";

/// Loads one session for the rules. Lenient where the rules do not care: an unreadable
/// `created_at` counts as `now` (so such a pending call is never stale), NULL text is `""`.
fn load_session(conn: &Connection, session: &SessionId, now: DateTime<Utc>) -> Result<Loaded> {
    let mut stmt = conn.prepare_cached(SESSION_ROWS)?;
    let mut rows = stmt.query([session.as_str()])?;
    let mut loaded = Loaded {
        messages: Vec::new(),
        part_ids: Vec::new(),
    };
    while let Some(row) = rows.next()? {
        let id: i64 = row.get(0)?;
        if loaded.messages.last().is_none_or(|m| m.id != id) {
            let role: String = row.get(3)?;
            let role = role.parse::<Role>().map_err(|e| Error::CorruptRow {
                table: "messages",
                row_id: id,
                detail: e.to_string(),
            })?;
            let created_at: Option<String> = row.get(5)?;
            loaded.messages.push(Message {
                id,
                seq: row.get(1)?,
                turn_index: row.get(2)?,
                role,
                compacted: row.get::<_, Option<i64>>(4)?.unwrap_or(0) != 0,
                created_at: created_at.as_deref().and_then(parse_time).unwrap_or(now),
                parts: Vec::new(),
            });
            loaded.part_ids.push(Vec::new());
        }
        let Some(part_id) = row.get::<_, Option<i64>>(6)? else {
            continue;
        };
        let kind: String = row.get(7)?;
        let kind = kind.parse::<PartKind>().map_err(|e| Error::CorruptRow {
            table: "parts",
            row_id: part_id,
            detail: e.to_string(),
        })?;
        let text = row.get::<_, Option<String>>(8)?.unwrap_or_default();
        let tool_use_id = row.get::<_, Option<String>>(9)?.unwrap_or_default();
        let part = match kind {
            PartKind::Text => Part::text(text),
            PartKind::Reasoning => Part::reasoning(text, None),
            PartKind::RedactedReasoning => Part::RedactedReasoning {
                data: text,
                provider_metadata: None,
            },
            // The input stays raw text: only a tool_use that becomes text shows it.
            PartKind::ToolUse => Part::ToolUse {
                id: tool_use_id,
                name: row.get::<_, Option<String>>(11)?.unwrap_or_default(),
                input: Value::String(row.get::<_, Option<String>>(12)?.unwrap_or_default()),
                provider_metadata: None,
            },
            PartKind::ToolResult => Part::ToolResult {
                tool_use_id,
                content: text,
                is_error: row.get::<_, Option<i64>>(10)?.unwrap_or(0) != 0,
                provider_metadata: None,
            },
        };
        if let (Some(message), Some(ids)) = (loaded.messages.last_mut(), loaded.part_ids.last_mut())
        {
            message.parts.push(part);
            ids.push(part_id);
        }
    }
    Ok(loaded)
}

fn session_ids(conn: &Connection) -> Result<Vec<SessionId>> {
    let mut stmt = conn.prepare_cached(SESSION_IDS)?;
    let ids = stmt
        .query_map([], |row| row.get::<_, String>(0))?
        .map(|id| id.map(SessionId::new))
        .collect::<rusqlite::Result<_>>()?;
    Ok(ids)
}

impl Store {
    /// The id of every session, in id order.
    pub fn session_ids(&self) -> Result<Vec<SessionId>> {
        if let Some(pg) = self.postgres() {
            return pg.session_ids();
        }
        self.read(session_ids)
    }

    /// Checks sessions against the contract's rules without writing anything: every session
    /// when `sessions` is empty, else those named ([`Error::UnknownSession`] for one that
    /// does not exist). All sessions are read from one snapshot.
    pub fn check(&self, sessions: &[SessionId], options: &RepairOptions) -> Result<CheckReport> {
        if let Some(pg) = self.postgres() {
            return pg.check(sessions, options);
        }
        let check_options = options.at(now());
        self.read(|conn| {
            let ids = if sessions.is_empty() {
                session_ids(conn)?
            } else {
                for session in sessions {
                    require_session(conn, session)?;
                }
                sessions.to_vec()
            };
            let mut report = CheckReport::default();
            for session in &ids {
                let loaded = load_session(conn, session, check_options.now)?;
                report
                    .violations
                    .extend(check_session(session, &loaded.messages, &check_options));
                report.sessions_checked += 1;
            }
            Ok(report)
        })
    }

    /// Mends one session in one `BEGIN IMMEDIATE` transaction; see the module docs.
    ///
    /// A healthy session is left untouched (nothing written). Fails with
    /// [`Error::RepairIncomplete`], and rolls back, if the mended session would still break
    /// a rule.
    pub fn repair_session(
        &self,
        session: &SessionId,
        options: &RepairOptions,
    ) -> Result<SessionRepair> {
        if let Some(pg) = self.postgres() {
            return pg.repair_session(session, options, false);
        }
        let now = now();
        let check_options = options.at(now);
        self.write(|tx| {
            require_session(tx, session)?;
            let loaded = load_session(tx, session, now)?;
            let found = check_session(session, &loaded.messages, &check_options);
            let mut repair = SessionRepair {
                session_id: session.clone(),
                found,
                changes: Vec::new(),
            };
            if repair.found.is_empty() {
                return Ok(repair);
            }
            let plan = plan_mend(&loaded.messages, &check_options);
            repair.changes = apply(tx, session, &loaded, &plan, now)?;
            let after = load_session(tx, session, now)?;
            let left = check_session(session, &after.messages, &check_options);
            if let Some(first) = left.first() {
                return Err(Error::RepairIncomplete {
                    session: session.clone(),
                    remaining: left.len(),
                    first: first.detail.clone(),
                });
            }
            Ok(repair)
        })
    }

    /// [`Store::repair_session`] rolled back at the end: what the mend would change, with
    /// nothing written (`store-repair --dry-run` on a PostgreSQL URL). PostgreSQL only: a
    /// SQLite dry run mends a private copy of the file instead ([`Error::Unsupported`]).
    pub fn repair_session_rolled_back(
        &self,
        session: &SessionId,
        options: &RepairOptions,
    ) -> Result<SessionRepair> {
        match self.postgres() {
            Some(pg) => pg.repair_session(session, options, true),
            None => Err(Error::Unsupported {
                operation: "a rolled-back mend (mend a copy instead)",
                backend: "sqlite",
            }),
        }
    }

    /// Takes a consistent copy of the database file at `dest` (see [`backup_database`]);
    /// [`Error::Unsupported`] on a PostgreSQL store, which has no file (use `pg_dump`).
    pub fn backup_to(&self, dest: &Path) -> Result<()> {
        if self.is_postgres() {
            return Err(Error::Unsupported {
                operation: "a file backup",
                backend: "postgres",
            });
        }
        backup_database(self.path(), dest)
    }
}

/// What [`inspect_database_file`] learned about a file it accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatabaseFile {
    /// The file has no bytes (a database with no tables).
    pub empty: bool,
    /// How many embedded migrations it still needs.
    pub pending_migrations: usize,
}

/// [`inspect_database_file`] for a PostgreSQL URL: connects, and refuses a migration history
/// from a newer build or a foreign one without writing anything.
pub fn inspect_database_url(url: &str) -> Result<DatabaseFile> {
    Ok(DatabaseFile {
        empty: false,
        pending_migrations: super::pg::schema::pending_at(url)?,
    })
}

/// Refuses, without creating or writing anything, a path `store-repair` must not touch: a
/// missing path or a directory ([`Error::Io`]), a file that is not SQLite
/// ([`Error::NotADatabase`]), a database from a newer build ([`Error::FutureSchema`]) or with
/// a foreign migration history ([`Error::DivergentSchema`]), or a damaged file
/// ([`Error::CorruptDatabase`], from `PRAGMA quick_check`).
pub fn inspect_database_file(path: &Path) -> Result<DatabaseFile> {
    schema::check_file(path, true)?;
    let empty = std::fs::metadata(path)
        .map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?
        .len()
        == 0;
    let conn = open_untouched(path)?;
    let pending = schema::pending_migrations(&conn).map_err(|e| not_a_database(e, path))?;
    quick_check(&conn, path)?;
    Ok(DatabaseFile {
        empty,
        pending_migrations: pending.len(),
    })
}

/// Refuses a damaged file before anything opens it for writing: mending on top of corrupt
/// pages could spread the damage, and only a person can decide what to salvage.
fn quick_check(conn: &Connection, path: &Path) -> Result<()> {
    let corrupt = |detail: String| Error::CorruptDatabase {
        path: path.to_path_buf(),
        detail,
    };
    let verdict: String = conn
        .query_row("PRAGMA quick_check(1)", [], |row| row.get(0))
        .map_err(|e| corrupt(e.to_string()))?;
    if verdict == "ok" {
        Ok(())
    } else {
        Err(corrupt(verdict))
    }
}

/// Copies the whole database at `src` to `dest`, consistently even while others write to it:
/// `VACUUM INTO` a temporary file next to `dest`, `PRAGMA integrity_check` on the copy, then
/// a rename. `src` is opened read-only; `dest` must not exist. On failure nothing is left at
/// `dest`.
pub fn backup_database(src: &Path, dest: &Path) -> Result<()> {
    if dest.exists() {
        return Err(Error::Io {
            path: dest.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::AlreadyExists, "backup path exists"),
        });
    }
    let file_name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "backup".to_owned());
    let temp = dest.with_file_name(format!(".{file_name}.tmp-{}", std::process::id()));
    let result = copy_checked(src, &temp).and_then(|()| {
        std::fs::rename(&temp, dest).map_err(|source| Error::Io {
            path: dest.to_path_buf(),
            source,
        })
    });
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// Opens `path` to read it without creating or changing any file.
///
/// A read-only connection to a WAL database creates the `-wal` and `-shm` files when they are
/// missing, and cannot remove them when it closes. They are missing only when no connection
/// has the database open, so then nothing can change under us and the file is opened as
/// `immutable` (no locks, no side files). Otherwise (a live database, or the rollback
/// journal) a plain read-only connection creates nothing.
fn open_untouched(path: &Path) -> Result<Connection> {
    let mut header = [0u8; 20];
    let is_wal = std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut header))
        .is_ok()
        && header[18] == 2;
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let conn = if is_wal && !Path::new(&wal).exists() {
        let text = path.to_str().ok_or_else(|| Error::Io {
            path: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "path is not UTF-8"),
        })?;
        let escaped = text
            .replace('%', "%25")
            .replace('?', "%3f")
            .replace('#', "%23");
        Connection::open_with_flags(
            format!("file:{escaped}?immutable=1"),
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
        )?
    } else {
        Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)?
    };
    conn.busy_timeout(Duration::from_secs(30))?;
    Ok(conn)
}

fn copy_checked(src: &Path, temp: &Path) -> Result<()> {
    let _ = std::fs::remove_file(temp);
    let target = temp.to_str().ok_or_else(|| Error::BackupFailed {
        path: temp.to_path_buf(),
        detail: "path is not UTF-8".to_owned(),
    })?;
    open_untouched(src)?.execute("VACUUM INTO ?1", [target])?;
    let copy = Connection::open_with_flags(temp, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let verdict: String = copy.query_row("PRAGMA integrity_check", [], |row| row.get(0))?;
    if verdict != "ok" {
        return Err(Error::BackupFailed {
            path: temp.to_path_buf(),
            detail: format!("integrity_check: {verdict}"),
        });
    }
    Ok(())
}

/// The default backup path: next to the database, named after it and the time, e.g.
/// `sessions.db.20261125T214230Z.bak` (with `-2`, `-3`, ... if that exists).
pub fn default_backup_path(db: &Path, now: DateTime<Utc>) -> PathBuf {
    let name = db
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "sessions.db".to_owned());
    let stamp = now.format("%Y%m%dT%H%M%SZ");
    let mut candidate = db.with_file_name(format!("{name}.{stamp}.bak"));
    let mut n = 2;
    while candidate.exists() {
        candidate = db.with_file_name(format!("{name}.{stamp}-{n}.bak"));
        n += 1;
    }
    candidate
}
