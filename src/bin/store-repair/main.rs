//! `store-repair`: brings a session database to the current schema, checks every session
//! against the contract's rules and mends what it finds (see the contract's `store-repair`).
//!
//! A thin shell over the library's check and repair (`Store::check`, `Store::repair_session`). Exit status: see `args::EXIT_STATUS`
//! (printed by `--help`); the cause chain of an error is printed on stderr.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

mod args;
// Sessions are named as `session-store` names them: an id or a unique prefix.
#[allow(dead_code)]
#[path = "../session-store/open.rs"]
mod open;
mod postgres;
mod report;
mod run;
#[path = "../session-store/terminal.rs"]
mod terminal;

fn main() -> ExitCode {
    terminal::catch_file_size_limit();
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
    terminal::init_tracing(args.verbose);
    // A URL names a PostgreSQL database (`postgres.rs`); anything else is a file (`run.rs`).
    let ran = if session_store::is_database_url(&args.db.to_string_lossy()) {
        postgres::run(&args)
    } else {
        run::run(&args)
    };
    let outcome = match ran {
        Ok(outcome) => outcome,
        Err(err) => {
            eprintln!("store-repair: {}", terminal::escape(&format!("{err:#}")));
            if let Some(note) = terminal::file_size_limit_note() {
                eprintln!("store-repair: {note}");
            }
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
    if outcome.dry_run && !(outcome.problems.is_empty() && outcome.orphan_rows.is_empty()) {
        ExitCode::from(1)
    } else if !outcome.unmended.is_empty() {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    }
}
