//! The command-line conventions of the contract's "For people and tools" section, run as
//! processes: `--json` on every command a script reads, progress only on a terminal, shell
//! completions and a man page, `store-repair` naming sessions as `session-store` does,
//! `prune` that asks or needs `--yes`, imports dated by their transcript, notes on stderr for
//! what an import skipped and what an export answered, tables that fit the terminal, a
//! `sessions` that streams, help texts that say what the commands do, and the README's
//! library quick start kept the same as the example that runs.
//!
//! A terminal is given with util-linux `script` (a pseudo-terminal); where it is missing,
//! the terminal half of a test prints a note and the rest still runs.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};
use session_store::{NewMessage, Part, SessionId, Store};
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_session-store");
const REPAIR: &str = env!("CARGO_BIN_EXE_store-repair");

fn command(program: &str, db: Option<&Path>, args: &[&str]) -> Command {
    let mut command = Command::new(program);
    if let Some(db) = db {
        command.arg("--db").arg(db);
    }
    command
        .args(args)
        .env_remove("SESSION_STORE_DB")
        .env_remove("RUST_LOG")
        .env_remove("COLUMNS");
    command
}

fn run(db: &Path, args: &[&str]) -> Output {
    command(BIN, Some(db), args).output().expect("runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn ok(db: &Path, args: &[&str]) -> String {
    let output = run(db, args);
    assert!(
        output.status.success(),
        "{args:?}: {}",
        text(&output.stderr)
    );
    text(&output.stdout)
}

fn json_of(db: &Path, args: &[&str]) -> Value {
    let out = ok(db, args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?} printed no JSON ({e}): {out}"))
}

fn fails(db: &Path, args: &[&str]) -> String {
    let output = run(db, args);
    assert_eq!(output.status.code(), Some(2), "{args:?}: {output:?}");
    text(&output.stderr)
}

/// The file and its write-ahead log: what a refused command must leave as it was.
fn bytes(db: &Path) -> Vec<u8> {
    let mut bytes = std::fs::read(db).expect("db readable");
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    if let Ok(log) = std::fs::read(&wal) {
        bytes.extend(log);
    }
    bytes
}

fn fixture(path: &str) -> PathBuf {
    crate::util::transcripts().join(path)
}

const TOOL_HEAVY: &str = "spotter/tool_heavy.jsonl";
const CODEX: &str =
    "agentcmd/codex/rollout-2025-09-24T19-22-20-01997e76-d124-7592-9cac-2ec05abbca08.jsonl";
const ANTHROPIC: &str = "pydantic-ai/derived/test_multiple_parallel_tool_calls.last_request.json";

/// A database holding the Claude Code log (7 turns) and a session whose call is pending.
fn database() -> (TempDir, PathBuf, String, SessionId) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("sessions.db");
    let log = fixture(TOOL_HEAVY);
    let imported = ok(&db, &["import", log.to_str().expect("utf-8")])
        .trim()
        .to_owned();
    let store = Store::open(&db).expect("open");
    let pending = store.create_session().expect("session");
    store
        .append(&pending, NewMessage::user("read the map"))
        .expect("user");
    store
        .append(
            &pending,
            NewMessage::assistant(vec![Part::tool_use(
                "call_map",
                "read",
                json!({"f": "map"}),
            )]),
        )
        .expect("call");
    drop(store);
    crate::util::settle(&db);
    (dir, db, imported, pending)
}

/// `program args` on a pseudo-terminal (util-linux `script`), `input` typed on it; `None`
/// (with a note) when `script` is not installed.
fn on_terminal(program: &str, args: &[&str], input: &str) -> Option<Output> {
    let line = std::iter::once(program)
        .chain(args.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    let child = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .env_remove("SESSION_STORE_DB")
        .env_remove("RUST_LOG")
        .env_remove("COLUMNS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let Ok(mut child) = child else {
        eprintln!("note: util-linux `script` is not installed; the terminal half is skipped");
        return None;
    };
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input.as_bytes()).expect("type");
    let output = child.wait_with_output().expect("script runs");
    drop(stdin);
    Some(output)
}

