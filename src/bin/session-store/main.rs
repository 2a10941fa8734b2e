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
mod delete;
mod export;
mod fork;
mod import;
mod open;
mod prune;
mod search;
mod sessions;
mod show;
mod size;
mod tree;
mod usage;

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
    Sessions {
        /// Show the fork tree instead: each session under the one it was forked from.
        #[arg(long)]
        tree: bool,
    },
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
    /// A new session holding the turns of SESSION before turn N; prints its id.
    Fork {
        /// The session to fork.
        session: String,
        /// The first turn not copied: 0 copies nothing, the number of turns copies all.
        #[arg(long, value_name = "N")]
        at_turn: i64,
    },
    /// Remove a session and all its rows, and give the space back to the file system.
    Delete {
        /// The session id.
        session: String,
    },
    /// Delete every session last changed longer ago than DURATION.
    Prune {
        /// How old a session must be: e.g. `30d`, `12h`, `1w2d` (s, m, h, d, w).
        #[arg(long, value_name = "DURATION", value_parser = prune::parse_duration)]
        older_than: chrono::TimeDelta,
        /// List what would be deleted; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// One JSON object on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Full-text search over text, reasoning and tool content, best match first.
    Search {
        /// Words to find (all of them); a trailing `*` searches a prefix.
        query: String,
        /// Only this session.
        #[arg(long, value_name = "SESSION")]
        session: Option<String>,
        /// At most this many hits.
        #[arg(long, value_name = "N", default_value_t = 20)]
        limit: usize,
        /// A JSON list on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Tokens per turn and in total, where the source recorded them.
    Usage {
        /// The session id.
        session: String,
        /// One JSON object on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Where the bytes are: file, tables, search index, the largest sessions, tool output.
    Size {
        /// How many of the largest sessions to list.
        #[arg(long, value_name = "N", default_value_t = 10)]
        top: usize,
        /// First give free pages back to the file system (the first time: one VACUUM).
        #[arg(long)]
        reclaim: bool,
        /// First rewrite the whole file (VACUUM): also gives back the room in half-empty
        /// pages that deleting scattered rows leaves.
        #[arg(long, conflicts_with = "reclaim")]
        vacuum: bool,
        /// One JSON object on stdout.
        #[arg(long)]
        json: bool,
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
        Command::Sessions { tree: false } => sessions::run(&open::existing(&cli.db)?, &mut out)?,
        Command::Sessions { tree: true } => tree::run(&open::existing(&cli.db)?, &mut out)?,
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
        Command::Fork { session, at_turn } => {
            fork::run(&open::existing(&cli.db)?, &session, at_turn, &mut out)?
        }
        Command::Delete { session } => delete::run(&open::existing(&cli.db)?, &session, &mut out)?,
        Command::Prune {
            older_than,
            dry_run,
            json,
        } => prune::run(
            &open::existing(&cli.db)?,
            older_than,
            dry_run,
            json,
            &mut out,
        )?,
        Command::Search {
            query,
            session,
            limit,
            json,
        } => search::run(
            &open::existing(&cli.db)?,
            &query,
            session.as_deref(),
            limit,
            json,
            &mut out,
        )?,
        Command::Usage { session, json } => {
            usage::run(&open::existing(&cli.db)?, &session, json, &mut out)?
        }
        Command::Size {
            top,
            reclaim,
            vacuum,
            json,
        } => size::run(
            &open::existing(&cli.db)?,
            top,
            (reclaim, vacuum),
            json,
            &mut out,
        )?,
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
