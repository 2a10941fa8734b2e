//! The transcript as Markdown: a heading per turn and per message, text as written, calls
//! and results in fenced code blocks (a fence longer than any run of backticks inside), marks
//! in bold.

use std::fmt::Write;

use super::{
    layout, lineage, pretty, role_name, total_usage_line, turn_count, usage_line, when, Answer,
    Block, Call, Entry, Outcome, Shown, Transcript,
};
use crate::history::compaction::Summary;

/// The whole transcript.
pub fn markdown(transcript: &Transcript<'_>) -> String {
    let mut out = String::with_capacity(2048 + transcript.messages.len() * 256);
    let title = transcript
        .title
        .filter(|t| !t.trim().is_empty())
        .map_or_else(
            || format!("Session {}", transcript.session),
            |title| prose(&one_line(title)),
        );
    let _ = writeln!(out, "# {title}\n");
    let messages = transcript.messages;
    let mut facts = vec![
        code_span(transcript.session.as_str()),
        format!("{} messages", messages.len()),
        format!("{} turns", turn_count(messages)),
    ];
    if let Some(line) = total_usage_line(transcript.usage) {
        facts.push(format!("tokens: {line}"));
    }
    if let Some(line) = lineage(transcript) {
        facts.push(prose(&one_line(&line)));
    }
    let _ = writeln!(out, "{}\n", facts.join(" · "));
    for entry in layout(transcript) {
        match entry {
            Entry::Turn(turn) => {
                let _ = writeln!(out, "## Turn {turn}\n");
            }
            Entry::Message(shown) => message(&mut out, &shown),
            Entry::Summary(summary) => summary_block(&mut out, summary),
        }
    }
    out
}

/// One message: a heading with its facts, then its blocks.
fn message(out: &mut String, shown: &Shown<'_>) {
    let message = shown.message;
    let mut head = vec![
        role_name(message.role).to_owned(),
        when(&message.created_at),
    ];
    if let Some(model) = &message.model {
        head.push(code_span(model));
    }
    if let Some(line) = shown.usage.and_then(usage_line) {
        head.push(line);
    }
    if message.compacted {
        head.push("*compacted: replaced by a summary in what the provider sees*".to_owned());
    }
    let _ = writeln!(out, "### {}\n", head.join(" · "));
    for block in &shown.blocks {
        match block {
            Block::Text(text) if text.trim().is_empty() => out.push_str("*(empty text)*\n\n"),
            Block::Text(text) => {
                let _ = writeln!(out, "{}\n", prose(text));
            }
            Block::Reasoning(text) => {
                out.push_str("> **Reasoning**\n>\n");
                quote(out, &prose(text));
            }
            Block::Described(text) => {
                let _ = writeln!(out, "*{}*\n", prose(&one_line(text)));
            }
            Block::Call(call) => call_block(out, call),
            Block::Stray(answer) => answer_block(out, answer),
        }
    }
}

/// A call, then what became of it.
fn call_block(out: &mut String, call: &Call<'_>) {
    let kind = if call.server {
        "Server tool call"
    } else {
        "Tool call"
    };
    let _ = writeln!(
        out,
        "**{kind}** {} {}\n",
        code_span(call.name),
        code_span(call.id)
    );
    fenced(out, "json", &pretty(call.input));
    match &call.outcome {
        Outcome::Answered(answer) => answer_block(out, answer),
        Outcome::Pending => out.push_str("**Pending:** no result yet.\n\n"),
        Outcome::Unanswered => {
            out.push_str("**No result:** the conversation moved on without one.\n\n");
        }
        Outcome::Unanswerable => out.push_str("**No result:** nothing can answer this call.\n\n"),
    }
}

/// A result with its marks.
fn answer_block(out: &mut String, answer: &Answer) {
    let label = if answer.tombstone {
        "**Tombstone** (cancelled)"
    } else if answer.is_error {
        "**Error result**"
    } else {
        "**Result**"
    };
    match answer.note {
        Some(note) => {
            let _ = writeln!(
                out,
                "{label} for {} ({note}):\n",
                code_span(&answer.tool_use_id)
            );
        }
        None => {
            let _ = writeln!(out, "{label}:\n");
        }
    }
    if answer.content.is_empty() {
        out.push_str("*(empty)*\n\n");
    } else {
        fenced(out, "", &answer.content);
    }
}

/// A compaction summary as a quote.
fn summary_block(out: &mut String, summary: &Summary) {
    let _ = writeln!(
        out,
        "> **Compaction summary** (replaces turns {}–{} in what the provider sees; {})\n>",
        summary.first_turn,
        summary.last_turn,
        when(&summary.created_at)
    );
    quote(out, &prose(&summary.text));
}

/// Stored text as Markdown prose: as written, but no raw HTML (`<` becomes `\<`, which
/// Markdown shows as `<`), and a code fence it opens and never closes is closed, so one
/// message cannot swallow the rest of the transcript.
fn prose(text: &str) -> String {
    let mut out = text.trim_end().replace('<', "\\<");
    let fences = out
        .lines()
        .filter(|line| {
            let line = line.trim_start();
            line.starts_with("```") || line.starts_with("~~~")
        })
        .count();
    if fences % 2 == 1 {
        out.push_str("\n```");
    }
    out
}

/// `text` as a block quote, every line prefixed.
fn quote(out: &mut String, text: &str) {
    for line in text.trim_end().lines() {
        if line.is_empty() {
            out.push_str(">\n");
        } else {
            let _ = writeln!(out, "> {line}");
        }
    }
    out.push('\n');
}

/// `text` in a fenced code block whose fence no line of it can close.
fn fenced(out: &mut String, info: &str, text: &str) {
    let fence = "`".repeat(longest_run(text, '`').max(2) + 1);
    let _ = writeln!(
        out,
        "{fence}{info}\n{}\n{fence}\n",
        text.trim_end_matches('\n')
    );
}

/// `text` as inline code, delimited by more backticks than it holds in a row.
fn code_span(text: &str) -> String {
    let text = one_line(text);
    let ticks = "`".repeat(longest_run(&text, '`') + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{ticks}{pad}{text}{pad}{ticks}")
}

/// The longest run of `c` in `text`.
fn longest_run(text: &str, c: char) -> usize {
    let (mut longest, mut run) = (0, 0);
    for ch in text.chars() {
        run = if ch == c { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    longest
}

/// `text` on one line (line breaks as spaces), for headings and inline code.
fn one_line(text: &str) -> String {
    text.split(['\n', '\r']).collect::<Vec<_>>().join(" ")
}
