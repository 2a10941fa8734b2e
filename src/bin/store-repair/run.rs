//! One run of the tool: inspect, (back up,) migrate, check, mend.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use session_store::history::rules::{Rule, Violation};
use session_store::store::repair::{
    backup_database, default_backup_path, inspect_database_file, RepairOptions,
};
use session_store::{SessionId, Store};

use crate::args::Args;

/// What a run found and did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The database.
    pub db: PathBuf,
    /// Nothing was written.
    pub dry_run: bool,
    /// Migrations the database needed (applied unless `dry_run`).
    pub migrations: usize,
    /// Sessions checked.
    pub sessions_checked: usize,
    /// What was found (for mended sessions: what was found under the write lock).
    pub problems: Vec<Violation>,
    /// Problems mended.
    pub repaired: usize,
    /// Sessions mended (or that a real run would mend).
    pub sessions_repaired: usize,
    /// Changes made (or that a real run would make), one repair-log row each.
    pub changes: usize,
    /// The backup taken, if any.
    pub backup: Option<PathBuf>,
    /// Sessions left as they are because a row is outside the contract (`unreadable_row`).
    pub unmended: Vec<SessionId>,
}

/// Sessions below this count mend too fast to need a progress bar.
const PROGRESS_THRESHOLD: usize = 50;

pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    let db = &args.db;
    let file = inspect_database_file(db)
        .with_context(|| format!("refusing {}; nothing was changed", db.display()))?;
    let options = RepairOptions {
        stale_after: args.stale_after,
    };
    let sessions: Vec<SessionId> = args.sessions.iter().map(SessionId::new).collect();
    let mut outcome = Outcome {
        db: db.clone(),
        dry_run: args.dry_run,
        migrations: file.pending_migrations,
        ..Outcome::default()
    };

    if args.dry_run {
        // Migrating or checking the real file could touch its bytes (schema, WAL header):
        // work on a private copy instead.
        let dir = tempfile::tempdir().context("creating a temporary directory")?;
        let copy = dir.path().join("dry-run.db");
        backup_database(db, &copy).context("copying the database for the dry run")?;
        let store = Store::open(&copy).context("migrating the dry-run copy")?;
        let report = store.check(&sessions, &options)?;
        outcome.sessions_checked = report.sessions_checked;
        for session in report.broken_sessions() {
            let repair = store.repair_session(&session, &options)?;
            if unreadable(&repair.found) {
                outcome.unmended.push(session);
                continue;
            }
            outcome.changes += repair.changes.len();
            outcome.sessions_repaired += 1;
        }
        outcome.problems = report.violations;
        return Ok(outcome);
    }

    let mut backup: Option<PathBuf> = None;
    let take_backup = |backup: &mut Option<PathBuf>| -> anyhow::Result<()> {
        if args.no_backup || backup.is_some() {
            return Ok(());
        }
        let dest = args
            .backup
            .clone()
            .unwrap_or_else(|| default_backup_path(db, session_store::store::clock()));
        backup_database(db, &dest).with_context(|| {
            format!(
                "backing up {} to {}; nothing was mended",
                db.display(),
                dest.display()
            )
        })?;
        *backup = Some(dest);
        Ok(())
    };
    if file.pending_migrations > 0 {
        take_backup(&mut backup)?;
    }
    let store = Store::open(db).with_context(|| format!("opening {}", db.display()))?;
    let report = store.check(&sessions, &options)?;
    outcome.sessions_checked = report.sessions_checked;
    let broken = report.broken_sessions();
    if !broken.is_empty() {
        take_backup(&mut backup)?;
    }
    outcome.backup = backup;
    let bar = progress(broken.len());
    // Sessions are checked in id order; keep that order in the report.
    let mut problems: BTreeMap<SessionId, Vec<Violation>> = BTreeMap::new();
    for violation in report.violations {
        problems
            .entry(violation.session_id.clone())
            .or_default()
            .push(violation);
    }
    for session in &broken {
        let repair = store
            .repair_session(session, &options)
            .with_context(|| format!("mending session {session}"))?;
        if unreadable(&repair.found) {
            outcome.unmended.push(session.clone());
        }
        if !repair.changes.is_empty() {
            outcome.sessions_repaired += 1;
            outcome.repaired += repair.found.len();
            outcome.changes += repair.changes.len();
        }
        // Report what was found under the write lock: the session may have changed.
        problems.insert(session.clone(), repair.found);
        bar.inc(1);
    }
    bar.finish_and_clear();
    outcome.problems = problems.into_values().flatten().collect();
    Ok(outcome)
}

/// The session's rows are outside the contract: it is reported and left as it is.
fn unreadable(found: &[Violation]) -> bool {
    found.iter().any(|v| v.rule == Rule::UnreadableRow)
}

fn progress(len: usize) -> ProgressBar {
    if len < PROGRESS_THRESHOLD || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len as u64);
    if let Ok(style) = ProgressStyle::with_template("mending {bar:40} {pos}/{len} sessions {eta}") {
        bar.set_style(style);
    }
    bar
}
