//! `export`: the request body the library would send now, as JSON on stdout; a transcript
//! for people (Markdown, HTML); or a bundle of every row of the session (JSON Lines).

use std::io::Write;

use anyhow::bail;
use session_store::clock;
use session_store::request::{RepairKind, Request};
use session_store::{ExportOptions, Provider, SessionId, Store, TranscriptFormat};

use crate::open;
use crate::terminal::escape;

/// What `export` writes.
pub enum Shape {
    /// A provider's request body.
    Request(Provider),
    /// A transcript a person reads.
    Transcript(TranscriptFormat),
    /// Every row of the session, for `import --format bundle`.
    Bundle,
}

pub fn run(
    store: &Store,
    session: &str,
    shape: Shape,
    model: Option<String>,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let id = open::session(store, session)?;
    if model.is_some() && !matches!(shape, Shape::Request(_)) {
        bail!("--model names the model a request body is for; transcripts and bundles show every message as stored");
    }
    let provider = match shape {
        Shape::Request(provider) => provider,
        Shape::Transcript(format) => {
            out.write_all(store.transcript(&id, format)?.as_bytes())?;
            return Ok(());
        }
        Shape::Bundle => {
            out.write_all(store.export_bundle(&id)?.as_bytes())?;
            return Ok(());
        }
    };
    let request = checked_request(store, &id, provider, model)?;
    serde_json::to_writer_pretty(&mut *out, &request.body)?;
    writeln!(out)?;
    let tombstoned = tombstoned(&request);
    if !tombstoned.is_empty() {
        eprintln!(
            "session-store: {} tool call(s) have no result; the body answers them with tombstones (nothing stored)",
            tombstoned.len()
        );
        for detail in &tombstoned {
            eprintln!("session-store:   {}", escape(detail));
        }
    }
    Ok(())
}

/// The request body for `id` as it would be sent now, refused when it breaks a provider rule
/// (each broken rule on stderr). Nothing is written: the thinking latch is not persisted, so
/// inspecting a session never changes it (the `export` command and the MCP `export` tool).
pub fn checked_request(
    store: &Store,
    id: &SessionId,
    provider: Provider,
    model: Option<String>,
) -> anyhow::Result<Request> {
    let options = ExportOptions {
        persist_latch: false,
        model,
        ..ExportOptions::default()
    };
    let request = store.export_request(id, provider, clock(), &options)?;
    // The renderers promise a valid body for any stored history; the library has already
    // checked it (every provider rule, and rule 9 against the stored thinking): never print
    // what the provider would reject.
    let violations = &request.violations;
    if !violations.is_empty() {
        for violation in violations {
            eprintln!("session-store: {}", escape(&violation.to_string()));
        }
        bail!(
            "the {provider} body for session {id} breaks {} provider rule(s); not printed",
            violations.len()
        );
    }
    Ok(request)
}

/// What the body says about the session's pending calls: the loader's tombstone repairs,
/// one sentence each (ids and what became of them).
pub fn tombstoned(request: &Request) -> Vec<String> {
    request
        .view
        .repairs
        .iter()
        .filter(|r| r.kind == RepairKind::Tombstone)
        .map(|r| r.detail.clone())
        .collect()
}
