//! The JSON shapes that `--json` prints and the MCP server answers with, written once so
//! that a script and an MCP client see the same objects. Each is documented in README.md
//! ("JSON output").

use serde_json::{json, Value};
use session_store::{Forked, OverviewRow, SessionId, SessionOverview, Store};

/// One session's listing: `{"id", "title", "created_at", "updated_at", "messages", "turns",
/// "compacted_turns", "pending", "pending_tool_use_ids"}` (the fields `sessions --json` has
/// before its health fields: the library's [`OverviewRow`]).
pub fn overview(o: &SessionOverview) -> Value {
    serde_json::to_value(OverviewRow::from(o)).unwrap_or(Value::Null)
}

/// How many turns `session` has (its last message's turn index plus one; 0 when empty).
pub fn turn_count(store: &Store, session: &SessionId) -> session_store::Result<i64> {
    Ok(store
        .last_turns(session, 1)?
        .first()
        .map_or(0, |m| m.turn_index + 1))
}

/// Whole turns `start..end` of a session (`end` `None`: to the last one): `{"session",
/// "overview", "turns", "start", "end", "next_turn", "messages"}`. `turns` is how many the
/// session has, `end` the first turn not included and `next_turn` where the next window
/// starts (`null` at the end). `messages` are the stored messages with their parts, compacted
/// ones included (`"compacted": true`).
pub fn turns(
    store: &Store,
    session: &SessionId,
    start: i64,
    end: Option<i64>,
) -> anyhow::Result<Value> {
    let Some(o) = store.session_overview(session)? else {
        anyhow::bail!("unknown session {session}");
    };
    let total = turn_count(store, session)?;
    let end = end.map_or(total, |end| end.min(total)).max(start);
    let messages = store.turns(session, start..end)?;
    Ok(json!({
        "session": session.as_str(),
        "overview": overview(&o),
        "turns": total,
        "start": start,
        "end": end,
        "next_turn": (end < total).then_some(end),
        "messages": messages,
    }))
}

/// What a fork made: `{"id", "parent", "at_turn", "messages", "summaries", "uncompacted",
/// "tombstoned"}`.
pub fn forked(forked: &Forked) -> Value {
    json!({
        "id": forked.id.as_str(),
        "parent": forked.parent.as_str(),
        "at_turn": forked.at_turn,
        "messages": forked.messages,
        "summaries": forked.summaries,
        "uncompacted": forked.uncompacted,
        "tombstoned": forked.tombstoned,
    })
}

/// `show --json`: [`turns`] for the range asked (every turn when none is), refused like the
/// text view when the range holds no turn.
pub fn show(
    store: &Store,
    session: &str,
    range: Option<crate::show::TurnRange>,
    out: &mut impl std::io::Write,
) -> anyhow::Result<()> {
    let id = crate::open::session(store, session)?;
    let value = match range {
        None => turns(store, &id, 0, None)?,
        Some(range) => {
            let total = turn_count(store, &id)?;
            if range.start >= total || range.end.is_some_and(|end| end <= range.start) {
                anyhow::bail!("session {id} has no turn in that range (its turns are 0..{total})");
            }
            turns(store, &id, range.start, range.end)?
        }
    };
    print(out, &value)
}

/// `value` on `out`, pretty-printed, with a final newline.
pub fn print(out: &mut impl std::io::Write, value: &Value) -> anyhow::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)?;
    Ok(())
}
