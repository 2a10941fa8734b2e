//! `session-store` run as a process on real files: each command's output and exit status,
//! and refused input that must leave the database exactly as it was (same bytes, same
//! sessions) or not create it at all. Guards the contract's CLI section, which scripts rely
//! on, and what a person sees: format detection instead of a silent misread, `cancel`, the
//! sessions table and its JSON, id prefixes, `--db` anywhere or from `SESSION_STORE_DB`,
//! terminal escapes that must not reach the terminal raw, and the marks of a broken session.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::util::session_store;
use tempfile::TempDir;

fn fixture(path: &str) -> PathBuf {
    crate::util::transcripts().join(path)
}

const TOOL_HEAVY: &str = "spotter/tool_heavy.jsonl";
const PARALLEL: &str = "pydantic-ai/derived/test_multiple_parallel_tool_calls.last_request.json";
const NO_ID: &str =
    "pydantic-ai/derived/test_compatible_api_with_tool_calls_without_id.last_request.json";

/// The listing as scripts read it: `sessions --json`.
fn listing(db: &Path) -> Vec<serde_json::Value> {
    let text = ok(db, &["sessions", "--json"]);
    match serde_json::from_str(&text).expect("sessions --json prints JSON") {
        serde_json::Value::Array(sessions) => sessions,
        other => panic!("expected an array, got {other}"),
    }
}

