//! `import`: a new session from a transcript file, in one transaction.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use session_store::{confirm_format_of, detect_format_of, Sample};
use session_store::{import_transcript, transcript_text, Format};

use crate::{open, ImportFormat};

pub fn run(
    db: &Option<PathBuf>,
    format: ImportFormat,
    file: &Path,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let db = open::path(db)?;
    let bytes = read_input(file)?;
    let text = transcript_text(&bytes).with_context(|| format!("{} refused", file.display()))?;
    // Never read a file as a format it is not: detect it, or confirm the format named.
    let sample = Sample::of(text);
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
    // Parse before opening the database, so refused input never creates a file.
    let imported = import_transcript(format, text)
        .with_context(|| format!("{} refused as {format}", file.display()))?;
    let tombstoned = imported.tombstoned.len();
    let orphans = imported.orphans_as_text;
    let warnings = imported.warnings.clone();
    let store = open::or_create(db)?;
    tracing::debug!(messages = imported.messages.len(), "parsed");
    let stored = store
        .import(&imported)
        .with_context(|| format!("cannot import {}", file.display()))?;
    let session = stored.session;
    for child in &stored.children {
        eprintln!(
            "session-store: a sub-agent's conversation was imported as child session {child}"
        );
    }
    if tombstoned > 0 {
        eprintln!(
            "session-store: {tombstoned} tool call(s) had no result before the conversation moved on; answered with tombstones"
        );
    }
    if orphans > 0 {
        eprintln!("session-store: {orphans} tool result(s) answered no call and were kept as text");
    }
    for warning in warnings {
        eprintln!("session-store: {}", crate::terminal::escape_line(&warning));
    }
    writeln!(out, "{session}")?;
    Ok(())
}

/// The input's bytes; `transcript_text` checks they are UTF-8 and says where they are not.
fn read_input(file: &Path) -> anyhow::Result<Vec<u8>> {
    if file.as_os_str() == "-" {
        let mut bytes = Vec::new();
        std::io::stdin()
            .read_to_end(&mut bytes)
            .context("cannot read stdin")?;
        return Ok(bytes);
    }
    // A FIFO or device would block the read or never end: only regular files are read.
    let metadata =
        std::fs::metadata(file).with_context(|| format!("cannot read {}", file.display()))?;
    if !metadata.is_file() {
        anyhow::bail!("{} is not a regular file", file.display());
    }
    std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))
}
