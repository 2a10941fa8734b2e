//! A bundle (`import --format bundle`) is text anyone can edit: a row the store could not
//! read back (a timestamp that is not one) is refused at its line like a row the database
//! refuses, and a refusal says what the database objected to. Nothing of a refused bundle is
//! written, on either engine and through the CLI.

use session_store::{Error, NewMessage, Part, SessionId, Store};

use crate::backends::backends;
use crate::util::{session_store, session_store_ok};

/// A small session with a call and its answer: a bundle with a sessions row, messages and
/// parts.
fn session(store: &Store) -> SessionId {
    let session = store.create_session().expect("session");
    store
        .append_batch(
            &session,
            vec![
                NewMessage::user("list the files"),
                NewMessage::assistant(vec![Part::tool_use(
                    "call_1",
                    "ls",
                    serde_json::json!({"path": "."}),
                )]),
                NewMessage::tool(vec![Part::tool_result("call_1", "a.txt")]),
                NewMessage::assistant(vec![Part::text("one file")]),
            ],
        )
        .expect("append");
    session
}

/// The bundle's lines with line `at` (from 1) edited by `edit`.
fn edited(bundle: &str, at: usize, edit: impl Fn(&str) -> String) -> String {
    bundle
        .lines()
        .enumerate()
        .map(|(i, l)| if i + 1 == at { edit(l) } else { l.to_owned() })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The line (from 1) of the `nth` row of `table`.
fn line_of(bundle: &str, table: &str, nth: usize) -> usize {
    let needle = format!("\"table\":\"{table}\"");
    bundle
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(&needle))
        .nth(nth)
        .map(|(i, _)| i + 1)
        .expect("row")
}

/// Replaces the value of `column` (a string) on a row line.
fn set_text(line: &str, column: &str, value: &str) -> String {
    let mut row: serde_json::Value = serde_json::from_str(line).expect("row");
    row["row"][column] = serde_json::Value::String(value.to_owned());
    row.to_string()
}

#[test]
fn a_bundle_row_no_command_could_read_is_refused_at_its_line() {
    for backend in backends() {
        let original = session(&backend.store);
        let bundle = backend.store.export_bundle(&original).expect("bundle");
        let sessions_line = line_of(&bundle, "sessions", 0);
        let cases = [
            (sessions_line, "created_at", "yesterday"),
            (sessions_line, "updated_at", "never"),
            (
                line_of(&bundle, "messages", 0),
                "created_at",
                "2025-13-45T99:00:00Z",
            ),
            (line_of(&bundle, "messages", 3), "created_at", ""),
        ];
        for (line, column, value) in cases {
            let text = edited(&bundle, line, |l| set_text(l, column, value));
            let before = backend.dump();
            match backend.store.import_bundle(text.as_bytes()) {
                Err(Error::Bundle { line: at, detail }) => {
                    assert_eq!(at, line, "{}: {column}={value:?}: {detail}", backend.name);
                    assert!(detail.contains(column), "{}: {detail}", backend.name);
                }
                other => panic!(
                    "{}: {column}={value:?} not refused: {other:?}",
                    backend.name
                ),
            }
            assert_eq!(
                backend.dump(),
                before,
                "{}: something was written",
                backend.name
            );
        }
    }
}