#[test]
fn every_command_a_script_reads_takes_json() {
    let (dir, db, imported, pending) = database();
    let log = fixture(TOOL_HEAVY);
    let again = json_of(&db, &["import", "--json", log.to_str().expect("utf-8")]);
    assert_eq!(again["format"], "claude-code");
    assert_eq!(again["messages"], 17);
    assert_eq!(again["session"].as_str().map(str::len), Some(36));
    for field in ["children", "tombstoned", "warnings"] {
        assert!(again[field].is_array(), "{field}: {again}");
    }

    let shown = json_of(&db, &["show", &imported[..8], "--json"]);
    assert_eq!(
        (
            shown["turns"].as_i64(),
            shown["start"].as_i64(),
            shown["end"].as_i64()
        ),
        (Some(7), Some(0), Some(7))
    );
    assert_eq!(shown["messages"].as_array().map(Vec::len), Some(17));
    assert!(shown["next_turn"].is_null());
    let window = json_of(&db, &["show", &imported, "--turns", "2..4", "--json"]);
    assert_eq!(
        (
            window["start"].as_i64(),
            window["end"].as_i64(),
            window["next_turn"].as_i64()
        ),
        (Some(2), Some(4), Some(4))
    );
    assert!(window["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .all(|m| (2..4).contains(&m["turn_index"].as_i64().unwrap_or(-1))));
    let outside = fails(&db, &["show", &imported, "--turns", "9..", "--json"]);
    assert!(outside.contains("no turn in that range"), "{outside}");

    let forked = json_of(&db, &["fork", &imported, "--at-turn", "3", "--json"]);
    assert_eq!(forked["parent"], imported.as_str());
    assert_eq!(forked["at_turn"], 3);
    let fork_id = forked["id"].as_str().expect("id").to_owned();
    let tree = json_of(&db, &["sessions", "--tree", "--json"]);
    let node = tree
        .as_array()
        .expect("array")
        .iter()
        .find(|n| n["id"] == fork_id.as_str())
        .cloned()
        .expect("the fork is in the tree");
    assert_eq!(
        node,
        json!({"id": fork_id.as_str(), "parent": imported.as_str(), "forked_at_turn": 3, "depth": 1})
    );

    let compacted = json_of(
        &db,
        &[
            "compact",
            &imported,
            "--min-keep-tail",
            "2",
            "--summary",
            "so far",
            "--json",
        ],
    );
    assert_eq!(compacted["compacted"], true, "{compacted}");
    assert_eq!(compacted["summary_number"], 1);
    assert!(compacted["newly_compacted"].as_u64().is_some_and(|n| n > 0));
    let nothing = json_of(
        &db,
        &[
            "compact",
            &fork_id,
            "--min-keep-tail",
            "100",
            "--summary",
            "x",
            "--json",
        ],
    );
    assert_eq!(nothing["compacted"], false);
    assert!(nothing["reason"].as_str().is_some_and(|r| !r.is_empty()));

    let cancelled = json_of(&db, &["cancel", pending.as_str(), "--json"]);
    assert_eq!(
        cancelled,
        json!({"session": pending.as_str(), "tombstoned": ["call_map"]})
    );
    let none = json_of(&db, &["cancel", pending.as_str(), "--json"]);
    assert_eq!(none["tombstoned"], json!([]));

    let copy = dir.path().join("copy.db");
    let copied = json_of(
        &db,
        &[
            "copy",
            "--from",
            db.to_str().expect("utf-8"),
            "--to",
            copy.to_str().expect("utf-8"),
            "--session",
            &fork_id,
            "--json",
        ],
    );
    assert_eq!(copied["sessions"], 1);
    assert_eq!(copied["verified"], true);
    assert!(
        copied["rows"]["messages"].as_u64().is_some_and(|n| n > 0),
        "{copied}"
    );

    let deleted = json_of(&db, &["delete", &fork_id, "--json"]);
    assert_eq!(deleted["session"], fork_id.as_str());
    assert!(
        deleted["bytes_before"].as_u64().is_some() && deleted["bytes_after"].as_u64().is_some()
    );
    // The id alone stays what a plain run prints.
    let plain = ok(&db, &["fork", &imported, "--at-turn", "1"]);
    assert_eq!(plain.trim().len(), 36, "{plain}");
}

#[test]
fn prune_asks_on_a_terminal_and_without_one_deletes_only_with_yes() {
    let (_dir, db, imported, _) = database();
    let before = bytes(&db);
    // The imported log dates from February 2026, the other session from now.
    for args in [
        &["prune", "--older-than", "30d"][..],
        &["prune", "--older-than", "30d", "--json"],
        &["prune", "--older-than", "1000w"],
    ] {
        let refused = fails(&db, args);
        assert!(
            refused.contains("--yes") && refused.contains("nothing was deleted"),
            "{refused}"
        );
        assert_eq!(bytes(&db), before, "{args:?} wrote");
    }
    let conflicting = fails(&db, &["prune", "--older-than", "30d", "--yes", "--dry-run"]);
    assert!(conflicting.contains("--dry-run"), "{conflicting}");
    let dry = ok(&db, &["prune", "--older-than", "30d", "--dry-run"]);
    assert!(dry.contains(&format!("would delete {imported}")), "{dry}");

    let args = [
        "--db",
        db.to_str().expect("utf-8"),
        "prune",
        "--older-than",
        "30d",
    ];
    if let Some(no) = on_terminal(BIN, &args, "n\n") {
        let said = text(&no.stdout);
        assert!(
            said.contains(&imported) && said.contains("delete 1 session(s)? [y/N]"),
            "{said}"
        );
        assert!(said.contains("nothing deleted"), "{said}");
        assert_eq!(
            ok(&db, &["sessions", "--json"]).matches("\"id\"").count(),
            2
        );
        let yes = on_terminal(BIN, &args, "y\n").expect("script ran before");
        assert!(
            text(&yes.stdout).contains(&format!("deleted {imported}")),
            "{}",
            text(&yes.stdout)
        );
    } else {
        let deleted = json_of(&db, &["prune", "--older-than", "30d", "--yes", "--json"]);
        assert_eq!(deleted["deleted"], 1);
    }
    let left = json_of(&db, &["sessions", "--json"]);
    assert_eq!(left.as_array().map(Vec::len), Some(1), "{left}");
    assert!(!left.to_string().contains(&imported));
}

#[test]
fn imported_sessions_are_dated_by_their_transcript() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("sessions.db");
    // (file, first message time, last message time); None: the source carries no times.
    let cases = [
        (
            TOOL_HEAVY,
            Some("2026-02-10T22:57:54.684000Z"),
            Some("2026-02-10T22:59:46"),
        ),
        (CODEX, Some("2025-09-25T01:"), Some("2025-09-25T0")),
        (ANTHROPIC, None, None),
    ];
    for (file, first, last) in cases {
        let started = session_store::clock().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        let id = ok(&db, &["import", fixture(file).to_str().expect("utf-8")])
            .trim()
            .to_owned();
        let listed = json_of(&db, &["sessions", "--json"]);
        let entry = listed
            .as_array()
            .expect("array")
            .iter()
            .find(|s| s["id"] == id.as_str())
            .cloned()
            .expect("listed");
        let created = entry["created_at"].as_str().expect("created_at").to_owned();
        let updated = entry["updated_at"].as_str().expect("updated_at").to_owned();
        match (first, last) {
            (Some(first), Some(last)) => {
                assert!(created.starts_with(first), "{file}: created {created}");
                assert!(updated.starts_with(last), "{file}: updated {updated}");
                assert!(created <= updated);
                let shown = json_of(&db, &["show", &id, "--json"]);
                let times: Vec<&str> = shown["messages"]
                    .as_array()
                    .expect("messages")
                    .iter()
                    .filter_map(|m| m["created_at"].as_str())
                    .collect();
                let earliest = times.iter().min().expect("a message");
                assert!(
                    created.starts_with(&earliest[..19]),
                    "{created} vs {earliest}"
                );
            }
            _ => assert!(
                created >= started,
                "{file}: no source time, dated at import: {created}"
            ),
        }
    }
    // Old logs are old to prune right after their import; the undated body is not.
    let dry = ok(
        &db,
        &["prune", "--older-than", "30d", "--dry-run", "--json"],
    );
    let dry: Value = serde_json::from_str(&dry).expect("json");
    assert_eq!(dry["sessions"].as_array().map(Vec::len), Some(2), "{dry}");
}

#[test]
fn import_and_export_say_on_stderr_what_they_skipped_and_what_they_answered() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("sessions.db");
    let log = dir.path().join("resumed.jsonl");
    let user = |uuid: &str, text: &str| json!({"type": "user", "uuid": uuid, "isSidechain": false, "timestamp": "2025-01-02T03:04:05Z", "message": {"role": "user", "content": text}});
    let lines = [
        user("u1", "hello"),
        json!({"type": "progress", "data": {}}),
        user("u1", "hello"),
        json!({"type": "file-history-snapshot", "snapshot": {}}),
        json!({"type": "progress", "data": {}}),
    ];
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&log, body).expect("write log");
    let output = run(&db, &["import", log.to_str().expect("utf-8")]);
    assert!(output.status.success(), "{output:?}");
    let said = text(&output.stderr);
    assert!(
        said.contains("skipped 1 line(s) that repeat an earlier message"),
        "{said}"
    );
    assert!(
        said.contains("3 line(s) that hold no message (file-history-snapshot: 1, progress: 2)"),
        "{said}"
    );
    let quiet = run(
        &db,
        &["import", fixture(ANTHROPIC).to_str().expect("utf-8")],
    );
    assert_eq!(text(&quiet.stderr), "", "nothing skipped, nothing said");

    let (_dir, db, imported, pending) = database();
    for format in ["anthropic", "openai", "responses", "gemini"] {
        let output = run(&db, &["export", pending.as_str(), "--format", format]);
        assert!(output.status.success(), "{output:?}");
        let said = text(&output.stderr);
        assert!(said.contains("1 tool call(s) have no result; the body answers them with tombstones (nothing stored)"), "{format}: {said}");
        assert!(said.contains("call_map"), "{said}");
        serde_json::from_slice::<Value>(&output.stdout).expect("stdout is the body alone");
        let clean = run(&db, &["export", &imported, "--format", format]);
        assert_eq!(
            text(&clean.stderr),
            "",
            "{format}: nothing pending, nothing said"
        );
    }
}

