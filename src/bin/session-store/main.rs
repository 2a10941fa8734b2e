//! `session-store`: inspect and exchange sessions (see the contract's `session-store` section).
//!
//! A thin shell over the library: argument parsing, opening the database, printing. Every
//! rule lives in the `session_store` crate.
//!
//! Exit status:
//! - 0: success (also when stdout is closed early, e.g. piped into `head`);
//! - 2: anything else: bad arguments (clap's own exit code is 2 as well), a missing database
//!   or input file, an unknown session, input the importer refused, or a database error.
//!   Nothing is written when a command fails.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use session_store::Provider;

mod compact;
mod export;
mod import;
mod open;
mod sessions;
mod show;

/// Inspect and exchange the sessions of a session-store database.
#[derive(Debug, Parser)]
#[command(name = "session-store", version, about)]
struct Cli {
    /// The database file. Read commands refuse a missing file; `import` creates it.
    #[arg(long, value_name = "PATH")]
    db: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// One line per session: id, messages, turns, compacted turns, pending tool calls, health.
    Sessions,
    /// A person's view of a session, turn by turn.
    Show {
        /// The session id.
        session: String,
        /// Only these turns: `A..B` (B excluded), `A..=B`, `A..`, `..B` or a single `N`.
        #[arg(long, value_name = "A..B", value_parser = show::parse_turns)]
        turns: Option<show::TurnRange>,
        /// Print every part in full instead of shortening long ones.
        #[arg(long)]
        full: bool,
    },
    /// The request body the library would send now, as JSON on stdout.
    Export {
        /// The session id.
        session: String,
        /// Which provider's request shape.
        #[arg(long, value_enum)]
        format: ExportFormat,
    },
    /// Replace the head of a session by a summary in what the provider sees; the messages
    /// stay in the database. Cuts only at turn starts: the tail kept may be longer than
    /// asked, never shorter.
    Compact {
        /// The session id.
        session: String,
        /// Keep at least this many of the latest messages visible.
        #[arg(long, value_name = "N")]
        min_keep_tail: usize,
        /// What the provider sees instead of the compacted turns.
        #[arg(long, value_name = "TEXT")]
        summary: String,
    },
    /// A new session from a transcript; prints its id.
    Import {
        /// What the file holds.
        #[arg(long, value_enum)]
        format: ImportFormat,
        /// The transcript file (`-` reads stdin).
        file: PathBuf,
    },
}

/// The request shapes `export` writes.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum ExportFormat {
    /// Anthropic Messages: `{"system": ..., "messages": [...]}`.
    Anthropic,
    /// OpenAI Chat Completions: `{"messages": [...]}`.
    Openai,
}

/// The transcript formats `import` reads.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum ImportFormat {
    /// An Anthropic Messages request body: `{"system"?, "messages": [...]}`.
    Anthropic,
    /// An OpenAI Chat Completions request body: `{"messages": [...]}`.
    Openai,
    /// A Claude Code session log (JSON Lines).
    ClaudeCode,
}

fn main() -> ExitCode {
    // `--help` and `--version` exit 0 through clap; bad arguments exit 2.
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("session-store: {error:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    match cli.command {
        Command::Sessions => sessions::run(&open::existing(&cli.db)?, &mut out)?,
        Command::Show {
            session,
            turns,
            full,
        } => show::run(&open::existing(&cli.db)?, &session, turns, full, &mut out)?,
        Command::Export { session, format } => {
            let provider = match format {
                ExportFormat::Anthropic => Provider::Anthropic,
                ExportFormat::Openai => Provider::OpenAi,
            };
            export::run(&open::existing(&cli.db)?, &session, provider, &mut out)?
        }
        Command::Compact {
            session,
            min_keep_tail,
            summary,
        } => compact::run(
            &open::existing(&cli.db)?,
            &session,
            min_keep_tail,
            &summary,
            &mut out,
        )?,
        Command::Import { format, file } => import::run(&cli.db, format, &file, &mut out)?,
    }
    out.flush()?;
    Ok(())
}

/// A reader that went away (`session-store ... | head`) is not an error.
fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        let kind = match cause.downcast_ref::<io::Error>() {
            Some(e) => Some(e.kind()),
            // serde_json wraps the writer's error in its own type.
            None => cause
                .downcast_ref::<serde_json::Error>()
                .and_then(serde_json::Error::io_error_kind),
        };
        kind == Some(io::ErrorKind::BrokenPipe)
    })
}
