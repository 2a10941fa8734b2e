//! Transcripts for people (`export --format markdown|html`): the HTML page parsed by a real
//! HTML parser keeps hostile text as text (no element, attribute or fetch it could inject),
//! on both engines; the Markdown and HTML of real transcripts through the CLI; and a
//! screenshot of the page in a real headless browser (Debian's chromium) where one is
//! installed, kept under `target/screenshots/` (CI installs chromium and sets
//! `SESSION_STORE_REQUIRE_CHROMIUM=1`, so that half cannot be skipped there unnoticed).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use scraper::{Html, Selector};
use serde_json::json;
use session_store::{NewMessage, Part, SessionId, Store, TranscriptFormat, Usage};

use crate::backends::backends;
use crate::util::{session_store, session_store_ok as ok};

/// Text that would be markup if a page printed it raw.
const HOSTILE: &[&str] = &[
    "<script>alert(1)</script>",
    "</pre><img src=x onerror=alert(2)>",
    "\"><svg onload=alert(3)>",
    "</details></article></main><iframe src=\"https://example.com/\">",
    "<!-- unclosed comment",
    "<style>body{display:none}</style>",
    "&lt;already escaped&gt; &amp;",
    "<a href=\"javascript:alert(4)\">x</a>",
];

/// Every element the page may use: nothing that runs, loads or links.
const ELEMENTS: &[&str] = &[
    "html", "head", "meta", "title", "style", "body", "main", "header", "h1", "h2", "p", "code",
    "span", "section", "article", "div", "time", "details", "summary", "pre", "aside",
];

/// A session that puts every hostile string everywhere a page shows a stored string: user
/// and assistant text, reasoning, tool names, ids and inputs, short and long results, an
/// error, a tombstone's reason, the model, and a compaction summary.
fn hostile_session(store: &Store) -> SessionId {
    let session = store.create_session().expect("session");
    for (n, hostile) in HOSTILE.iter().enumerate() {
        let id = format!("call{n}{hostile}");
        let long = format!("{hostile}\n").repeat(20);
        store
            .append_batch(
                &session,
                vec![
                    NewMessage::user(format!("user says {hostile}")),
                    NewMessage::assistant(vec![
                        Part::reasoning(format!("thinks {hostile}"), None),
                        Part::text(format!("answers {hostile}")),
                        Part::tool_use(&id, *hostile, json!({"arg": hostile})),
                        Part::tool_use(format!("{id}b"), "bash", json!({"k": 1})),
                    ])
                    .by_model(format!("x/{hostile}"))
                    .with_usage(Usage::new(10, 2)),
                    NewMessage::tool(vec![
                        Part::tool_result(&id, long),
                        Part::tool_error(format!("{id}b"), *hostile),
                    ]),
                ],
            )
            .expect("append");
    }
    store
        .append(
            &session,
            NewMessage::assistant(vec![Part::tool_use("late", "bash", json!({}))]),
        )
        .expect("append");
    store
        .cancel_pending(&session, HOSTILE[1])
        .expect("tombstone");
    store
        .compact(&session, 4, &format!("summary {}", HOSTILE.join(" | ")))
        .expect("compact");
    session
}

/// Hostile text stays text: the parsed page holds no element but the page's own, no event
/// handler, link or source attribute, and every hostile string comes back verbatim from the
/// text nodes; a result's `<pre>` holds exactly the stored result.
#[test]
fn hostile_text_stays_text_in_the_html_page() {
    for backend in backends() {
        let session = hostile_session(&backend.store);
        let page = backend
            .store
            .transcript(&session, TranscriptFormat::Html)
            .expect("page");
        let html = Html::parse_document(&page);
        assert!(
            html.errors.is_empty(),
            "{}: {:?}",
            backend.name,
            html.errors
        );
        let every = Selector::parse("*").expect("selector");
        for element in html.select(&every) {
            let name = element.value().name();
            assert!(
                ELEMENTS.contains(&name),
                "{}: <{name}> in the page",
                backend.name
            );
            for (attribute, value) in element.value().attrs() {
                assert!(
                    !attribute.starts_with("on")
                        && !matches!(attribute, "src" | "href" | "action" | "style"),
                    "{}: {attribute}={value:?} on <{name}>",
                    backend.name
                );
            }
        }
        let styles = Selector::parse("style").expect("selector");
        assert_eq!(html.select(&styles).count(), 1, "only the page's own style");
        let text: String = html.root_element().text().collect();
        for hostile in HOSTILE {
            for shown in [
                format!("user says {hostile}"),
                format!("thinks {hostile}"),
                format!("x/{hostile}"),
                format!("\"arg\": {}", serde_json::to_string(hostile).expect("json")),
            ] {
                assert!(
                    text.contains(&shown),
                    "{}: {shown:?} not shown as text",
                    backend.name
                );
            }
        }
        assert!(text.contains(&format!("summary {}", HOSTILE.join(" | "))));
        let outputs = Selector::parse("pre.output").expect("selector");
        let results: Vec<String> = html
            .select(&outputs)
            .map(|pre| pre.text().collect())
            .collect();
        assert!(
            results.contains(&HOSTILE[1].to_owned()),
            "the error result, verbatim"
        );
        assert!(results.contains(&format!("{}\n", HOSTILE[0]).repeat(20)));
        // Long results fold; the tombstone and the compaction are marked.
        let folded = Selector::parse("details.result").expect("selector");
        assert_eq!(html.select(&folded).count(), HOSTILE.len());
        for mark in [
            "span.badge.tombstone",
            "span.badge.compacted",
            "aside.summary",
        ] {
            let selector = Selector::parse(mark).expect("selector");
            assert!(html.select(&selector).next().is_some(), "{mark} missing");
        }
    }
}

