//! Every text the store writes on a user's behalf, in one place: tombstones, parts kept as
//! text because they cannot stand where they are, placeholders, and the one scheme that
//! renames repeated tool_use ids.
//!
//! The write path, `store-repair`, the loader and the importers all word these the same way,
//! so a person reading a session (or grepping for a tombstone) sees one vocabulary.

use std::collections::{HashMap, HashSet};

use crate::history::blank::is_blank;
use crate::model::Part;

/// Why a call was closed when the caller gave no reason.
pub const CANCELLED: &str = "cancelled";
/// Why `store-repair` closed a call.
pub const REPAIR_REASON: &str = "no result was ever stored; closed by store-repair";
/// Why an importer closed a call.
pub const IMPORT_REASON: &str = "the imported transcript holds no result for this call";
/// Why a fork closed a call that was pending at the cut.
pub const FORK_REASON: &str = "the session was forked before this call returned";
/// Why a call of a streamed message was closed when its writer went away before finishing.
pub const INTERRUPTED_REASON: &str =
    "the message that made this call was cut off (its writer went away before finishing it)";
/// Why the loader answers a call in what a provider sees (the rows stay as they are).
pub const LOST_REASON: &str = "it was interrupted or its result was lost";

/// How every tombstone's text begins.
pub const TOMBSTONE_PREFIX: &str = "Tool call cancelled before it returned a result: ";

/// The text of a tombstone result; never blank, since providers reject error results
/// without content.
pub fn tombstone(reason: &str) -> String {
    let reason = if is_blank(reason) {
        CANCELLED
    } else {
        reason.trim()
    };
    format!("{TOMBSTONE_PREFIX}{reason}")
}

/// True for the content of an error result the store wrote as a tombstone.
pub fn is_tombstone(content: &str, is_error: bool) -> bool {
    is_error && content.starts_with(TOMBSTONE_PREFIX)
}

/// The content given to an error result stored with empty content.
pub const EMPTY_ERROR: &str = "Tool call failed without output.";

/// The words put before a compaction summary in the user message that carries it.
pub const SUMMARY_PREFIX: &str = "Summary of the earlier conversation:\n\n";

/// The user message put first when a provider needs the conversation to start with one.
pub const PLACEHOLDER_USER: &str = "(The conversation so far continues below.)";

/// The text sent in place of a stored user or assistant message that holds only blank text,
/// to a provider whose turns must alternate and that refuses blank text (Gemini; see
/// [`crate::history::render::blank_turn_text`]).
pub const BLANK_TURN: &str = "(empty message)";

/// The id given to a tool_use stored without one (then made unique like a repeated id).
pub const UNNAMED_ID: &str = "tool_use";

/// The name given to a tool_use stored without one.
pub const UNNAMED_TOOL: &str = "unknown_tool";

/// The text a part becomes when it cannot be sent or stored as what it is (an orphan result,
/// a tool_use outside an assistant message). Deterministic, and never blank.
pub fn describe(part: &Part) -> String {
    match part {
        Part::Text { text, .. } | Part::Reasoning { text, .. } => text.clone(),
        Part::RedactedReasoning { .. } => "[redacted reasoning]".to_owned(),
        Part::ToolUse {
            id, name, input, ..
        } => format!("[tool_use {id:?} of tool {name:?} with input {input}]"),
        Part::ToolResult {
            tool_use_id,
            content,
            is_error,
            ..
        } => {
            let status = if *is_error { "error " } else { "" };
            if is_blank(content) {
                format!("[{status}tool_result for tool_use {tool_use_id:?}, without content]")
            } else {
                format!("[{status}tool_result for tool_use {tool_use_id:?}]\n{content}")
            }
        }
        Part::Image { source, title, .. } => media("image", source, title.as_deref()),
        Part::Document { source, title, .. } => media("document", source, title.as_deref()),
        Part::ServerToolUse {
            id, name, input, ..
        } => format!("[server tool call {id:?} of {name:?} with input {input}]"),
        Part::ServerToolResult {
            tool_use_id, block, ..
        } => format!("[server tool result for {tool_use_id:?}]\n{block}"),
        Part::Opaque { block, .. } => {
            let kind = block.get("type").and_then(serde_json::Value::as_str);
            format!(
                "[provider block {} not sent]",
                kind.unwrap_or("of unknown type")
            )
        }
    }
}

