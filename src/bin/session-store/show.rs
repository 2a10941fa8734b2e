//! `show`: a person's view of a session, turn by turn, so that a broken session is visible
//! at a glance: the header says the session's health, turns say whether the provider sees
//! them (compacted, or split by a compaction), pending calls and tombstones are labelled, and
//! each broken rule is marked `!!` under the message or part at fault. Everything that came
//! from a transcript is escaped for the terminal (`text.rs`).

use std::io::Write;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use anyhow::bail;
use session_store::repair::Problem;
use session_store::repair::RepairOptions;
use session_store::request::is_tombstone;
use session_store::SessionOverview;
use session_store::{Message, Part, Store};

use crate::open;
use crate::sessions::count;
use crate::terminal::{escape, escape_line};

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

/// Writes the person's view of `session` to `out`: the header, the summaries, each shown
/// message (the `turns` asked for, all when `None`) with its parts, marks and sub-agents,
/// the rows that cannot be read, and the pending calls.
pub fn run(
    store: &Store,
    session: &str,
    turns: Option<TurnRange>,
    full: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let id = open::session(store, session)?;
    let Some(overview) = store.session_overview(&id)? else {
        bail!("unknown session {id}");
    };
    let (shown, unreadable, turn_count) = shown_messages(store, &id, turns)?;
    // Refuse before the first line is printed: an error comes alone.
    if shown.is_empty() && turns.is_some() {
        bail!("session {id} has no turn in that range (its turns are 0..{turn_count})");
    }
    let violations = store
        .check(std::slice::from_ref(&id), &RepairOptions::default())?
        .violations;
    let summaries = store.summaries(&id)?;

    write_header(out, store, &overview, &violations)?;
    write_summaries(out, &summaries, full)?;
    let pending: BTreeSet<&str> = overview.pending.iter().map(String::as_str).collect();
    // Each sub-agent under the call that spawned it; the rest after the messages.
    let mut spawned: HashMap<String, Vec<session_store::Subagent>> = HashMap::new();
    for child in store.subagents(Some(&id))? {
        spawned
            .entry(child.parent_tool_use_id.clone().unwrap_or_default())
            .or_default()
            .push(child);
    }
    // Each violation under the message, or the part of it, at fault.
    let mut marks: Marks<'_> = HashMap::new();
    // Rows outside the contract are named together at the end, with what to do about them.
    for violation in violations.iter().filter(|v| v.rule.is_mended()) {
        marks
            .entry((violation.message_id, violation.part))
            .or_default()
            .push(violation);
    }
    let around = Around {
        marks: &marks,
        pending: &pending,
        full,
    };
    let mut current = None;
    for (index, message) in shown.iter().enumerate() {
        if current != Some(message.turn_index) {
            current = Some(message.turn_index);
            let turn: Vec<&Message> = shown[index..]
                .iter()
                .take_while(|m| m.turn_index == message.turn_index)
                .collect();
            writeln!(out, "\n{}", turn_header(message.turn_index, &turn))?;
        }
        write_message(out, message, &around, &mut spawned)?;
    }
    for child in spawned.into_values().flatten() {
        write_subagent(out, &child)?;
    }
    write_unreadable(out, store, &id, &unreadable)?;
    write_pending(out, &overview, &id)?;
    Ok(())
}

/// The violations to mark, by (message id, part position; `None` for the whole message).
type Marks<'a> = HashMap<(Option<i64>, Option<usize>), Vec<&'a Problem>>;

/// What a message is shown with: the marks at fault in it, the calls still pending, and
/// whether long parts are shown whole.
struct Around<'a> {
    marks: &'a Marks<'a>,
    pending: &'a BTreeSet<&'a str>,
    full: bool,
}

/// The messages to show (the `turns` asked for, all when `None`), the rows outside the
/// contract left out of them, and the session's turn count. When a row is outside the
/// contract, every row that can be read is shown and the others are named.
fn shown_messages(
    store: &Store,
    id: &session_store::SessionId,
    turns: Option<TurnRange>,
) -> anyhow::Result<(Vec<Message>, Vec<Problem>, i64)> {
    Ok(match load(store, id, turns) {
        Ok(shown) => {
            let turn_count = store
                .last_turns(id, 1)?
                .first()
                .map_or(0, |m| m.turn_index + 1);
            (shown, Vec::new(), turn_count)
        }
        // A row outside the contract: show every row that can be read, and name the others.
        Err(session_store::Error::CorruptRow { .. }) => {
            let readable = store.readable_messages(id)?;
            let turn_count = readable.messages.last().map_or(0, |m| m.turn_index + 1);
            let range = turns.unwrap_or(TurnRange {
                start: 0,
                end: None,
            });
            let shown = readable
                .messages
                .into_iter()
                .filter(|m| {
                    m.turn_index >= range.start && range.end.is_none_or(|e| m.turn_index < e)
                })
                .collect();
            (shown, readable.unreadable, turn_count)
        }
        Err(error) => return Err(error.into()),
    })
}

