//! The README's quick start, whole: a session with a tool call and its result, a refused
//! write, and the request body for the next call. `cargo run -p session-store --example
//! quickstart [PATH]` (default `quickstart.db`, created if missing).

use serde_json::json;
use session_store::{NewMessage, Part, Provider, Store};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "quickstart.db".into());
    let store = Store::open(&path)?; // creates or migrates the file
    let session = store.create_session()?;

    store.append(&session, NewMessage::user("What is in /tmp?"))?;
    store.append(
        &session,
        NewMessage::assistant(vec![Part::tool_use(
            "call_1",
            "bash",
            json!({"cmd": "ls /tmp"}),
        )]),
    )?;
    // While call_1 waits for its result, a user message is refused and nothing is written.
    let refused = store.append(&session, NewMessage::user("hello?"));
    assert!(refused.is_err());

    // The tool's result answers the call; the conversation goes on.
    store.append(
        &session,
        NewMessage::tool(vec![Part::tool_result("call_1", "a.txt\nb.txt")]),
    )?;
    store.append(
        &session,
        NewMessage::assistant(vec![Part::text("/tmp holds a.txt and b.txt.")]),
    )?;

    // What to send the provider next: a body that passes its rules.
    let body = store.export_now(&session, Provider::Anthropic, &Default::default())?;
    println!("{}", serde_json::to_string_pretty(&body)?);
    println!("session {session} in {path}");
    Ok(())
}
