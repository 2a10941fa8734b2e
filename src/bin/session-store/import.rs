//! `import`: a new session from a transcript file, in one transaction.

use std::io::{Cursor, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use session_store::import::{
    confirm_sample as confirm_format_of, detect_sample as detect_format_of, Sample,
};
use session_store::{
    import::{validate as validate_transcript, Format},
    is_database_url,
};

use crate::{open, ImportFormat};

pub fn run(
    db: &Option<PathBuf>,
    format: ImportFormat,
    model: Option<&str>,
    file: &Path,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let db = open::path(db)?;
    let mut input = open_input(file)?;
    // Never read a file as a format it is not: detect it, or confirm the format named. The
    // sample holds the first elements of a document's arrays, not the whole file.
    let sample = Sample::read(&mut input).with_context(|| format!("{} refused", file.display()))?;
    let format = match format {
        ImportFormat::Auto => {
            detect_format_of(&sample).with_context(|| format!("{} refused", file.display()))?
        }
        named => {
            let format = match named {
                ImportFormat::Anthropic => Format::Anthropic,
                ImportFormat::Openai => Format::OpenAi,
                ImportFormat::Responses => Format::Responses,
                ImportFormat::Gemini => Format::Gemini,
                ImportFormat::Codex => Format::Codex,
                ImportFormat::ClaudeCode | ImportFormat::Auto => Format::ClaudeCode,
            };
            confirm_format_of(format, &sample)
                .with_context(|| format!("{} refused as {format}", file.display()))?;
            format
        }
    };
    drop(sample);
    tracing::info!(file = %file.display(), %format, "importing");
    // Refused input never creates a database file: a new one is only made once a dry run
    // (which stores nothing and holds one message at a time) has read the whole transcript.
    if !is_database_url(&db.to_string_lossy()) && !db.exists() {
        rewind(&mut input, file)?;
        let messages = validate_transcript(format, &mut input)
            .with_context(|| format!("{} refused as {format}", file.display()))?;
        tracing::debug!(messages, "checked");
    }
    rewind(&mut input, file)?;
    let store = open::or_create(db)?;
    let stored =
        store
            .import_reader_as(format, &mut input, model)
            .map_err(|error| match error {
                session_store::Error::Import(refused) => anyhow::Error::new(refused)
                    .context(format!("{} refused as {format}", file.display())),
                other => {
                    anyhow::Error::new(other).context(format!("cannot import {}", file.display()))
                }
            })?;
    tracing::debug!(messages = stored.messages, "stored");
    let session = stored.session;
    for child in &stored.children {
        eprintln!(
            "session-store: a sub-agent's conversation was imported as child session {child}"
        );
    }
    let tombstoned = stored.tombstoned.len();
    if tombstoned > 0 {
        eprintln!(
            "session-store: {tombstoned} tool call(s) had no result before the conversation moved on; answered with tombstones"
        );
    }
    let orphans = stored.orphans_as_text;
    if orphans > 0 {
        eprintln!("session-store: {orphans} tool result(s) answered no call and were kept as text");
    }
    for warning in stored.warnings {
        eprintln!("session-store: {}", crate::terminal::escape_line(&warning));
    }
    writeln!(out, "{session}")?;
    Ok(())
}

/// The input, read from its start again (a streamed import reads it more than once).
fn rewind(input: &mut Input, file: &Path) -> anyhow::Result<()> {
    input
        .seek(SeekFrom::Start(0))
        .with_context(|| format!("cannot read {}", file.display()))?;
    Ok(())
}

/// A transcript to read: a regular file, or stdin's bytes (a pipe cannot be read twice).
enum Input {
    File(std::fs::File),
    Bytes(Cursor<Vec<u8>>),
}

impl Read for Input {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Input::File(file) => file.read(buf),
            Input::Bytes(bytes) => bytes.read(buf),
        }
    }
}

impl Seek for Input {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        match self {
            Input::File(file) => file.seek(to),
            Input::Bytes(bytes) => bytes.seek(to),
        }
    }
}

/// The input; the importer checks it is UTF-8 and says where it is not.
fn open_input(file: &Path) -> anyhow::Result<Input> {
    if file.as_os_str() == "-" {
        let mut bytes = Vec::new();
        std::io::stdin()
            .read_to_end(&mut bytes)
            .context("cannot read stdin")?;
        return Ok(Input::Bytes(Cursor::new(bytes)));
    }
    // A FIFO or device would block the read or never end: only regular files are read.
    let metadata =
        std::fs::metadata(file).with_context(|| format!("cannot read {}", file.display()))?;
    if !metadata.is_file() {
        anyhow::bail!("{} is not a regular file", file.display());
    }
    let opened =
        std::fs::File::open(file).with_context(|| format!("cannot read {}", file.display()))?;
    Ok(Input::File(opened))
}