/// Each summary, in order, with the turns it replaces and whether the provider sees it.
fn write_summaries(
    out: &mut impl Write,
    summaries: &[session_store::Summary],
    full: bool,
) -> std::io::Result<()> {
    let count = summaries.len();
    for (index, summary) in summaries.iter().enumerate() {
        let seen = if index + 1 == count {
            "the provider sees it instead of those turns"
        } else {
            "superseded by a later summary"
        };
        let label = format!(
            "summary {} of {count}: replaces turns {}..={}; {seen}",
            index + 1,
            summary.first_turn,
            summary.last_turn
        );
        writeln!(out)?;
        write_part(out, &label, &summary.text, full)?;
    }
    Ok(())
}

/// One message: its line, its marks, then each part with the sub-agents its call spawned
/// (taken out of `spawned`) and the part's marks.
fn write_message(
    out: &mut impl Write,
    message: &Message,
    around: &Around<'_>,
    spawned: &mut HashMap<String, Vec<session_store::Subagent>>,
) -> std::io::Result<()> {
    let compacted = if message.compacted {
        "  [compacted]"
    } else {
        ""
    };
    let state = match message.state {
        session_store::MessageState::Open => "  [open: still streaming]",
        session_store::MessageState::Interrupted => "  [interrupted: its writer went away]",
        _ => "",
    };
    writeln!(
        out,
        "#{} {}  {}{compacted}{state}",
        message.seq,
        message.role,
        message.created_at.format("%Y-%m-%d %H:%M:%S")
    )?;
    let at = |part: Option<usize>| {
        around
            .marks
            .get(&(Some(message.id), part))
            .map_or(&[][..], Vec::as_slice)
    };
    for violation in at(None) {
        write_violation(out, violation)?;
    }
    for (position, part) in message.parts.iter().enumerate() {
        let (label, body) = describe(part, around.pending);
        write_part(out, &label, &body, around.full)?;
        if let Part::ToolUse { id: call, .. } = part {
            for child in spawned.remove(call.as_str()).unwrap_or_default() {
                write_subagent(out, &child)?;
            }
        }
        for violation in at(Some(position)) {
            write_violation(out, violation)?;
        }
    }
    Ok(())
}

/// The calls still waiting for a result, and how to answer them with tombstones.
fn write_pending(
    out: &mut impl Write,
    overview: &SessionOverview,
    id: &session_store::SessionId,
) -> std::io::Result<()> {
    if !overview.pending.is_empty() {
        writeln!(
            out,
            "\n{} {}: waiting for a result (legal); `session-store cancel {}` answers {} with a tombstone",
            if overview.pending.len() == 1 { "pending call" } else { "pending calls" },
            escape_line(&overview.pending.join(", ")),
            escape_line(id.as_str()),
            if overview.pending.len() == 1 { "it" } else { "each" },
        )?;
    }
    Ok(())
}

/// A sub-agent's line: its session and where it stands.
fn write_subagent(out: &mut impl Write, child: &session_store::Subagent) -> std::io::Result<()> {
    let state = child
        .state
        .map_or("unknown", session_store::SubagentState::as_str);
    writeln!(
        out,
        "    sub-agent {} ({state}){}",
        escape_line(child.id.as_str()),
        child
            .parent_tool_use_id
            .as_deref()
            .map(|call| format!(", spawned by {}", escape_line(call)))
            .unwrap_or_default()
    )
}

/// The session's messages in `turns` (all when `None`), straight from the store (keyed on
/// the turn index), not a filtered copy; [`session_store::Error::CorruptRow`] when a row of
/// the session is outside the contract.
fn load(
    store: &Store,
    id: &session_store::SessionId,
    turns: Option<TurnRange>,
) -> session_store::Result<Vec<Message>> {
    match turns {
        None => store.messages(id),
        Some(TurnRange { start, end: None }) => store.turns(id, start..),
        Some(TurnRange {
            start,
            end: Some(end),
        }) => store.turns(id, start..end),
    }
}

/// Each row left out because it is outside the contract, where it is as far as known, and
/// the commands that diagnose it and deal with it.
fn write_unreadable(
    out: &mut impl Write,
    store: &Store,
    id: &session_store::SessionId,
    unreadable: &[Problem],
) -> std::io::Result<()> {
    if unreadable.is_empty() {
        return Ok(());
    }
    let known = |n: Option<i64>| n.map_or_else(|| "?".to_owned(), |n| n.to_string());
    writeln!(out)?;
    for problem in unreadable {
        writeln!(
            out,
            "!! {} (seq {}, turn {}): not shown: {}",
            problem.rule,
            known(problem.seq),
            known(problem.turn),
            escape_line(&problem.detail)
        )?;
    }
    let db = open::shown(store.path());
    writeln!(
        out,
        "   every other row is shown above. `store-repair --db {db} --dry-run --session {id}` \
         reports it (store-repair leaves such rows as they are); mend the row named above by \
         hand (its table and id), or `session-store --db {db} delete {id}` drops the session",
        db = escape_line(&db),
        id = escape_line(id.as_str()),
    )
}

