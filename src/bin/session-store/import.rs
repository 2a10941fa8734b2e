//! `import`: a new session from a transcript file, in one transaction.

use std::io::{Read, Write};
use std::path::Path;

use anyhow::Context;
use session_store::import::{self, Format};

use crate::{open, ImportFormat};

pub fn run(
    db: &Path,
    format: ImportFormat,
    file: &Path,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let format = match format {
        ImportFormat::Anthropic => Format::Anthropic,
        ImportFormat::Openai => Format::OpenAi,
        ImportFormat::ClaudeCode => Format::ClaudeCode,
    };
    let text = read_input(file)?;
    // Parse before opening the database, so refused input never creates a file.
    let imported = import::import(format, &text)
        .with_context(|| format!("{} refused as {format}", file.display()))?;
    let tombstoned = imported.tombstoned.len();
    let orphans = imported.orphans_as_text;
    let store = open::or_create(db)?;
    let session = store
        .import_session(imported.into_messages())
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
