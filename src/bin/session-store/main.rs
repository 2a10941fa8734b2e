//! `session-store`: inspect and exchange sessions (see the contract's `session-store` section,
//! `docs/CONTRACT.md`).
//!
//! A thin shell over the library: argument parsing, opening the database, printing. Every
//! rule lives in the `session_store` crate. Text that came from a transcript is escaped
//! before it reaches a terminal (`terminal.rs`). Exit status: see [`EXIT_STATUS`].

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{ArgAction, Parser, Subcommand, ValueEnum};
use session_store::{Provider, TranscriptFormat};

use crate::export::Shape;

mod budget;
mod cancel;
mod compact;
mod confirm;
mod copy;
mod delete;
mod export;
mod fork;
mod import;
mod mcp;
mod open;
mod progress;
mod prune;
mod search;
mod sessions;
mod shapes;
mod show;
mod size;
mod table;
mod terminal;
mod tree;
mod usage;

/// The exit codes, as `--help` prints them.
const EXIT_STATUS: &str = "\
Exit status:
  0  success (also when the reader of stdout goes away, as with `| head`)
  2  bad arguments, a missing database or input file, an unknown or ambiguous session,
     input that is refused (malformed, or not the format named), or any other error;
     a refused command writes nothing

The database is --db PATH or --db postgres://URL (before or after the command), else
$SESSION_STORE_DB.
A session is named by its id or a unique prefix of 8 characters or more.";

