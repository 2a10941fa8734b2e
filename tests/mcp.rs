//! `session-store mcp` spoken to by a real MCP client: the official Rust SDK's (`rmcp`),
//! which spawns the binary and talks JSON-RPC over its stdin/stdout. Guards the contract's
//! "For people and tools" section: the four read tools and their results, `fork` only with
//! `--allow-writes`, errors as MCP errors (a tool that fails, arguments outside its schema
//! included, answers `isError` with the reason; a tool not offered is a JSON-RPC error), and
//! a read-only server that leaves the
//! database file byte-identical, its search included (also with the index behind).

use std::path::Path;
use std::process::Command;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceError, ServiceExt};
use serde_json::{json, Value};
use session_store::{NewMessage, Part, Store};

type Client = RunningService<RoleClient, ()>;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// A client connected to `session-store --db DB mcp [extra]`.
async fn connect(db: &Path, extra: &[&str]) -> Client {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_session-store"));
    command
        .arg("--db")
        .arg(db)
        .arg("mcp")
        .args(extra)
        .env_remove("SESSION_STORE_DB")
        .env_remove("RUST_LOG");
    let transport = TokioChildProcess::new(command).expect("spawn session-store mcp");
    ().serve(transport).await.expect("MCP initialize")
}

/// Calls `tool`; the JSON-RPC error when the server refuses the request itself.
async fn call(
    client: &Client,
    tool: &str,
    arguments: Value,
) -> Result<CallToolResult, ServiceError> {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object");
    };
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments))
        .await
}

/// A call that must succeed: its structured JSON result.
async fn ok(client: &Client, tool: &str, arguments: Value) -> Value {
    let result = call(client, tool, arguments.clone())
        .await
        .unwrap_or_else(|e| panic!("{tool} {arguments}: {e}"));
    assert_eq!(
        result.is_error,
        Some(false),
        "{tool} {arguments}: {result:?}"
    );
    let structured = result
        .structured_content
        .clone()
        .expect("structured content");
    // The text block holds the same JSON, for clients that read only text.
    let text = result.content[0]
        .as_text()
        .expect("a text block")
        .text
        .clone();
    assert_eq!(
        serde_json::from_str::<Value>(&text).expect("JSON text"),
        structured
    );
    structured
}

/// A call the tool answers with `isError`: the reason it gives.
async fn tool_error(client: &Client, tool: &str, arguments: Value) -> String {
    let result = call(client, tool, arguments.clone())
        .await
        .unwrap_or_else(|e| panic!("{tool} {arguments} should answer isError, got {e}"));
    assert_eq!(
        result.is_error,
        Some(true),
        "{tool} {arguments}: {result:?}"
    );
    result.content[0]
        .as_text()
        .expect("a text block")
        .text
        .clone()
}

/// A call the server refuses as a JSON-RPC error: its code.
async fn protocol_error(client: &Client, tool: &str, arguments: Value) -> i32 {
    match call(client, tool, arguments.clone()).await {
        Err(ServiceError::McpError(error)) => error.code.0,
        other => panic!("{tool} {arguments} should be a JSON-RPC error, got {other:?}"),
    }
}

/// A database with an imported Claude Code log (7 turns) and a session whose last call is
/// pending; `search` has run once from the CLI, so the index holds both.
fn database(dir: &Path) -> (std::path::PathBuf, String, String) {
    let db = dir.join("sessions.db");
    let log = crate::util::transcripts().join("spotter/tool_heavy.jsonl");
    let output = Command::new(env!("CARGO_BIN_EXE_session-store"))
        .arg("--db")
        .arg(&db)
        .arg("import")
        .arg(&log)
        .env_remove("SESSION_STORE_DB")
        .output()
        .expect("import runs");
    assert!(output.status.success(), "{output:?}");
    let imported = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let store = Store::open(&db).expect("open");
    let pending = store.create_session().expect("session");
    store
        .append(
            &pending,
            NewMessage::user("list the files, then read zebra.txt"),
        )
        .expect("user");
    store
        .append(
            &pending,
            NewMessage::assistant(vec![Part::tool_use(
                "call_zebra",
                "ls",
                json!({"path": "."}),
            )]),
        )
        .expect("assistant");
    store
        .search("phoenix", &Default::default())
        .expect("index caught up");
    drop(store);
    crate::util::settle(&db);
    (db, imported, pending.as_str().to_owned())
}

