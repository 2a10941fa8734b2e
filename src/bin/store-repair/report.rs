//! The two shapes of the report: a summary for people, one JSON object for scripts.

use std::collections::BTreeMap;
use std::io::{self, Write};

use session_store::history::rules::Rule;

use crate::run::Outcome;

fn by_rule(outcome: &Outcome) -> BTreeMap<Rule, usize> {
    let mut counts = BTreeMap::new();
    for problem in &outcome.problems {
        *counts.entry(problem.rule).or_insert(0) += 1;
    }
    counts
}

/// `{"sessions_checked", "problems", "repaired", ...}` on one line.
pub fn json(outcome: &Outcome, out: &mut impl Write) -> io::Result<()> {
    let by_rule: serde_json::Map<String, serde_json::Value> = by_rule(outcome)
        .into_iter()
        .map(|(rule, n)| (rule.as_str().to_owned(), n.into()))
        .collect();
    let value = serde_json::json!({
        "db": outcome.db.display().to_string(),
        "dry_run": outcome.dry_run,
        "migrations": outcome.migrations,
        "sessions_checked": outcome.sessions_checked,
        "problems": outcome.problems,
        "problems_by_rule": by_rule,
        "repaired": outcome.repaired,
        "sessions_repaired": outcome.sessions_repaired,
        "changes": outcome.changes,
        "backup": outcome.backup.as_ref().map(|p| p.display().to_string()),
        "unmended": outcome.unmended,
    });
    serde_json::to_writer(&mut *out, &value)?;
    writeln!(out)
}

/// A few lines for people.
pub fn human(outcome: &Outcome, out: &mut impl Write) -> io::Result<()> {
    let sessions = {
        let mut ids: Vec<_> = outcome.problems.iter().map(|p| &p.session_id).collect();
        ids.dedup();
        ids.len()
    };
    writeln!(
        out,
        "{}: {} session(s) checked, {} problem(s) in {} session(s)",
        outcome.db.display(),
        outcome.sessions_checked,
        outcome.problems.len(),
        sessions
    )?;
    for (rule, count) in by_rule(outcome) {
        writeln!(out, "  {:<24} {count}", rule.as_str())?;
    }
    if outcome.dry_run {
        if outcome.migrations > 0 {
            writeln!(
                out,
                "would apply {} schema migration(s)",
                outcome.migrations
            )?;
        }
        if outcome.changes > 0 {
            writeln!(
                out,
                "dry run, nothing written: mending would make {} change(s) in {} session(s)",
                outcome.changes, outcome.sessions_repaired
            )?;
        } else {
            writeln!(out, "dry run, nothing written")?;
        }
        return Ok(());
    }
    if outcome.migrations > 0 {
        writeln!(out, "applied {} schema migration(s)", outcome.migrations)?;
    }
    if outcome.changes > 0 {
        writeln!(
            out,
            "mended {} problem(s) in {} session(s) with {} change(s); see the repair_log table",
            outcome.repaired, outcome.sessions_repaired, outcome.changes
        )?;
    } else if outcome.problems.is_empty() {
        writeln!(out, "healthy: nothing to mend")?;
    }
    if !outcome.unmended.is_empty() {
        writeln!(
            out,
            "left unmended ({} session(s) with rows outside the contract, rule unreadable_row):",
            outcome.unmended.len()
        )?;
        for session in &outcome.unmended {
            writeln!(out, "  {session}")?;
        }
    }
    match &outcome.backup {
        Some(path) => writeln!(out, "backup: {}", path.display()),
        None => Ok(()),
    }
}