/// Inspect and exchange the sessions of a session-store database.
#[derive(Debug, Parser)]
#[command(name = "session-store", version, after_help = EXIT_STATUS)]
struct Cli {
    /// The database: a file path or a postgres:// URL [default: $SESSION_STORE_DB]. Read
    /// commands refuse a missing file; `import` creates it. (`copy` takes --from and --to.)
    #[arg(long, value_name = "DB", global = true)]
    db: Option<PathBuf>,
    /// Trace what the library does on stderr (-v info, -vv debug, -vvv trace; RUST_LOG
    /// overrides).
    #[arg(short, long, action = ArgAction::Count, global = true)]
    verbose: u8,
    /// What a commit promises on power loss: `full` syncs every commit (SQLite
    /// synchronous=FULL), `normal` may lose the latest commits but never corrupts.
    #[arg(
        long,
        value_name = "full|normal",
        global = true,
        default_value = "normal"
    )]
    durability: session_store::Durability,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// A table of sessions: id, times, counts, pending calls, health, title.
    ///
    /// The counts are SQL aggregates; health runs the contract's check (the one
    /// store-repair runs) on each session, one at a time: it reads every message once and
    /// holds one session in memory.
    Sessions {
        /// One JSON object per session, in a JSON array, instead of the table (with --tree:
        /// `[{"id", "parent", "forked_at_turn", "depth"}]` in the tree's order).
        #[arg(long)]
        json: bool,
        /// Show the tree instead: each session under the one it was forked from, and each
        /// sub-agent under the session that spawned it (with its call and state).
        #[arg(long)]
        tree: bool,
    },
    /// A person's view of a session, turn by turn.
    ///
    /// Compacted turns, pending calls, tombstones and broken rules (`!!`) are marked.
    Show {
        /// The session id, or a unique prefix of 8 characters or more.
        session: String,
        /// Only these turns: `A..B` (B excluded), `A..=B`, `A..`, `..B` or a single `N`.
        #[arg(long, value_name = "A..B", value_parser = show::parse_turns)]
        turns: Option<show::TurnRange>,
        /// Print every part in full instead of shortening long ones.
        #[arg(long, conflicts_with = "json")]
        full: bool,
        /// The turns as one JSON object (`session`, `overview`, `turns`, `start`, `end`,
        /// `next_turn`, `messages` with every part in full) instead of the text view.
        #[arg(long)]
        json: bool,
    },
    /// The request body the library would send now, as JSON on stdout; or the session as a
    /// transcript (Markdown, HTML) or a bundle of every row (JSON Lines).
    Export {
        /// The session id, or a unique prefix of 8 characters or more.
        session: String,
        /// Which provider's request shape, or a transcript or bundle.
        #[arg(long, value_enum)]
        format: ExportFormat,
        /// The model the body is for, as `provider/model` (e.g. `anthropic/claude-sonnet-4-5`):
        /// signed reasoning another model wrote is not sent. Default: the model of the
        /// session's latest assistant message.
        #[arg(long, value_name = "PROVIDER/MODEL", value_parser = parse_model)]
        model: Option<String>,
    },
    /// Replace the head of a session by a summary in what the provider sees.
    ///
    /// The messages stay in the database. Cuts only at turn starts: the tail kept may be
    /// longer than asked, never shorter.
    Compact {
        /// The session id, or a unique prefix of 8 characters or more.
        session: String,
        /// Keep at least this many of the latest messages visible.
        #[arg(long, value_name = "N")]
        min_keep_tail: usize,
        /// What the provider sees instead of the compacted turns.
        #[arg(long, value_name = "TEXT")]
        summary: String,
        /// One JSON object on stdout (`compacted`, the turns it covers or the `reason`).
        #[arg(long)]
        json: bool,
    },
    /// A new session from a transcript or a bundle; prints its id.
    Import {
        /// What the file holds; `auto` tells the formats apart. A file that is not the
        /// format named is refused, never read as another.
        #[arg(long, value_enum, default_value_t = ImportFormat::Auto)]
        format: ImportFormat,
        /// The model that wrote the source's assistant messages, when the source does not
        /// say (a body's own top-level `model` is used when present).
        #[arg(long, value_name = "PROVIDER/MODEL", value_parser = parse_model)]
        model: Option<String>,
        /// The transcript file (`-` reads stdin). Several files, or a folder (its files,
        /// recursively, in name order, hidden ones left out), are one import run: one transaction for them all, a
        /// session each, and a Codex sub-agent's rollout linked to its parent's whatever
        /// their order.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// One JSON object on stdout (`session`, `children`, `branches`, `messages`,
        /// `tombstoned`, `orphans_as_text`, `warnings`) instead of the id alone.
        #[arg(long)]
        json: bool,
    },
    /// Answer a session's pending tool calls with tombstones; prints their ids.
    ///
    /// A tombstone is a tool_result with `is_error` and the reason as its text, so the
    /// conversation can go on. With nothing pending it writes nothing.
    Cancel {
        /// The session id, or a unique prefix of 8 characters or more.
        session: String,
        /// Why the calls will never get their result; part of the tombstone text.
        #[arg(
            long,
            value_name = "TEXT",
            default_value = "cancelled with session-store cancel"
        )]
        reason: String,
        /// One JSON object on stdout (`session`, `tombstoned`: the ids answered).
        #[arg(long)]
        json: bool,
    },
    /// Copy sessions, every row of each, from one database to another, either backend
    /// (a file or a postgres:// URL), and verify each copy read back; prints a line per table.
    ///
    /// Each session is written in one transaction of the destination; a session the
    /// destination already has is refused before anything of it is written.
    Copy {
        /// The source database (path or postgres:// URL; must exist).
        #[arg(long, value_name = "DB")]
        from: PathBuf,
        /// The destination database (path or postgres:// URL; a new file appears only once
        /// the copy succeeded). Sessions it already holds with the same rows are skipped and
        /// named on stderr, so a copy that stopped can be run again; when it holds one with
        /// other rows, nothing is copied.
        #[arg(long, value_name = "DB")]
        to: PathBuf,
        /// Copy only this session (repeatable; id or unique prefix); every session when absent.
        #[arg(long = "session", value_name = "ID")]
        sessions: Vec<String>,
        /// Not used by copy (it reads --from and writes --to); kept out of its help.
        #[arg(long, value_name = "DB", hide = true)]
        db: Option<PathBuf>,
        /// One JSON object on stdout (`from`, `to`, `sessions`, `rows` per table, `verified`).
        #[arg(long)]
        json: bool,
    },
    /// A new session holding the turns of SESSION before turn N; prints its id.
    Fork {
        /// The session to fork.
        session: String,
        /// The first turn not copied: 0 copies nothing, the number of turns copies all.
        #[arg(long, value_name = "N")]
        at_turn: i64,
        /// One JSON object on stdout (`id`, `parent`, `at_turn`, `messages`, `summaries`,
        /// `uncompacted`, `tombstoned`) instead of the id alone.
        #[arg(long)]
        json: bool,
    },
    /// Remove a session and all its rows, and give the space back to the file system.
    Delete {
        /// The session id.
        session: String,
        /// One JSON object on stdout (`session`, `messages`, `bytes_before`, `bytes_after`).
        #[arg(long)]
        json: bool,
    },
    /// Delete every session last changed longer ago than DURATION.
    ///
    /// On a terminal it lists what it would delete and asks first; without a terminal it
    /// deletes only with --yes (else it refuses, exit 2, deleting nothing). An imported
    /// session is as old as its transcript's last message.
    Prune {
        /// How old a session must be: e.g. `30d`, `12h`, `1w2d` (s, m, h, d, w).
        #[arg(long, value_name = "DURATION", value_parser = prune::parse_duration)]
        older_than: chrono::TimeDelta,
        /// List what would be deleted; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Delete without asking (what a script passes).
        #[arg(long, short = 'y', conflicts_with = "dry_run")]
        yes: bool,
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
    /// The next request's size against a token limit, and the smallest compaction on a
    /// turn boundary that brings it under (the estimate's method: `history/budget.rs`).
    Budget {
        /// The session id.
        session: String,
        /// The limit, in tokens.
        #[arg(long, value_name = "TOKENS")]
        limit: u64,
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
    /// A Model Context Protocol server on stdin/stdout, for any MCP client (an agent, an IDE).
    ///
    /// Tools: list_sessions, search, show (whole turns, a window of them) and export; with
    /// --allow-writes also fork. Read-only by default: the database is opened without write
    /// access and the file stays byte-identical (search finds what the index already holds).
    /// A tool that fails (arguments that do not fit its schema included) answers `isError`
    /// with the reason; a tool not offered is a JSON-RPC error. Results are JSON, the shapes
    /// of --json.
    Mcp {
        /// Also offer `fork`, and open the database for writing (migrating it if needed).
        #[arg(long)]
        allow_writes: bool,
    },
    /// Shell completions on stdout: e.g. `session-store completions bash > /etc/bash_completion.d/session-store`.
    Completions {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// The manual page (roff) on stdout: e.g. `session-store man | man -l -`.
    Man,
}

/// The request shapes `export` writes.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum ExportFormat {
    /// Anthropic Messages: `{"system": ..., "messages": [...]}`.
    Anthropic,
    /// OpenAI Chat Completions: `{"messages": [...]}`.
    Openai,
    /// OpenAI Responses: `{"instructions"?, "input": [...]}`.
    Responses,
    /// Gemini generateContent: `{"systemInstruction"?, "contents": [...]}`.
    Gemini,
    /// A transcript a person reads, as Markdown: turns, calls beside their results,
    /// tombstones and compactions marked.
    Markdown,
    /// The same as one self-contained HTML page (no script, nothing fetched, long results
    /// folded).
    Html,
    /// Every row of the session as JSON Lines, for `import --format bundle`.
    Bundle,
}

/// The transcript formats `import` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ImportFormat {
    /// Tell the formats below apart by their content.
    Auto,
    /// An Anthropic Messages request body: `{"system"?, "messages": [...]}`.
    Anthropic,
    /// An OpenAI Chat Completions request body: `{"messages": [...]}`.
    Openai,
    /// An OpenAI Responses request body: `{"instructions"?, "input": [...]}`.
    Responses,
    /// A Gemini generateContent request body: `{"systemInstruction"?, "contents": [...]}`.
    Gemini,
    /// A Claude Code session log (JSON Lines).
    ClaudeCode,
    /// A Codex CLI rollout (JSON Lines).
    Codex,
    /// A session bundle written by `export --format bundle` (JSON Lines): every row restored.
    Bundle,
}