#[test]
fn a_read_only_server_lists_its_four_tools_answers_each_and_leaves_the_file_byte_identical() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, imported, pending) = database(dir.path());
    let before = std::fs::read(&db).expect("read db");
    runtime().block_on(async {
        let client = connect(&db, &[]).await;
        let info = client.peer_info().expect("server info");
        assert_eq!(
            info.server_info.as_ref().map(|s| s.name.as_str()),
            Some("session-store")
        );
        let mut names: Vec<String> = client
            .list_all_tools()
            .await
            .expect("tools/list")
            .into_iter()
            .map(|t| t.name.into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["export", "list_sessions", "search", "show"]);

        let listed = ok(&client, "list_sessions", json!({})).await;
        assert_eq!(listed["total"], 2);
        let ids: Vec<&str> = listed["sessions"]
            .as_array()
            .expect("sessions")
            .iter()
            .map(|s| s["id"].as_str().expect("id"))
            .collect();
        assert!(
            ids.contains(&imported.as_str()) && ids.contains(&pending.as_str()),
            "{ids:?}"
        );
        let page = ok(&client, "list_sessions", json!({"limit": 1, "offset": 1})).await;
        assert_eq!(page["sessions"].as_array().map(Vec::len), Some(1));
        assert_eq!(page["sessions"][0]["id"], listed["sessions"][1]["id"]);

        let found = ok(&client, "search", json!({"query": "phoenix"})).await;
        assert_eq!(found["index_behind"], false, "{found}");
        let hits = found["hits"].as_array().expect("hits");
        assert!(!hits.is_empty(), "{found}");
        assert!(
            hits.iter().all(|h| h["session"] == imported.as_str()),
            "{found}"
        );
        let zebra = ok(
            &client,
            "search",
            json!({"query": "zebra", "session": &pending[..8]}),
        )
        .await;
        assert_eq!(zebra["hits"].as_array().map(Vec::len), Some(1), "{zebra}");

        // A window of whole turns, by prefix, with where the next one starts.
        let shown = ok(
            &client,
            "show",
            json!({"session": &imported[..8], "from_turn": 2, "turns": 3}),
        )
        .await;
        assert_eq!(
            (shown["start"].as_i64(), shown["end"].as_i64()),
            (Some(2), Some(5))
        );
        assert_eq!(shown["turns"], 7);
        assert_eq!(shown["next_turn"], 5);
        let store = session_store::Store::open_with(
            &db,
            &session_store::StoreOptions {
                read_only: true,
                ..Default::default()
            },
        )
        .expect("open read-only");
        let id = session_store::SessionId::new(imported.clone());
        let expected = store.turns(&id, 2..5).expect("turns");
        drop(store);
        let messages = shown["messages"].as_array().expect("messages");
        assert_eq!(messages.len(), expected.len());
        for (got, want) in messages.iter().zip(&expected) {
            assert_eq!(got["seq"], want.seq);
            assert_eq!(
                got["parts"].as_array().map(Vec::len),
                Some(want.parts.len())
            );
        }
        let last = ok(
            &client,
            "show",
            json!({"session": &imported, "from_turn": 5}),
        )
        .await;
        assert_eq!(
            (last["end"].as_i64(), last["next_turn"].is_null()),
            (Some(7), true)
        );

        // The pending call goes out answered by a tombstone, and the result says so.
        for format in ["anthropic", "openai", "responses", "gemini"] {
            let exported = ok(
                &client,
                "export",
                json!({"session": &pending, "format": format}),
            )
            .await;
            assert_eq!(exported["format"], format);
            let tombstoned = exported["tombstoned"].as_array().expect("tombstoned");
            assert_eq!(tombstoned.len(), 1, "{exported}");
            assert!(tombstoned[0].as_str().unwrap_or("").contains("call_zebra"));
            assert!(exported["body"].to_string().contains("call_zebra"));
        }
        let clean = ok(
            &client,
            "export",
            json!({"session": &imported, "format": "anthropic"}),
        )
        .await;
        assert_eq!(clean["tombstoned"], json!([]));
        assert!(clean["body"]["messages"]
            .as_array()
            .is_some_and(|m| !m.is_empty()));

        // Errors: a tool that ran and failed says why; a request it cannot route is refused.
        assert!(
            tool_error(&client, "show", json!({"session": "no-such-session"}))
                .await
                .contains("unknown session")
        );
        assert!(tool_error(
            &client,
            "show",
            json!({"session": &imported, "from_turn": 7})
        )
        .await
        .contains("0..7"));
        assert!(
            tool_error(&client, "show", json!({"session": &imported, "turns": 0}))
                .await
                .contains("turns 1 to")
        );
        assert!(tool_error(
            &client,
            "export",
            json!({"session": &imported, "format": "cohere"})
        )
        .await
        .contains("unknown provider"));
        assert!(tool_error(
            &client,
            "search",
            json!({"query": "x", "session": "nothing-like-it"})
        )
        .await
        .contains("unknown session"));
        // Arguments outside the tool's schema: the tool answers isError, naming the field.
        for (tool, arguments, field) in [
            ("show", json!({}), "session"),
            ("show", json!({"session": 12}), "string"),
            ("search", json!({"query": "x", "limit": "many"}), "many"),
            ("export", json!({"session": &imported}), "format"),
        ] {
            let why = tool_error(&client, tool, arguments).await;
            assert!(
                why.contains("parameters") && why.contains(field),
                "{tool}: {why}"
            );
        }
        // A tool that is not offered is a JSON-RPC error: -32602 (invalid params).
        assert_eq!(
            protocol_error(&client, "fork", json!({"session": &imported, "at_turn": 1})).await,
            -32602
        );
        assert_eq!(
            protocol_error(&client, "no_such_tool", json!({})).await,
            -32602
        );
        client.cancel().await.expect("close");
    });
    assert!(
        std::fs::read(&db).expect("read db") == before,
        "the read-only server changed the file"
    );
}

