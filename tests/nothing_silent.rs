//! Nothing silently wrong: input the store cannot take as it is gets a word, never a quiet
//! change. A token count outside what the store keeps exactly is refused with its JSON path
//! (never clamped, never NULL); a search query's repeated words count once and too many
//! distinct words are a typed error (never a cut query, never minutes of CPU); what `search`
//! prints is escaped like `show`; the CLI's small errors name what was wrong.

use std::path::Path;
use std::process::{Command, Output};

use crate::util::session_store;
use serde_json::{json, Value};
use session_store::import::{import as import_transcript, Format, ImportError, Location};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The counts the issue found changed without a word, as JSON text (the parse layer keeps
/// numbers digit for digit), with why each is refused.
const BAD_COUNTS: [(&str, &str); 9] = [
    ("18446744073709551616", "above the largest"), // 2^64
    ("9223372036854775808", "above the largest"),  // i64::MAX + 1
    ("18446744073709551615", "above the largest"), // u64::MAX
    ("-5", "negative"),
    ("1.5", "not a whole number"),
    ("1e19", "not a whole number"),
    ("1e400", "not a whole number"),
    ("\"12\"", "the string"),
    ("true", "must be a number"),
];

/// One transcript per importer that reads usage, with `COUNT` where a count goes, and the
/// JSON path the refusal must name.
fn transcripts() -> Vec<(Format, &'static str, String, &'static str)> {
    let anthropic = r#"{"messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello", "usage": {"input_tokens": 3, "output_tokens": COUNT}}]}"#;
    let chat = r#"{"messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello", "usage": {"prompt_tokens": COUNT, "completion_tokens": 2}}]}"#;
    let cached = r#"{"messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello", "usage": {"input_tokens": 9223372036854775807, "output_tokens": 2,
            "input_tokens_details": {"cached_tokens": COUNT}}}]}"#;
    let claude_code = concat!(
        r#"{"type": "user", "uuid": "u1", "sessionId": "s", "message": {"role": "user", "content": "hi"}}"#,
        "\n",
        r#"{"type": "assistant", "uuid": "a1", "sessionId": "s", "message": {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": "hello"}], "usage": {"input_tokens": 1, "cache_read_input_tokens": COUNT}}}"#,
        "\n"
    );
    vec![
        (
            Format::Anthropic,
            "anthropic",
            anthropic.to_owned(),
            "messages[1].usage.output_tokens",
        ),
        (
            Format::OpenAi,
            "openai",
            chat.to_owned(),
            "messages[1].usage.prompt_tokens",
        ),
        (
            Format::OpenAi,
            "openai",
            cached.to_owned(),
            "messages[1].usage.input_tokens_details.cached_tokens",
        ),
        (
            Format::ClaudeCode,
            "claude-code",
            claude_code.to_owned(),
            "message.usage.cache_read_input_tokens",
        ),
    ]
}

fn refusal_path(error: &ImportError) -> Option<&Location> {
    match error {
        ImportError::Malformed { at, .. } => Some(at),
        _ => None,
    }
}

#[test]
fn token_counts_the_store_cannot_keep_exactly_are_refused_with_their_path() {
    for (format, _, template, path) in transcripts() {
        for (count, why) in BAD_COUNTS {
            let body = template.replace("COUNT", count);
            let error = import_transcript(format, &body)
                .err()
                .unwrap_or_else(|| panic!("{format:?} took {count} at {path}"));
            let at = refusal_path(&error).unwrap_or_else(|| panic!("{error:?}"));
            assert_eq!(at.path, path, "{format:?} {count}: {error}");
            assert!(
                error.to_string().contains(why),
                "{format:?} {count}: {error}"
            );
        }
        // What can be kept is kept exactly: 0 and the largest count.
        for count in ["0", "9223372036854775807", "null"] {
            let body = template.replace("COUNT", count);
            let imported = import_transcript(format, &body)
                .unwrap_or_else(|e| panic!("{format:?} refused {count}: {e}"));
            let usage = imported
                .messages
                .iter()
                .find_map(|m| m.usage.clone())
                .expect("usage kept");
            let kept = usage.counts().into_iter().filter_map(|(_, n)| n);
            if count == "9223372036854775807" && !path.ends_with("cached_tokens") {
                assert!(kept.clone().any(|n| n == i64::MAX as u64), "{usage:?}");
            }
            if count == "null" {
                assert!(kept.count() >= 1, "the other counts stay: {usage:?}");
            }
        }
    }
}

