//! Streamed imports: a transcript read from a reader and handed out in batches, so that an
//! import holds one source message and the open end of the conversation at a time, never the
//! whole file or its parsed tree.
//!
//! A request body (Anthropic, OpenAI, Responses, Gemini) is read twice:
//! 1. [`json::scan_document`] checks the whole document (syntax with line and byte offset,
//!    duplicate keys with their path) building only the small top-level fields (`system`,
//!    `model`, ...), so every error the parse layer finds comes before any message is
//!    handed out, as with a whole-file parse;
//! 2. [`json::each_element`] reads the long array (`messages`, `input`, `contents`) one
//!    element at a time into the format's [`Document::element`], and the [`Assembler`]'s
//!    settled messages go to the [`Sink`] every [`super::BATCH`] messages.
//!
//!
//! A JSON Lines log (Claude Code, Codex) is read a line at a time ([`Log`]), after a first
//! pass for what must be known before any message is handed out (Codex: the system prompt;
//! Claude Code: every line's syntax and shape errors, the title, which lines are a
//! sub-agent's). A Claude Code log's sub-agents are assembled beside the main conversation
//! and handed out as conversations `1..` ([`Sink::batch`]).
//!
//! An input that is not one UTF-8 text is refused first ([`json::utf8_stream`]), as
//! [`super::import_bytes`] does. The same code reads a `&str` (the in-memory importers are
//! this path with a sink that collects), so the two cannot drift apart.

use std::io::{BufRead, Cursor, Seek, SeekFrom};

use serde_json::Value;

use super::json::{self, Pass, Top};
use super::{Assembler, ImportError, Imported, ImportedChild, ImportedCompaction, Rest};
use crate::model::NewMessage;

/// Where a streamed import's messages go, batch by batch, in order (the system prompt first).
pub(crate) trait Sink {
    /// What the sink can fail with.
    type Error;
    /// The next messages of conversation `stream`: 0 is the imported one, `k` its `k`-th
    /// child ([`Streamed::children`]), whose first batch may come before or after others'.
    fn batch(&mut self, stream: usize, messages: Vec<NewMessage>) -> Result<(), Self::Error>;
}

/// Why a streamed import stopped.
#[derive(Debug)]
pub(crate) enum Halt<E> {
    /// The transcript was refused.
    Import(ImportError),
    /// The sink failed.
    Sink(E),
}

impl<E> From<ImportError> for Halt<E> {
    fn from(error: ImportError) -> Self {
        Halt::Import(error)
    }
}

/// What a streamed import found besides the messages it handed out.
#[derive(Clone, Debug, Default)]
pub(crate) struct Streamed {
    /// Messages handed out, the system prompt included.
    pub(crate) messages: usize,
    /// Whether the first message handed out is the session's system prompt.
    pub(crate) has_system: bool,
    /// See [`Imported::tombstoned`].
    pub(crate) tombstoned: Vec<String>,
    /// See [`Imported::orphans_as_text`].
    pub(crate) orphans_as_text: usize,
    /// See [`Imported::warnings`].
    pub(crate) warnings: Vec<String>,
    /// See [`Imported::title`].
    pub(crate) title: Option<String>,
    /// See [`Imported::compactions`] (indexes after the system prompt).
    pub(crate) compactions: Vec<ImportedCompaction>,
    /// The child conversations, in order: conversation `k + 1` of the batches.
    pub(crate) children: Vec<StreamedChild>,
    /// See [`Imported::subagent`].
    pub(crate) subagent: Option<super::SubagentOrigin>,
    /// See [`Imported::source_thread_id`].
    pub(crate) source_thread_id: Option<String>,
}

/// A child conversation of a streamed import (a Claude Code sub-agent).
#[derive(Clone, Debug, Default)]
pub(crate) struct StreamedChild {
    /// See [`super::ImportedChild::spawned_by`].
    pub(crate) spawned_by: Option<String>,
    /// Its compactions.
    pub(crate) compactions: Vec<ImportedCompaction>,
    /// Messages handed out.
    pub(crate) messages: usize,
    /// See [`Imported::tombstoned`].
    pub(crate) tombstoned: Vec<String>,
    /// See [`Imported::orphans_as_text`].
    pub(crate) orphans_as_text: usize,
    /// See [`ImportedChild::branch`].
    pub(crate) branch: Option<super::Branch>,
}

