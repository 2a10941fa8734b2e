//! Throwaway: fork time of a 10k-message session (not committed).
use session_store::{NewMessage, Part, Store};
use std::time::Instant;

fn main() {
    let location = std::env::args().nth(1).expect("location");
    let store = Store::open(&location).expect("open");
    let session = store.create_session().expect("session");
    for turn in 0..2500 {
        let call = format!("call_{turn}");
        store
            .append_batch(
                &session,
                vec![
                    NewMessage::user(format!("question {turn} {}", "x".repeat(200))),
                    NewMessage::assistant(vec![
                        Part::text("Let me look."),
                        Part::tool_use(&call, "bash", serde_json::json!({"cmd": "ls"})),
                    ]),
                    NewMessage::tool(vec![Part::tool_result(&call, "out ".repeat(100))]),
                    NewMessage::assistant(vec![Part::text("done")]),
                ],
            )
            .expect("turn");
    }
    let mut times = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        let fork = store.fork(&session, 2499).expect("fork");
        times.push(start.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(fork.messages, 9996);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "fork of 9996 messages: median {:.1} ms (min {:.1}, max {:.1})",
        times[2], times[0], times[4]
    );
}