#[test]
fn cached_tokens_above_the_prompt_that_includes_them_are_refused_not_clamped() {
    for (prompt, cached) in [(5, 6), (0, 1), (100, 1000)] {
        let body = json!({"messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "ok", "usage": {"prompt_tokens": prompt,
                "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": cached}}}]})
        .to_string();
        let error = import_transcript(Format::OpenAi, &body).expect_err("refused");
        let at = refusal_path(&error).expect("malformed");
        assert_eq!(
            at.path,
            "messages[1].usage.prompt_tokens_details.cached_tokens"
        );
    }
}

#[test]
fn a_refused_token_count_writes_nothing_through_the_cli() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (_, name, template, path) in transcripts() {
        for (count, _) in BAD_COUNTS.iter().take(4) {
            let db = dir.path().join(format!("{name}.db"));
            let file = dir.path().join(format!("{name}.json"));
            std::fs::write(&file, template.replace("COUNT", count)).expect("write");
            let file = file.to_str().expect("utf-8");
            let output = session_store(&db, &["import", "--format", name, file]);
            assert_eq!(output.status.code(), Some(2), "{name} {count}");
            let said = text(&output.stderr);
            assert!(said.contains(path), "{name} {count}: {said}");
            let listed = session_store(&db, &["sessions", "--json"]);
            if listed.status.success() {
                let rows: Value = serde_json::from_slice(&listed.stdout).expect("json");
                assert_eq!(rows, json!([]), "{name} {count} wrote a session");
            }
        }
    }
}

#[test]
fn search_output_shows_control_characters_escaped_like_show() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("s.db");
    let body = dir.path().join("hostile.json");
    std::fs::write(
        &body,
        r#"{"messages": [
            {"role": "user", "content": "clear\u001b[2J screen and copy \u001b]52;c;cm0gLXJmIH4=\u0007 clipboard, evil\u202etxt.exe reorder, \u009b31m csi"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "bash\u001b[2Jtool", "input": {"cmd": "wipe\u001b[31m red"}}]}
        ]}"#,
    )
    .expect("write");
    let imported = session_store(&db, &["import", body.to_str().expect("utf-8")]);
    assert!(imported.status.success(), "{}", text(&imported.stderr));
    let raw = |out: &str| {
        out.chars().any(|c| {
            (c.is_control() && c != '\n' && c != '\t') || ('\u{202a}'..='\u{202e}').contains(&c)
        })
    };
    for (query, shown) in [
        ("screen", "clear\\x1b[2J"),
        ("clipboard", "\\x1b]52;c;cm0gLXJmIH4=\\x07"),
        ("reorder", "evil\\u{202e}txt"),
        ("csi", "\\x9b31m"),
        ("bash", "\\x1b[2Jtool"),
        ("red", "wipe\\u001b[31m"),
    ] {
        let output = session_store(&db, &["search", query]);
        assert!(output.status.success(), "{}", text(&output.stderr));
        let out = text(&output.stdout);
        assert!(!raw(&out), "{query}: {out:?}");
        assert!(out.contains(shown), "{query}: {out}");
    }
}

#[test]
fn a_query_with_too_many_distinct_words_is_refused_by_the_cli_with_the_cap() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("s.db");
    drop(session_store::Store::open(&db).expect("create"));
    let words: Vec<String> = (0..=session_store::MAX_SEARCH_TERMS)
        .map(|n| format!("w{n}"))
        .collect();
    // One argument of 128 KB of one repeated word is one term.
    let repeated = "deploy ".repeat(128 * 1024 / 7);
    for (query, refused) in [
        (words.join(" "), true),
        (words[1..].join(" "), false),
        (repeated, false),
        (
            format!("{} {}", words[1..].join(" "), words[1..].join(" ")),
            false,
        ),
    ] {
        let output = session_store(&db, &["search", &query]);
        if refused {
            assert_eq!(output.status.code(), Some(2));
            let said = text(&output.stderr);
            assert!(said.contains("more than 64 distinct terms"), "{said}");
        } else {
            assert!(output.status.success(), "{}", text(&output.stderr));
        }
    }
}

