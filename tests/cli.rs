//! `session-store` run as a process on real files: each command's output and exit status,
//! and refused input that must leave the database exactly as it was (same bytes, same
//! sessions) or not create it at all. Guards the contract's CLI section, which scripts rely on.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tempfile::TempDir;

fn fixture(path: &str) -> PathBuf {
    crate::util::transcripts().join(path)
}

const TOOL_HEAVY: &str = "spotter/tool_heavy.jsonl";
const PARALLEL: &str = "pydantic-ai/derived/test_multiple_parallel_tool_calls.last_request.json";
const NO_ID: &str =
    "pydantic-ai/derived/test_compatible_api_with_tool_calls_without_id.last_request.json";

fn session_store(db: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_session-store"))
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .expect("session-store runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Runs a command that must succeed and returns its stdout.
fn ok(db: &Path, args: &[&str]) -> String {
    let output = session_store(db, args);
    assert!(
        output.status.success(),
        "{args:?} failed: {}",
        stderr(&output)
    );
    stdout(&output)
}

/// Runs a command that must fail with exit status 2 and returns its stderr.
fn fails(db: &Path, args: &[&str]) -> String {
    let output = session_store(db, args);
    assert_eq!(
        output.status.code(),
        Some(2),
        "{args:?}: {}",
        stderr(&output)
    );
    stderr(&output)
}

fn import(db: &Path, format: &str, file: &Path) -> String {
    let id = ok(
        db,
        &[
            "import",
            "--format",
            format,
            file.to_str().expect("utf-8 path"),
        ],
    );
    let id = id.trim().to_owned();
    assert_eq!(id.len(), 36, "a session id: {id:?}");
    id
}

fn temp() -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("sessions.db");
    (dir, db)
}

/// The database's bytes, write-ahead log included: what a refused command must not change.
fn bytes(db: &Path) -> Vec<u8> {
    let mut bytes = std::fs::read(db).expect("db readable");
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    if let Ok(log) = std::fs::read(&wal) {
        bytes.extend(log);
    }
    bytes
}

#[test]
fn import_then_list_and_show_each_format() {
    let (_dir, db) = temp();
    let cc = import(&db, "claude-code", &fixture(TOOL_HEAVY));
    let anthropic = import(&db, "anthropic", &fixture(PARALLEL));
    let openai = import(&db, "openai", &fixture(NO_ID));

    let listing = ok(&db, &["sessions"]);
    let lines: Vec<&str> = listing.lines().collect();
    assert_eq!(lines.len(), 3, "{listing}");
    let line_of = |id: &str| {
        *lines
            .iter()
            .find(|l| l.starts_with(id))
            .unwrap_or_else(|| panic!("{id} listed in {listing}"))
    };
    // tool_heavy: 6 calls, all answered; the parallel body: 4 calls in one turn.
    assert!(line_of(&cc).contains("\tpending=0\t"), "{listing}");
    assert!(
        line_of(&anthropic).contains("\tmessages=4\tturns=1\t"),
        "{listing}"
    );
    assert!(line_of(&openai).contains("\tmessages=3\t"), "{listing}");
    for line in lines {
        for field in [
            "messages=",
            "turns=",
            "compacted_turns=",
            "pending=",
            "health=",
        ] {
            assert!(line.contains(field), "{line}");
        }
    }

    let shown = ok(&db, &["show", &anthropic]);
    assert!(shown.contains("== turn 0 =="), "{shown}");
    assert_eq!(
        shown.matches("[tool_use retrieve_entity_info").count(),
        4,
        "{shown}"
    );
    assert_eq!(shown.matches("[result for toolu_").count(), 4, "{shown}");
    assert!(
        shown.contains("#1 system"),
        "the system prompt is stored first: {shown}"
    );
}

#[test]
fn show_turns_prints_only_the_turns_asked_for() {
    let (_dir, db) = temp();
    let id = import(&db, "claude-code", &fixture(TOOL_HEAVY));
    let all = ok(&db, &["show", &id]);
    assert!(
        all.contains("== turn 0 ==") && all.contains("== turn 2 =="),
        "{all}"
    );
    let some = ok(&db, &["show", &id, "--turns", "1..3"]);
    assert!(!some.contains("== turn 0 =="), "{some}");
    assert!(
        some.contains("== turn 1 ==") && some.contains("== turn 2 =="),
        "{some}"
    );
    assert!(!some.contains("== turn 3 =="), "{some}");
    let one = ok(&db, &["show", &id, "--turns", "2"]);
    assert_eq!(one.matches("== turn").count(), 1, "{one}");
    fails(&db, &["show", &id, "--turns", "500.."]);
    fails(&db, &["show", &id, "--turns", "3..1"]);
}

#[test]
fn unknown_sessions_and_missing_files_exit_2() {
    let (dir, db) = temp();
    // Read commands never create the database.
    assert!(fails(&db, &["sessions"]).contains("no database"));
    assert!(!db.exists());
    fails(&db, &["show", "nope"]);
    assert!(!db.exists());

    import(&db, "claude-code", &fixture(TOOL_HEAVY));
    let err = fails(&db, &["show", "no-such-session"]);
    assert!(err.contains("unknown session no-such-session"), "{err}");
    let missing = dir.path().join("missing.jsonl");
    let err = fails(
        &db,
        &[
            "import",
            "--format",
            "claude-code",
            missing.to_str().expect("utf-8"),
        ],
    );
    assert!(err.contains("missing.jsonl"), "{err}");
}

#[test]
fn bad_arguments_exit_2() {
    let (_dir, db) = temp();
    fails(&db, &["import", "--format", "codex", "x.jsonl"]);
    fails(&db, &["frobnicate"]);
    fails(&db, &["show"]);
}

#[test]
fn a_malformed_line_is_refused_by_number_and_nothing_is_written() {
    let (dir, db) = temp();
    let first = import(&db, "claude-code", &fixture(TOOL_HEAVY));
    let before = bytes(&db);
    let listing = ok(&db, &["sessions"]);

    // A real log with its 5th line cut short.
    let text = std::fs::read_to_string(fixture(TOOL_HEAVY)).expect("fixture");
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let half = lines[4].len() / 2;
    lines[4].truncate(half);
    let broken = dir.path().join("broken.jsonl");
    std::fs::write(&broken, lines.join("\n")).expect("write");
    let err = fails(
        &db,
        &[
            "import",
            "--format",
            "claude-code",
            broken.to_str().expect("utf-8"),
        ],
    );
    assert!(err.contains("line 5"), "{err}");

    assert_eq!(bytes(&db), before, "the database file is unchanged");
    assert_eq!(ok(&db, &["sessions"]), listing);
    assert!(listing.starts_with(&first));
}

#[test]
fn a_malformed_body_is_refused_by_path_and_no_database_is_created() {
    let (dir, db) = temp();
    let body = dir.path().join("body.json");
    std::fs::write(
        &body,
        r#"{"messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "input": {}}]}
        ]}"#,
    )
    .expect("write");
    let err = fails(
        &db,
        &[
            "import",
            "--format",
            "anthropic",
            body.to_str().expect("utf-8"),
        ],
    );
    assert!(err.contains("messages[1].content[0]"), "{err}");
    assert!(!db.exists(), "refused input creates no database");

    // A result that answers no call: the provider would reject it, so the import does.
    std::fs::write(
        &body,
        r#"{"messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "b", "content": "?"}
        ]}"#,
    )
    .expect("write");
    import(&db, "anthropic", &fixture(PARALLEL));
    let before = bytes(&db);
    let err = fails(
        &db,
        &[
            "import",
            "--format",
            "openai",
            body.to_str().expect("utf-8"),
        ],
    );
    assert!(err.contains("messages[2]"), "{err}");
    assert_eq!(bytes(&db), before);
    assert_eq!(ok(&db, &["sessions"]).lines().count(), 1);
}

