//! `store-repair`: brings a session database to the current schema, checks every session
//! against the contract's rules and mends what it finds (see the contract's `store-repair`).
//!
//! A thin shell over `session_store::store::repair`. Exit status:
//! - 0: every session checked is healthy, or was mended;
//! - 1: `--dry-run` found problems (nothing was written);
//! - 3: a run without `--dry-run` left sessions unmended because a row is outside the
//!   contract (`unreadable_row`); they are listed, every other session was checked and mended;
//! - 2: bad arguments, or a database file that is missing, a directory, not SQLite, from a
//!   newer build, or any other error; the cause chain is printed on stderr. When the file
//!   is refused nothing is created or changed; a failed backup mends nothing.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

mod args;
mod report;
mod run;

fn main() -> ExitCode {
    let args = match args::Args::try_parse() {
        Ok(args) => args,
        Err(err) => {
            let _ = err.print();
            return if err.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let outcome = match run::run(&args) {
        Ok(outcome) => outcome,
        Err(err) => {
            eprintln!("store-repair: {err:#}");
            return ExitCode::from(2);
        }
    };
    let mut stdout = std::io::stdout().lock();
    let printed = if args.json {
        report::json(&outcome, &mut stdout)
    } else {
        report::human(&outcome, &mut stdout)
    }
    .and_then(|()| stdout.flush());
    match printed {
        Ok(()) => {}
        // A closed pipe (`store-repair ... | head`) is not an error worth a message.
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(err) => {
            eprintln!("store-repair: writing the report: {err}");
            return ExitCode::from(2);
        }
    }
    if outcome.dry_run && !outcome.problems.is_empty() {
        ExitCode::from(1)
    } else if !outcome.unmended.is_empty() {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    }
}