#[test]
fn progress_shows_on_a_terminal_and_stays_quiet_when_piped() {
    let (_dir, db, _, _) = database();
    let log = fixture(TOOL_HEAVY);
    let path = log.to_str().expect("utf-8");
    for args in [&["import", path][..], &["search", "phoenix"], &["sessions"]] {
        let output = run(&db, args);
        assert!(output.status.success(), "{args:?}");
        let said = text(&output.stderr);
        assert!(
            !said.contains("importing") && !said.contains('\u{1b}') && !said.contains('\r'),
            "{args:?}: {said:?}"
        );
    }
    let db_arg = db.to_str().expect("utf-8");
    if let Some(output) = on_terminal(BIN, &["--db", db_arg, "import", path], "") {
        let seen = text(&output.stdout);
        assert!(
            seen.contains("importing"),
            "a terminal sees the bar: {seen:?}"
        );
        let id = seen
            .lines()
            .filter_map(|l| l.rsplit('\r').next())
            .find(|l| l.trim().len() == 36);
        assert!(id.is_some(), "the id is still printed: {seen:?}");
    }
}

#[test]
fn completions_for_each_shell_and_a_man_page() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("none.db");
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = ok(&db, &["completions", shell]);
        for word in [
            "session-store",
            "prune",
            "mcp",
            "allow-writes",
            "older-than",
        ] {
            assert!(script.contains(word), "{shell}: {word}");
        }
    }
    assert!(fails(&db, &["completions", "tcsh"]).contains("tcsh"));
    let man = ok(&db, &["man"]);
    assert!(
        man.contains(".TH session-store"),
        "{}",
        &man[..200.min(man.len())]
    );
    for word in ["sessions", "prune", "mcp", "completions"] {
        assert!(man.contains(word), "{word}");
    }
    assert!(!db.exists(), "neither command opens a database");
}