/// A request-body format, read as its top level and then one element of its long array at
/// a time.
pub(crate) trait Document: Sized {
    /// The long array's key.
    const STREAM: &'static str;
    /// The top-level fields [`Document::begin`] reads.
    const FIELDS: &'static [&'static str];
    /// Checks the top level (in the order the whole-file importer did) and starts the
    /// assembly, the system prompt set. An empty array in [`Top::stream`] stands for the long
    /// array, whose elements come to [`Document::element`].
    fn begin(top: Top) -> Result<Self, ImportError>;
    /// One element of the long array.
    fn element(&mut self, index: usize, value: Value) -> Result<(), ImportError>;
    /// The assembler, for [`Assembler::take_ready`].
    fn assembler(&mut self) -> &mut Assembler;
    /// The end of the document.
    fn finish(self) -> Result<Rest, ImportError>;
}

/// Refuses `input` unless it is UTF-8 throughout (naming where it is not), and leaves it
/// where it was: the first step of every import, before the importer reads.
pub(crate) fn require_utf8<R: BufRead + Seek>(input: &mut R) -> Result<(), ImportError> {
    let io = |source| ImportError::Io { source };
    let start = input.stream_position().map_err(io)?;
    json::utf8_stream(input)?;
    input.seek(SeekFrom::Start(start)).map_err(io)?;
    Ok(())
}

/// Reads one request body: pass one, [`Document::begin`], pass two, [`Document::finish`].
pub(crate) fn document<D: Document, R: BufRead + Seek, S: Sink>(
    input: &mut R,
    sink: &mut S,
) -> Result<Streamed, Halt<S::Error>> {
    let start = input
        .stream_position()
        .map_err(|source| ImportError::Io { source })?;
    let top = json::scan_document(&mut *input, D::FIELDS, D::STREAM)?;
    let is_array = matches!(top.stream, Some(Value::Array(_)));
    let mut body = D::begin(top)?;
    let mut handed = 0;
    if is_array {
        input
            .seek(SeekFrom::Start(start))
            .map_err(|source| ImportError::Io { source })?;
        let each = |index, value| -> Result<(), Halt<S::Error>> {
            body.element(index, value)?;
            let ready = body.assembler().take_ready();
            if !ready.is_empty() {
                handed += ready.len();
                sink.batch(0, ready).map_err(Halt::Sink)?;
            }
            Ok(())
        };
        match json::each_element(&mut *input, D::STREAM, each) {
            Ok(()) => {}
            Err(Pass::Halted(halt)) => return Err(halt),
            Err(Pass::Import(error)) => return Err(error.into()),
        }
    }
    let rest = body.finish()?;
    handed += rest.messages.len();
    if !rest.messages.is_empty() {
        sink.batch(0, rest.messages).map_err(Halt::Sink)?;
    }
    Ok(Streamed {
        messages: handed,
        has_system: rest.has_system,
        tombstoned: rest.tombstoned,
        orphans_as_text: rest.orphans_as_text,
        ..Streamed::default()
    })
}

/// Messages to hand out, each batch with its conversation (see [`Sink::batch`]).
pub(crate) type Batches = Vec<(usize, Vec<NewMessage>)>;

/// A JSON Lines format, read one line at a time.
pub(crate) trait Log: Sized {
    /// Pass one, over as much of the input as the format needs to know before the first
    /// message is handed out (its system prompt, which lines are a sub-agent's, ...); the
    /// errors a whole-file importer finds before assembling anything.
    fn begin(input: &mut dyn BufRead) -> Result<Self, ImportError>;
    /// One line, without its line break; `number` is 1-based, `byte` its offset in the
    /// input, `ended` whether a line break followed it.
    fn line(
        &mut self,
        number: usize,
        byte: usize,
        line: &str,
        ended: bool,
    ) -> Result<(), ImportError>;
    /// The messages ready to hand out, by conversation.
    fn ready(&mut self) -> Batches;
    /// The end of the input (`lines` lines were read); the rest of each conversation, by
    /// conversation, and what the import found besides.
    fn finish(self, lines: usize) -> Result<(Batches, Streamed), ImportError>;
}

