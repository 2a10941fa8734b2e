//! `copy`: sessions from one database to another, whatever the backends, verified.

use std::io::Write;
use std::path::Path;

use anyhow::Context;

use crate::open;

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
    let dest = open::or_create(to)?;
    let report = source
        .copy_to(&dest, &ids)
        .with_context(|| format!("copying to {}", open::shown(to)))?;
    tracing::info!(sessions = report.sessions, "copied");
    writeln!(
        out,
        "copied {} session{} from {} to {}, verified",
        report.sessions,
        if report.sessions == 1 { "" } else { "s" },
        open::shown(from),
        open::shown(to)
    )?;
    for (table, rows) in &report.rows {
        writeln!(out, "  {table:<18} {rows:>8} rows")?;
    }
    Ok(())
}