#[test]
fn store_repair_names_sessions_by_prefix_and_reads_session_store_db() {
    let (_dir, db, imported, pending) = database();
    let store = Store::open(&db).expect("open");
    for twin in ["abcdefgh-twin-1", "abcdefgh-twin-2"] {
        store
            .create_session_with_id(&SessionId::new(twin))
            .expect("twin");
    }
    drop(store);
    crate::util::settle(&db);
    let checked = |output: &Output| -> Value {
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        serde_json::from_slice(&output.stdout).expect("json")
    };
    let by_prefix = command(
        REPAIR,
        Some(&db),
        &["--dry-run", "--json", "--session", &imported[..8]],
    )
    .output()
    .expect("runs");
    assert_eq!(checked(&by_prefix)["sessions_checked"], 1);
    let two = command(
        REPAIR,
        Some(&db),
        &[
            "--dry-run",
            "--json",
            "--session",
            &imported[..10],
            "--session",
            &pending.as_str()[..9],
        ],
    )
    .output()
    .expect("runs");
    assert_eq!(checked(&two)["sessions_checked"], 2);
    for (name, why) in [
        ("abcdefgh", "ambiguous"),
        ("zzzzzzzz", "unknown session"),
        ("abc", "unknown session"),
    ] {
        let refused = command(REPAIR, Some(&db), &["--dry-run", "--session", name])
            .output()
            .expect("runs");
        assert_eq!(refused.status.code(), Some(2), "{name}");
        assert!(
            text(&refused.stderr).contains(why),
            "{name}: {}",
            text(&refused.stderr)
        );
    }
    let from_env = command(REPAIR, None, &["--dry-run", "--json"])
        .env("SESSION_STORE_DB", &db)
        .output()
        .expect("runs");
    assert_eq!(checked(&from_env)["sessions_checked"], 4);
    let neither = command(REPAIR, None, &["--dry-run"])
        .output()
        .expect("runs");
    assert_eq!(neither.status.code(), Some(2));
    assert!(
        text(&neither.stderr).contains("--db"),
        "{}",
        text(&neither.stderr)
    );
    // session-store takes the same names.
    let env_run = command(BIN, None, &["show", "--json", &imported[..8]])
        .env("SESSION_STORE_DB", &db)
        .output()
        .expect("runs");
    assert!(env_run.status.success());
}

