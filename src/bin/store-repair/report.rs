//! The two shapes of the report: lines for people, one JSON object for scripts.
//!
//! Both say apart what was found (`problems`, per session and per rule), what a real run
//! would do (a dry run's `would_*`) and what was done (`repaired`, `changes`,
//! `sessions_repaired`, `migrations_applied`, `backup`), so no number is read as another.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde_json::{json, Map, Value};
use session_store::repair::HealthRule;
use session_store::SessionId;

use crate::run::{Outcome, Plan};
use crate::terminal::escape_line;

fn by_rule(outcome: &Outcome) -> BTreeMap<HealthRule, usize> {
    let mut counts = BTreeMap::new();
    for problem in &outcome.problems {
        *counts.entry(problem.rule).or_insert(0) += 1;
    }
    counts
}

/// Each broken session with the number of problems per rule, in the order found.
fn by_session(outcome: &Outcome) -> Vec<(&SessionId, BTreeMap<HealthRule, usize>)> {
    let mut sessions: Vec<(&SessionId, BTreeMap<HealthRule, usize>)> = Vec::new();
    for problem in &outcome.problems {
        match sessions.last_mut() {
            Some((id, rules)) if *id == &problem.session_id => {
                *rules.entry(problem.rule).or_insert(0) += 1;
            }
            _ => sessions.push((&problem.session_id, BTreeMap::from([(problem.rule, 1)]))),
        }
    }
    sessions
}

fn counts(rules: &BTreeMap<HealthRule, usize>) -> Map<String, Value> {
    rules
        .iter()
        .map(|(rule, n)| (rule.as_str().to_owned(), (*n).into()))
        .collect()
}

/// One JSON object on one line; see the module docs for what each field means.
pub fn json(outcome: &Outcome, out: &mut impl Write) -> io::Result<()> {
    let broken: Vec<Value> = by_session(outcome)
        .into_iter()
        .map(|(id, rules)| {
            json!({
                "session_id": id.as_str(),
                "problems": rules.values().sum::<usize>(),
                "rules": counts(&rules),
            })
        })
        .collect();
    let would = outcome.would;
    let value = json!({
        "db": outcome.db.display().to_string(),
        "dry_run": outcome.dry_run,
        // Found.
        "sessions_checked": outcome.sessions_checked,
        "problems": outcome.problems,
        "problems_by_rule": counts(&by_rule(outcome)),
        "broken_sessions": broken,
        // Rows that point at a row that is not there (rule `orphan_row`), found before the
        // sessions were checked.
        "orphan_rows": outcome.orphan_rows,
        "migrations_pending": outcome.migrations_pending,
        // What a real run would do (dry run only; null otherwise).
        "would_repair": would.map(|w| w.repair),
        "would_change": would.map(|w| w.changes),
        "sessions_would_repair": would.map(|w| w.sessions),
        "would_change_orphan_rows": would.map(|w| w.orphan_changes),
        // Done (always 0 on a dry run).
        "migrations_applied": outcome.migrations_applied,
        "repaired": outcome.repaired,
        "changes": outcome.changes,
        "sessions_repaired": outcome.sessions_repaired,
        "orphan_rows_changed": outcome.orphan_changes,
        "backup": outcome.backup.as_ref().map(|p| p.display().to_string()),
        "unmended": outcome.unmended,
    });
    serde_json::to_writer(&mut *out, &value)?;
    writeln!(out)
}

