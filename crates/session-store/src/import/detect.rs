//! Telling transcript formats apart: `import --format auto`, and the refusal of a file that
//! is not the format it was named as.
//!
//! A transcript read as the wrong format does not always fail: an Anthropic body read as
//! OpenAI Chat Completions turns every tool call into a text part, and exits 0. So the
//! importers never run on a guess. [`detect`] names the format a text is, from signs only
//! that format has; [`confirm`] refuses a text for a named format when it is evidently
//! another one.
//!
//! Each format has one sniffer ([`sniff`]) that looks at a [`Sample`] of the text (the whole
//! document, or the first lines of JSON Lines) and returns [`Evidence`]:
//! - [`Evidence::Is`]: a sign only this format has (an Anthropic `tool_use` block, an OpenAI
//!   `tool_calls` field or `tool` role, a Claude Code log line with its `type` and `uuid`);
//! - [`Evidence::Fits`]: the text has this format's shape but nothing that tells it apart (a
//!   body of plain user and assistant text messages reads the same as Anthropic and OpenAI);
//! - [`Evidence::IsNot`]: a sign that rules this format out (a field or block type it does
//!   not have, JSON Lines where it wants one document).
//!
//! [`detect`] takes the one format with [`Evidence::Is`], or else the first that
//! [`Evidence::Fits`] in [`CANDIDATES`] order, and refuses otherwise. Adding a format: a
//! variant of [`Format`], an arm of [`sniff`] (the match is exhaustive, so the compiler asks
//! for it), and its place in [`CANDIDATES`]; a sign it has that an older format reads
//! wrongly belongs in that format's sniffer as [`Evidence::IsNot`]. Pure: no I/O but
//! [`Sample::read`], which takes its sample from a reader.

use std::fmt;

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};

use serde_json::{Map, Value};

use super::{Format, ImportError};

/// Every format [`detect`] considers, in the order it prefers one whose shape merely fits.
pub const CANDIDATES: &[Format] = &[
    Format::Anthropic,
    Format::OpenAi,
    Format::Responses,
    Format::Gemini,
    Format::ClaudeCode,
    Format::Codex,
];

/// How many non-blank lines of JSON Lines the sniffers look at.
const SAMPLE_LINES: usize = 64;

/// What one sniffer found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Evidence {
    /// A sign only this format has; the text says which.
    Is(String),
    /// The shape of this format, with nothing that tells it apart from another.
    Fits,
    /// A sign that this is not the format; the text says which.
    IsNot(String),
}

/// The part of a text the sniffers look at.
#[derive(Clone, Debug)]
pub enum Sample {
    /// The whole text is one JSON value.
    Document(Value),
    /// The text is not one JSON value, but some of its lines are: the first non-blank
    /// lines that parse, with their 1-based line numbers (lines that do not parse are left
    /// to the importer to refuse by number).
    Lines(Vec<(usize, Value)>),
    /// Neither: the error of reading the text as one document.
    Unreadable(String),
}

impl Sample {
    /// Reads a sample of `text`.
    pub fn of(text: &str) -> Self {
        if text.starts_with('\u{feff}') {
            return Sample::Unreadable(super::json::BOM_PROBLEM.to_owned());
        }
        let error = match serde_json::from_str::<Value>(text) {
            Ok(value) => return Sample::Document(value),
            Err(error) => error,
        };
        let lines: Vec<(usize, Value)> = text
            .lines()
            .enumerate()
            .filter(|(_, line)| !line.trim().is_empty())
            .take(SAMPLE_LINES)
            .filter_map(|(index, line)| {
                serde_json::from_str::<Value>(line)
                    .ok()
                    .map(|value| (index + 1, value))
            })
            .collect();
        if lines.is_empty() {
            Sample::Unreadable(if text.trim().is_empty() {
                "the input is empty".to_owned()
            } else {
                unreadable(&error)
            })
        } else {
            Sample::Lines(lines)
        }
    }
}

