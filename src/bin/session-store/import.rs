//! `import`: a new session from a transcript file, in one transaction.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use session_store::{confirm_format_of, detect_format_of, Sample};
use session_store::{import_transcript, Format};

use crate::{open, ImportFormat};

pub fn run(
    db: &Option<PathBuf>,
    format: ImportFormat,
    file: &Path,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let db = open::path(db)?;
    let text = read_input(file)?;
    // Never read a file as a format it is not: detect it, or confirm the format named.
    let sample = Sample::of(&text);
    let format = match format {
        ImportFormat::Auto => {
            detect_format_of(&sample).with_context(|| format!("{} refused", file.display()))?
        }
        named => {
            let format = match named {
                ImportFormat::Anthropic => Format::Anthropic,
                ImportFormat::Openai => Format::OpenAi,
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
    let imported = import_transcript(format, &text)
        .with_context(|| format!("{} refused as {format}", file.display()))?;
    let tombstoned = imported.tombstoned.len();
    let orphans = imported.orphans_as_text;
    let store = open::or_create(db)?;
    let messages = imported.into_messages();
    tracing::debug!(messages = messages.len(), "parsed");
    let session = store
        .import_session(messages)
        .with_context(|| format!("cannot import {}", file.display()))?;
    if tombstoned > 0 {
        eprintln!(
            "session-store: {tombstoned} tool call(s) had no result before the conversation moved on; answered with tombstones"
        );
    }
    if orphans > 0 {
        eprintln!("session-store: {orphans} tool result(s) answered no call and were kept as text");
    }
    writeln!(out, "{session}")?;
    Ok(())
}

fn read_input(file: &Path) -> anyhow::Result<String> {
    if file.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read stdin")?;
        return Ok(text);
    }
    std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))
}