/// Runs a binary under `ulimit -f` (in 512-byte blocks) with SIGXFSZ left at its default,
/// which kills the process unless the binary catches it.
fn under_file_size_limit(blocks: u32, binary: &str, args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -f {blocks}; exec \"$@\""))
        .arg("limited")
        .arg(binary)
        .args(args)
        .env_remove("SESSION_STORE_DB")
        .env_remove("RUST_LOG")
        .output()
        .expect("sh runs")
}

#[test]
fn a_write_past_the_file_size_limit_is_an_error_that_says_so_not_a_signal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let big = dir.path().join("big.json");
    let long = "x".repeat(100_000);
    let messages: Vec<Value> = (0..20)
        .flat_map(|_| {
            [
                json!({"role": "user", "content": long}),
                json!({"role": "assistant", "content": long}),
            ]
        })
        .collect();
    std::fs::write(&big, json!({ "messages": messages }).to_string()).expect("write");
    let big = big.to_str().expect("utf-8");
    // A database with one small session, to copy and to import into.
    let small = dir.path().join("small.db");
    let small_json = dir.path().join("small.json");
    std::fs::write(
        &small_json,
        json!({"messages": [{"role": "user", "content": long}]}).to_string(),
    )
    .expect("write");
    let imported = session_store(&small, &["import", small_json.to_str().expect("utf-8")]);
    assert!(imported.status.success(), "{}", text_of(&imported));
    let small = small.to_str().expect("utf-8");
    let store = env!("CARGO_BIN_EXE_session-store");
    let copy_to = dir.path().join("copy.db");
    for (blocks, args) in [
        (
            400,
            vec!["--db", small, "import", "--format", "anthropic", big],
        ),
        (
            400,
            vec![
                "--db",
                dir.path().join("new.db").to_str().expect("utf-8"),
                "import",
                big,
            ],
        ),
        (
            100,
            vec![
                "copy",
                "--from",
                small,
                "--to",
                copy_to.to_str().expect("utf-8"),
            ],
        ),
    ] {
        let output = under_file_size_limit(blocks, store, &args);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            text_of(&output)
        );
        assert!(
            text(&output.stderr).contains("file size limit"),
            "{args:?}: {}",
            text_of(&output)
        );
    }
    // What was committed before stays readable and whole.
    let listed = session_store(Path::new(small), &["sessions", "--json"]);
    let rows: Value = serde_json::from_slice(&listed.stdout).expect("json");
    assert_eq!(rows.as_array().map(Vec::len), Some(1), "{rows}");
}

fn text_of(output: &Output) -> String {
    format!("{}{}", text(&output.stdout), text(&output.stderr))
}

