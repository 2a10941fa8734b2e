//! Checking and mending stored sessions against the contract's rules (`store-repair`).
//!
//! [`Store::check`] is read-only: one snapshot, every session (or those named) through
//! [`check_session`]. An agent can call it at start-up. [`Store::repair_session`] mends one
//! session in one `BEGIN IMMEDIATE` transaction: it loads and checks the session again under
//! the write lock (so a session that changed since it was checked is judged as it is now),
//! applies the [`plan_mend`] plan, writes one `repair_log` row per change, and checks once
//! more before it commits. A kill at any moment leaves the session as it was or fully mended.
//!
//! The file side of `store-repair` (backups, refusing files it must not touch) lives in
//! [`super::file`] and is re-exported here.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use serde::Serialize;

use super::apply::apply;
pub use super::apply::LoggedChange;
use super::engine;
pub use super::file::{backup_database, default_backup_path, inspect_database_file, DatabaseFile};
use super::handle::Store;
pub use super::orphans::{OrphanMend, OrphanRow, ORPHAN_ROW};
use super::rows::Unreadable;
use super::sql::Sql;
use super::time::now;
use crate::error::{Error, Result};
use crate::history::mend::plan_mend;
use crate::history::rules::{check_session, CheckOptions, HealthRule, Problem};
use crate::model::SessionId;

/// How [`Store::check`] and [`Store::repair_session`] judge pending calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RepairOptions {
    /// A pending tool_use older than this is dangling (and gets a tombstone when mended).
    /// `None`: pending calls are always legal.
    pub stale_after: Option<Duration>,
    /// How long the writer of an open (streaming) message on another host may stay silent
    /// before the message counts as abandoned and is settled; `None`:
    /// [`crate::repair::WRITER_LEASE`] (a writer on this host is asked directly).
    pub writer_lease: Option<Duration>,
}

