//! Command-line arguments.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Parser};

/// The exit codes, as `--help` prints them.
const EXIT_STATUS: &str = "\
Exit status:
  0  every session checked is healthy, or was mended
  1  --dry-run found problems or rows pointing at a missing row (nothing was written)
  3  a run without --dry-run left sessions unmended because a row is outside the
     contract (unreadable_row); they are listed (unmended in --json), every other
     session was checked and mended
  2  bad arguments, or a database file that is missing, a directory, not SQLite, from a
     newer build, or any other error; when the file is refused nothing is created or
     changed, and a failed backup mends nothing

The report names every broken session with its rules, and the rows that point at a
missing row (rule orphan_row: left by writes with foreign keys off; mended first, never
by deleting a message or part); --json prints one object with what was found (problems,
broken_sessions, orphan_rows), what a real run would do (would_*, dry run) and what was
done (repaired, changes, sessions_repaired, orphan_rows_changed, migrations_applied,
backup).";

/// Check a session database against the store's contract and mend what is broken.
#[derive(Debug, Parser)]
#[command(name = "store-repair", version, after_help = EXIT_STATUS)]
pub struct Args {
    /// The database to check: a file path (must exist; an empty file is a database with no
    /// tables) or a postgres:// URL [default: $SESSION_STORE_DB].
    #[arg(long, value_name = "DB", env = "SESSION_STORE_DB", hide_env = true)]
    pub db: PathBuf,
    /// Report what would be mended and write nothing at all (the file's bytes stay the same).
    #[arg(long)]
    pub dry_run: bool,
    /// Print one JSON object on stdout instead of a summary.
    #[arg(long)]
    pub json: bool,
    /// Check only this session (repeatable; its id, or a unique prefix of 8 characters or
    /// more); every session when absent.
    #[arg(long = "session", value_name = "ID")]
    pub sessions: Vec<String>,
    /// Where to write the backup taken before the first write (default: next to the
    /// database, named with a timestamp).
    #[arg(long, value_name = "PATH", conflicts_with = "no_backup")]
    pub backup: Option<PathBuf>,
    /// Do not take a backup before writing.
    #[arg(long)]
    pub no_backup: bool,
    /// Treat calls pending for longer than this as dangling and tombstone them, e.g. `30m`,
    /// `12h`, `7d`, `1h30m` (units: s, m, h, d, w).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub stale_after: Option<Duration>,
    /// How long the writer of a streaming message on another host may stay silent before
    /// its message counts as abandoned and is settled (`interrupted`, its calls answered
    /// with tombstones), e.g. `2m`, `0s` (default 10m; a writer on this host is asked
    /// directly).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub writer_lease: Option<Duration>,
    /// Trace what the run does on stderr (-v info, -vv debug, -vvv trace; RUST_LOG
    /// overrides).
    #[arg(short, long, action = ArgAction::Count)]
    pub verbose: u8,
    /// What a commit promises on power loss: `full` syncs every commit (SQLite
    /// synchronous=FULL), `normal` may lose the latest commits but never corrupts.
    #[arg(long, value_name = "full|normal", default_value = "normal")]
    pub durability: session_store::Durability,
}

/// The options the run opens the database with (`--durability`).
pub fn store_options(args: &Args) -> session_store::StoreOptions {
    session_store::StoreOptions {
        durability: args.durability,
        ..session_store::StoreOptions::default()
    }
}

/// Parses `90s`, `30m`, `12h`, `7d`, `2w` and sums like `1h30m`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty duration".to_owned());
    }
    let mut total: u64 = 0;
    let mut number = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit: u64 = match c {
            's' => 1,
            'm' => 60,
            'h' => 3_600,
            'd' => 86_400,
            'w' => 604_800,
            other => {
                return Err(format!(
                    "unknown unit {other:?} in {text:?} (use s, m, h, d, w)"
                ))
            }
        };
        let value: u64 = number
            .parse()
            .map_err(|_| format!("a number must come before {c:?} in {text:?}"))?;
        number.clear();
        total = value
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| format!("{text:?} is too long"))?;
    }
    if !number.is_empty() {
        return Err(format!(
            "{text:?} needs a unit after {number} (s, m, h, d, w)"
        ));
    }
    Ok(Duration::from_secs(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units_and_sums() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5_400)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(604_800)));
        assert!(parse_duration("10").is_err());
        assert!(parse_duration("5y").is_err());
        assert!(parse_duration("h").is_err());
    }
}
