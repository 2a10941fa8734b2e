//! A run on a PostgreSQL database (`--db postgres://...`): the same check and mend, session by
//! session, each mended in its own transaction under the session's row lock. There is no file
//! to copy: `--backup` is refused (take one with `pg_dump`), and a dry run does each mend in a
//! transaction it rolls back instead of on a private copy.

use anyhow::{bail, Context};
use session_store::repair::{inspect_database_url, RepairOptions};
use session_store::Store;

use crate::args::Args;
use crate::run::{check, dry_run, mend, named, Outcome};

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
        writer_lease: args.writer_lease,
    };
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
    let store = Store::open_with(&url, &crate::args::store_options(args))
        .with_context(|| format!("opening {shown}"))?;
    outcome.migrations_applied = if args.dry_run { 0 } else { pending };
    let sessions = named(&store, &args.sessions)?;
    let report = check(&store, &sessions, &options)?;
    if args.dry_run {
        dry_run(&mut outcome, report, "mending (rolled back)", |session| {
            store.repair_session_rolled_back(session, &options)
        })?;
    } else {
        mend(&mut outcome, report, |session| {
            store.repair_session(session, &options)
        })?;
    }
    Ok(outcome)
}