#[test]
fn import_reads_stdin_when_the_file_is_a_dash() {
    let (_dir, db) = temp();
    let output = Command::new(env!("CARGO_BIN_EXE_session-store"))
        .arg("--db")
        .arg(&db)
        .args(["import", "--format", "openai", "-"])
        .stdin(std::fs::File::open(fixture(NO_ID)).expect("fixture"))
        .output()
        .expect("runs");
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(ok(&db, &["sessions"]).lines().count(), 1);
}

#[test]
fn a_reader_that_goes_away_is_not_an_error() {
    // `session-store show ... | head`: once the pipe closes, writes fail with EPIPE; the
    // tool must stop quietly with status 0, not print an error.
    use std::io::Read;
    use std::process::Stdio;
    let (_dir, db) = temp();
    let id = import(
        &db,
        "claude-code",
        &fixture("spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl"),
    );
    // show writes through io::Write, export through serde_json: both must stop quietly.
    for args in [
        vec!["show", &id, "--full"],
        vec!["export", &id, "--format", "anthropic"],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_session-store"))
            .arg("--db")
            .arg(&db)
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut head = [0u8; 64];
        child
            .stdout
            .take()
            .expect("stdout")
            .read_exact(&mut head)
            .expect("some output");
        // The read end is dropped here, long before the megabytes of output are written.
        let output = child.wait_with_output().expect("wait");
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        assert_eq!(stderr(&output), "", "{args:?}");
    }
}

