//! PostgreSQL check and mend: the same rules (`check_session`) and plan (`plan_mend`) as
//! `store/repair.rs`. A check reads one snapshot; each session is mended in its own
//! transaction under its row lock, reloaded and re-checked there, and checked once more
//! before the commit. There is no file to back up: `store-repair` refuses `--backup` for a
//! URL (use `pg_dump`).

use super::Tx;
use chrono::{DateTime, TimeDelta, Utc};

use super::read::session_ids;
use super::rows::part_from_row;
use super::{lock_session, require_session, PgStore};
use crate::error::{Error, Result};
use crate::history::mend::plan_mend;
use crate::history::rules::{check_session, CheckOptions};
use crate::model::{Message, Role, SessionId};
use crate::store::apply::apply;
use crate::store::repair::{CheckReport, Loaded, RepairOptions, SessionRepair};
use crate::store::{now, parse_time};

fn check_options(options: &RepairOptions, now: DateTime<Utc>) -> CheckOptions {
    CheckOptions {
        now,
        stale_after: options
            .stale_after
            .map(|d| TimeDelta::from_std(d).unwrap_or(TimeDelta::MAX)),
    }
}

/// The session as the rules see it, with each part's row id (as `store/repair.rs` loads it).
fn load_session(tx: &mut Tx<'_>, session: &SessionId, now: DateTime<Utc>) -> Result<Loaded> {
    let rows = tx.query(
        "SELECT m.id, m.seq, m.turn_index, m.role, m.compacted, m.created_at, m.model,
                p.id, p.kind, p.text, p.tool_use_id, p.tool_name, p.input, p.is_error,
                p.provider_metadata
         FROM messages m LEFT JOIN parts p ON p.message_id = m.id
         WHERE m.session_id = $1
         ORDER BY m.seq, p.ordinal",
        &[&session.as_str()],
    )?;
    let mut loaded = Loaded {
        messages: Vec::new(),
        part_ids: Vec::new(),
    };
    for row in &rows {
        let id: i64 = row.try_get(0)?;
        if loaded.messages.last().is_none_or(|m: &Message| m.id != id) {
            let role: String = row.try_get(3)?;
            let role = role.parse::<Role>().map_err(|e| Error::CorruptRow {
                table: "messages",
                row_id: id,
                detail: e.to_string(),
            })?;
            let created_at: Option<String> = row.try_get(5)?;
            loaded.messages.push(Message {
                id,
                seq: row.try_get(1)?,
                turn_index: row.try_get(2)?,
                role,
                compacted: row.try_get::<_, i64>(4)? != 0,
                created_at: created_at.as_deref().and_then(parse_time).unwrap_or(now),
                model: row.try_get(6)?,
                parts: Vec::new(),
            });
            loaded.part_ids.push(Vec::new());
        }
        let Some(part_id) = row.try_get::<_, Option<i64>>(7)? else {
            continue;
        };
        let Some(part) = part_from_row(row, 7, true)? else {
            continue;
        };
        if let (Some(message), Some(ids)) = (loaded.messages.last_mut(), loaded.part_ids.last_mut())
        {
            message.parts.push(part);
            ids.push(part_id);
        }
    }
    Ok(loaded)
}

impl PgStore {
    pub(crate) fn check(
        &self,
        sessions: &[SessionId],
        options: &RepairOptions,
    ) -> Result<CheckReport> {
        let options = check_options(options, now());
        self.read(|tx| {
            let ids = if sessions.is_empty() {
                session_ids(tx)?
            } else {
                for session in sessions {
                    require_session(tx, session)?;
                }
                sessions.to_vec()
            };
            let mut report = CheckReport::default();
            for session in &ids {
                let loaded = load_session(tx, session, options.now)?;
                report
                    .violations
                    .extend(check_session(session, &loaded.messages, &options));
                report.sessions_checked += 1;
            }
            Ok(report)
        })
    }

    /// Mends one session in its own transaction; with `rollback`, does all of it (the same
    /// statements, the same final check) and rolls back: a dry run that writes nothing.
    pub(crate) fn repair_session(
        &self,
        session: &SessionId,
        options: &RepairOptions,
        rollback: bool,
    ) -> Result<SessionRepair> {
        let now = now();
        let options = check_options(options, now);
        self.transaction(rollback, |tx| {
            lock_session(tx, session)?;
            let loaded = load_session(tx, session, now)?;
            let found = check_session(session, &loaded.messages, &options);
            let mut repair = SessionRepair {
                session_id: session.clone(),
                found,
                changes: Vec::new(),
            };
            if repair.found.is_empty() {
                return Ok(repair);
            }
            let plan = plan_mend(&loaded.messages, &options);
            repair.changes = apply(tx, session, &loaded, &plan, now)?;
            let after = load_session(tx, session, now)?;
            let left = check_session(session, &after.messages, &options);
            if let Some(first) = left.first() {
                return Err(Error::RepairIncomplete {
                    session: session.clone(),
                    remaining: left.len(),
                    first: first.detail.clone(),
                });
            }
            Ok(repair)
        })
    }
}
