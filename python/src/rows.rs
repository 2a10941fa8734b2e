//! The rows of `session-store sessions --json`, for `Store.sessions()`.
//!
//! The same fields, computed the same way as the CLI's listing: the counts from
//! [`lib::Store::session_overviews`], the health from the contract's check of each session
//! alone.

use std::collections::BTreeSet;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{json, Value};
use session_store as lib;

use crate::Failure;

/// One row per session, oldest first; a session deleted while listing is left out.
pub(crate) fn sessions(store: &lib::Store) -> Result<Value, Failure> {
    let mut rows = Vec::new();
    for overview in store.session_overviews()? {
        let Some((state, rules, detail)) = health(store, &overview)? else {
            continue;
        };
        rows.push(json!({
            "id": overview.id.as_str(),
            "title": overview.title,
            "created_at": timestamp(overview.created_at),
            "updated_at": timestamp(overview.updated_at),
            "messages": overview.messages,
            "turns": overview.turns,
            "compacted_turns": overview.compacted_turns,
            "pending": overview.pending.len(),
            "pending_tool_use_ids": overview.pending,
            "health": state,
            "rules": rules,
            "unreadable": detail,
        }));
    }
    Ok(Value::Array(rows))
}

fn timestamp(at: Option<DateTime<Utc>>) -> Option<String> {
    at.map(|t| t.to_rfc3339_opts(SecondsFormat::Micros, true))
}

/// `(health, rules, why unreadable)`; `None` for a session gone since the listing.
type Health = (&'static str, Vec<&'static str>, Option<String>);

fn health(store: &lib::Store, overview: &lib::SessionOverview) -> Result<Option<Health>, Failure> {
    if overview.created_at.is_none() || overview.updated_at.is_none() {
        let why = "created_at or updated_at is not an RFC 3339 timestamp".to_owned();
        return Ok(Some(("unreadable", vec!["unreadable_row"], Some(why))));
    }
    let report = match store.check(
        std::slice::from_ref(&overview.id),
        &lib::repair::RepairOptions::default(),
    ) {
        Ok(report) => report,
        Err(lib::Error::UnknownSession(_)) => return Ok(None),
        Err(error @ lib::Error::CorruptRow { .. }) => {
            return Ok(Some((
                "unreadable",
                vec!["unreadable_row"],
                Some(error.to_string()),
            )))
        }
        Err(error) => return Err(error.into()),
    };
    // The check reports a row outside the contract as a problem of its own.
    if let Some(unreadable) = report
        .violations
        .iter()
        .find(|v| v.rule == lib::repair::HealthRule::UnreadableRow)
    {
        let why = Some(unreadable.detail.clone());
        return Ok(Some(("unreadable", vec!["unreadable_row"], why)));
    }
    let rules: BTreeSet<&'static str> = report.violations.iter().map(|v| v.rule.as_str()).collect();
    let state = if rules.is_empty() { "ok" } else { "broken" };
    Ok(Some((state, rules.into_iter().collect(), None)))
}