#[test]
fn the_sessions_table_fits_the_terminal_and_piped_output_keeps_every_column() {
    let (_dir, db, imported, pending) = database();
    let store = Store::open(&db).expect("open");
    let titled = store.create_session().expect("session");
    drop(store);
    rusqlite::Connection::open(&db)
        .expect("raw")
        .execute(
            "UPDATE sessions SET title = ?2 WHERE id = ?1",
            [
                titled.as_str(),
                "a title that goes on and on about what the session did, far too long",
            ],
        )
        .expect("title");
    let piped = ok(&db, &["sessions"]);
    let header = piped.lines().next().expect("header");
    for column in ["ID", "CREATED (UTC)", "COMPACTED", "TITLE"] {
        assert!(header.contains(column), "{header}");
    }
    assert!(piped.contains(&imported) && piped.contains(pending.as_str()));
    assert!(
        piped.contains("a title that goes on and on about what the sess…"),
        "{piped}"
    );
    for columns in [200, 120, 100, 80, 70] {
        let table = command(BIN, Some(&db), &["sessions"])
            .env("COLUMNS", columns.to_string())
            .output()
            .expect("runs");
        let table = text(&table.stdout);
        for line in table.lines() {
            assert!(
                line.chars().count() <= columns,
                "{columns}: {line:?} is {} wide",
                line.chars().count()
            );
        }
        let rows: Vec<&str> = table.lines().skip(1).take(3).collect();
        for row in &rows {
            let shown = row.split_whitespace().next().expect("an id");
            assert!(shown.len() >= 8, "{row}");
            // Each shown id names its session for every command.
            let named = json_of(&db, &["show", shown, "--json"]);
            assert!(named["session"]
                .as_str()
                .is_some_and(|id| id.starts_with(shown)));
        }
        assert!(
            table.ends_with("3 sessions · all healthy · 1 pending call\n"),
            "{table}"
        );
    }
    let narrow = text(
        &command(BIN, Some(&db), &["sessions"])
            .env("COLUMNS", "80")
            .output()
            .expect("runs")
            .stdout,
    );
    assert!(
        !narrow.contains("CREATED") && !narrow.contains("COMPACTED"),
        "{narrow}"
    );
    assert!(
        narrow
            .lines()
            .next()
            .is_some_and(|h| h.contains("TITLE") && h.contains("HEALTH")),
        "{narrow}"
    );
}

