//! Byte-stable exports. The failure covered: a change to the export pipeline (the loader, a
//! renderer, the order a body's keys are written in) that changes the bytes of a body
//! exported from the same stored history. A provider's prompt cache keys on those bytes, so
//! every session would miss its cache once after the upgrade (issue 16 rewrote the export
//! to move strings instead of copying them, which must not show in the bytes).
//!
//! The bodies of the real transcripts (`tests/fixtures/transcripts/`, Codex rollouts
//! included) and of a hand-written session holding every part kind, in all four formats, are
//! pinned by their length and FNV-1a 64 digest in `tests/fixtures/export_digests.txt`.
//! A change that means to change the bytes rewrites that file with
//! `SESSION_STORE_BLESS=1 cargo test --test tests export_bytes`, and says why in its commit.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use chrono::{TimeZone, Utc};
use serde_json::json;
use session_store::{
    import::{import as import_transcript, Format},
    ExportOptions, NewMessage, Part, Provider, Role, SessionId, Store,
};

use crate::import_fixtures::transcripts;

fn digests_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/export_digests.txt")
}

/// FNV-1a 64 of `bytes`.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Every part kind, in messages the write path accepts.
fn every_kind(store: &Store) -> SessionId {
    let session = store.create_session().expect("session");
    let signed = |text: &str| {
        Part::reasoning(
            text,
            Some(json!({"anthropic": {"signature": format!("sig-{text}")}})),
        )
    };
    store
        .append_batch(
            &session,
            vec![
                NewMessage::system("be brief"),
                NewMessage::new(
                    Role::User,
                    vec![
                        Part::text("look at this"),
                        Part::Image {
                            source: json!({"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}),
                            title: None,
                            provider_metadata: None,
                        },
                        Part::Document {
                            source: json!({"type": "url", "url": "https://example.com/a.pdf", "media_type": "application/pdf"}),
                            title: Some("a.pdf".into()),
                            provider_metadata: Some(json!({"anthropic": {"attributes": {"citations": {"enabled": true}}}})),
                        },
                    ],
                ),
                NewMessage::assistant(vec![
                    signed("first"),
                    Part::RedactedReasoning {
                        data: "cmVkYWN0ZWQ=".into(),
                        provider_metadata: None,
                    },
                    Part::text(""),
                    signed("second"),
                    Part::text("Let me search and run it."),
                    Part::ServerToolUse {
                        id: "srvtoolu_1".into(),
                        name: "web_search".into(),
                        input: json!({"query": "q"}),
                        provider_metadata: None,
                    },
                    Part::ServerToolResult {
                        tool_use_id: "srvtoolu_1".into(),
                        block: json!({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}),
                        provider_metadata: None,
                    },
                    Part::opaque("anthropic", json!({"type": "container_upload", "file_id": "f1"})),
                    Part::opaque("openai", json!({"type": "web_search_call", "id": "ws_1"})),
                    Part::opaque("gemini", json!({"executableCode": {"code": "1"}})),
                    Part::tool_use("toolu_a", "bash", json!({"cmd": "ls", "n": 12345678901234567890u64})),
                    Part::tool_use("toolu_b", "read", json!({"path": "/tmp/ü"})),
                ]),
                NewMessage::tool(vec![
                    Part::tool_result("toolu_b", "contents\nwith \"quotes\""),
                    Part::tool_error("toolu_a", "denied"),
                ]),
                NewMessage::assistant(vec![
                    Part::reasoning(
                        "summary",
                        Some(json!({"openai": {"encrypted_content": "gAAA", "id": "rs_1"}})),
                    ),
                    Part::text("Done.  "),
                ]),
            ],
        )
        .expect("a healthy session");
    session
}

/// One line per session and format: `name format length digest`.
fn exported(store: &Store, session: &SessionId, name: &str, out: &mut String) {
    // Far after every stored time: the idle latch decides the same way on every run.
    let now = Utc
        .with_ymd_and_hms(2030, 1, 1, 0, 0, 0)
        .single()
        .expect("a time");
    let options = ExportOptions {
        persist_latch: false,
        ..ExportOptions::default()
    };
    for provider in Provider::ALL {
        let body = store
            .export(session, provider, now, &options)
            .unwrap_or_else(|e| panic!("{name} {provider}: {e}"));
        let bytes = serde_json::to_string(&body).expect("serializes");
        let _ = writeln!(
            out,
            "{name} {provider} {} {:016x}",
            bytes.len(),
            fnv(bytes.as_bytes())
        );
    }
}

#[test]
fn the_same_stored_history_exports_the_same_bytes_in_every_format() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("s.db")).expect("open");
    let mut lines = String::new();
    let root = crate::util::transcripts();
    let mut sources = transcripts();
    let codex = root.join("agentcmd/codex");
    let mut rollouts: Vec<PathBuf> = std::fs::read_dir(&codex)
        .expect("codex folder")
        .map(|entry| entry.expect("entry").path())
        .collect();
    rollouts.sort();
    sources.extend(rollouts.into_iter().map(|path| (path, Format::Codex)));
    for (path, format) in sources {
        let text = std::fs::read_to_string(&path).expect("readable");
        let imported =
            import_transcript(format, &text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let session = store.import(&imported).expect("stores").session;
        let name = path
            .strip_prefix(&root)
            .expect("under the fixtures")
            .to_string_lossy()
            .replace(' ', "_");
        exported(&store, &session, &name, &mut lines);
    }
    let session = every_kind(&store);
    exported(&store, &session, "every-kind", &mut lines);

    if std::env::var_os("SESSION_STORE_BLESS").is_some() {
        std::fs::write(digests_file(), &lines).expect("write the digests");
        return;
    }
    let pinned =
        std::fs::read_to_string(digests_file()).expect("tests/fixtures/export_digests.txt");
    for (now, then) in lines.lines().zip(pinned.lines()) {
        assert_eq!(now, then, "an exported body changed its bytes");
    }
    assert_eq!(lines.lines().count(), pinned.lines().count());
}