/// Why a text is no transcript: JSON nested deeper than the store reads back, said so (the
/// format cannot be told from such a text, but that is not why it is refused); else neither
/// one JSON document nor JSON Lines.
fn unreadable(error: &serde_json::Error) -> String {
    let problem = super::json::problem(error);
    if problem == "not valid JSON" {
        format!("it is neither one JSON document nor JSON Lines ({error})")
    } else {
        format!("{problem} ({error})")
    }
}

/// About how many bytes of text (strings and keys) a [`Sample::read`] of a document keeps.
const SAMPLE_BYTES: usize = 8 * 1024 * 1024;

impl Sample {
    /// Reads a sample of the text `input` yields, holding no more of it than the sample: a
    /// document cut to about 8 MiB of text (each array's elements while that lasts, each
    /// string's first 64 KiB; a smaller document whole), or the first 64 non-blank lines of
    /// JSON Lines. Refuses bytes that are not UTF-8 first, naming where, as
    /// [`crate::import::import_bytes`] does. `input` is read from its current position, more
    /// than once; the only I/O of this module.
    pub fn read<R: Read + Seek>(input: R) -> Result<Self, ImportError> {
        let io = |source| ImportError::Io { source };
        let mut input = BufReader::with_capacity(64 * 1024, input);
        let start = input.stream_position().map_err(io)?;
        super::json::utf8_stream(&mut input)?;
        input.seek(SeekFrom::Start(start)).map_err(io)?;
        let error = match super::json::bounded_document(&mut input, SAMPLE_BYTES) {
            Ok(value) => return Ok(Sample::Document(value)),
            Err(error) if error.is_io() => return Err(io(error.into())),
            Err(error) => error,
        };
        input.seek(SeekFrom::Start(start)).map_err(io)?;
        let mut lines = Vec::new();
        let mut blank = true;
        let mut line = String::new();
        let mut number = 0;
        let mut taken = 0;
        while taken < SAMPLE_LINES {
            line.clear();
            if input.read_line(&mut line).map_err(io)? == 0 {
                break;
            }
            number += 1;
            let text = line.strip_suffix('\n').unwrap_or(&line);
            let text = text.strip_suffix('\r').unwrap_or(text);
            if text.trim().is_empty() {
                continue;
            }
            blank = false;
            taken += 1;
            if let Ok(value) = serde_json::from_str::<Value>(text) {
                lines.push((number, value));
            }
        }
        Ok(if !lines.is_empty() {
            Sample::Lines(lines)
        } else if blank {
            Sample::Unreadable("the input is empty".to_owned())
        } else {
            Sample::Unreadable(unreadable(&error))
        })
    }
}

/// Why [`detect`] or [`confirm`] refused a text. Nothing is imported.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DetectError {
    /// The text was named as `named` but is not that format.
    #[error("not {}: {reason}{}", describe(*.named), looks_like_suffix(*.looks_like))]
    NotThatFormat {
        /// The format the caller named.
        named: Format,
        /// The sign that ruled it out.
        reason: String,
        /// The format the text looks like instead, when one sniffer is sure.
        looks_like: Option<Format>,
    },
    /// No format fits the text.
    #[error("not a transcript format this build reads: {}", .reasons.join("; "))]
    Unknown {
        /// Why each format was ruled out, as `format: reason`.
        reasons: Vec<String>,
    },
    /// More than one format claims the text.
    #[error("the input has signs of several formats ({}); name the format", .formats.iter().map(|f| f.as_str()).collect::<Vec<_>>().join(", "))]
    Ambiguous {
        /// The formats that claim it.
        formats: Vec<Format>,
    },
    /// The text is not JSON (nor JSON Lines), so no format can be told.
    #[error("cannot tell the format: {0}")]
    Unreadable(String),
}

fn describe(format: Format) -> &'static str {
    match format {
        Format::Anthropic => "an Anthropic Messages request body",
        Format::OpenAi => "an OpenAI Chat Completions request body",
        Format::ClaudeCode => "a Claude Code session log",
        Format::Responses => "an OpenAI Responses request body",
        Format::Gemini => "a Gemini generateContent request body",
        Format::Codex => "a Codex rollout",
    }
}