/// Reads one JSON Lines log: [`Log::begin`], then every line, then [`Log::finish`].
pub(crate) fn log<L: Log, R: BufRead + Seek, S: Sink>(
    input: &mut R,
    sink: &mut S,
) -> Result<Streamed, Halt<S::Error>> {
    let io = |source| ImportError::Io { source };
    let start = input.stream_position().map_err(io)?;
    let mut log = L::begin(&mut *input)?;
    input.seek(SeekFrom::Start(start)).map_err(io)?;
    let mut handed: Vec<usize> = Vec::new();
    let mut hand = |batches: Batches, sink: &mut S| {
        for (stream, batch) in batches {
            if batch.is_empty() {
                continue;
            }
            if handed.len() <= stream {
                handed.resize(stream + 1, 0);
            }
            handed[stream] += batch.len();
            sink.batch(stream, batch).map_err(Halt::Sink)?;
        }
        Ok::<(), Halt<S::Error>>(())
    };
    let mut buffer = Vec::new();
    let mut number = 0;
    let mut byte = 0;
    loop {
        buffer.clear();
        let read = input.read_until(b'\n', &mut buffer).map_err(io)?;
        if read == 0 {
            break;
        }
        number += 1;
        let text = json::utf8(&buffer).map_err(|error| match error {
            // The input changed since it was checked: name the place in the whole input.
            ImportError::InvalidUtf8 { at } => ImportError::InvalidUtf8 {
                at: super::Location {
                    line: Some(number),
                    byte: at.byte.map(|b| byte + b),
                    path: String::new(),
                },
            },
            other => other,
        })?;
        let (text, ended) = match text.strip_suffix('\n') {
            Some(text) => (text.strip_suffix('\r').unwrap_or(text), true),
            None => (text, false),
        };
        log.line(number, byte, text, ended)?;
        byte += read;
        let ready = log.ready();
        hand(ready, sink)?;
    }
    let (rest, mut streamed) = log.finish(number)?;
    hand(rest, sink)?;
    streamed.messages = handed.first().copied().unwrap_or_default();
    for (k, child) in streamed.children.iter_mut().enumerate() {
        child.messages = handed.get(k + 1).copied().unwrap_or_default();
    }
    Ok(streamed)
}

/// A JSON Lines log in memory, read by the streaming path, collected into an [`Imported`].
pub(crate) fn collect_log<L: Log>(text: &str) -> Result<Imported, ImportError> {
    collected(|sink| log::<L, _, _>(&mut Cursor::new(text.as_bytes()), sink))
}

/// A sink that keeps everything (the in-memory importers), by conversation.
#[derive(Default)]
struct Collect(Vec<Vec<NewMessage>>);

impl Sink for Collect {
    type Error = std::convert::Infallible;

    fn batch(&mut self, stream: usize, messages: Vec<NewMessage>) -> Result<(), Self::Error> {
        if self.0.len() <= stream {
            self.0.resize_with(stream + 1, Vec::new);
        }
        self.0[stream].extend(messages);
        Ok(())
    }
}

/// A request body in memory, read by the streaming path, collected into an [`Imported`].
pub(crate) fn collect<D: Document>(text: &str) -> Result<Imported, ImportError> {
    collected(|sink| document::<D, _, _>(&mut Cursor::new(text.as_bytes()), sink))
}