/// A real transcript through the CLI, in both formats: every turn has its heading, every
/// call is shown once with its result after it, errors are marked, the page is one document
/// with nothing to fetch; an unknown session exits 2.
#[test]
fn the_cli_exports_real_transcripts_as_markdown_and_html() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("t.db");
    let fixture = crate::util::transcripts().join("fasthooks/sample_main_transcript.jsonl");
    let id = ok(&db, &["import", fixture.to_str().expect("path")]);
    let id = id.trim();
    let store = Store::open(&db).expect("open");
    let messages = store.messages(&SessionId::new(id)).expect("messages");
    let calls: Vec<&str> = messages
        .iter()
        .flat_map(|m| &m.parts)
        .filter_map(|p| match p {
            Part::ToolUse { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    assert!(calls.len() >= 10);
    let turns = messages.last().map_or(0, |m| m.turn_index + 1);
    let markdown = ok(&db, &["export", id, "--format", "markdown"]);
    for turn in 0..turns {
        assert!(
            markdown.contains(&format!("\n## Turn {turn}\n")),
            "turn {turn}"
        );
    }
    for call in &calls {
        assert_eq!(markdown.matches(call).count(), 1, "{call} shown once");
    }
    assert_eq!(markdown.matches("**Error result**").count(), 2);
    assert!(markdown.contains("> **Compaction summary**"));
    let page = ok(&db, &["export", id, "--format", "html"]);
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.contains("default-src 'none'"));
    assert_eq!(page.matches("badge error").count(), 2);
    let html = Html::parse_document(&page);
    let ids = Selector::parse(".call-head code.id").expect("selector");
    let shown: Vec<String> = html.select(&ids).map(|c| c.text().collect()).collect();
    assert_eq!(shown, calls, "every call, in order, once");
    let output = session_store(&db, &["export", "unknown-session", "--format", "html"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
}

/// The browser: `chromium` (Debian) or `chromium-browser`, when on PATH.
fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| ["chromium", "chromium-browser"].map(|name| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

/// Where screenshots go: `target/screenshots/` (CI keeps them as artifacts).
fn screenshots() -> PathBuf {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let dir = tmp.parent().unwrap_or(tmp).join("screenshots");
    std::fs::create_dir_all(&dir).expect("screenshots folder");
    dir
}

/// `page` screenshotted by headless chromium at 1200x1600, with no network and a throwaway
/// profile; the PNG's path.
fn screenshot(browser: &Path, page: &str, name: &str) -> PathBuf {
    let dir = screenshots();
    let html = dir.join(format!("{name}.html"));
    let png = dir.join(format!("{name}.png"));
    std::fs::write(&html, page).expect("write page");
    let _ = std::fs::remove_file(&png);
    let profile = tempfile::tempdir().expect("profile");
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
            "--window-size=1200,1600",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", html.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    let started = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("chromium did not finish a screenshot of {name}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    png
}

/// Width and height from a PNG's header.
fn png_size(bytes: &[u8]) -> Option<(u32, u32)> {
    if bytes.len() < 24 || &bytes[..8] != b"\x89PNG\r\n\x1a\n" || &bytes[12..16] != b"IHDR" {
        return None;
    }
    let word =
        |at: usize| u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    Some((word(16), word(20)))
}

/// The page of a real transcript and of the hostile session, as a browser draws them:
/// screenshots in `target/screenshots/`, each a 1200x1600 PNG with something drawn on it.
#[test]
fn a_headless_browser_draws_the_page() {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("SESSION_STORE_REQUIRE_CHROMIUM").is_none(),
            "SESSION_STORE_REQUIRE_CHROMIUM is set but chromium is not on PATH"
        );
        eprintln!("note: chromium is not on PATH: the screenshot test is skipped");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("t.db")).expect("open");
    let fixture = crate::util::transcripts().join("fasthooks/sample_main_transcript.jsonl");
    let text = std::fs::read_to_string(fixture).expect("fixture");
    let imported = session_store::import::import(session_store::import::Format::ClaudeCode, &text)
        .expect("import");
    let real = store.import(&imported).expect("store").session;
    let hostile = hostile_session(&store);
    for (session, name) in [(real, "transcript"), (hostile, "hostile")] {
        let page = store
            .transcript(&session, TranscriptFormat::Html)
            .expect("page");
        let png = screenshot(&browser, &page, name);
        let bytes = std::fs::read(&png).expect("chromium wrote the screenshot");
        assert_eq!(png_size(&bytes), Some((1200, 1600)), "{}", png.display());
        // A blank 1200x1600 page compresses to a few KiB; text and cards do not.
        assert!(
            bytes.len() > 40_000,
            "{}: {} bytes",
            png.display(),
            bytes.len()
        );
        eprintln!("screenshot: {}", png.display());
    }
}
