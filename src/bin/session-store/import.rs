//! `import`: a new session from a transcript file, in one transaction.

use std::io::{BufReader, Cursor, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use session_store::import::{
    confirm_sample as confirm_format_of, detect_sample as detect_format_of, Sample,
};
use session_store::{
    import::{validate as validate_transcript, Format},
    is_database_url,
};
use session_store::{validate_bundle, BUNDLE_FORMAT};

use crate::{open, progress, ImportFormat};

/// Imports `files` (a file, several, or folders of them) into the database `db`: one file
/// as [`one`] does, more in one import run ([`several`]).
pub fn run(
    db: &Option<PathBuf>,
    format: ImportFormat,
    model: Option<&str>,
    files: &[PathBuf],
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    match files {
        [file] if !file.is_dir() => one(db, format, model, file, json, out),
        _ => match expand(files)?.as_slice() {
            [file] if format == ImportFormat::Bundle => one(db, format, model, file, json, out),
            expanded => several(db, format, model, expanded, json, out),
        },
    }
}

/// The files `paths` name: a file as itself, a folder as the regular files under it,
/// recursively, in name order, hidden ones (`.name`) left out.
fn expand(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in paths {
        if !path.is_dir() {
            files.push(path.clone());
            continue;
        }
        let mut found = Vec::new();
        let mut folders = vec![path.clone()];
        while let Some(folder) = folders.pop() {
            let entries = std::fs::read_dir(&folder)
                .with_context(|| format!("cannot read {}", folder.display()))?;
            for entry in entries {
                let entry = entry.with_context(|| format!("cannot read {}", folder.display()))?;
                if entry.file_name().to_string_lossy().starts_with('.') {
                    continue;
                }
                let kind = entry.file_type()?;
                if kind.is_dir() {
                    folders.push(entry.path());
                } else if entry.path().is_file() {
                    found.push(entry.path());
                }
            }
        }
        if found.is_empty() {
            anyhow::bail!("{} holds no files to import", path.display());
        }
        found.sort();
        files.extend(found);
    }
    Ok(files)
}

/// Imports `files` in one transaction (one import run), a session each, after checking each
/// with a dry run so that a refusal names its file; reports each new session as [`one`] does,
/// in the files' order (with `json`, one array of its objects). A bundle is not part of a
/// run (it is imported alone).
fn several(
    db: &Option<PathBuf>,
    format: ImportFormat,
    model: Option<&str>,
    files: &[PathBuf],
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let db = open::path(db)?;
    if format == ImportFormat::Bundle {
        anyhow::bail!(
            "--format bundle imports one bundle file, not {} (a bundle is imported alone, not in a run of several files)",
            files.len()
        );
    }
    let mut inputs = Vec::with_capacity(files.len());
    for file in files {
        let mut input = open_input(file)?;
        if is_bundle(&mut input)? {
            anyhow::bail!(
                "{} is a bundle: a bundle is imported alone, not in a run of several files",
                file.display()
            );
        }
        let sample =
            Sample::read(&mut input).with_context(|| format!("{} refused", file.display()))?;
        let format = transcript_format(format, &sample, file)?;
        drop(sample);
        rewind(&mut input, file)?;
        validate_transcript(format, &mut input)
            .with_context(|| format!("{} refused as {format}", file.display()))?;
        rewind(&mut input, file)?;
        inputs.push((format, input));
    }
    let formats: Vec<Format> = inputs.iter().map(|(format, _)| *format).collect();
    let store = open::or_create(db)?;
    let bar = progress::spinner(&format!("importing {} files", files.len()));
    let stored = store
        .import_readers_as(inputs, model)
        .with_context(|| format!("cannot import the {} files", files.len()))?;
    bar.finish_and_clear();
    // One line per file (its new session), or with `json` one array of `import --json`'s
    // objects, in the files' order.
    let mut objects = Vec::with_capacity(stored.len());
    for (stored, format) in stored.iter().zip(formats) {
        notes(stored);
        if json {
            objects.push(summary_json(stored, format));
        } else {
            writeln!(out, "{}", stored.session)?;
        }
    }
    if json {
        crate::shapes::print(out, &serde_json::Value::Array(objects))?;
    }
    Ok(())
}

/// Imports `file` (its `format` detected, or confirmed when named) as a new session of the
/// database `db`, and reports the new session on `out` (as JSON with `json`) and its notes
/// on stderr.
fn one(
    db: &Option<PathBuf>,
    format: ImportFormat,
    model: Option<&str>,
    file: &Path,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let db = open::path(db)?;
    let mut input = open_input(file)?;
    if format == ImportFormat::Bundle || (format == ImportFormat::Auto && is_bundle(&mut input)?) {
        return bundle(db, input, file, out);
    }
    // Never read a file as a format it is not: detect it, or confirm the format named. The
    // sample holds the first elements of a document's arrays, not the whole file.
    let sample = Sample::read(&mut input).with_context(|| format!("{} refused", file.display()))?;
    let format = transcript_format(format, &sample, file)?;
    drop(sample);
    tracing::info!(file = %file.display(), %format, "importing");
    // Refused input never creates a database file: a new one is only made once a dry run
    // (which stores nothing and holds one message at a time) has read the whole transcript.
    if !is_database_url(&db.to_string_lossy()) && !db.exists() {
        rewind(&mut input, file)?;
        let bar = progress::bytes("checking", input.len());
        let messages = validate_transcript(format, bar.wrap_read(&mut input))
            .with_context(|| format!("{} refused as {format}", file.display()))?;
        bar.finish_and_clear();
        tracing::debug!(messages, "checked");
    }
    rewind(&mut input, file)?;
    let store = open::or_create(db)?;
    let bar = progress::bytes("importing", input.len());
    let stored = store
        .import_reader_as(format, bar.wrap_read(&mut input), model)
        .map_err(|error| match error {
            session_store::Error::Import(refused) => anyhow::Error::new(refused)
                .context(format!("{} refused as {format}", file.display())),
            other => anyhow::Error::new(other).context(format!("cannot import {}", file.display())),
        })?;
    bar.finish_and_clear();
    tracing::debug!(messages = stored.messages, "stored");
    report(stored, format, json, out)
}

/// The transcript format of `file`: detected from its `sample` (`auto`), or the format
/// named, once the sample confirms it.
fn transcript_format(format: ImportFormat, sample: &Sample, file: &Path) -> anyhow::Result<Format> {
    Ok(match format {
        ImportFormat::Auto => {
            detect_format_of(sample).with_context(|| format!("{} refused", file.display()))?
        }
        named => {
            let format = match named {
                ImportFormat::Anthropic => Format::Anthropic,
                ImportFormat::Openai => Format::OpenAi,
                ImportFormat::Responses => Format::Responses,
                ImportFormat::Gemini => Format::Gemini,
                ImportFormat::Codex => Format::Codex,
                ImportFormat::ClaudeCode | ImportFormat::Auto | ImportFormat::Bundle => {
                    Format::ClaudeCode
                }
            };
            confirm_format_of(format, sample)
                .with_context(|| format!("{} refused as {format}", file.display()))?;
            format
        }
    })
}

/// What an import stored: the session on `out` (as JSON with `json`), and on stderr the
/// child sessions, the tombstoned calls, the orphan results and the warnings.
fn report(
    stored: session_store::ImportSummary,
    format: Format,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    if json {
        // The notes below go to stderr as well: a script reading stdout sees them here.
        crate::shapes::print(out, &summary_json(&stored, format))?;
    }
    notes(&stored);
    if !json {
        writeln!(out, "{}", stored.session)?;
    }
    Ok(())
}

/// What `import --json` prints of one imported file.
fn summary_json(stored: &session_store::ImportSummary, format: Format) -> serde_json::Value {
    serde_json::json!({
        "session": stored.session.as_str(),
        "format": format.to_string(),
        "children": stored.children,
        "branches": stored.branches,
        "messages": stored.messages,
        "tombstoned": stored.tombstoned,
        "orphans_as_text": stored.orphans_as_text,
        "warnings": stored.warnings,
    })
}

/// The notes of one import on stderr: child sessions, branches, tombstones, orphans,
/// warnings.
fn notes(stored: &session_store::ImportSummary) {
    for child in &stored.children {
        eprintln!(
            "session-store: a sub-agent's conversation was imported as child session {child}"
        );
    }
    for branch in &stored.branches {
        match (&branch.forked_from, branch.at_turn) {
            (Some(from), Some(turn)) => eprintln!(
                "session-store: a branch the log left (a rewind or an edited prompt) was imported as session {}, a fork of {from} at turn {turn}",
                branch.session
            ),
            (Some(from), None) => eprintln!(
                "session-store: a branch the log left (a rewind or an edited prompt) was imported as session {}, a fork of {from}",
                branch.session
            ),
            (None, _) => eprintln!(
                "session-store: another conversation of the log (its own root) was imported as session {}",
                branch.session
            ),
        }
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
    for warning in &stored.warnings {
        eprintln!("session-store: {}", crate::terminal::escape_line(warning));
    }
}

/// A bundle restored as a new session (checked whole before a database file is created).
fn bundle(db: &Path, mut input: Input, file: &Path, out: &mut impl Write) -> anyhow::Result<()> {
    let refused = || format!("{} refused as a bundle", file.display());
    if !is_database_url(&db.to_string_lossy()) && !db.exists() {
        validate_bundle(BufReader::new(&mut input)).with_context(refused)?;
        rewind(&mut input, file)?;
    }
    let store = open::or_create(db)?;
    let session = store
        .import_bundle(BufReader::new(input))
        .with_context(refused)?;
    writeln!(out, "{session}")?;
    Ok(())
}

/// True when the input's first line is a bundle's header (then rewound).
fn is_bundle(input: &mut Input) -> anyhow::Result<bool> {
    let mut start = [0_u8; 64];
    let mut read = 0;
    while read < start.len() {
        match input.read(&mut start[read..])? {
            0 => break,
            n => read += n,
        }
    }
    input.seek(SeekFrom::Start(0))?;
    let start = String::from_utf8_lossy(&start[..read]);
    let compact: String = start.chars().filter(|c| !c.is_whitespace()).collect();
    Ok(compact.starts_with(&format!("{{\"format\":\"{BUNDLE_FORMAT}\"")))
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

impl Input {
    /// Its length in bytes (0 when unknown), for the progress bar.
    fn len(&self) -> u64 {
        match self {
            Input::File(file) => file.metadata().map_or(0, |m| m.len()),
            Input::Bytes(bytes) => bytes.get_ref().len() as u64,
        }
    }
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