#[test]
fn sessions_streams_its_rows_and_its_json_is_the_same_array() {
    let (_dir, db, _, _) = database();
    let store = Store::open(&db).expect("open");
    for _ in 0..40 {
        store.create_session().expect("session");
    }
    drop(store);
    let listed = ok(&db, &["sessions", "--json"]);
    let parsed: Value = serde_json::from_str(&listed).expect("json");
    assert_eq!(parsed.as_array().map(Vec::len), Some(42));
    assert_eq!(
        listed,
        format!(
            "{}\n",
            serde_json::to_string_pretty(&parsed).expect("pretty")
        )
    );
    // A reader that goes away after one line: stopped quietly, exit 0.
    for args in [&["sessions"][..], &["sessions", "--json"]] {
        let mut child = command(BIN, Some(&db), args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut stdout = child.stdout.take().expect("stdout");
        let mut first = [0u8; 8];
        std::io::Read::read_exact(&mut stdout, &mut first).expect("a first line");
        drop(stdout);
        let output = child.wait_with_output().expect("exits");
        assert_eq!(
            output.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&output.stderr)
        );
    }
}

#[test]
fn help_texts_say_what_the_commands_do() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("none.db");
    let help = ok(&db, &["--help"]);
    assert!(help.contains("postgres://"), "--db takes URLs: {help}");
    let copy = ok(&db, &["copy", "--help"]);
    assert!(!copy.contains("--db"), "copy takes --from and --to: {copy}");
    let prune = ok(&db, &["prune", "--help"]);
    assert!(
        prune.contains("--yes") && prune.contains("terminal"),
        "{prune}"
    );
    let mcp = ok(&db, &["mcp", "--help"]);
    for word in [
        "list_sessions",
        "search",
        "show",
        "export",
        "fork",
        "--allow-writes",
        "Read-only",
    ] {
        assert!(mcp.contains(word), "{word}: {mcp}");
    }
    for command in [
        "show", "import", "fork", "cancel", "delete", "compact", "copy",
    ] {
        assert!(
            ok(&db, &[command, "--help"]).contains("--json"),
            "{command}"
        );
    }
    let repair = command(REPAIR, None, &["--help"]).output().expect("runs");
    let repair = text(&repair.stdout);
    assert!(
        repair.contains("SESSION_STORE_DB") && repair.contains("prefix"),
        "{repair}"
    );
}

#[test]
fn the_readme_quick_start_is_the_example_that_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README");
    let example = std::fs::read_to_string(root.join("crates/session-store/examples/quickstart.rs"))
        .expect("example");
    assert!(
        readme.contains(&format!("```rust\n{example}```\n")),
        "README's library section quotes the example whole"
    );
    assert!(readme.contains("cargo run -p session-store --example quickstart"));
    assert!(
        readme.contains("session-store = { path = "),
        "a dependency line"
    );
    for needed in [
        "fn main()",
        "Part::tool_use(",
        "Part::tool_result(",
        "export_now(",
    ] {
        assert!(example.contains(needed), "{needed}");
    }
}