fn looks_like_suffix(format: Option<Format>) -> String {
    format.map_or_else(String::new, |f| {
        format!("; it looks like {} (format {f})", describe(f))
    })
}

/// The format `text` is. See the module docs for the rule.
pub fn detect(text: &str) -> Result<Format, DetectError> {
    detect_sample(&Sample::of(text))
}

/// [`detect`] over a sample already taken.
pub fn detect_sample(sample: &Sample) -> Result<Format, DetectError> {
    if let Sample::Unreadable(reason) = sample {
        return Err(DetectError::Unreadable(reason.clone()));
    }
    let evidence: Vec<(Format, Evidence)> = CANDIDATES
        .iter()
        .map(|&format| (format, sniff(format, sample)))
        .collect();
    let sure: Vec<Format> = evidence
        .iter()
        .filter(|(_, e)| matches!(e, Evidence::Is(_)))
        .map(|(f, _)| *f)
        .collect();
    match sure.as_slice() {
        [one] => return Ok(*one),
        [] => {}
        _ => return Err(DetectError::Ambiguous { formats: sure }),
    }
    if let Some((format, _)) = evidence.iter().find(|(_, e)| *e == Evidence::Fits) {
        return Ok(*format);
    }
    Err(DetectError::Unknown {
        reasons: evidence
            .into_iter()
            .filter_map(|(format, e)| match e {
                Evidence::IsNot(reason) => Some(format!("{format}: {reason}")),
                _ => None,
            })
            .collect(),
    })
}

/// Refuses `text` for the named `format` when it is evidently not that format: its sniffer
/// rules it out, or it merely fits while another format's sniffer is sure. A text that is
/// not JSON at all passes, so that the importer refuses it with the line or position at fault.
pub fn confirm(format: Format, text: &str) -> Result<(), DetectError> {
    confirm_sample(format, &Sample::of(text))
}

/// [`confirm`] over a sample already taken.
pub fn confirm_sample(format: Format, sample: &Sample) -> Result<(), DetectError> {
    if let Sample::Unreadable(_) = sample {
        return Ok(());
    }
    let looks_like = || {
        let sure: Vec<Format> = CANDIDATES
            .iter()
            .copied()
            .filter(|&other| other != format && matches!(sniff(other, sample), Evidence::Is(_)))
            .collect();
        match sure.as_slice() {
            [one] => Some(*one),
            _ => None,
        }
    };
    match sniff(format, sample) {
        Evidence::Is(_) => Ok(()),
        Evidence::IsNot(reason) => Err(DetectError::NotThatFormat {
            named: format,
            reason,
            looks_like: looks_like(),
        }),
        Evidence::Fits => match looks_like() {
            None => Ok(()),
            Some(other) => Err(DetectError::NotThatFormat {
                named: format,
                reason: match sniff(other, sample) {
                    Evidence::Is(sign) => sign,
                    _ => String::new(),
                },
                looks_like: Some(other),
            }),
        },
    }
}

/// What `format`'s sniffer says about the sample.
pub fn sniff(format: Format, sample: &Sample) -> Evidence {
    match format {
        Format::Anthropic => body(sample).anthropic(),
        Format::OpenAi => body(sample).openai(),
        Format::ClaudeCode => claude_code(sample),
        Format::Responses => keyed_body(sample, "input", "an `input` list"),
        Format::Gemini => keyed_body(sample, "contents", "a `contents` list"),
        Format::Codex => codex(sample),
    }
}