#[test]
fn a_row_the_database_refuses_is_refused_with_the_databases_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("s.db");
    let store = Store::open(&db).expect("open");
    let original = session(&store);
    let bundle = store.export_bundle(&original).expect("bundle");
    drop(store);
    let second_part = line_of(&bundle, "parts", 1);
    let first_part_row: serde_json::Value =
        serde_json::from_str(bundle.lines().nth(second_part - 2).expect("line")).expect("row");
    let cases: Vec<(String, usize, &str)> = vec![
        (
            // A second part at the first part's place.
            edited(&bundle, second_part, |l| {
                let mut row: serde_json::Value = serde_json::from_str(l).expect("row");
                row["row"]["message_id"] = first_part_row["row"]["message_id"].clone();
                row["row"]["ordinal"] = first_part_row["row"]["ordinal"].clone();
                row.to_string()
            }),
            second_part,
            "UNIQUE",
        ),
        (
            edited(&bundle, line_of(&bundle, "messages", 1), |l| {
                set_text(l, "role", "wizard")
            }),
            line_of(&bundle, "messages", 1),
            "CHECK",
        ),
        (
            edited(&bundle, line_of(&bundle, "messages", 2), |l| {
                l.replace("\"compacted\":0", "\"compacted\":2")
            }),
            line_of(&bundle, "messages", 2),
            "compacted",
        ),
    ];
    for (text, line, reason) in cases {
        let file = dir.path().join("edited.jsonl");
        std::fs::write(&file, &text).expect("write");
        let before = crate::util::dump(&db);
        let out = session_store(
            &db,
            &[
                "import",
                "--format",
                "bundle",
                file.to_str().expect("utf-8"),
            ],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(out.stdout.is_empty());
        assert!(stderr.contains(&format!("line {line}:")), "{stderr}");
        assert!(
            stderr.contains(reason),
            "the database's reason is missing: {stderr}"
        );
        assert_eq!(crate::util::dump(&db), before, "a refused bundle wrote");
    }
    // The unedited bundle still restores.
    let file = dir.path().join("plain.jsonl");
    std::fs::write(&file, &bundle).expect("write");
    let id = session_store_ok(
        &db,
        &[
            "import",
            "--format",
            "bundle",
            file.to_str().expect("utf-8"),
        ],
    );
    assert_eq!(id.trim().len(), original.as_str().len());
}

/// Blank lines hold no row, as in the JSON Lines logs the importers read: a bundle with a
/// trailing blank line (`echo >>`, an editor), blank or whitespace-only lines between rows,
/// or CRLF line ends restores the same session; a bundle missing rows is still refused at
/// the line after its last.
#[test]
fn blank_lines_in_a_bundle_hold_no_row() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("s.db");
    let store = Store::open(&db).expect("open");
    let original = session(&store);
    let bundle = store.export_bundle(&original).expect("bundle");
    let second = |text: &str| {
        let id = store.import_bundle(text.as_bytes()).expect("restored");
        let again = store.export_bundle(&id).expect("bundle");
        again.replace(id.as_str(), original.as_str())
    };
    let lines: Vec<&str> = bundle.lines().collect();
    let cases = [
        format!("{bundle}\n"),
        format!("{bundle}\n\n  \n"),
        lines.join("\n\n"),
        lines.join("\n \t \n"),
        lines.join("\r\n"),
    ];
    for text in cases {
        assert_eq!(second(&text), bundle, "{text:?}");
    }
    let cut = format!("{}\n\n", lines[..lines.len() - 1].join("\n"));
    match store.import_bundle(cut.as_bytes()) {
        Err(Error::Bundle { line, detail }) => {
            assert_eq!(line, lines.len() + 1, "{detail}");
            assert!(detail.contains("promises"), "{detail}");
        }
        other => panic!("a cut bundle restored: {other:?}"),
    }
}

/// A restore is a write like any other: it never stores a session that breaks the contract.
/// A bundle whose result answers no call is refused at the line of the message at fault, and
/// nothing is written.
#[test]
fn a_bundle_of_a_session_that_breaks_the_contract_is_refused_and_nothing_is_written() {
    for backend in backends() {
        let original = session(&backend.store);
        let bundle = backend.store.export_bundle(&original).expect("bundle");
        let result_line = line_of(&bundle, "parts", 2);
        let text = edited(&bundle, result_line, |l| {
            set_text(l, "tool_use_id", "nobody")
        });
        let before = backend.dump();
        match backend.store.import_bundle(text.as_bytes()) {
            Err(Error::Bundle { line, detail }) => {
                assert!(
                    detail.contains("breaks the contract"),
                    "{}: {detail}",
                    backend.name
                );
                assert!(
                    detail.contains("orphan_tool_result") || detail.contains("dangling_tool_use"),
                    "{}: {detail}",
                    backend.name
                );
                let messages: Vec<usize> =
                    (0..4).map(|n| line_of(&bundle, "messages", n)).collect();
                assert!(
                    messages.contains(&line),
                    "{}: line {line} is a message's",
                    backend.name
                );
            }
            other => panic!("{}: a broken bundle restored: {other:?}", backend.name),
        }
        assert_eq!(
            backend.dump(),
            before,
            "{}: something was written",
            backend.name
        );
    }
}
