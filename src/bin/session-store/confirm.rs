//! Asking before deleting: a person at a terminal answers a question; a script says `--yes`
//! up front. Without a terminal to ask on and without `--yes`, nothing is deleted and the
//! command fails (exit 2), so that a forgotten flag in a cron job never deletes anything.

use std::io::{BufRead, IsTerminal, Write};

use anyhow::bail;
use session_store::Deleted;

use crate::terminal::escape_line;

/// How many of the sessions to delete the question lists by name.
const LISTED: usize = 10;

/// True when the person at the terminal says yes to deleting `sessions`. An error (nothing
/// deleted) when stdin is not a terminal: `--yes` is how a script confirms.
pub fn delete_sessions(sessions: &[Deleted]) -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        bail!(
            "prune deletes only after a yes on a terminal, or with --yes (stdin is not a terminal); nothing was deleted (--dry-run lists what would be)"
        );
    }
    if sessions.is_empty() {
        return Ok(true);
    }
    let mut stderr = std::io::stderr().lock();
    for session in sessions.iter().take(LISTED) {
        writeln!(
            stderr,
            "  {}\tupdated_at={}\tmessages={}",
            escape_line(session.session.as_str()),
            escape_line(&session.updated_at),
            session.messages
        )?;
    }
    if sessions.len() > LISTED {
        writeln!(stderr, "  ... and {} more", sessions.len() - LISTED)?;
    }
    write!(stderr, "delete {} session(s)? [y/N] ", sessions.len())?;
    stderr.flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    let yes = is_yes(&answer);
    if !yes {
        writeln!(stderr, "nothing deleted")?;
    }
    Ok(yes)
}

/// `y` or `yes`, in any case; anything else (an empty line, end of input) is no.
fn is_yes(answer: &str) -> bool {
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_yes_is_a_yes() {
        for yes in ["y\n", "Y", "yes", " YES \r\n"] {
            assert!(is_yes(yes), "{yes:?}");
        }
        for no in ["", "\n", "n", "no", "yess", "y es", "ok"] {
            assert!(!is_yes(no), "{no:?}");
        }
    }
}