/// A request body told by its one top-level list: `input` (Responses) or `contents`
/// (Gemini). A body with another format's list is not this one.
fn keyed_body(sample: &Sample, key: &str, what: &str) -> Evidence {
    let object = match sample {
        Sample::Document(Value::Object(object)) => object,
        Sample::Document(_) => return Evidence::IsNot("the document is not a JSON object".into()),
        Sample::Lines(_) => {
            return Evidence::IsNot("it is JSON Lines, not one JSON document".into())
        }
        Sample::Unreadable(reason) => return Evidence::IsNot(reason.clone()),
    };
    for other in ["messages", "input", "contents"] {
        if other != key && object.contains_key(other) {
            return Evidence::IsNot(format!("it has a top-level `{other}` field"));
        }
    }
    match object.get(key) {
        Some(Value::Array(_)) => Evidence::Is(format!("it has {what}")),
        Some(Value::String(_)) if key == "input" => Evidence::Is("it has a string `input`".into()),
        _ => Evidence::IsNot(format!("it has no {what}")),
    }
}

/// Codex rollout lines: `{"type": one of [`CODEX_TYPES`], "payload": ...}`, or a first line
/// that is the older layout's session header ([`super::codex::older_header`]).
fn codex(sample: &Sample) -> Evidence {
    let lines: Vec<(usize, &Value)> = match sample {
        Sample::Document(value) => vec![(1, value)],
        Sample::Lines(lines) => lines.iter().map(|(n, v)| (*n, v)).collect(),
        Sample::Unreadable(reason) => return Evidence::IsNot(reason.clone()),
    };
    for (index, (line, value)) in lines.into_iter().enumerate() {
        let Value::Object(object) = value else {
            return Evidence::IsNot(format!("line {line} is not a JSON object"));
        };
        if index == 0 && super::codex::older_header(object) {
            return Evidence::Is(format!(
                "line {line} is the session header of a Codex rollout of the older layout \
                 (`id`, `timestamp`, `instructions`, no `type`)"
            ));
        }
        if let Some(Value::String(kind)) = object.get("type") {
            if CODEX_TYPES.contains(&kind.as_str()) && object.contains_key("payload") {
                return Evidence::Is(format!("line {line} is a Codex {kind:?} line"));
            }
        }
        if object.contains_key("uuid") || object.contains_key("messages") {
            return Evidence::IsNot(format!("line {line} is not a Codex rollout line"));
        }
    }
    Evidence::IsNot("no line looks like a Codex rollout line (`type` with `payload`)".into())
}

/// Content block types only Anthropic bodies (and Claude Code logs) have.
const ANTHROPIC_BLOCKS: &[&str] = &[
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "image",
    "document",
    "search_result",
    "server_tool_use",
    "web_search_tool_result",
    "web_fetch_tool_result",
    "code_execution_tool_result",
    "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result",
    "mcp_tool_use",
    "mcp_tool_result",
    "container_upload",
    "compaction",
];

/// Content part types only OpenAI Chat Completions bodies have.
const OPENAI_PARTS: &[&str] = &["image_url", "input_audio", "file", "refusal"];

/// Message fields only OpenAI Chat Completions bodies have.
const OPENAI_FIELDS: &[&str] = &[
    "tool_calls",
    "tool_call_id",
    "function_call",
    "reasoning_content",
    "refusal",
];

/// What a request body shows: the first sign of each provider, or why it is no body.
struct BodySigns {
    not_a_body: Option<String>,
    anthropic: Option<String>,
    openai: Option<String>,
}

impl BodySigns {
    fn anthropic(&self) -> Evidence {
        self.judge(&self.anthropic, &self.openai)
    }

    fn openai(&self) -> Evidence {
        self.judge(&self.openai, &self.anthropic)
    }

    fn judge(&self, own: &Option<String>, other: &Option<String>) -> Evidence {
        if let Some(reason) = &self.not_a_body {
            return Evidence::IsNot(reason.clone());
        }
        match (own, other) {
            (_, Some(sign)) => Evidence::IsNot(sign.clone()),
            (Some(sign), None) => Evidence::Is(sign.clone()),
            (None, None) => Evidence::Fits,
        }
    }
}