fn write_header(
    out: &mut impl Write,
    store: &Store,
    overview: &SessionOverview,
    violations: &[Problem],
) -> std::io::Result<()> {
    match &overview.title {
        Some(title) => writeln!(
            out,
            "session {}  \"{}\"",
            escape_line(overview.id.as_str()),
            escape_line(title)
        )?,
        None => writeln!(out, "session {}", escape_line(overview.id.as_str()))?,
    }
    let when = |at: Option<chrono::DateTime<chrono::Utc>>| {
        at.map_or_else(
            || "? (not a timestamp)".to_owned(),
            |at| at.format("%Y-%m-%d %H:%M:%S").to_string(),
        )
    };
    writeln!(
        out,
        "created {}, updated {} (UTC)",
        when(overview.created_at),
        when(overview.updated_at)
    )?;
    let usize_of = |n: i64| usize::try_from(n).unwrap_or(0);
    let mut counts = vec![
        count(usize_of(overview.messages), "message", "messages"),
        count(usize_of(overview.turns), "turn", "turns"),
    ];
    if overview.compacted_turns > 0 {
        counts.push(format!("{} compacted", overview.compacted_turns));
    }
    if !overview.pending.is_empty() {
        counts.push(count(
            overview.pending.len(),
            "call pending",
            "calls pending",
        ));
    }
    writeln!(out, "{}", counts.join(", "))?;
    if violations.is_empty() {
        return writeln!(out, "health: ok");
    }
    let mut rules: BTreeMap<&str, usize> = BTreeMap::new();
    for violation in violations {
        *rules.entry(violation.rule.as_str()).or_default() += 1;
    }
    let rules: Vec<String> = rules
        .into_iter()
        .map(|(rule, n)| format!("{rule} ×{n}"))
        .collect();
    writeln!(
        out,
        "health: BROKEN ({}); marked {MARK} below; `store-repair --db {} --session {}` mends it (`--dry-run` first)",
        rules.join(", "),
        escape_line(&store.path().display().to_string()),
        escape_line(overview.id.as_str())
    )
}

/// The line opening a turn, saying whether the provider sees it.
fn turn_header(turn: i64, messages: &[&Message]) -> String {
    let compacted = messages.iter().filter(|m| m.compacted).count();
    let state = if compacted == 0 {
        String::new()
    } else if compacted == messages.len() {
        " · compacted (the provider sees the summary instead)".to_owned()
    } else {
        format!(
            " · SPLIT: {compacted} of {} messages compacted",
            messages.len()
        )
    };
    format!("== turn {turn}{state} ==")
}

/// Marks a broken rule where it is broken.
const MARK: &str = "!!";

fn write_violation(out: &mut impl Write, violation: &Problem) -> std::io::Result<()> {
    writeln!(
        out,
        "  {MARK} {}: {}",
        violation.rule.as_str(),
        escape_line(&violation.detail)
    )
}

/// A label for the part and its text.
fn describe(part: &Part, pending: &BTreeSet<&str>) -> (String, String) {
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
        } => {
            let state = if pending.contains(id.as_str()) {
                " · PENDING"
            } else {
                ""
            };
            (format!("tool_use {name} {id}{state}"), input.to_string())
        }
        Part::ToolResult {
            tool_use_id,
            content,
            is_error,
            ..
        } => {
            let label = if is_tombstone(content, *is_error) {
                format!("TOMBSTONE for {tool_use_id}")
            } else if *is_error {
                format!("result for {tool_use_id} · error")
            } else {
                format!("result for {tool_use_id}")
            };
            (label, content.clone())
        }
        Part::ServerToolUse {
            id, name, input, ..
        } => (format!("server tool {name} {id}"), input.to_string()),
        Part::ServerToolResult { tool_use_id, .. } => (
            format!("server result for {tool_use_id}"),
            session_store::request::describe(part),
        ),
        Part::Image { .. } | Part::Document { .. } | Part::Opaque { .. } => (
            part.kind().as_str().to_owned(),
            session_store::request::describe(part),
        ),
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
    let label = escape_line(label);
    if body.is_empty() {
        return writeln!(out, "  [{label}] (empty)");
    }
    if body.trim().is_empty() {
        // Whitespace a provider may refuse (rule 7): shown, not left as a blank line.
        return writeln!(out, "  [{label}] (blank: \"{}\")", body.escape_debug());
    }
    let body = escape(body);
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