/// One session's entry in [`listing`].
fn entry(list: &[serde_json::Value], id: &str) -> serde_json::Value {
    list.iter()
        .find(|s| s["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("{id} listed in {list:?}"))
}

/// Every row of every table: what a refused command must leave as it was.
fn dump(db: &Path) -> String {
    crate::util::dump(db)
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
    let path = file.to_str().expect("utf-8 path");
    let id = if format == "auto" {
        ok(db, &["import", path])
    } else {
        ok(db, &["import", "--format", format, path])
    };
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

    let list = listing(&db);
    assert_eq!(list.len(), 3, "{list:?}");
    // tool_heavy: 6 calls, all answered; the parallel body: 4 calls in one turn.
    assert_eq!(entry(&list, &cc)["pending"], 0);
    assert_eq!(entry(&list, &anthropic)["messages"], 4);
    assert_eq!(entry(&list, &anthropic)["turns"], 1);
    assert_eq!(entry(&list, &openai)["messages"], 3);
    for session in &list {
        for field in [
            "id",
            "title",
            "created_at",
            "updated_at",
            "messages",
            "turns",
            "compacted_turns",
            "pending",
            "pending_tool_use_ids",
            "health",
            "rules",
        ] {
            assert!(session.get(field).is_some(), "{field} in {session}");
        }
        assert_eq!(session["health"], "ok");
    }

    // The table for people: a header, one row per session, a summary line.
    let table = ok(&db, &["sessions"]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 5, "{table}");
    for column in [
        "ID", "CREATED", "UPDATED", "MESSAGES", "TURNS", "PENDING", "HEALTH", "TITLE",
    ] {
        assert!(lines[0].contains(column), "{column} in {}", lines[0]);
    }
    for id in [&cc, &anthropic, &openai] {
        assert!(lines.iter().any(|l| l.starts_with(id.as_str())), "{table}");
    }
    assert_eq!(lines[4], "3 sessions · all healthy · 0 pending calls");

    let shown = ok(&db, &["show", &anthropic]);
    assert!(shown.contains("== turn 0 =="), "{shown}");
    assert!(shown.contains("4 messages, 1 turn\n"), "{shown}");
    assert!(shown.contains("health: ok"), "{shown}");
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
    // A range with no turn is an error, and the error comes alone: no header before it.
    for range in ["500..", "99", "3..1"] {
        let output = session_store(&db, &["show", &id, "--turns", range]);
        assert_eq!(output.status.code(), Some(2), "{range}");
        assert_eq!(stdout(&output), "", "{range}: nothing on stdout");
    }
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
    fails(&db, &["import", "--format", "chat", "x.jsonl"]);
    fails(&db, &["frobnicate"]);
    fails(&db, &["show"]);
}

#[test]
fn a_malformed_line_is_refused_by_number_and_nothing_is_written() {
    let (dir, db) = temp();
    let first = import(&db, "claude-code", &fixture(TOOL_HEAVY));
    let before = bytes(&db);
    let listing = ok(&db, &["sessions", "--json"]);

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
    assert_eq!(ok(&db, &["sessions", "--json"]), listing);
    assert!(listing.contains(&first));
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
    assert_eq!(listing(&db).len(), 1);
}

#[test]
fn import_reads_stdin_when_the_file_is_a_dash() {
    let (_dir, db) = temp();
    let output = Command::new(env!("CARGO_BIN_EXE_session-store"))
        .arg("--db")
        .arg(&db)
        .args(["import", "-"])
        .stdin(std::fs::File::open(fixture(NO_ID)).expect("fixture"))
        .output()
        .expect("runs");
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(listing(&db).len(), 1);
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
    // Summaries are counted per session, not by their database-wide row id.
    assert!(out.ends_with("after summary 1 of the session\n"), "{out}");
    let compacted = entry(&listing(&db), &id)["compacted_turns"].clone();
    assert!(compacted.as_u64().is_some_and(|n| n > 0), "{compacted}");

    // The compacted turns are still there for a person, marked, with the summary.
    let shown = ok(&db, &["show", &id]);
    assert!(
        shown.contains(" · compacted (the provider sees the summary instead) ==")
            && shown.contains("[compacted]")
            && shown.contains("[summary 1 of 1: replaces turns 0..=")
            && shown.contains("SUMMARY-OF-THE-HEAD"),
        "{shown}"
    );

    // The provider sees the summary first and nothing of the compacted head.
    let body: serde_json::Value =
        serde_json::from_str(&ok(&db, &["export", &id, "--format", "openai"])).expect("JSON");
    assert!(session_store::request::check_openai(&body).is_empty());
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
    // A log without a compaction, so tool calls are in what the provider sees.
    let id = import(&db, "claude-code", &fixture("spotter/tool_heavy.jsonl"));
    // Compared as contents: closing the last connection may checkpoint the WAL into the
    // main file, which moves bytes without writing anything.
    let before = crate::util::dump(&db);
    for (format, check) in [
        (
            "anthropic",
            session_store::request::check_anthropic as fn(&serde_json::Value) -> Vec<_>,
        ),
        ("openai", session_store::request::check_openai),
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
    fails(&db, &["export", &id, "--format", "bedrock"]);
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
    let list = listing(&db);
    assert_eq!(entry(&list, &healthy)["health"], "ok");
    let broken = entry(&list, "broken");
    assert_eq!(broken["health"], "broken");
    assert_eq!(
        broken["rules"],
        serde_json::json!(["dangling_tool_use", "misplaced_tool_result"])
    );
    let table = ok(&db, &["sessions"]);
    let row = table
        .lines()
        .find(|l| l.starts_with("broken "))
        .unwrap_or_else(|| panic!("broken in {table}"));
    assert!(
        row.contains("dangling_tool_use,misplaced_tool_result"),
        "{table}"
    );
    assert!(table.ends_with("2 sessions · 1 broken (store-repair --dry-run lists what is wrong) · 0 pending calls\n"), "{table}");

    // show marks each broken rule where it is broken, under a header that says so.
    let shown = ok(&db, &["show", "broken"]);
    assert!(
        shown.contains("health: BROKEN (dangling_tool_use ×2, misplaced_tool_result ×1)"),
        "{shown}"
    );
    let marks: Vec<&str> = shown
        .lines()
        .filter(|l| l.trim_start().starts_with("!! "))
        .collect();
    assert_eq!(marks.len(), 3, "{shown}");
    assert!(
        marks[0].contains("dangling_tool_use") && marks[0].contains("call_a"),
        "{shown}"
    );
    assert!(
        marks[1].contains("dangling_tool_use") && marks[1].contains("call_b"),
        "{shown}"
    );
    assert!(marks[2].contains("misplaced_tool_result"), "{shown}");
    for (format, check) in [
        (
            "anthropic",
            session_store::request::check_anthropic as fn(&serde_json::Value) -> Vec<_>,
        ),
        ("openai", session_store::request::check_openai),
    ] {
        let body: serde_json::Value =
            serde_json::from_str(&ok(&db, &["export", "broken", "--format", format]))
                .expect("JSON");
        assert!(check(&body).is_empty(), "{format}: {:#?}", check(&body));
    }
}

/// Runs the binary with no `--db` and the environment given.
fn session_store_env(env: &[(&str, &Path)], args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_session-store"));
    command
        .args(args)
        .env_remove("SESSION_STORE_DB")
        .env_remove("RUST_LOG");
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("session-store runs")
}

/// Every transcript format is told apart without `--format`, and gives the same session
/// as when the format is named.
#[test]
fn import_detects_each_format_and_stores_what_the_named_import_stores() {
    let (_dir, db) = temp();
    for (format, file) in [
        ("claude-code", TOOL_HEAVY),
        ("anthropic", PARALLEL),
        ("openai", NO_ID),
        (
            "anthropic",
            "pydantic-ai/derived/test_anthropic_compaction_round_trip.last_request.json",
        ),
        ("claude-code", "fasthooks/sample_agent_sidechain.jsonl"),
    ] {
        let named = import(&db, format, &fixture(file));
        let detected = import(&db, "auto", &fixture(file));
        let show = |id: &str| {
            // The same turns, messages and parts; only the id and import times differ.
            ok(&db, &["show", id, "--full"])
                .lines()
                .skip(2)
                .map(|l| {
                    if l.starts_with('#') {
                        l.split("  ").next().unwrap_or(l).to_owned()
                    } else {
                        l.to_owned()
                    }
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(show(&named), show(&detected), "{file} as {format}");
    }
}

/// The bug: an Anthropic body imported with `--format openai` turned every tool call into
/// the text `[tool_use part]` and exited 0. A file that is not the named format is refused
/// (exit 2), and nothing is written.
#[test]
fn a_file_named_as_another_format_is_refused_not_misread() {
    let (dir, db) = temp();
    let cases = [
        ("openai", PARALLEL, "an Anthropic Messages request body"),
        (
            "anthropic",
            NO_ID,
            "an OpenAI Chat Completions request body",
        ),
        (
            "claude-code",
            PARALLEL,
            "an Anthropic Messages request body",
        ),
        ("anthropic", TOOL_HEAVY, "a Claude Code session log"),
        ("openai", TOOL_HEAVY, "a Claude Code session log"),
    ];
    // No database yet: a refused import does not create one.
    for (format, file, looks_like) in cases {
        let path = fixture(file);
        let err = fails(
            &db,
            &["import", "--format", format, path.to_str().expect("utf-8")],
        );
        assert!(err.contains(&format!("refused as {format}")), "{err}");
        assert!(err.contains(looks_like), "{format} {file}: {err}");
        assert!(!db.exists(), "a refused import creates no database");
    }
    import(&db, "anthropic", &fixture(PARALLEL));
    let before = dump(&db);
    for (format, file, _) in cases {
        let path = fixture(file);
        fails(
            &db,
            &["import", "--format", format, path.to_str().expect("utf-8")],
        );
    }
    // Text that is no format is refused under auto too, never guessed.
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "just some notes\n").expect("write");
    let err = fails(&db, &["import", notes.to_str().expect("utf-8")]);
    assert!(err.contains("cannot tell the format"), "{err}");
    assert_eq!(dump(&db), before, "refused imports wrote nothing");
}

#[test]
fn cancel_answers_pending_calls_with_tombstones_and_show_marks_them() {
    let (_dir, db) = temp();
    // Ends with three parallel calls that never got a result.
    let id = import(
        &db,
        "claude-code",
        &fixture("agentcmd/claude/full-session-three.jsonl"),
    );
    assert_eq!(entry(&listing(&db), &id)["pending"], 3);
    let shown = ok(&db, &["show", &id]);
    assert_eq!(shown.matches(" · PENDING]").count(), 3, "{shown}");
    assert!(shown.contains("3 calls pending"), "{shown}");
    assert!(
        shown.contains(&format!("`session-store cancel {id}` answers each")),
        "{shown}"
    );

    let before = dump(&db);
    // Unknown sessions and bad arguments: exit 2, nothing written.
    fails(&db, &["cancel", "no-such-session"]);
    fails(&db, &["cancel"]);
    assert_eq!(dump(&db), before);

    let answered = ok(&db, &["cancel", &id[..8], "--reason", "user went home"]);
    assert_eq!(answered.lines().count(), 3, "{answered}");
    let list = listing(&db);
    assert_eq!(entry(&list, &id)["pending"], 0);
    assert_eq!(entry(&list, &id)["health"], "ok");
    let shown = ok(&db, &["show", &id]);
    assert_eq!(shown.matches("[TOMBSTONE for ").count(), 3, "{shown}");
    assert!(shown.contains("user went home"), "{shown}");
    assert!(!shown.contains("PENDING"), "{shown}");

    // Nothing pending any more: exit 0, nothing written, and it says so.
    let after = dump(&db);
    let output = session_store(&db, &["cancel", &id]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(stdout(&output), "");
    assert!(
        stderr(&output).contains("nothing pending"),
        "{}",
        stderr(&output)
    );
    assert_eq!(dump(&db), after);
}

/// Two sessions whose ids share their first 9 characters.
fn twins(db: &Path) -> [String; 2] {
    let store = session_store::Store::open(db).expect("open");
    let ids = ["0123abcd-one", "0123abcd-two"];
    for id in ids {
        store
            .create_session_with_id(&session_store::SessionId::new(id))
            .expect("create");
        store
            .append(
                &session_store::SessionId::new(id),
                session_store::NewMessage::user("hi"),
            )
            .expect("append");
    }
    ids.map(str::to_owned)
}

#[test]
fn a_unique_prefix_of_eight_characters_names_a_session() {
    let (_dir, db) = temp();
    let id = import(&db, "claude-code", &fixture(TOOL_HEAVY));
    let [one, _two] = twins(&db);
    for prefix in [&id[..8], &id[..13], &one[..10], one.as_str()] {
        let shown = ok(&db, &["show", prefix, "--turns", "0"]);
        assert!(shown.starts_with("session "), "{prefix}: {shown}");
    }
    ok(&db, &["export", &id[..8], "--format", "openai"]);

    let before = dump(&db);
    // Too short, ambiguous, or unknown: exit 2, and the writing commands write nothing.
    let err = fails(&db, &["show", &id[..7]]);
    assert!(err.contains("8 characters"), "{err}");
    let err = fails(&db, &["show", "0123abcd"]);
    assert!(
        err.contains("ambiguous session prefix 0123abcd") && err.contains("0123abcd-two"),
        "{err}"
    );
    fails(&db, &["cancel", "0123abcd"]);
    fails(
        &db,
        &[
            "compact",
            "0123abcd",
            "--min-keep-tail",
            "1",
            "--summary",
            "x",
        ],
    );
    fails(
        &db,
        &[
            "compact",
            "ffffffff",
            "--min-keep-tail",
            "1",
            "--summary",
            "x",
        ],
    );
    assert_eq!(dump(&db), before);
}

#[test]
fn db_goes_before_or_after_the_command_or_comes_from_the_environment() {
    let (dir, db) = temp();
    let id = import(&db, "anthropic", &fixture(PARALLEL));
    let expected = ok(&db, &["sessions", "--json"]);
    let after = session_store_env(
        &[],
        &["sessions", "--json", "--db", db.to_str().expect("utf-8")],
    );
    assert_eq!(stdout(&after), expected, "{}", stderr(&after));
    let from_env = session_store_env(&[("SESSION_STORE_DB", &db)], &["sessions", "--json"]);
    assert_eq!(stdout(&from_env), expected, "{}", stderr(&from_env));
    // --db wins over the environment.
    let other = dir.path().join("other.db");
    let both = session_store_env(
        &[("SESSION_STORE_DB", &other)],
        &["show", &id, "--db", db.to_str().expect("utf-8")],
    );
    assert!(both.status.success(), "{}", stderr(&both));
    assert!(!other.exists());

    // Neither: exit 2, saying how to give one; nothing is created.
    let none = session_store_env(&[], &["sessions"]);
    assert_eq!(none.status.code(), Some(2));
    assert!(
        stderr(&none).contains("SESSION_STORE_DB"),
        "{}",
        stderr(&none)
    );
    let before = dump(&db);
    let none = session_store_env(&[], &["import", fixture(NO_ID).to_str().expect("utf-8")]);
    assert_eq!(none.status.code(), Some(2));
    assert_eq!(dump(&db), before);
}

#[test]
fn each_binary_explains_itself_and_its_exit_codes() {
    for (bin, codes) in [
        (env!("CARGO_BIN_EXE_session-store"), &["0 ", "2 "][..]),
        (env!("CARGO_BIN_EXE_store-repair"), &["0 ", "1 ", "2 "][..]),
    ] {
        let help = Command::new(bin).arg("--help").output().expect("runs");
        assert_eq!(help.status.code(), Some(0));
        let text = stdout(&help);
        assert!(text.contains("Exit status:"), "{bin}: {text}");
        for code in codes {
            assert!(
                text.contains(&format!("\n  {code}")),
                "{bin} exit {code}: {text}"
            );
        }
        assert!(text.contains("-v, --verbose"), "{bin}: {text}");
    }
    let main = stdout(
        &Command::new(env!("CARGO_BIN_EXE_session-store"))
            .arg("--help")
            .output()
            .expect("runs"),
    );
    let repair = stdout(
        &Command::new(env!("CARGO_BIN_EXE_store-repair"))
            .arg("--help")
            .output()
            .expect("runs"),
    );
    assert!(main.starts_with("Inspect and exchange"), "{main}");
    assert!(repair.starts_with("Check a session database"), "{repair}");
}

#[test]
fn verbose_traces_on_stderr_and_quiet_runs_print_nothing_there() {
    let (_dir, db) = temp();
    import(&db, "anthropic", &fixture(PARALLEL));
    let quiet = session_store(&db, &["sessions"]);
    assert_eq!(stderr(&quiet), "");
    let verbose = session_store(&db, &["-v", "sessions"]);
    assert!(verbose.status.success());
    assert!(stderr(&verbose).contains("INFO"), "{}", stderr(&verbose));
    assert_eq!(stdout(&verbose), stdout(&quiet), "tracing stays off stdout");
    let repair = Command::new(env!("CARGO_BIN_EXE_store-repair"))
        .args(["--db", db.to_str().expect("utf-8"), "--dry-run", "-v"])
        .env_remove("RUST_LOG")
        .output()
        .expect("runs");
    assert!(stderr(&repair).contains("checked"), "{}", stderr(&repair));
}

/// Imported text is somebody else's bytes: `ESC [2J` clears a screen, OSC 52 writes the
/// clipboard. What a person reads (show, sessions, errors, traces) shows them escaped.
#[test]
fn terminal_control_sequences_in_imported_text_never_reach_the_terminal_raw() {
    let (dir, db) = temp();
    let body = dir.path().join("hostile.json");
    std::fs::write(
        &body,
        r#"{"messages": [
            {"role": "user", "content": "clear\u001b[2J and copy \u001b]52;c;cm0gLXJmIH4=\u0007 then\rhide \u009b31m"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "evil\u001b[8m", "name": "bash\u001b[2J", "input": {"cmd": "\u001b[31m"}}]}
        ]}"#,
    )
    .expect("write");
    let id = import(&db, "auto", &body);
    let raw = |text: &str| {
        text.chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t')
    };
    let shown = ok(&db, &["show", &id, "--full"]);
    assert!(!raw(&shown), "{shown:?}");
    assert!(shown.contains("clear\\x1b[2J"), "{shown}");
    assert!(shown.contains("\\x1b]52;c;cm0gLXJmIH4=\\x07"), "{shown}");
    assert!(shown.contains("then\\rhide \\x9b31m"), "{shown}");
    assert!(!raw(&ok(&db, &["sessions"])));
    // A session id from elsewhere, in the table and in errors.
    {
        let conn = rusqlite::Connection::open(&db).expect("open raw");
        crate::broken_db::Raw::new(&conn, "odd\u{1b}[2J-id").msg(
            "user",
            false,
            &[crate::broken_db::P::Text("hi")],
        );
    }
    let table = ok(&db, &["sessions"]);
    assert!(
        !raw(&table) && table.contains("odd\\x1b[2J-id"),
        "{table:?}"
    );
    let err = fails(&db, &["show", "nope\u{1b}]52;c;eA==\u{7}"]);
    assert!(!raw(&err), "{err:?}");
    let traced = session_store(&db, &["-vv", "show", "odd\u{1b}[2J-id"]);
    assert!(traced.status.success(), "{}", stderr(&traced));
    assert!(!raw(&stderr(&traced)) && !raw(&stdout(&traced)));
    // Scripts get JSON, where serde escapes them as \u001b.
    assert!(!raw(&ok(&db, &["sessions", "--json"])));
}

/// "1 turns", "1 stay visible": counts of one read as one.
#[test]
fn counts_of_one_are_singular() {
    let (dir, db) = temp();
    let body = dir.path().join("two-turns.json");
    std::fs::write(
        &body,
        r#"{"messages": [
            {"role": "user", "content": "one"}, {"role": "assistant", "content": "a"},
            {"role": "user", "content": "two"}, {"role": "assistant", "content": "b"}
        ]}"#,
    )
    .expect("write");
    let id = import(&db, "auto", &body);
    let out = ok(
        &db,
        &[
            "compact",
            &id,
            "--min-keep-tail",
            "1",
            "--summary",
            "the first turn",
        ],
    );
    assert!(
        out.contains(
            ": 2 messages newly compacted, 2 messages stay visible after summary 1 of the session"
        ),
        "{out}"
    );
    let out = ok(
        &db,
        &["compact", &id, "--min-keep-tail", "1", "--summary", "x"],
    );
    assert!(out.starts_with("nothing to compact"), "{out}");
    let single = import(&db, "auto", &fixture(PARALLEL));
    let shown = ok(&db, &["show", &single]);
    assert!(shown.contains("4 messages, 1 turn\n"), "{shown}");
    let table = ok(&db, &["sessions"]);
    assert!(
        table.ends_with("2 sessions · all healthy · 0 pending calls\n"),
        "{table}"
    );
}

