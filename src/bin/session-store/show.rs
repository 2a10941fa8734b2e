//! `show`: a person's view of a session, turn by turn.

use std::io::Write;

use anyhow::bail;
use session_store::{Part, Store};

use crate::open;

/// Parts longer than this are shortened unless `--full` is given.
const SHORT: usize = 400;

/// Which turns to show, as a half-open range `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TurnRange {
    /// First turn shown.
    pub start: i64,
    /// First turn not shown; `None` for "to the end".
    pub end: Option<i64>,
}

/// Parses `A..B`, `A..=B`, `A..`, `..B`, `..=B` or `N`.
pub fn parse_turns(text: &str) -> Result<TurnRange, String> {
    let number = |s: &str| -> Result<i64, String> {
        s.trim()
            .parse::<i64>()
            .ok()
            .filter(|n| *n >= 0)
            .ok_or_else(|| format!("{s:?} is not a turn index (a number from 0)"))
    };
    let Some((start, end)) = text.split_once("..") else {
        let turn = number(text)?;
        return Ok(TurnRange {
            start: turn,
            end: Some(turn + 1),
        });
    };
    let start = if start.is_empty() { 0 } else { number(start)? };
    let end = match end.strip_prefix('=') {
        Some(last) => Some(number(last)? + 1),
        None if end.is_empty() => None,
        None => Some(number(end)?),
    };
    if end.is_some_and(|end| end < start) {
        return Err(format!("{text:?} ends before it starts"));
    }
    Ok(TurnRange { start, end })
}

pub fn run(
    store: &Store,
    session: &str,
    turns: Option<TurnRange>,
    full: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let id = open::session(store, session)?;
    let message_count = store.session(&id)?.map_or(0, |info| info.message_count);
    let turn_count = store
        .last_turns(&id, 1)?
        .first()
        .map_or(0, |m| m.turn_index + 1);
    writeln!(
        out,
        "session {id}: {message_count} messages, {turn_count} turns"
    )?;
    // Whole turns straight from the store (keyed on the turn index), not a filtered copy.
    let shown = match turns {
        None => store.messages(&id)?,
        Some(TurnRange { start, end: None }) => store.turns(&id, start..)?,
        Some(TurnRange {
            start,
            end: Some(end),
        }) => store.turns(&id, start..end)?,
    };
    if shown.is_empty() && turns.is_some() {
        bail!("session {id} has no turn in that range (turns 0..{turn_count})");
    }
    for summary in store.summaries(&id)? {
        let label = format!(
            "summary {} replaces turns {}..={}",
            summary.id, summary.first_turn, summary.last_turn
        );
        writeln!(out)?;
        write_part(out, &label, &summary.text, full)?;
    }
    let mut current = None;
    for message in &shown {
        if current != Some(message.turn_index) {
            current = Some(message.turn_index);
            let compacted = if message.compacted {
                " (compacted)"
            } else {
                ""
            };
            writeln!(out, "\n== turn {}{compacted} ==", message.turn_index)?;
        }
        writeln!(
            out,
            "#{} {} {}",
            message.seq,
            message.role,
            message.created_at.format("%Y-%m-%d %H:%M:%S")
        )?;
        for part in &message.parts {
            let (label, body) = describe(part);
            write_part(out, &label, &body, full)?;
        }
    }
    let pending = store.pending_tool_uses(&id)?;
    if !pending.is_empty() {
        writeln!(out, "\npending tool calls: {}", pending.join(", "))?;
    }
    Ok(())
}

/// A label for the part and its text.
fn describe(part: &Part) -> (String, String) {
    match part {
        Part::Text { text, .. } => ("text".into(), text.clone()),
        Part::Reasoning {
            text,
            provider_metadata,
        } => {
            let signed = provider_metadata
                .as_ref()
                .and_then(|m| m.as_object())
                .is_some_and(|m| m.values().any(|v| v.get("signature").is_some()));
            let label = if signed {
                "thinking, signed"
            } else {
                "thinking"
            };
            (label.into(), text.clone())
        }
        Part::RedactedReasoning { data, .. } => (
            "redacted thinking".into(),
            format!("({} bytes of opaque data)", data.len()),
        ),
        Part::ToolUse {
            id, name, input, ..
        } => (format!("tool_use {name} {id}"), input.to_string()),
        Part::ToolResult {
            tool_use_id,
            content,
            is_error,
            ..
        } => {
            let error = if *is_error { ", error" } else { "" };
            (format!("result for {tool_use_id}{error}"), content.clone())
        }
    }
}

fn write_part(out: &mut impl Write, label: &str, body: &str, full: bool) -> std::io::Result<()> {
    let chars = body.chars().count();
    let shortened: String;
    let body = if !full && chars > SHORT {
        shortened = format!(
            "{}… ({} more characters; --full shows all)",
            body.chars().take(SHORT).collect::<String>(),
            chars - SHORT
        );
        &shortened
    } else {
        body
    };
    if body.is_empty() {
        return writeln!(out, "  [{label}] (empty)");
    }
    let mut lines = body.lines();
    writeln!(out, "  [{label}] {}", lines.next().unwrap_or_default())?;
    for line in lines {
        writeln!(out, "    {line}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turn_ranges_parse_like_rust_ranges() {
        let range = |start, end| TurnRange { start, end };
        assert_eq!(parse_turns("2..5"), Ok(range(2, Some(5))));
        assert_eq!(parse_turns("2..=5"), Ok(range(2, Some(6))));
        assert_eq!(parse_turns("3.."), Ok(range(3, None)));
        assert_eq!(parse_turns("..2"), Ok(range(0, Some(2))));
        assert_eq!(parse_turns("4"), Ok(range(4, Some(5))));
        assert!(parse_turns("5..2").is_err());
        assert!(parse_turns("a..b").is_err());
        assert!(parse_turns("-1").is_err());
    }
}