impl RepairOptions {
    pub(crate) fn at(&self, now: DateTime<Utc>) -> CheckOptions {
        let delta = |d: Duration| TimeDelta::from_std(d).unwrap_or(TimeDelta::MAX);
        let checked = CheckOptions::at(now);
        CheckOptions {
            stale_after: self.stale_after.map(delta),
            writer_lease: self.writer_lease.map_or(checked.writer_lease, delta),
            ..checked
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
    /// True when a mend of these findings would change something: one of them breaks a rule
    /// the mend mends ([`crate::repair::HealthRule::is_mended`]).
    pub fn needs_mending(&self) -> bool {
        self.violations.iter().any(|v| v.rule.is_mended())
    }

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

/// Checks sessions inside the caller's read snapshot, on either engine: every session when
/// `sessions` is empty, else those named. A session with a row outside the contract is
/// reported (`unreadable_row`), not a stop.
pub(crate) fn check_sessions(
    db: &mut impl Sql,
    sessions: &[SessionId],
    options: &CheckOptions,
) -> Result<CheckReport> {
    let ids = if sessions.is_empty() {
        db.session_ids()?
    } else {
        for session in sessions {
            db.require_session(session)?;
        }
        sessions.to_vec()
    };
    let mut report = CheckReport::default();
    for session in &ids {
        match load_checkable(db, session)? {
            Ok(loaded) => {
                report.violations.extend(super::stream::abandoned_in(
                    db,
                    session,
                    &super::writer::Lease::of(options),
                )?);
                report
                    .violations
                    .extend(check_session(session, &loaded.messages, options));
            }
            Err(unreadable) => report.violations.push(unreadable.violation(session)),
        }
        report.sessions_checked += 1;
    }
    Ok(report)
}

/// The session as the check reads it, or the first of its rows no reader could take: its
/// messages and parts (the row decoder), then its usage rows ([`super::usage::unreadable_usage`]),
/// which no rule reads but the usage report, a bundle and a transcript do.
fn load_checkable(
    db: &mut impl Sql,
    session: &SessionId,
) -> Result<std::result::Result<super::rows::Loaded, Unreadable>> {
    let loaded = match db.load_for_check(session)? {
        Ok(loaded) => loaded,
        Err(unreadable) => return Ok(Err(unreadable)),
    };
    Ok(match super::usage::unreadable_usage(db, session)? {
        Some(unreadable) => Err(unreadable),
        None => Ok(loaded),
    })
}

/// Mends one session in the caller's write transaction (which already holds the session's
/// lock), on either engine; see the module docs.
pub(crate) fn mend_session(
    db: &mut impl Sql,
    session: &SessionId,
    options: &CheckOptions,
) -> Result<SessionRepair> {
    // An abandoned streamed message is settled as the next write would settle it; one whose
    // writer is still there is left to it.
    let lease = super::writer::Lease::of(options);
    let abandoned = super::stream::abandoned_in(db, session, &lease)?;
    let mut settled = Vec::new();
    if !abandoned.is_empty() {
        settled = super::stream::settle_with(db, session, &lease)?;
    }
    let loaded = match load_checkable(db, session)? {
        Ok(loaded) => loaded,
        // Left as it is: reported, never mended (`unreadable_row`).
        Err(unreadable) => {
            return Ok(SessionRepair {
                session_id: session.clone(),
                found: vec![unreadable.violation(session)],
                changes: Vec::new(),
            })
        }
    };
    let mut found = abandoned;
    found.extend(check_session(session, &loaded.messages, options));
    let mut repair = SessionRepair {
        session_id: session.clone(),
        found,
        changes: Vec::new(),
    };
    repair.changes = settled;
    if repair
        .found
        .iter()
        .all(|p| p.rule == HealthRule::AbandonedMessage)
    {
        return Ok(repair);
    }
    let plan = plan_mend(&loaded.messages, options);
    repair
        .changes
        .extend(apply(db, session, &loaded, &plan, options.now)?);
    let after = db
        .load_for_check(session)?
        .map_err(Unreadable::into_error)?;
    let left = check_session(session, &after.messages, options);
    if let Some(first) = left.first() {
        return Err(Error::RepairIncomplete {
            session: session.clone(),
            remaining: left.len(),
            first: first.detail.clone(),
        });
    }
    Ok(repair)
}

impl Store {
    /// The id of every session, in id order.
    pub fn session_ids(&self) -> Result<Vec<SessionId>> {
        self.read(|db| db.session_ids())
    }

    /// Checks sessions against the contract's rules without writing anything: every session
    /// when `sessions` is empty, else those named ([`Error::UnknownSession`] for one that
    /// does not exist). All sessions are read from one snapshot.
    pub fn check(&self, sessions: &[SessionId], options: &RepairOptions) -> Result<CheckReport> {
        let options = options.at(now());
        self.read(|db| check_sessions(db, sessions, &options))
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
        let options = options.at(now());
        self.write(|tx| {
            tx.lock_session(session)?;
            mend_session(tx, session, &options)
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
        let options = options.at(now());
        engine::run(
            |work| {
                self.engine
                    .run_rolled_back("a rolled-back mend (mend a copy instead)", work)
            },
            |tx| {
                tx.lock_session(session)?;
                mend_session(tx, session, &options)
            },
        )
    }
}

/// [`inspect_database_file`] for a PostgreSQL URL: connects, and refuses a migration history
/// from a newer build or a foreign one without writing anything.
#[cfg(feature = "postgres")]
pub fn inspect_database_url(url: &str) -> Result<DatabaseFile> {
    Ok(DatabaseFile {
        empty: false,
        pending_migrations: super::pg::schema::pending_at(url)?,
    })
}

/// [`inspect_database_url`] in a build without PostgreSQL: [`Error::FeatureMissing`].
#[cfg(not(feature = "postgres"))]
pub fn inspect_database_url(url: &str) -> Result<DatabaseFile> {
    Err(Error::FeatureMissing {
        feature: "postgres",
        what: format!("opening {}", super::redact_database_url(url)),
    })
}
