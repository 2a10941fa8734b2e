//! `sessions`: a table of sessions for people, or a JSON array for scripts, each row printed
//! as soon as it is known. The table fits the terminal (`table.rs`): a narrow one shows
//! unique id prefixes, then leaves out CREATED and COMPACTED, and shortens titles.
//!
//! The counts come from [`Store::session_overviews`] (SQL aggregates; no message is loaded).
//! Health is the contract's check, the same `store-repair` runs, done one session at a time
//! ([`Store::session_row`]): it reads every message once, holding one session in memory at
//! a time; the JSON rows are the library's [`session_store::SessionRow`]. `health` is `ok`,
//! the rule names the session breaks, or `unreadable_row` when its rows cannot be read; a
//! pending call is legal and only counted.

use std::io::Write;

use chrono::{DateTime, Utc};
use session_store::{SessionHealth, SessionOverview, Store};

use crate::terminal::escape_line;

/// Titles longer than this are shortened in the table (not in JSON); a narrow terminal
/// shortens them further.
const TITLE_WIDTH: usize = 48;

pub fn run(store: &Store, json: bool, out: &mut impl Write) -> anyhow::Result<()> {
    // The overviews are SQL aggregates (no message loaded); each row is printed as soon as
    // its health is known, so `sessions | head` stops early and memory holds one session.
    let overviews = store.session_overviews()?;
    if json {
        write_json(store, &overviews, out)
    } else {
        write_table(store, &overviews, out)
    }
}

/// The JSON array, one element at a time, byte for byte what `to_writer_pretty` writes for
/// the whole array.
fn write_json(
    store: &Store,
    overviews: &[SessionOverview],
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let mut listed = 0;
    for o in overviews {
        let Some(row) = store.session_row(o)? else {
            continue;
        };
        let element = serde_json::to_string_pretty(&row)?;
        out.write_all(if listed == 0 { b"[\n" } else { b",\n" })?;
        for (index, line) in element.lines().enumerate() {
            if index > 0 {
                out.write_all(b"\n")?;
            }
            write!(out, "  {line}")?;
        }
        listed += 1;
    }
    out.write_all(if listed == 0 { b"[]\n" } else { b"\n]\n" })?;
    tracing::info!(sessions = listed, "listed");
    Ok(())
}

fn when(at: Option<DateTime<Utc>>) -> String {
    at.map_or_else(
        || "?".to_owned(),
        |at| at.format("%Y-%m-%d %H:%M").to_string(),
    )
}

