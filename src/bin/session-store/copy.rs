//! `copy`: sessions from one database to another, whatever the backends, verified.

use std::io::Write;
use std::path::Path;

use anyhow::Context;

use crate::open;

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
    let dest = open::or_create(to)?;
    let spinner = crate::progress::spinner("copying and verifying");
    let report = source.copy_to(&dest, &ids);
    spinner.finish_and_clear();
    let report = report.with_context(|| format!("copying to {}", open::shown(to)))?;
    tracing::info!(sessions = report.sessions, "copied");
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
            "rows": rows,
            "verified": true,
        });
        return crate::shapes::print(out, &body);
    }
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