/// A target model as `messages.model` records it: `provider/model`.
fn parse_model(text: &str) -> Result<String, String> {
    match text.split_once('/') {
        Some((provider, model)) if !provider.is_empty() && !model.is_empty() => Ok(text.to_owned()),
        _ => Err(format!(
            "expected PROVIDER/MODEL, e.g. anthropic/claude-sonnet-4-5, found {text:?}"
        )),
    }
}

fn main() -> ExitCode {
    // `--help` and `--version` exit 0 through clap; bad arguments exit 2.
    terminal::catch_file_size_limit();
    let mut cli = Cli::parse();
    terminal::init_tracing(cli.verbose);
    open::set_durability(cli.durability);
    if cli.db.is_none() {
        cli.db = std::env::var_os("SESSION_STORE_DB")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from);
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            let message = format!("{error:#}");
            eprintln!("session-store: {}", terminal::escape(&message));
            if let Some(note) = terminal::file_size_limit_note() {
                eprintln!("session-store: {note}");
            }
            if let Some(hint) = hint(&error) {
                eprintln!("session-store: {}", terminal::escape(&hint));
            }
            ExitCode::from(2)
        }
    }
}

/// Runs the subcommand `cli` names, its output buffered on stdout.
// Over 80 lines on purpose: one `match` dispatching each subcommand to its module.
fn run(cli: Cli) -> anyhow::Result<()> {
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    match cli.command {
        Command::Sessions { json, tree: false } => {
            sessions::run(&open::existing(&cli.db)?, json, &mut out)?
        }
        Command::Sessions { tree: true, json } => {
            tree::run(&open::existing(&cli.db)?, json, &mut out)?
        }
        Command::Show {
            session,
            turns,
            full,
            json,
        } => {
            let store = open::existing(&cli.db)?;
            if json {
                shapes::show(&store, &session, turns, &mut out)?
            } else {
                show::run(&store, &session, turns, full, &mut out)?
            }
        }
        Command::Export {
            session,
            format,
            model,
        } => export::run(
            &open::existing(&cli.db)?,
            &session,
            shape_of(format),
            model,
            &mut out,
        )?,
        Command::Compact {
            session,
            min_keep_tail,
            summary,
            json,
        } => compact::run(
            &open::existing(&cli.db)?,
            &session,
            (min_keep_tail, &summary),
            json,
            &mut out,
        )?,
        Command::Import {
            format,
            model,
            files,
            json,
        } => import::run(&cli.db, format, model.as_deref(), &files, json, &mut out)?,
        Command::Cancel {
            session,
            reason,
            json,
        } => cancel::run(&open::existing(&cli.db)?, &session, &reason, json, &mut out)?,
        Command::Fork {
            session,
            at_turn,
            json,
        } => fork::run(&open::existing(&cli.db)?, &session, at_turn, json, &mut out)?,
        Command::Delete { session, json } => {
            delete::run(&open::existing(&cli.db)?, &session, json, &mut out)?
        }
        Command::Prune {
            older_than,
            dry_run,
            yes,
            json,
        } => prune::run(
            &open::existing(&cli.db)?,
            older_than,
            prune::Mode::of(dry_run, yes),
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
        Command::Budget {
            session,
            limit,
            json,
        } => budget::run(&open::existing(&cli.db)?, &session, limit, json, &mut out)?,
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
        Command::Copy {
            from,
            to,
            sessions,
            json,
            db: _,
        } => copy::run(&from, &to, &sessions, json, &mut out)?,
        Command::Mcp { allow_writes } => {
            // stdout belongs to the protocol: nothing else may be written there.
            drop(out);
            return mcp::run(open::path(&cli.db)?, allow_writes);
        }
        Command::Completions { shell } => clap_complete::generate(
            shell,
            &mut <Cli as clap::CommandFactory>::command(),
            "session-store",
            &mut out,
        ),
        Command::Man => {
            clap_mangen::Man::new(<Cli as clap::CommandFactory>::command()).render(&mut out)?
        }
    }
    out.flush()?;
    Ok(())
}

/// The shape `export` writes for the format named on the command line.
fn shape_of(format: ExportFormat) -> Shape {
    match format {
        ExportFormat::Anthropic => Shape::Request(Provider::Anthropic),
        ExportFormat::Openai => Shape::Request(Provider::OpenAi),
        ExportFormat::Responses => Shape::Request(Provider::Responses),
        ExportFormat::Gemini => Shape::Request(Provider::Gemini),
        ExportFormat::Markdown => Shape::Transcript(TranscriptFormat::Markdown),
        ExportFormat::Html => Shape::Transcript(TranscriptFormat::Html),
        ExportFormat::Bundle => Shape::Bundle,
    }
}

/// What to do about an error, when there is something to do. The library's refusal for
/// pending calls says "call cancel_pending", which a person at a shell cannot: a refused
/// write names the command that answers them, a refused import says what the body lacks.
fn hint(error: &anyhow::Error) -> Option<String> {
    use session_store::import::ImportError;
    use session_store::{Error, Refusal};
    error.chain().find_map(|cause| {
        if let Some(Error::Refused {
            session,
            reason: Refusal::PendingToolUses { .. },
            ..
        }) = cause.downcast_ref::<Error>()
        {
            return Some(format!(
                "hint: `session-store cancel {session}` answers the pending calls with tombstones"
            ));
        }
        if let Some(ImportError::Refused {
            reason: Refusal::PendingToolUses { ids, .. },
            ..
        }) = cause.downcast_ref::<ImportError>()
        {
            return Some(format!(
                "hint: the provider refuses this body too: each tool_use ({}) needs its tool_result in the message right after it; nothing was imported",
                ids.join(", ")
            ));
        }
        None
    })
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

#[cfg(test)]
mod tests {
    use session_store::{Error, Refusal, Role, SessionId};

    use super::*;

    /// The library's refusal says "call cancel_pending", which a CLI user cannot: the hint
    /// names the command that does it.
    #[test]
    fn a_refusal_for_pending_calls_points_at_the_cancel_command() {
        let refused = Error::Refused {
            session: SessionId::new("s-1"),
            index: 0,
            reason: Refusal::PendingToolUses {
                ids: vec!["call_1".into()],
                role: Role::User,
            },
        };
        let error = anyhow::Error::new(refused).context("cannot append");
        assert_eq!(
            hint(&error).as_deref(),
            Some("hint: `session-store cancel s-1` answers the pending calls with tombstones")
        );
        assert_eq!(hint(&anyhow::anyhow!("unknown session x")), None);
        let import = session_store::import::import(
            session_store::import::Format::Anthropic,
            r#"{"messages": [{"role": "user", "content": "hi"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
                {"role": "user", "content": "go on"}]}"#,
        );
        let error = anyhow::Error::new(import.expect_err("refused"));
        let hint = hint(&error).unwrap_or_default();
        assert!(
            hint.contains("each tool_use (t1) needs its tool_result"),
            "{hint}"
        );
    }
}