/// With the full-text index behind (messages appended after the last search), a read-only
/// server cannot write the catch-up: it searches what the index holds and writes nothing.
#[test]
fn a_read_only_search_with_the_index_behind_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, _, pending) = database(dir.path());
    let store = Store::open(&db).expect("open");
    let id = session_store::SessionId::new(pending.clone());
    store
        .append(
            &id,
            NewMessage::new(
                session_store::Role::Tool,
                vec![Part::tool_result("call_zebra", "quagga.txt")],
            ),
        )
        .expect("result");
    drop(store);
    crate::util::settle(&db);
    let before = std::fs::read(&db).expect("read db");
    runtime().block_on(async {
        let client = connect(&db, &[]).await;
        for (query, hits) in [("quagga", 0), ("zebra", 1), ("phoenix", 6)] {
            let found = ok(&client, "search", json!({"query": query})).await;
            // What the index holds is found; the part written after it is not, and it says so.
            assert_eq!(found["index_behind"], true, "{found}");
            let count = found["hits"].as_array().map_or(0, Vec::len);
            assert!((hits == 0) == (count == 0), "{query}: {found}");
        }
        client.cancel().await.expect("close");
    });
    assert!(
        std::fs::read(&db).expect("read db") == before,
        "search wrote to a read-only database"
    );
}

#[test]
fn fork_is_offered_and_writes_only_with_allow_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, imported, pending) = database(dir.path());
    runtime().block_on(async {
        let client = connect(&db, &["--allow-writes"]).await;
        let mut names: Vec<String> = client
            .list_all_tools()
            .await
            .expect("tools/list")
            .into_iter()
            .map(|t| t.name.into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["export", "fork", "list_sessions", "search", "show"]);
        let forked = ok(
            &client,
            "fork",
            json!({"session": &imported[..8], "at_turn": 3}),
        )
        .await;
        assert_eq!(forked["parent"], imported.as_str());
        assert_eq!(forked["at_turn"], 3);
        let new = forked["id"].as_str().expect("new id").to_owned();
        let shown = ok(&client, "show", json!({"session": &new, "turns": 100})).await;
        assert_eq!(shown["turns"], 3);
        // Forking at the pending call's turn answers it with a tombstone, and says so.
        let cut = ok(&client, "fork", json!({"session": &pending, "at_turn": 1})).await;
        assert_eq!(cut["tombstoned"], json!(["call_zebra"]));
        let listed = ok(&client, "list_sessions", json!({})).await;
        assert_eq!(listed["total"], 4);
        assert!(tool_error(
            &client,
            "fork",
            json!({"session": "unknown-session", "at_turn": 1})
        )
        .await
        .contains("unknown session"));
        assert!(tool_error(&client, "fork", json!({"session": &imported}))
            .await
            .contains("at_turn"));
        assert_eq!(
            ok(&client, "list_sessions", json!({})).await["total"],
            4,
            "a refused fork writes nothing"
        );
        client.cancel().await.expect("close");
    });
}

#[test]
fn the_server_refuses_to_start_on_a_missing_database_and_never_creates_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    for extra in [&[][..], &["--allow-writes"][..]] {
        let db = dir.path().join("missing.db");
        let output = Command::new(env!("CARGO_BIN_EXE_session-store"))
            .arg("--db")
            .arg(&db)
            .arg("mcp")
            .args(extra)
            .env_remove("SESSION_STORE_DB")
            .output()
            .expect("runs");
        assert_eq!(output.status.code(), Some(2), "{extra:?}");
        assert!(String::from_utf8_lossy(&output.stderr).contains("no database at"));
        assert!(output.stdout.is_empty(), "stdout belongs to the protocol");
        assert!(!db.exists());
    }
}