/// How an image or document a provider cannot take is described: its kind, title and where
/// it came from (never its data).
/// [`describe`] of an image or document block already rendered for Anthropic (`type`,
/// `source`, `title`).
pub(crate) fn describe_media_block(block: &serde_json::Value) -> String {
    let kind = block
        .get("type")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("media");
    let source = block.get("source").unwrap_or(&serde_json::Value::Null);
    let title = block.get("title").and_then(serde_json::Value::as_str);
    media(kind, source, title)
}

fn media(kind: &str, source: &serde_json::Value, title: Option<&str>) -> String {
    let title = title
        .filter(|t| !is_blank(t))
        .map(|t| format!(" {t:?}"))
        .unwrap_or_default();
    let media_type = source.get("media_type").and_then(serde_json::Value::as_str);
    let origin = match source.get("type").and_then(serde_json::Value::as_str) {
        Some("url") => source
            .get("url")
            .and_then(serde_json::Value::as_str)
            .map(|u| format!(" from {u}")),
        Some("file") => source
            .get("file_id")
            .and_then(serde_json::Value::as_str)
            .map(|f| format!(" (file {f})")),
        _ => None,
    }
    .unwrap_or_default();
    match media_type {
        Some(media_type) => format!("[{kind}{title} ({media_type}){origin} not shown]"),
        None => format!("[{kind}{title}{origin} not shown]"),
    }
}

/// The one renaming scheme for repeated or missing tool_use ids: `{id}__{n}` with the
/// smallest free `n >= 2`.
///
/// Linear over a session: for each base id it remembers the suffix to try next (every smaller
/// one is taken, since names are only ever added), so a session that repeats one id
/// thousands of times is renamed in one pass.
#[derive(Clone, Debug, Default)]
pub struct Renamer {
    taken: HashSet<String>,
    next_suffix: HashMap<String, u64>,
}

impl Renamer {
    /// A renamer that never hands out any of `taken`.
    pub fn with_taken(taken: impl IntoIterator<Item = String>) -> Self {
        Self {
            taken: taken.into_iter().collect(),
            next_suffix: HashMap::new(),
        }
    }

    /// Marks `name` taken; false when it already was.
    pub fn take(&mut self, name: &str) -> bool {
        self.taken.insert(name.to_owned())
    }

    /// A fresh name derived from `base` (`UNNAMED_ID` when blank), now taken.
    pub fn fresh(&mut self, base: &str) -> String {
        let base = if base.is_empty() { UNNAMED_ID } else { base };
        let mut n = self.next_suffix.get(base).copied().unwrap_or(2);
        let name = loop {
            let candidate = format!("{base}__{n}");
            n += 1;
            if !self.taken.contains(&candidate) {
                break candidate;
            }
        };
        self.next_suffix.insert(base.to_owned(), n);
        self.taken.insert(name.clone());
        name
    }

    /// `base` itself when free, else [`Renamer::fresh`]; the result is taken.
    pub fn claim(&mut self, base: &str) -> String {
        let base = if base.is_empty() { UNNAMED_ID } else { base };
        if self.take(base) {
            base.to_owned()
        } else {
            self.fresh(base)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renaming_skips_taken_names_and_stays_linear() {
        let mut r = Renamer::with_taken(["a".to_owned(), "a__3".to_owned()]);
        assert_eq!(r.claim("a"), "a__2");
        assert_eq!(r.claim("a"), "a__4");
        assert_eq!(r.claim(""), "tool_use");
        assert_eq!(r.claim(""), "tool_use__2");
        assert_eq!(r.claim("b"), "b");
        for _ in 0..20_000 {
            r.claim("same");
        }
        assert_eq!(r.claim("same"), "same__20001");
    }

    #[test]
    fn tombstones_are_never_blank() {
        assert!(tombstone("  ").ends_with(CANCELLED));
        assert!(tombstone("\u{feff}").ends_with(CANCELLED));
        assert!(tombstone("user interrupted").ends_with("user interrupted"));
    }
}
