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
    let bytes = read_input(file)?;
    // Parse before opening the database, so refused input never creates a file.
    let imported = import::import_bytes(format, &bytes)
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

/// The input's bytes; the importer checks they are UTF-8 and says where they are not.
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
