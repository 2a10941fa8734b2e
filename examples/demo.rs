//! The main job of the README: stores a tool-heavy session with a cancelled turn in
//! `./sessions.db` (or the path given as the first argument) and prints it turn by turn.
//!
//! Run it with `cargo run --release --example demo`.

use std::error::Error;
use std::io::{self, Write};
use std::process::ExitCode;

use serde_json::json;
use session_store::{Message, NewMessage, Part, Store};

fn main() -> ExitCode {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "sessions.db".to_owned());
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    match run(&path, &mut out).and_then(|()| Ok(out.flush()?)) {
        Ok(()) => ExitCode::SUCCESS,
        // `demo | head -3`: the reader went away; that is not a failure.
        Err(error)
            if error
                .downcast_ref::<io::Error>()
                .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe) =>
        {
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("demo: {error}");
            let mut source = error.source();
            while let Some(cause) = source {
                eprintln!("  caused by: {cause}");
                source = cause.source();
            }
            ExitCode::FAILURE
        }
    }
}

fn run(path: &str, out: &mut impl Write) -> Result<(), Box<dyn Error>> {
    let store = Store::open(path)?;
    let session = store.create_session()?;

    // Turn 0: three parallel tool calls, all answered, then a final answer — one batch.
    store.append_batch(
        &session,
        vec![
            NewMessage::system("You are a careful coding agent."),
            NewMessage::user("Why does the build fail?"),
            NewMessage::assistant(vec![
                Part::reasoning(
                    "Look at the manifest, the lock file and the last CI log.",
                    Some(json!({"anthropic": {"signature": "sig-demo-1"}})),
                ),
                Part::text(""),
                Part::tool_use("toolu_01", "read_file", json!({"path": "Cargo.toml"})),
                Part::tool_use("toolu_02", "read_file", json!({"path": "Cargo.lock"})),
                Part::tool_use("toolu_03", "bash", json!({"cmd": "cat ci.log | tail -20"})),
            ]),
            NewMessage::tool(vec![
                Part::tool_result("toolu_01", "[package]\nname = \"demo\""),
                Part::tool_result("toolu_02", ""),
            ]),
            NewMessage::tool(vec![Part::tool_error(
                "toolu_03",
                "Exit code 1: ci.log: No such file",
            )]),
            NewMessage::assistant(vec![Part::text(
                "The lock file is empty; run `cargo generate-lockfile`.",
            )]),
        ],
    )?;

    // Turn 1: the agent starts a long command and the user interrupts it.
    store.append(
        &session,
        NewMessage::user("Regenerate it and run the tests."),
    )?;
    store.append(
        &session,
        NewMessage::assistant(vec![Part::tool_use(
            "toolu_04",
            "bash",
            json!({"cmd": "cargo generate-lockfile && cargo test"}),
        )]),
    )?;
    // The store refuses a new user turn while toolu_04 is unanswered...
    if let Err(refused) = store.append(&session, NewMessage::user("stop, wrong branch")) {
        writeln!(
            out,
            "refused as it should be: {}",
            refused.refusal().map_or(String::new(), |r| r.to_string())
        )?;
    }
    // ...so the interruption is recorded as a tombstone result first.
    let cancelled = store.cancel_pending(&session, "interrupted by the user")?;
    writeln!(out, "cancelled: {cancelled:?}")?;

    // Turn 2: the conversation goes on, healthy.
    store.append_batch(
        &session,
        vec![
            NewMessage::user("Stop, wrong branch. Just tell me what you would run."),
            NewMessage::assistant(vec![Part::text(
                "`cargo generate-lockfile && cargo test` on main.",
            )]),
        ],
    )?;

    writeln!(out, "\nsession {session} in {path}")?;
    print_turns(&store.messages(&session)?, out)?;
    Ok(())
}

fn print_turns(messages: &[Message], out: &mut impl Write) -> io::Result<()> {
    let mut turn = None;
    for message in messages {
        if turn != Some(message.turn_index) {
            turn = Some(message.turn_index);
            writeln!(out, "\n== turn {} ==", message.turn_index)?;
        }
        writeln!(out, "  #{:<3} {}", message.seq, message.role)?;
        for part in &message.parts {
            writeln!(out, "        {}", describe(part))?;
        }
    }
    Ok(())
}

fn describe(part: &Part) -> String {
    match part {
        Part::Text { text, .. } => format!("text {text:?}"),
        Part::Reasoning {
            text,
            provider_metadata,
        } => {
            format!(
                "reasoning {text:?} {}",
                provider_metadata
                    .as_ref()
                    .map_or(String::new(), |m| m.to_string())
            )
        }
        Part::RedactedReasoning { data, .. } => {
            format!("redacted_reasoning ({} bytes)", data.len())
        }
        Part::ToolUse {
            id, name, input, ..
        } => format!("tool_use {id} {name} {input}"),
        Part::ToolResult {
            tool_use_id,
            content,
            is_error,
            ..
        } => {
            let tag = if *is_error {
                "tool_result (error)"
            } else {
                "tool_result"
            };
            format!("{tag} {tool_use_id} {content:?}")
        }
        other => format!(
            "{} {}",
            other.kind(),
            session_store::request::describe(other)
        ),
    }
}
