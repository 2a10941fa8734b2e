//! `size [--top N] [--json] [--reclaim | --vacuum]`: where the bytes of the database are,
//! and giving free pages back to the file system (`--reclaim`: incremental after the first
//! time; `--vacuum`: a full rewrite that also compacts half-empty pages).

use std::io::Write;

use serde_json::json;
use session_store::{Reclaimed, SizeReport, Store};

/// Measures where the database's bytes are (after giving free pages back with `reclaim`,
/// or rewriting the file with `vacuum`) and writes the report, the `top` largest sessions
/// first, to `out` (as JSON with `json`).
pub fn run(
    store: &Store,
    top: usize,
    (reclaim, vacuum): (bool, bool),
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let spinner = crate::progress::spinner("measuring");
    let reclaimed = if vacuum {
        Some(store.vacuum()?)
    } else if reclaim {
        Some(store.reclaim_space()?)
    } else {
        None
    };
    let report = store.size_report(top)?;
    spinner.finish_and_clear();
    if json {
        let mut body = serde_json::to_value(&report)?;
        if let Some(reclaimed) = reclaimed {
            body["reclaimed"] = json!(reclaimed);
        }
        serde_json::to_writer_pretty(&mut *out, &body)?;
        writeln!(out)?;
        return Ok(());
    }
    write_human(out, store.is_postgres(), &report, reclaimed)
}

/// The size report for people: what was reclaimed, the file (or, on PostgreSQL, the
/// tables), the content, the largest sessions, and each table and index.
fn write_human(
    out: &mut impl Write,
    is_postgres: bool,
    report: &SizeReport,
    reclaimed: Option<Reclaimed>,
) -> anyhow::Result<()> {
    if let Some(reclaimed) = reclaimed {
        writeln!(
            out,
            "reclaimed: {} -> {}{}",
            bytes(reclaimed.before_bytes),
            bytes(reclaimed.after_bytes),
            if reclaimed.full_vacuum {
                " (full VACUUM)"
            } else {
                ""
            }
        )?;
    }
    if is_postgres {
        // No file: the tables and indexes of the store's schema (free pages and WAL are the
        // server's, reported as 0).
        writeln!(
            out,
            "tables and indexes {}, search index {}",
            bytes(report.file_bytes),
            bytes(report.search_index_bytes)
        )?;
    } else {
        writeln!(
            out,
            "file {} (free {}), wal {}, search index {}",
            bytes(report.file_bytes),
            bytes(report.free_bytes),
            bytes(report.wal_bytes),
            bytes(report.search_index_bytes)
        )?;
    }
    writeln!(
        out,
        "{} session(s): content {}, of which tool output {} ({}%)",
        report.sessions,
        bytes(report.content_bytes),
        bytes(report.tool_output_bytes),
        percent(report.tool_output_bytes, report.content_bytes)
    )?;
    if !report.largest.is_empty() {
        writeln!(out, "largest sessions:")?;
        for session in &report.largest {
            writeln!(
                out,
                "{}\tmessages={}\tcontent={}\ttool_output={} ({}%)",
                session.session,
                session.messages,
                bytes(session.content_bytes),
                bytes(session.tool_output_bytes),
                percent(session.tool_output_bytes, session.content_bytes)
            )?;
        }
    }
    writeln!(out, "tables and indexes:")?;
    for object in &report.objects {
        writeln!(out, "{}\t{}", object.name, bytes(object.bytes))?;
    }
    Ok(())
}

/// Bytes for people: `512 B`, `3.4 KiB`, `12.0 MiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

fn percent(part: u64, whole: u64) -> u64 {
    part.saturating_mul(100).checked_div(whole).unwrap_or(0)
}
