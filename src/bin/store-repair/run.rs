//! One run of the tool: inspect, (back up,) migrate, check, mend.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use session_store::repair::{
    backup_database, default_backup_path, inspect_database_file, CheckReport, RepairOptions,
};
use session_store::repair::{OrphanRow, Problem, SessionRepair};
use session_store::{SessionId, Store};

use crate::args::Args;

/// What a run found, what it would do (dry run) and what it did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The database.
    pub db: PathBuf,
    /// Nothing was written.
    pub dry_run: bool,
    /// Migrations the database needed when the run started.
    pub migrations_pending: usize,
    /// Migrations applied to the database (0 on a dry run: they ran on a private copy).
    pub migrations_applied: usize,
    /// Sessions checked.
    pub sessions_checked: usize,
    /// What was found (for mended sessions: what was found under the write lock).
    pub problems: Vec<Problem>,
    /// Dry run: what a real run would do. `None` on a real run.
    pub would: Option<Plan>,
    /// Problems mended (0 on a dry run).
    pub repaired: usize,
    /// Sessions mended (0 on a dry run).
    pub sessions_repaired: usize,
    /// Changes made, one repair-log row each (0 on a dry run).
    pub changes: usize,
    /// The backup taken, if any.
    pub backup: Option<PathBuf>,
    /// Sessions left as they are because a row is outside the contract (`unreadable_row`).
    pub unmended: Vec<SessionId>,
    /// Rows that point at a row that is not there (`orphan_row`), found before the sessions
    /// were checked.
    pub orphan_rows: Vec<OrphanRow>,
    /// Rows the mend of the orphan rows removed or changed, each logged (0 on a dry run).
    pub orphan_changes: usize,
}

/// What a real run would do, measured by mending a private copy.
#[derive(Debug, Default, Clone, Copy)]
pub struct Plan {
    /// Problems it would mend.
    pub repair: usize,
    /// Sessions it would mend.
    pub sessions: usize,
    /// Changes it would make (repair-log rows).
    pub changes: usize,
    /// Rows the mend of the orphan rows would remove or change (repair-log rows).
    pub orphan_changes: usize,
}

/// Runs over fewer sessions than this are too fast to need a progress bar.
const PROGRESS_THRESHOLD: usize = 50;

/// Checks and mends the database file `args.db`.
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    let db = &args.db;
    let file = inspect_database_file(db)
        .with_context(|| format!("refusing {}; nothing was changed", db.display()))?;
    let options = RepairOptions {
        stale_after: args.stale_after,
        writer_lease: args.writer_lease,
    };
    let mut outcome = Outcome {
        db: db.clone(),
        dry_run: args.dry_run,
        migrations_pending: file.pending_migrations,
        ..Outcome::default()
    };

    if args.dry_run {
        // Migrating or checking the real file could touch its bytes (schema, WAL header):
        // work on a private copy instead.
        let dir = tempfile::tempdir().context("creating a temporary directory")?;
        let copy = dir.path().join("dry-run.db");
        backup_database(db, &copy).context("copying the database for the dry run")?;
        let store = Store::open(&copy).context("migrating the dry-run copy")?;
        outcome.orphan_rows = store.orphan_rows()?;
        let orphan_changes = store
            .mend_orphan_rows()
            .context("mending the orphan rows of the copy")?
            .len();
        let sessions = named(&store, &args.sessions)?;
        let report = check(&store, &sessions, &options)?;
        dry_run(&mut outcome, report, "mending a copy", |session| {
            store.repair_session(session, &options)
        })?;
        if let Some(plan) = outcome.would.as_mut() {
            plan.orphan_changes = orphan_changes;
        }
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
            .unwrap_or_else(|| default_backup_path(db, session_store::clock()));
        backup_database(db, &dest).with_context(|| {
            format!(
                "backing up {} to {}; nothing was mended",
                db.display(),
                dest.display()
            )
        })?;
        tracing::info!(backup = %dest.display(), "backup taken");
        *backup = Some(dest);
        Ok(())
    };
    if file.pending_migrations > 0 {
        take_backup(&mut backup)?;
    }
    let store = Store::open_with(db, &crate::args::store_options(args))
        .with_context(|| format!("opening {}", db.display()))?;
    outcome.migrations_applied = file.pending_migrations;
    // Rows no session reaches are mended first: a message that took a dead one's id would
    // otherwise be checked with that message's parts.
    outcome.orphan_rows = store.orphan_rows()?;
    if !outcome.orphan_rows.is_empty() {
        take_backup(&mut backup)?;
        outcome.orphan_changes = store
            .mend_orphan_rows()
            .context("mending the rows that point at a missing row")?
            .len();
    }
    let sessions = named(&store, &args.sessions)?;
    let report = check(&store, &sessions, &options)?;
    // A finding the mend leaves as it is (`unreadable_row`) changes nothing: no backup.
    if report.needs_mending() {
        take_backup(&mut backup)?;
    }
    outcome.backup = backup;
    mend(&mut outcome, report, |session| {
        store.repair_session(session, &options)
    })?;
    Ok(outcome)
}