#[test]
fn an_empty_database_lists_no_sessions() {
    let (_dir, db) = temp();
    drop(session_store::Store::open(&db).expect("create"));
    assert_eq!(ok(&db, &["sessions"]), "no sessions\n");
    assert_eq!(ok(&db, &["sessions", "--json"]), "[]\n");
}

/// The README's main job, `cargo run --example demo | head -3`: once the reader goes away
/// the demo stops quietly with status 0 (it panicked on the broken pipe).
#[test]
fn the_demo_stops_quietly_when_its_reader_goes_away() {
    use std::process::Stdio;
    // Beside this test binary (target/<profile>/deps/) lies target/<profile>/examples/.
    let exe = std::env::current_exe().expect("test binary path");
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    let demo = profile
        .join("examples")
        .join(format!("demo{}", std::env::consts::EXE_SUFFIX));
    if !demo.exists() {
        // `cargo test --test tests` builds no examples; build this one (dependencies are
        // already compiled).
        let status = Command::new(env!("CARGO"))
            .args(["build", "--example", "demo"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("cargo runs");
        assert!(status.success());
    }
    let (dir, _db) = temp();
    let mut child = Command::new(&demo)
        .arg(dir.path().join("demo.db"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("demo starts");
    // Close the read end before the demo has written its first line.
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("demo ends");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stderr(&output), "");
}

/// Rows written by other code that the store cannot read (a role outside the contract, a
/// timestamp that is not one) make their own session `unreadable_row`; the listing still
/// shows every other session, and exits 0.
#[test]
fn an_unreadable_session_does_not_hide_the_others() {
    use crate::broken_db::{Raw, P};
    let (_dir, db) = temp();
    let healthy = import(&db, "anthropic", &fixture(PARALLEL));
    {
        let conn = rusqlite::Connection::open(&db).expect("open raw");
        // Other code's schema may lack the store's CHECK constraints.
        conn.pragma_update(None, "ignore_check_constraints", true)
            .expect("pragma");
        Raw::new(&conn, "robot-role").msg("robot", false, &[P::Text("beep")]);
        Raw::new(&conn, "bad-time").msg("user", false, &[P::Text("hi")]);
        conn.execute(
            "UPDATE sessions SET created_at = 'last tuesday' WHERE id = 'bad-time'",
            [],
        )
        .expect("update");
    }
    let list = listing(&db);
    assert_eq!(list.len(), 3, "{list:?}");
    assert_eq!(entry(&list, &healthy)["health"], "ok");
    for id in ["robot-role", "bad-time"] {
        assert_eq!(entry(&list, id)["health"], "unreadable", "{id}: {list:?}");
        assert_eq!(
            entry(&list, id)["rules"],
            serde_json::json!(["unreadable_row"])
        );
    }
    assert_eq!(
        entry(&list, "bad-time")["created_at"],
        serde_json::Value::Null
    );
    let table = ok(&db, &["sessions"]);
    assert!(table.contains("3 sessions · 2 broken"), "{table}");
    let row = table
        .lines()
        .find(|l| l.starts_with("bad-time "))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(
        row.contains(" ? ") && row.contains("unreadable_row"),
        "{row}"
    );
}
