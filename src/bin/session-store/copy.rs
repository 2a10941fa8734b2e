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
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let source = open::existing(&Some(from.to_path_buf()))?;
    let ids = sessions
        .iter()
        .map(|id| open::session(&source, id))
        .collect::<anyhow::Result<Vec<_>>>()?;
    tracing::info!(db = %open::shown(to), "copying (a new file is created when done)");
    let spinner = crate::progress::spinner("copying and verifying");
    let report = source.copy_to_path(to, &ids);
    spinner.finish_and_clear();
    let report = report.with_context(|| format!("copying to {}", open::shown(to)))?;
    tracing::info!(sessions = report.sessions, "copied");
    for session in &report.skipped {
        eprintln!(
            "session-store: skipped session {}: {} already holds it with the same rows",
            escape_line(session.as_str()),
            escape_line(&open::shown(to))
        );
    }
    if json {
        let rows: serde_json::Map<String, serde_json::Value> = report
            .rows
            .iter()
            .map(|(table, rows)| (table.clone(), (*rows).into()))
            .collect();
        let body = serde_json::json!({
            "from": open::shown(from),
            "to": open::shown(to),
            "sessions": report.sessions,
            "skipped": report.skipped,
            "rows": rows,
            "verified": true,
        });
        return crate::shapes::print(out, &body);
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
