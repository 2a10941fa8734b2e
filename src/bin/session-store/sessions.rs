//! `sessions`: a table of sessions for people, or a JSON array for scripts.
//!
//! The counts come from [`Store::session_overviews`] (SQL aggregates; no message is loaded).
//! Health is the contract's check, the same `store-repair` runs, done one session at a time
//! ([`Store::check`] with that session alone): it reads every message once, holding one
//! session in memory at a time. `health` is `ok`, the rule names the session breaks, or
//! `unreadable_row` when its rows cannot be read; a pending call is legal and only counted.

use std::collections::BTreeSet;
use std::io::Write;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::json;
use session_store::repair::RepairOptions;
use session_store::SessionOverview;
use session_store::{repair::HealthRule, Error, Store};

use crate::terminal::escape_line;

/// Titles longer than this are shortened in the table (not in JSON).
const TITLE_WIDTH: usize = 48;

/// What the check says about one session.
enum Health {
    Ok,
    Broken(BTreeSet<&'static str>),
    Unreadable(String),
}

impl Health {
    fn of(store: &Store, overview: &SessionOverview) -> anyhow::Result<Self> {
        if overview.created_at.is_none() || overview.updated_at.is_none() {
            return Ok(Health::Unreadable(
                "created_at or updated_at is not an RFC 3339 timestamp".to_owned(),
            ));
        }
        match store.check(
            std::slice::from_ref(&overview.id),
            &RepairOptions::default(),
        ) {
            Ok(report) if report.violations.is_empty() => Ok(Health::Ok),
            // The check reports a row outside the contract as a problem of its own.
            Ok(report)
                if report
                    .violations
                    .iter()
                    .any(|v| v.rule == HealthRule::UnreadableRow) =>
            {
                let why = report
                    .violations
                    .iter()
                    .find(|v| v.rule == HealthRule::UnreadableRow)
                    .map(|v| v.detail.clone())
                    .unwrap_or_default();
                Ok(Health::Unreadable(why))
            }
            Ok(report) => Ok(Health::Broken(
                report.violations.iter().map(|v| v.rule.as_str()).collect(),
            )),
            Err(error @ Error::CorruptRow { .. }) => Ok(Health::Unreadable(error.to_string())),
            Err(error) => Err(error.into()),
        }
    }

    fn label(&self) -> String {
        match self {
            Health::Ok => "ok".to_owned(),
            Health::Broken(rules) => rules.iter().copied().collect::<Vec<_>>().join(","),
            Health::Unreadable(_) => "unreadable_row".to_owned(),
        }
    }
}

pub fn run(store: &Store, json: bool, out: &mut impl Write) -> anyhow::Result<()> {
    let overviews = store.session_overviews()?;
    let mut rows = Vec::with_capacity(overviews.len());
    for overview in overviews {
        match Health::of(store, &overview) {
            Ok(health) => rows.push((overview, health)),
            // Deleted by another process since the list was read: not listed.
            Err(error)
                if matches!(
                    error.downcast_ref::<Error>(),
                    Some(Error::UnknownSession(_))
                ) => {}
            Err(error) => return Err(error),
        }
    }
    tracing::info!(sessions = rows.len(), "listed");
    if json {
        write_json(&rows, out)
    } else {
        write_table(&rows, out)
    }
}

fn write_json(rows: &[(SessionOverview, Health)], out: &mut impl Write) -> anyhow::Result<()> {
    let sessions: Vec<serde_json::Value> = rows
        .iter()
        .map(|(o, health)| {
            let (state, rules, detail) = match health {
                Health::Ok => ("ok", Vec::new(), None),
                // A check that reports unreadable rows as a rule says the same thing.
                Health::Broken(rules) if rules.contains("unreadable_row") => {
                    ("unreadable", rules.iter().copied().collect(), None)
                }
                Health::Broken(rules) => ("broken", rules.iter().copied().collect(), None),
                Health::Unreadable(why) => ("unreadable", vec!["unreadable_row"], Some(why)),
            };
            json!({
                "id": o.id.as_str(),
                "title": o.title,
                "created_at": o.created_at.map(|t| t.to_rfc3339_opts(SecondsFormat::Micros, true)),
                "updated_at": o.updated_at.map(|t| t.to_rfc3339_opts(SecondsFormat::Micros, true)),
                "messages": o.messages,
                "turns": o.turns,
                "compacted_turns": o.compacted_turns,
                "pending": o.pending.len(),
                "pending_tool_use_ids": o.pending,
                "health": state,
                "rules": rules,
                "unreadable": detail,
            })
        })
        .collect();
    serde_json::to_writer_pretty(&mut *out, &sessions)?;
    writeln!(out)?;
    Ok(())
}

fn when(at: Option<DateTime<Utc>>) -> String {
    at.map_or_else(
        || "?".to_owned(),
        |at| at.format("%Y-%m-%d %H:%M").to_string(),
    )
}

fn write_table(rows: &[(SessionOverview, Health)], out: &mut impl Write) -> anyhow::Result<()> {
    if rows.is_empty() {
        writeln!(out, "no sessions")?;
        return Ok(());
    }
    let header = [
        "ID",
        "CREATED (UTC)",
        "UPDATED (UTC)",
        "MESSAGES",
        "TURNS",
        "COMPACTED",
        "PENDING",
        "HEALTH",
        "TITLE",
    ];
    let cells: Vec<[String; 9]> = rows
        .iter()
        .map(|(o, health)| {
            let title = o.title.as_deref().map_or_else(String::new, shorten);
            [
                escape_line(o.id.as_str()).into_owned(),
                when(o.created_at),
                when(o.updated_at),
                o.messages.to_string(),
                o.turns.to_string(),
                o.compacted_turns.to_string(),
                o.pending.len().to_string(),
                health.label(),
                title,
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &cells {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    // Numbers align right, text left; the last column is not padded.
    let numeric = [false, false, false, true, true, true, true, false, false];
    let line = |fields: &[&str]| -> String {
        let mut line = String::new();
        for (index, field) in fields.iter().enumerate() {
            if index > 0 {
                line.push_str("  ");
            }
            let pad = widths[index].saturating_sub(field.chars().count());
            if index == fields.len() - 1 {
                line.push_str(field);
            } else if numeric[index] {
                line.push_str(&" ".repeat(pad));
                line.push_str(field);
            } else {
                line.push_str(field);
                line.push_str(&" ".repeat(pad));
            }
        }
        line.trim_end().to_owned()
    };
    writeln!(out, "{}", line(&header))?;
    for row in &cells {
        let fields: Vec<&str> = row.iter().map(String::as_str).collect();
        writeln!(out, "{}", line(&fields))?;
    }
    let broken = rows
        .iter()
        .filter(|(_, h)| !matches!(h, Health::Ok))
        .count();
    let pending: usize = rows.iter().map(|(o, _)| o.pending.len()).sum();
    writeln!(
        out,
        "{} · {} · {}",
        count(rows.len(), "session", "sessions"),
        match broken {
            0 => "all healthy".to_owned(),
            n => format!("{} ({})", count(n, "broken", "broken"), repair_hint()),
        },
        count(pending, "pending call", "pending calls"),
    )?;
    Ok(())
}

fn repair_hint() -> &'static str {
    "store-repair --dry-run lists what is wrong"
}

/// `1 session`, `2 sessions`.
pub fn count(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

fn shorten(title: &str) -> String {
    let title = escape_line(title);
    if title.chars().count() <= TITLE_WIDTH {
        return title.into_owned();
    }
    let mut short: String = title.chars().take(TITLE_WIDTH - 1).collect();
    short.push('…');
    short
}