fn body(sample: &Sample) -> BodySigns {
    let mut signs = BodySigns {
        not_a_body: None,
        anthropic: None,
        openai: None,
    };
    let object = match sample {
        Sample::Document(Value::Object(object)) => object,
        Sample::Document(_) => {
            signs.not_a_body = Some("the document is not a JSON object".into());
            return signs;
        }
        Sample::Lines(_) => {
            signs.not_a_body = Some("it is JSON Lines, not one JSON document".into());
            return signs;
        }
        Sample::Unreadable(reason) => {
            signs.not_a_body = Some(reason.clone());
            return signs;
        }
    };
    let Some(Value::Array(messages)) = object.get("messages") else {
        signs.not_a_body = Some("it has no `messages` list".into());
        return signs;
    };
    if object.contains_key("system") {
        signs.anthropic = Some("it has a top-level `system` field".into());
    }
    for (index, message) in messages.iter().enumerate() {
        let Value::Object(message) = message else {
            continue;
        };
        message_signs(message, index, &mut signs);
        if signs.anthropic.is_some() && signs.openai.is_some() {
            break;
        }
    }
    signs
}

fn message_signs(message: &Map<String, Value>, index: usize, signs: &mut BodySigns) {
    let at = format!("messages[{index}]");
    if signs.openai.is_none() {
        if let Some(Value::String(role)) = message.get("role") {
            if !matches!(role.as_str(), "user" | "assistant") {
                signs.openai = Some(format!("{at} has the role {role:?}"));
            }
        }
    }
    if signs.openai.is_none() {
        if let Some(field) = OPENAI_FIELDS.iter().find(|f| message.contains_key(**f)) {
            signs.openai = Some(format!("{at} has the field `{field}`"));
        }
    }
    let Some(Value::Array(blocks)) = message.get("content") else {
        return;
    };
    for (position, block) in blocks.iter().enumerate() {
        let Some(Value::String(kind)) = block.get("type") else {
            continue;
        };
        let sign = || format!("{at}.content[{position}] is a `{kind}` block");
        if signs.anthropic.is_none() && ANTHROPIC_BLOCKS.contains(&kind.as_str()) {
            signs.anthropic = Some(sign());
        }
        if signs.openai.is_none() && OPENAI_PARTS.contains(&kind.as_str()) {
            signs.openai = Some(sign());
        }
    }
}

/// Claude Code log line types.
const CLAUDE_CODE_TYPES: &[&str] = &[
    "user",
    "assistant",
    "system",
    "summary",
    "progress",
    "file-history-snapshot",
    "queue-operation",
];

/// Codex CLI rollout line types (`{"timestamp", "type", "payload"}`).
const CODEX_TYPES: &[&str] = &[
    "session_meta",
    "response_item",
    "event_msg",
    "turn_context",
    "compacted",
];

fn claude_code(sample: &Sample) -> Evidence {
    let lines: Vec<(usize, &Value)> = match sample {
        // A one-line log is also one JSON document.
        Sample::Document(value) => vec![(1, value)],
        Sample::Lines(lines) => lines.iter().map(|(n, v)| (*n, v)).collect(),
        Sample::Unreadable(reason) => return Evidence::IsNot(reason.clone()),
    };
    for (line, value) in lines {
        let Value::Object(object) = value else {
            return Evidence::IsNot(format!("line {line} is not a JSON object"));
        };
        if object.contains_key("messages") {
            return Evidence::IsNot(format!(
                "line {line} holds a `messages` list, as a request body does"
            ));
        }
        let Some(Value::String(kind)) = object.get("type") else {
            continue;
        };
        if CODEX_TYPES.contains(&kind.as_str()) && object.contains_key("payload") {
            return Evidence::IsNot(format!(
                "line {line} is a Codex rollout line of type {kind:?}"
            ));
        }
        let log_fields = ["uuid", "sessionId", "leafUuid", "messageId"];
        if CLAUDE_CODE_TYPES.contains(&kind.as_str())
            && log_fields.iter().any(|f| object.contains_key(*f))
        {
            return Evidence::Is(format!("line {line} is a Claude Code {kind:?} line"));
        }
    }
    Evidence::IsNot("no line looks like a Claude Code log line (`type` with `uuid`)".into())
}