const HEADER: [&str; 9] = [
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
/// Numbers align right, text left.
const NUMERIC: [bool; 9] = [false, false, false, true, true, true, true, false, false];
/// Dropped first when the terminal is narrow (CREATED, COMPACTED).
const OPTIONAL: [usize; 2] = [1, 5];
/// The narrowest title column worth showing.
const MIN_TITLE: usize = 10;

/// Which columns a table shows and how wide each is.
struct Layout {
    /// Per column: its width, or `None` when it is left out. The title's is its limit.
    widths: [Option<usize>; 9],
    /// Per session (in overview order): the characters of its id shown.
    id_chars: Vec<usize>,
}

impl Layout {
    /// The widest of: every column with whole ids; unique id prefixes; without the optional
    /// columns; whichever first leaves room for a title within `width` (`None`: no limit).
    /// Widths come from the overviews; the health column is as wide as its header (a rule
    /// name longer than that pushes that row's title right).
    fn fit(overviews: &[SessionOverview], width: Option<usize>) -> Self {
        let ids: Vec<&str> = overviews.iter().map(|o| o.id.as_str()).collect();
        let whole: Vec<usize> = ids
            .iter()
            .map(|id| escape_line(id).chars().count())
            .collect();
        let mut widths: [Option<usize>; 9] = HEADER.map(|h| Some(h.chars().count()));
        let mut grow = |column: usize, cell: &str| {
            widths[column] = widths[column].map(|w| w.max(cell.chars().count()));
        };
        for o in overviews {
            grow(1, &when(o.created_at));
            grow(2, &when(o.updated_at));
            grow(3, &o.messages.to_string());
            grow(4, &o.turns.to_string());
            grow(5, &o.compacted_turns.to_string());
            grow(6, &o.pending.len().to_string());
        }
        grow(7, "ok");
        let mut layout = Layout {
            widths,
            id_chars: whole.clone(),
        };
        layout.set_ids(&whole);
        let Some(width) = width else {
            layout.widths[8] = Some(TITLE_WIDTH);
            return layout;
        };
        let prefixes = crate::table::unique_prefixes(&ids);
        for step in 0..3 {
            match step {
                1 => layout.set_ids(&prefixes),
                2 => OPTIONAL.iter().for_each(|&c| layout.widths[c] = None),
                _ => {}
            }
            let room = width.saturating_sub(layout.before_title());
            if room >= MIN_TITLE || step == 2 {
                layout.widths[8] = Some(room.clamp(HEADER[8].len(), TITLE_WIDTH));
                break;
            }
        }
        layout
    }

    fn set_ids(&mut self, chars: &[usize]) {
        self.id_chars = chars.to_vec();
        self.widths[0] = Some(
            chars
                .iter()
                .copied()
                .chain([HEADER[0].len()])
                .max()
                .unwrap_or(2),
        );
    }

    /// The columns before the title, with their separators and the title's.
    fn before_title(&self) -> usize {
        self.widths[..8].iter().flatten().map(|w| w + 2).sum()
    }

    /// One line: each shown field padded to its column; the title is not padded.
    fn line(&self, fields: &[&str; 9]) -> String {
        let mut line = String::new();
        for (index, field) in fields.iter().enumerate() {
            let Some(width) = self.widths[index] else {
                continue;
            };
            if !line.is_empty() {
                line.push_str("  ");
            }
            let pad = width.saturating_sub(field.chars().count());
            if index == 8 {
                line.push_str(field);
            } else if NUMERIC[index] {
                line.push_str(&" ".repeat(pad));
                line.push_str(field);
            } else {
                line.push_str(field);
                line.push_str(&" ".repeat(pad));
            }
        }
        line.trim_end().to_owned()
    }
}

fn write_table(
    store: &Store,
    overviews: &[SessionOverview],
    out: &mut impl Write,
) -> anyhow::Result<()> {
    if overviews.is_empty() {
        writeln!(out, "no sessions")?;
        return Ok(());
    }
    let layout = Layout::fit(overviews, crate::table::width());
    writeln!(out, "{}", layout.line(&HEADER))?;
    let (mut listed, mut broken, mut pending) = (0, 0, 0);
    for (o, id_chars) in overviews.iter().zip(&layout.id_chars) {
        let Some(row) = store.session_row(o)? else {
            continue;
        };
        let id: String = escape_line(o.id.as_str()).chars().take(*id_chars).collect();
        let title_width = layout.widths[8].unwrap_or(TITLE_WIDTH);
        let title = o
            .title
            .as_deref()
            .map_or_else(String::new, |t| shorten(t, title_width));
        let cells = [
            id,
            when(o.created_at),
            when(o.updated_at),
            o.messages.to_string(),
            o.turns.to_string(),
            o.compacted_turns.to_string(),
            o.pending.len().to_string(),
            row.health_label(),
            title,
        ];
        writeln!(
            out,
            "{}",
            layout.line(&cells.each_ref().map(String::as_str))
        )?;
        listed += 1;
        broken += usize::from(row.health != SessionHealth::Ok);
        pending += o.pending.len();
    }
    tracing::info!(sessions = listed, "listed");
    writeln!(
        out,
        "{} · {} · {}",
        count(listed, "session", "sessions"),
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

fn shorten(title: &str, width: usize) -> String {
    let title = escape_line(title);
    if title.chars().count() <= width {
        return title.into_owned();
    }
    let mut short: String = title.chars().take(width.saturating_sub(1)).collect();
    short.push('…');
    short
}