#[test]
fn a_byte_order_mark_is_named_not_called_invalid_json() {
    let bom = "\u{feff}";
    let bodies = [
        (Format::Anthropic, "anthropic", r#"{"messages": [{"role": "user", "content": "hi"}]}"#),
        (Format::OpenAi, "openai", r#"{"messages": [{"role": "user", "content": "hi"}]}"#),
        (
            Format::ClaudeCode,
            "claude-code",
            "{\"type\": \"user\", \"uuid\": \"u\", \"sessionId\": \"s\", \"message\": {\"role\": \"user\", \"content\": \"hi\"}}\n",
        ),
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("s.db");
    for (format, name, body) in bodies {
        let marked = format!("{bom}{body}");
        for error in [
            import_transcript(format, &marked).expect_err("refused"),
            session_store::import::import_bytes(format, marked.as_bytes()).expect_err("refused"),
        ] {
            assert!(
                error.to_string().contains("byte order mark"),
                "{name}: {error}"
            );
        }
        assert!(
            import_transcript(format, body).is_ok(),
            "{name} without the mark"
        );
        let file = dir.path().join(format!("{name}.json"));
        std::fs::write(&file, &marked).expect("write");
        let file = file.to_str().expect("utf-8");
        for args in [vec!["import", file], vec!["import", "--format", name, file]] {
            let output = session_store(&db, &args);
            assert_eq!(output.status.code(), Some(2), "{args:?}");
            let said = text(&output.stderr);
            assert!(
                said.contains("byte order mark (bytes EF BB BF)"),
                "{args:?}: {said}"
            );
        }
    }
}

#[test]
fn a_path_that_cannot_be_reached_is_not_called_missing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b, own) = (
        dir.path().join("a"),
        dir.path().join("b"),
        dir.path().join("own"),
    );
    std::os::unix::fs::symlink(&b, &a).expect("link");
    std::os::unix::fs::symlink(&a, &b).expect("link");
    std::os::unix::fs::symlink(&own, &own).expect("link");
    let file = dir.path().join("file");
    std::fs::write(&file, "x").expect("write");
    for (db, why) in [
        (a, "symbolic links"),
        (own, "symbolic links"),
        (file.join("under-a-file.db"), "Not a directory"),
    ] {
        let output = session_store(&db, &["sessions"]);
        assert_eq!(output.status.code(), Some(2));
        let said = text(&output.stderr);
        assert!(
            said.contains("cannot reach") && said.contains(why),
            "{said}"
        );
        assert!(!said.contains("no database"), "{said}");
    }
    let missing = session_store(&dir.path().join("missing.db"), &["sessions"]);
    assert!(text(&missing.stderr).contains("no database at"));
}

#[test]
fn a_search_that_finds_nothing_says_why_when_the_index_cannot_match_the_term() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("s.db");
    let body = dir.path().join("text.json");
    std::fs::write(
        &body,
        json!({"messages": [{"role": "user", "content": "漢字のテキスト and a 🦀 crab"}]})
            .to_string(),
    )
    .expect("write");
    let imported = session_store(&db, &["import", body.to_str().expect("utf-8")]);
    assert!(imported.status.success(), "{}", text(&imported.stderr));
    for (query, said) in [
        ("🦀", "holds no letter or digit"),
        ("🦀 🎉", "\"🎉\" holds no letter or digit"),
        ("漢字", "漢字* finds the runs that start with it"),
        ("テキスト", "matches only a whole run"),
    ] {
        let output = session_store(&db, &["search", query]);
        assert!(output.status.success(), "{}", text(&output.stderr));
        assert!(
            output.stdout.is_empty(),
            "{query}: {}",
            text(&output.stdout)
        );
        let notes = text(&output.stderr);
        assert!(notes.contains(said), "{query}: {notes}");
    }
    // The way the note points finds it; a word found prints no note.
    for query in ["漢字*", "crab"] {
        let output = session_store(&db, &["search", query]);
        assert!(!output.stdout.is_empty(), "{query} found nothing");
        assert!(
            output.stderr.is_empty(),
            "{query}: {}",
            text(&output.stderr)
        );
    }
}

/// The store refuses NUL on write; other code may still write one. FTS5's `snippet()` reads
/// a column as a C string and stopped there: the snippet then lost what follows the NUL.
#[test]
fn a_nul_in_stored_text_does_not_cut_the_snippet_short() {
    use session_store::{NewMessage, Part, SearchOptions, Store};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s.db");
    let store = Store::open(&path).expect("open");
    let session = store.create_session().expect("session");
    store
        .append(&session, NewMessage::user("placeholder one"))
        .expect("user");
    store
        .append(
            &session,
            NewMessage::assistant(vec![Part::tool_use("c1", "placeholder_tool", json!({}))]),
        )
        .expect("call");
    let conn = rusqlite::Connection::open(&path).expect("raw");
    conn.execute(
        "UPDATE parts SET text = 'start of text' || char(0) || 'after the nul comes the target word'
         WHERE text = 'placeholder one'",
        [],
    )
    .expect("text");
    conn.execute(
        "UPDATE parts SET tool_name = 'fetch' || char(0) || 'hidden_tool' WHERE tool_name = 'placeholder_tool'",
        [],
    )
    .expect("name");
    drop(conn);
    let options = SearchOptions::default();
    for (query, snippet) in [
        (
            "target",
            "start of text\u{0}after the nul comes the [target] word",
        ),
        (
            "start",
            "[start] of text\u{0}after the nul comes the target word",
        ),
        (
            "nul",
            "start of text\u{0}after the [nul] comes the target word",
        ),
        ("hidden", "fetch\u{0}[hidden]_tool"),
        ("fetch", "[fetch]\u{0}hidden_tool"),
    ] {
        let hits = store.search(query, &options).expect("search");
        let found: Vec<&str> = hits.iter().map(|h| h.snippet.as_str()).collect();
        assert_eq!(found, [snippet], "{query}");
    }
    // The words replaced are gone from the index: the rows are searched as they are now.
    let hits = store.search("placeholder", &options).expect("search");
    assert!(hits.is_empty(), "{hits:?}");
}