/// `1 problem`, `2 problems`.
fn count(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

fn rules_line(rules: &BTreeMap<HealthRule, usize>) -> String {
    rules
        .iter()
        .map(|(rule, n)| format!("{} ×{n}", rule.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Lines for people: the totals, every broken session with its rules, then what was (or
/// would be) done.
pub fn human(outcome: &Outcome, out: &mut impl Write) -> io::Result<()> {
    let sessions = by_session(outcome);
    writeln!(
        out,
        "{}: {} checked, {} in {}",
        escape_line(&outcome.db.display().to_string()),
        count(outcome.sessions_checked, "session", "sessions"),
        count(outcome.problems.len(), "problem", "problems"),
        count(sessions.len(), "session", "sessions"),
    )?;
    if !sessions.is_empty() {
        write_broken(outcome, &sessions, out)?;
    }
    write_orphans(outcome, out)?;
    if let Some(plan) = outcome.would {
        return write_would(outcome, plan, out);
    }
    write_done(outcome, out)
}

/// Every broken session with its rules (its id padded to the longest), then the count per
/// rule.
fn write_broken(
    outcome: &Outcome,
    sessions: &[(&SessionId, BTreeMap<HealthRule, usize>)],
    out: &mut impl Write,
) -> io::Result<()> {
    let width = sessions
        .iter()
        .map(|(id, _)| escape_line(id.as_str()).chars().count())
        .max()
        .unwrap_or(0);
    writeln!(out, "broken sessions:")?;
    for (id, rules) in sessions {
        writeln!(
            out,
            "  {:<width$}  {}",
            escape_line(id.as_str()),
            rules_line(rules)
        )?;
    }
    writeln!(out, "problems by rule:")?;
    for (rule, n) in by_rule(outcome) {
        writeln!(out, "  {:<24} {n}", rule.as_str())?;
    }
    Ok(())
}

/// The rows that point at a missing row, counted by table and the table they point at.
fn write_orphans(outcome: &Outcome, out: &mut impl Write) -> io::Result<()> {
    if outcome.orphan_rows.is_empty() {
        return Ok(());
    }
    let mut tables: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for row in &outcome.orphan_rows {
        *tables.entry((&row.table, &row.parent)).or_default() += 1;
    }
    writeln!(
        out,
        "{} pointing at a missing row (rule orphan_row):",
        count(outcome.orphan_rows.len(), "row", "rows")
    )?;
    for ((table, parent), n) in tables {
        writeln!(
            out,
            "  {:<24} {n} (a missing {})",
            escape_line(table),
            escape_line(parent)
        )?;
    }
    Ok(())
}

/// What a real run would do, after a dry run that wrote nothing.
fn write_would(outcome: &Outcome, plan: Plan, out: &mut impl Write) -> io::Result<()> {
    let mut would = Vec::new();
    if outcome.migrations_pending > 0 {
        would.push(format!(
            "apply {}",
            count(
                outcome.migrations_pending,
                "schema migration",
                "schema migrations"
            )
        ));
    }
    if plan.orphan_changes > 0 {
        would.push(format!(
            "mend {} for rows pointing at missing rows (each logged)",
            count(plan.orphan_changes, "change", "changes")
        ));
    }
    if plan.changes > 0 {
        would.push(format!(
            "mend {} in {} with {}",
            count(plan.repair, "problem", "problems"),
            count(plan.sessions, "session", "sessions"),
            count(plan.changes, "change", "changes"),
        ));
    }
    if would.is_empty() {
        writeln!(out, "dry run, nothing written; nothing to do")?;
    } else {
        writeln!(
            out,
            "dry run, nothing written; a real run would {}",
            would.join(" and ")
        )?;
    }
    Ok(())
}

/// What a real run did: migrations applied, problems mended, sessions left unmended, and
/// the backup.
fn write_done(outcome: &Outcome, out: &mut impl Write) -> io::Result<()> {
    if outcome.migrations_applied > 0 {
        writeln!(
            out,
            "applied {}",
            count(
                outcome.migrations_applied,
                "schema migration",
                "schema migrations"
            )
        )?;
    }
    if outcome.orphan_changes > 0 {
        writeln!(
            out,
            "mended the rows pointing at missing rows with {} (a missing session or message \
             made again, what else their keys declare); see the repair_log table (rule orphan_row)",
            count(outcome.orphan_changes, "change", "changes")
        )?;
    }
    if outcome.changes > 0 {
        writeln!(
            out,
            "mended {} in {} with {}; see the repair_log table",
            count(outcome.repaired, "problem", "problems"),
            count(outcome.sessions_repaired, "session", "sessions"),
            count(outcome.changes, "change", "changes"),
        )?;
    } else if outcome.problems.is_empty() && outcome.orphan_rows.is_empty() {
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
        Some(path) => writeln!(out, "backup: {}", escape_line(&path.display().to_string())),
        None => Ok(()),
    }
}
