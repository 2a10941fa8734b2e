//! `export`: the request body the library would send now, as JSON on stdout.

use std::io::Write;

use anyhow::bail;
use session_store::history::contract;
use session_store::{ExportOptions, Provider, Store};

use crate::open;

pub fn run(
    store: &Store,
    session: &str,
    provider: Provider,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let id = open::session(store, session)?;
    // Same body as a live export; only the thinking latch is not written back, so inspecting
    // a session never changes it.
    let options = ExportOptions {
        persist_latch: false,
        ..ExportOptions::default()
    };
    let body = store.export_now(&id, provider, &options)?;
    // The renderers promise a valid body for any stored history; check it independently
    // rather than print something the provider would reject.
    let violations = contract::check(provider, &body);
    if !violations.is_empty() {
        for violation in &violations {
            eprintln!("session-store: {violation}");
        }
        bail!(
            "the {provider} body for session {id} breaks {} provider rule(s); not printed",
            violations.len()
        );
    }
    serde_json::to_writer_pretty(&mut *out, &body)?;
    writeln!(out)?;
    Ok(())
}
