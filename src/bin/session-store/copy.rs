//! `copy`: sessions from one database to another, whatever the backends, verified;
//! resumable (sessions the destination already holds identically are skipped), refused as a
//! whole before anything is written when it holds one differently.

use std::io::Write;
use std::path::Path;

use anyhow::Context;

use crate::open;
use crate::terminal::escape_line;

pub fn run(
    from: &Path,
    to: &Path,
    sessions: &[String],
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let source = open::existing(&Some(from.to_path_buf()))?;
    let ids = sessions
        .iter()
        .map(|id| open::session(&source, id))
        .collect::<anyhow::Result<Vec<_>>>()?;
    tracing::info!(db = %open::shown(to), "copying (a new file is created when done)");
    let report = source
        .copy_to_path(to, &ids)
        .with_context(|| format!("copying to {}", open::shown(to)))?;
    tracing::info!(sessions = report.sessions, "copied");
    for session in &report.skipped {
        eprintln!(
            "session-store: skipped session {}: {} already holds it with the same rows",
            escape_line(session.as_str()),
            escape_line(&open::shown(to))
        );
    }
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    write!(
        out,
        "copied {} session{} from {} to {}, verified",
        report.sessions,
        plural(report.sessions),
        escape_line(&open::shown(from)),
        escape_line(&open::shown(to))
    )?;
    if report.skipped.is_empty() {
        writeln!(out)?;
    } else {
        writeln!(
            out,
            "; {} session{} skipped (already there)",
            report.skipped.len(),
            plural(report.skipped.len())
        )?;
    }
    for (table, rows) in &report.rows {
        writeln!(out, "  {table:<18} {rows:>8} rows")?;
    }
    Ok(())
}