/// The sessions `--session` names, each by its id or a unique prefix (as `session-store`
/// names them); an unknown or ambiguous name is an error.
pub(crate) fn named(store: &Store, names: &[String]) -> anyhow::Result<Vec<SessionId>> {
    names
        .iter()
        .map(|name| crate::open::session(store, name))
        .collect()
}

/// What a dry run reports: each broken session mended by `mend_one`, which writes nothing
/// that lasts (a private copy, or a transaction rolled back).
pub(crate) fn dry_run(
    outcome: &mut Outcome,
    report: CheckReport,
    what: &str,
    mend_one: impl Fn(&SessionId) -> session_store::Result<SessionRepair>,
) -> anyhow::Result<()> {
    outcome.sessions_checked = report.sessions_checked;
    let broken = report.broken_sessions();
    let bar = progress(what, broken.len());
    let mut plan = Plan::default();
    for session in &broken {
        let repair = mend_one(session).with_context(|| format!("mending session {session}"))?;
        if !repair.changes.is_empty() {
            plan.repair += repair.found.len();
            plan.changes += repair.changes.len();
            plan.sessions += 1;
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    outcome.would = Some(plan);
    outcome.problems = report.violations;
    Ok(())
}

/// Mends each broken session of `report` with `mend_one` (one transaction each) and fills
/// the outcome. A session deleted by another writer since the check has nothing left to mend.
pub(crate) fn mend(
    outcome: &mut Outcome,
    report: CheckReport,
    mend_one: impl Fn(&SessionId) -> session_store::Result<SessionRepair>,
) -> anyhow::Result<()> {
    outcome.sessions_checked = report.sessions_checked;
    let broken = report.broken_sessions();
    let bar = progress("mending", broken.len());
    // Sessions are checked in id order; keep that order in the report.
    let mut problems: BTreeMap<SessionId, Vec<Problem>> = BTreeMap::new();
    for violation in report.violations {
        problems
            .entry(violation.session_id.clone())
            .or_default()
            .push(violation);
    }
    for session in &broken {
        let repair = match mend_one(session) {
            Ok(repair) => repair,
            Err(session_store::Error::UnknownSession(_)) => {
                problems.remove(session);
                continue;
            }
            Err(error) => {
                return Err(error).with_context(|| format!("mending session {session}"));
            }
        };
        tracing::info!(%session, changes = repair.changes.len(), "mended");
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
    Ok(())
}

/// The session's rows are outside the contract: it is reported and left as it is.
fn unreadable(found: &[Problem]) -> bool {
    found.iter().any(|p| !p.rule.is_mended())
}

/// Checks the sessions named (every session when none is) one at a time, with a progress
/// bar on a big database. Each session is read in its own snapshot; the mend re-checks each
/// broken one under its write lock anyway.
pub(crate) fn check(
    store: &Store,
    named: &[SessionId],
    options: &RepairOptions,
) -> anyhow::Result<CheckReport> {
    let ids = if named.is_empty() {
        store.session_ids()?
    } else {
        named.to_vec()
    };
    let started = std::time::Instant::now();
    let bar = progress("checking", ids.len());
    let mut report = CheckReport::default();
    for id in &ids {
        match store.check(std::slice::from_ref(id), options) {
            Ok(one) => {
                report.sessions_checked += one.sessions_checked;
                report.violations.extend(one.violations);
            }
            // Deleted by another process since the list was read: nothing left to check.
            Err(session_store::Error::UnknownSession(_)) if named.is_empty() => {
                tracing::debug!(session = %id, "gone before its check");
            }
            Err(error) => return Err(error.into()),
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    tracing::info!(
        sessions = report.sessions_checked,
        problems = report.violations.len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "checked"
    );
    Ok(report)
}

/// A bar on stderr, only when stderr is a terminal and the run is long enough to need one.
pub(crate) fn progress(what: &str, len: usize) -> ProgressBar {
    if len < PROGRESS_THRESHOLD || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len as u64);
    let template = format!("{what} {{bar:40}} {{pos}}/{{len}} sessions {{eta}}");
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style);
    }
    bar
}