#[test]
fn compact_cuts_at_a_turn_start_and_export_sends_the_summary_first() {
    let (_dir, db) = temp();
    let id = import(&db, "claude-code", &fixture(TOOL_HEAVY));
    let out = ok(
        &db,
        &[
            "compact",
            &id,
            "--min-keep-tail",
            "5",
            "--summary",
            "SUMMARY-OF-THE-HEAD",
        ],
    );
    assert!(out.starts_with("compacted turns 0..="), "{out}");
    let listing = ok(&db, &["sessions"]);
    assert!(!listing.contains("compacted_turns=0\t"), "{listing}");

    // The compacted turns are still there for a person, marked, with the summary.
    let shown = ok(&db, &["show", &id]);
    assert!(
        shown.contains("(compacted)") && shown.contains("SUMMARY-OF-THE-HEAD"),
        "{shown}"
    );

    // The provider sees the summary first and nothing of the compacted head.
    let body: serde_json::Value =
        serde_json::from_str(&ok(&db, &["export", &id, "--format", "openai"])).expect("JSON");
    assert!(session_store::check_openai(&body).is_empty());
    let first = body["messages"][0]["content"].to_string();
    assert!(first.contains("SUMMARY-OF-THE-HEAD"), "{first}");
    assert!(!body.to_string().contains("start phoenix in background"));

    // Again with the same tail: nothing more to compact, and that is not an error.
    let again = ok(
        &db,
        &["compact", &id, "--min-keep-tail", "5", "--summary", "x"],
    );
    assert!(again.starts_with("nothing to compact"), "{again}");
    // An empty summary, an unknown session and a missing number are refused.
    let before = bytes(&db);
    fails(
        &db,
        &["compact", &id, "--min-keep-tail", "1", "--summary", "  "],
    );
    fails(
        &db,
        &["compact", "nope", "--min-keep-tail", "1", "--summary", "x"],
    );
    fails(&db, &["compact", &id, "--summary", "x"]);
    assert_eq!(bytes(&db), before);
}

#[test]
fn export_prints_a_body_that_passes_the_contract_and_writes_nothing() {
    let (_dir, db) = temp();
    let id = import(
        &db,
        "claude-code",
        &fixture("fasthooks/sample_main_transcript.jsonl"),
    );
    // Compared as contents: closing the last connection may checkpoint the WAL into the
    // main file, which moves bytes without writing anything.
    let before = crate::util::dump(&db);
    for (format, check) in [
        (
            "anthropic",
            session_store::check_anthropic as fn(&serde_json::Value) -> Vec<_>,
        ),
        ("openai", session_store::check_openai),
    ] {
        let body: serde_json::Value =
            serde_json::from_str(&ok(&db, &["export", &id, "--format", format]))
                .expect("stdout is one JSON document");
        assert!(check(&body).is_empty(), "{format}: {:#?}", check(&body));
        let messages = body["messages"].as_array().expect("messages");
        assert!(!messages.is_empty());
        // Tool results reach the provider in its own shape: Anthropic user blocks, OpenAI
        // tool messages.
        let tool_role = messages.iter().any(|m| m["role"] == "tool");
        assert_eq!(tool_role, format == "openai", "{format}");
    }
    assert_eq!(
        crate::util::dump(&db),
        before,
        "export does not write (not even the thinking latch)"
    );
    fails(&db, &["export", "no-such-session", "--format", "openai"]);
    fails(&db, &["export", &id, "--format", "gemini"]);
}

