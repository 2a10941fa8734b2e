//! A run on a PostgreSQL database (`--db postgres://...`): the same check and mend, session by
//! session, each mended in its own transaction under the session's row lock. There is no file
//! to copy: `--backup` is refused (take one with `pg_dump`), and a dry run does each mend in a
//! transaction it rolls back instead of on a private copy.

use std::collections::BTreeMap;

use anyhow::{bail, Context};
use session_store::Problem;
use session_store::{inspect_database_url, RepairOptions};
use session_store::{SessionId, Store};

use crate::args::Args;
use crate::run::{check, progress, Outcome, Plan};

pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    let url = args.db.to_string_lossy().into_owned();
    let shown = session_store::redact_database_url(&url);
    if args.backup.is_some() {
        bail!(
            "--backup copies a database file, and {shown} is a PostgreSQL database: take a \
             backup with pg_dump instead; nothing was changed"
        );
    }
    let pending = inspect_database_url(&url)
        .with_context(|| format!("refusing {shown}; nothing was changed"))?
        .pending_migrations;
    let options = RepairOptions {
        stale_after: args.stale_after,
    };
    let sessions: Vec<SessionId> = args.sessions.iter().map(SessionId::new).collect();
    let mut outcome = Outcome {
        db: shown.clone().into(),
        dry_run: args.dry_run,
        migrations_pending: pending,
        ..Outcome::default()
    };
    if args.dry_run && pending > 0 {
        bail!(
            "{shown} needs {pending} migration(s), which a dry run does not apply: run without \
             --dry-run to migrate; nothing was changed"
        );
    }
    let store = Store::open(&url).with_context(|| format!("opening {shown}"))?;
    outcome.migrations_applied = if args.dry_run { 0 } else { pending };
    let report = check(&store, &sessions, &options)?;
    outcome.sessions_checked = report.sessions_checked;
    let broken = report.broken_sessions();
    if args.dry_run {
        let bar = progress("mending (rolled back)", broken.len());
        let mut plan = Plan::default();
        for session in &broken {
            let repair = store.repair_session_rolled_back(session, &options)?;
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
        return Ok(outcome);
    }
    let bar = progress("mending", broken.len());
    let mut problems: BTreeMap<SessionId, Vec<Problem>> = BTreeMap::new();
    for violation in report.violations {
        problems
            .entry(violation.session_id.clone())
            .or_default()
            .push(violation);
    }
    for session in &broken {
        let repair = match store.repair_session(session, &options) {
            Ok(repair) => repair,
            // Deleted by another writer since the check: nothing left to mend.
            Err(session_store::Error::UnknownSession(_)) => {
                problems.remove(session);
                continue;
            }
            Err(error) => {
                return Err(error).with_context(|| format!("mending session {session}"));
            }
        };
        tracing::info!(%session, changes = repair.changes.len(), "mended");
        if !repair.changes.is_empty() {
            outcome.sessions_repaired += 1;
            outcome.repaired += repair.found.len();
            outcome.changes += repair.changes.len();
        }
        problems.insert(session.clone(), repair.found);
        bar.inc(1);
    }
    bar.finish_and_clear();
    outcome.problems = problems.into_values().flatten().collect();
    Ok(outcome)
}