impl fmt::Display for Evidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Evidence::Is(sign) => write!(f, "is: {sign}"),
            Evidence::Fits => f.write_str("fits"),
            Evidence::IsNot(sign) => write!(f, "is not: {sign}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PLAIN: &str = r#"{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}"#;
    const ANTHROPIC: &str = r#"{"messages": [{"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}]}"#;
    const OPENAI: &str = r#"{"messages": [{"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"}]}"#;
    const CLAUDE_CODE: &str = concat!(
        r#"{"type":"user","uuid":"u1","sessionId":"s","message":{"role":"user","content":"hi"}}"#,
        "\n",
        r#"{"type":"assistant","uuid":"u2","sessionId":"s","message":{"id":"m","role":"assistant","content":[{"type":"text","text":"yo"}]}}"#,
        "\n"
    );
    const CODEX: &str = r#"{"timestamp":"t","type":"session_meta","payload":{}}
{"timestamp":"t","type":"response_item","payload":{"type":"message"}}"#;

    /// `Sample::read` (what the CLI detects from) tells the same formats as the whole text, and
    /// holds a bounded part of a large document, not all of it.
    #[test]
    fn a_sample_read_from_a_reader_tells_formats_as_the_whole_text_does() {
        use std::io::Cursor;
        for text in [
            PLAIN,
            ANTHROPIC,
            OPENAI,
            CLAUDE_CODE,
            CODEX,
            "",
            "  \n",
            "{\"messages\": [1,",
        ] {
            let read = Sample::read(Cursor::new(text.as_bytes())).expect("reads");
            for format in CANDIDATES {
                assert_eq!(
                    sniff(*format, &read),
                    sniff(*format, &Sample::of(text)),
                    "{format} on {text:?}"
                );
            }
            assert_eq!(detect_sample(&read), detect(text), "{text:?}");
        }
        let message = json!({"role": "user", "content": "x".repeat(100_000)});
        let mut messages = vec![json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": "t", "name": "f", "input": {}}]})];
        messages.extend(std::iter::repeat_n(message, 300));
        let big = json!({"messages": messages}).to_string();
        let read = Sample::read(Cursor::new(big.as_bytes())).expect("reads");
        let Sample::Document(value) = &read else {
            panic!("a document");
        };
        let kept = value["messages"].as_array().map_or(0, Vec::len);
        assert!((1..300).contains(&kept), "{kept} of 301 messages kept");
        assert_eq!(detect_sample(&read), Ok(Format::Anthropic));
        let bad = Sample::read(Cursor::new(b"{\"a\": \"\xff\"}".as_slice()));
        assert!(
            matches!(bad, Err(ImportError::InvalidUtf8 { .. })),
            "{bad:?}"
        );
    }

    #[test]
    fn each_format_is_told_by_its_own_signs() {
        assert_eq!(detect(ANTHROPIC), Ok(Format::Anthropic));
        assert_eq!(detect(OPENAI), Ok(Format::OpenAi));
        assert_eq!(detect(CLAUDE_CODE), Ok(Format::ClaudeCode));
        // A one-line log is one JSON document, and still a log.
        assert_eq!(
            detect(CLAUDE_CODE.lines().next().unwrap_or_default()),
            Ok(Format::ClaudeCode)
        );
    }

    #[test]
    fn a_plain_body_reads_alike_in_both_body_formats_and_is_taken_as_the_first() {
        assert_eq!(detect(PLAIN), Ok(Format::Anthropic));
        assert_eq!(confirm(Format::OpenAi, PLAIN), Ok(()));
        assert_eq!(confirm(Format::Anthropic, PLAIN), Ok(()));
    }

    /// The bug this module exists for: an Anthropic body read as OpenAI turned each call into
    /// the text `[tool_use part]` and succeeded.
    #[test]
    fn a_body_named_as_the_other_provider_is_refused_naming_what_it_is() {
        let refused = confirm(Format::OpenAi, ANTHROPIC);
        assert!(
            matches!(
                &refused,
                Err(DetectError::NotThatFormat {
                    named: Format::OpenAi,
                    looks_like: Some(Format::Anthropic),
                    ..
                })
            ),
            "{refused:?}"
        );
        let message = refused.map_err(|e| e.to_string()).err().unwrap_or_default();
        assert!(
            message.contains("messages[1].content[0] is a `tool_use` block"),
            "{message}"
        );
        assert!(confirm(Format::Anthropic, OPENAI).is_err());
        assert!(confirm(Format::ClaudeCode, ANTHROPIC).is_err());
        assert!(confirm(Format::Anthropic, CLAUDE_CODE).is_err());
        assert!(confirm(Format::OpenAi, CLAUDE_CODE).is_err());
    }

    #[test]
    fn responses_gemini_and_codex_are_told_by_their_own_signs() {
        assert_eq!(detect(CODEX), Ok(Format::Codex));
        assert!(confirm(Format::ClaudeCode, CODEX).is_err());
        assert!(confirm(Format::Codex, CLAUDE_CODE).is_err());
        assert_eq!(detect(r#"{"contents": []}"#), Ok(Format::Gemini));
        assert_eq!(
            detect(r#"{"input": [], "instructions": "x"}"#),
            Ok(Format::Responses)
        );
        assert!(confirm(Format::Gemini, ANTHROPIC).is_err());
        assert!(confirm(Format::Responses, r#"{"contents": []}"#).is_err());
        assert!(confirm(Format::Anthropic, r#"{"input": []}"#).is_err());
    }

    /// A Codex rollout of the older layout (a session header first, then bare Responses
    /// items) is Codex, and no other format: not Responses (its items are JSON Lines, not a
    /// body's `input`), not Claude Code (no `uuid`).
    #[test]
    fn a_codex_rollout_of_the_older_layout_is_told_by_its_header() {
        let older = concat!(
            r#"{"id":"T","timestamp":"2025-08-01T10:00:00Z","instructions":null,"git":{}}"#,
            "
",
            r#"{"record_type":"state"}"#,
            "
",
            r#"{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}"#,
            "
"
        );
        assert_eq!(detect(older), Ok(Format::Codex));
        for other in CANDIDATES.iter().filter(|f| **f != Format::Codex) {
            assert!(confirm(*other, older).is_err(), "{other}");
        }
        // The header alone is one JSON document, and still a rollout.
        let header = older.lines().next().unwrap_or_default();
        assert_eq!(detect(header), Ok(Format::Codex));
        // Bare items without the header are no rollout Codex wrote.
        let headless: String = older.lines().skip(1).collect::<Vec<_>>().join("\n");
        assert!(detect(&headless).is_err());
    }

    #[test]
    fn formats_this_build_does_not_read_are_refused_not_guessed() {
        assert!(matches!(
            detect(r#"{"prompt": "x"}"#),
            Err(DetectError::Unknown { .. })
        ));
        assert!(matches!(detect(""), Err(DetectError::Unreadable(_))));
        assert!(matches!(detect("notes\n"), Err(DetectError::Unreadable(_))));
        let mixed = r#"{"system": "x", "messages": [{"role": "tool", "content": "?"}]}"#;
        assert!(detect(mixed).is_err());
    }

    #[test]
    fn text_that_is_not_json_is_left_to_the_named_importer_to_refuse_by_position() {
        assert_eq!(confirm(Format::Anthropic, "{\"messages\": [1,"), Ok(()));
        // A log with a broken line still shows its other lines.
        let broken = format!("{{\"type\": \"user\", \"uu\n{CLAUDE_CODE}");
        assert_eq!(confirm(Format::ClaudeCode, &broken), Ok(()));
        assert_eq!(detect(&broken), Ok(Format::ClaudeCode));
    }
}