#[test]
fn an_imported_anthropic_body_exports_back_to_the_same_messages() {
    // A clean request body (system, text, four parallel calls and their results) comes back
    // from import and export unchanged.
    let (_dir, db) = temp();
    let id = import(&db, "anthropic", &fixture(PARALLEL));
    let exported: serde_json::Value =
        serde_json::from_str(&ok(&db, &["export", &id, "--format", "anthropic"])).expect("JSON");
    let original: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture(PARALLEL)).expect("fixture"))
            .expect("JSON");
    assert_eq!(exported["system"], original["system"]);
    let strip = |messages: &serde_json::Value| -> Vec<serde_json::Value> {
        // `is_error: false` is the default and may be left out.
        messages
            .as_array()
            .expect("messages")
            .iter()
            .map(|m| {
                let mut m = m.clone();
                for block in m["content"].as_array_mut().into_iter().flatten() {
                    if block["is_error"] == false {
                        block.as_object_mut().expect("block").remove("is_error");
                    }
                }
                m
            })
            .collect()
    };
    assert_eq!(strip(&exported["messages"]), strip(&original["messages"]));
}

#[test]
fn a_file_that_is_not_a_database_is_refused_and_left_alone() {
    let (_dir, db) = temp();
    std::fs::write(&db, "these are my notes, not SQLite\n".repeat(200)).expect("write");
    let before = bytes(&db);
    let err = fails(&db, &["sessions"]);
    assert!(err.contains("not an SQLite database"), "{err}");
    fails(
        &db,
        &[
            "import",
            "--format",
            "anthropic",
            fixture(PARALLEL).to_str().expect("utf-8"),
        ],
    );
    assert_eq!(bytes(&db), before);
}

#[test]
fn sessions_reports_the_rules_a_broken_session_breaks_and_export_still_passes() {
    use crate::broken_db::{Raw, P};
    let (_dir, db) = temp();
    let healthy = import(&db, "anthropic", &fixture(PARALLEL));
    {
        // Written the way older code did: a call never answered before the next user
        // message, and a result sitting in a user message.
        let conn = rusqlite::Connection::open(&db).expect("open raw");
        let mut raw = Raw::new(&conn, "broken");
        raw.msg("user", false, &[P::Text("hi")]);
        raw.msg("assistant", false, &[P::Use("call_a")]);
        raw.msg("user", false, &[P::Text("well?")]);
        raw.msg("assistant", false, &[P::Use("call_b")]);
        raw.msg("user", false, &[P::Result("call_b"), P::Text("and this")]);
    }
    let listing = ok(&db, &["sessions"]);
    let line = |id: &str| {
        listing
            .lines()
            .find(|l| l.starts_with(id))
            .unwrap_or_else(|| panic!("{id} in {listing}"))
            .to_owned()
    };
    assert!(line(&healthy).ends_with("\thealth=ok"), "{listing}");
    let broken = line("broken");
    assert!(broken.contains("dangling_tool_use"), "{broken}");
    assert!(broken.contains("misplaced_tool_result"), "{broken}");
    for (format, check) in [
        (
            "anthropic",
            session_store::check_anthropic as fn(&serde_json::Value) -> Vec<_>,
        ),
        ("openai", session_store::check_openai),
    ] {
        let body: serde_json::Value =
            serde_json::from_str(&ok(&db, &["export", "broken", "--format", format]))
                .expect("JSON");
        assert!(check(&body).is_empty(), "{format}: {:#?}", check(&body));
    }
}