/// What a streamed import handed out, as the [`Imported`] the whole-file importers return.
fn collected(
    read: impl FnOnce(&mut Collect) -> Result<Streamed, Halt<std::convert::Infallible>>,
) -> Result<Imported, ImportError> {
    let mut sink = Collect::default();
    let streamed = match read(&mut sink) {
        Ok(streamed) => streamed,
        Err(Halt::Import(error)) => return Err(error),
        Err(Halt::Sink(never)) => match never {},
    };
    let mut conversations = sink.0.into_iter();
    let mut messages = conversations.next().unwrap_or_default().into_iter();
    let system = if streamed.has_system {
        messages.next()
    } else {
        None
    };
    let children = streamed
        .children
        .into_iter()
        .map(|child| ImportedChild {
            spawned_by: child.spawned_by,
            branch: child.branch,
            imported: Imported {
                messages: conversations.next().unwrap_or_default(),
                compactions: child.compactions,
                tombstoned: child.tombstoned,
                orphans_as_text: child.orphans_as_text,
                ..Imported::default()
            },
        })
        .collect();
    Ok(Imported {
        system,
        messages: messages.collect(),
        tombstoned: streamed.tombstoned,
        orphans_as_text: streamed.orphans_as_text,
        warnings: streamed.warnings,
        title: streamed.title,
        compactions: streamed.compactions,
        children,
        subagent: streamed.subagent,
        source_thread_id: streamed.source_thread_id,
    })
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::io::{self, BufReader, Read, Seek, SeekFrom};
    use std::rc::Rc;

    use serde_json::json;

    use super::*;
    use crate::import::{Count, Format};

    /// A reader over bytes that tells where it is.
    struct Watched {
        bytes: Cursor<Vec<u8>>,
        at: Rc<Cell<u64>>,
    }

    impl Read for Watched {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.bytes.read(buf)?;
            self.at.set(self.bytes.position());
            Ok(n)
        }
    }

    impl Seek for Watched {
        fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
            let at = self.bytes.seek(to)?;
            self.at.set(at);
            Ok(at)
        }
    }

    /// Records where the reader was when each batch came, and the batch's size.
    struct Batches {
        at: Rc<Cell<u64>>,
        seen: Vec<(u64, usize)>,
    }

    impl Sink for Batches {
        type Error = std::convert::Infallible;

        fn batch(&mut self, _: usize, messages: Vec<NewMessage>) -> Result<(), Self::Error> {
            self.seen.push((self.at.get(), messages.len()));
            Ok(())
        }
    }

    fn long_body(turns: usize) -> Vec<u8> {
        let mut messages = Vec::new();
        for n in 0..turns {
            let id = format!("call_{n}");
            messages.push(
                json!({"role": "user", "content": format!("question {n} {}", "x".repeat(200))}),
            );
            messages.push(json!({"role": "assistant", "content": [
                {"type": "text", "text": "looking"},
                {"type": "tool_use", "id": id, "name": "read", "input": {"path": "a"}}]}));
            messages.push(json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": id, "content": "y".repeat(300)}]}));
            messages.push(json!({"role": "assistant", "content": "done"}));
        }
        json!({"system": "be brief", "model": "claude-x", "messages": messages})
            .to_string()
            .into_bytes()
    }

    /// The regression this module exists for: an importer that reads the whole input (or
    /// builds the whole message list) before handing anything out. The first batch must come
    /// while the second pass is still in the first half of the input, and no batch may hold
    /// more than the window of one turn past [`super::super::BATCH`].
    #[test]
    fn messages_are_handed_out_while_the_input_is_still_being_read() {
        let bytes = long_body(2_000);
        let len = bytes.len() as u64;
        assert!(
            len > 8 * 64 * 1024,
            "the input outgrows the read buffer: {len}"
        );
        let at = Rc::new(Cell::new(0));
        let mut input = BufReader::with_capacity(
            64 * 1024,
            Watched {
                bytes: Cursor::new(bytes),
                at: Rc::clone(&at),
            },
        );
        let mut sink = Batches {
            at: Rc::clone(&at),
            seen: Vec::new(),
        };
        let streamed = Format::Anthropic
            .stream(&mut input, &mut sink)
            .expect("imports");
        assert_eq!(streamed.messages, 1 + 4 * 2_000);
        assert!(streamed.has_system);
        let (first_at, _) = sink.seen[0];
        assert!(
            first_at < len / 2,
            "the first batch came at byte {first_at} of {len}: the input was read whole first"
        );
        assert!(sink.seen.len() > 100, "{} batches", sink.seen.len());
        let largest = sink.seen.iter().map(|(_, n)| *n).max().unwrap_or_default();
        assert!(largest <= super::super::BATCH + 4, "a batch of {largest}");
        let total: usize = sink.seen.iter().map(|(_, n)| *n).sum();
        assert_eq!(total, streamed.messages);
    }

    /// Streamed or read whole, a body gives the same messages (what `collect` builds is what
    /// the batches held, in order).
    #[test]
    fn batches_in_order_are_the_whole_import() {
        let bytes = long_body(100);
        let text = String::from_utf8(bytes.clone()).expect("utf-8");
        let whole = super::super::import(Format::Anthropic, &text).expect("imports");
        let mut input = Cursor::new(bytes);
        let mut sink = Collect::default();
        Format::Anthropic
            .stream(&mut input, &mut sink)
            .expect("imports");
        assert_eq!(sink.0, [whole.into_messages()]);
    }

    /// Errors keep their precedence: a duplicate key at the end of the file is found before
    /// a malformed message at its start (pass one checks the whole document first), and bytes
    /// that are not UTF-8 before either.
    #[test]
    fn the_whole_document_is_checked_before_any_message_is_read() {
        let body =
            r#"{"messages": [{"role": "robot", "content": "hi"}], "model": "a", "model": "b"}"#;
        let err = super::super::import(Format::Anthropic, body).expect_err("duplicate");
        assert!(
            matches!(err, ImportError::DuplicateKey { ref key, .. } if key == "model"),
            "{err}"
        );
        let mut bytes = body.as_bytes().to_vec();
        bytes.extend(b" \xff");
        let mut sink = Count::default();
        let err = Format::Anthropic
            .stream(&mut Cursor::new(bytes), &mut sink)
            .expect_err("not UTF-8");
        assert!(
            matches!(err, Halt::Import(ImportError::InvalidUtf8 { .. })),
            "{err:?}"
        );
        assert_eq!(sink.0, 0);
    }
}
