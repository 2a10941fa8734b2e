//! Prompt-cache stability of exported requests across the idle latch. The failure covered
//! (issue 16): once the thinking latch was on, every new assistant message with reasoning
//! stripped the previous one's (`keep_recent = 1`), so each request rewrote an earlier message
//! and broke the provider's cached prefix, not only the request where the latch fired.

use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::{json, Value};
use session_store::{ExportOptions, NewMessage, Part, Provider, SessionId, Store};

use crate::util::temp_store;

fn signed(text: &str) -> Part {
    Part::reasoning(
        text,
        Some(json!({"anthropic": {"signature": format!("sig-{text}")}})),
    )
}

fn export(store: &Store, session: &SessionId, now: DateTime<Utc>) -> Value {
    store
        .export(session, Provider::Anthropic, now, &ExportOptions::default())
        .expect("export")
}

fn keeps_prefix(earlier: &Value, later: &Value) -> bool {
    let a = earlier["messages"].as_array().expect("messages");
    let b = later["messages"].as_array().expect("messages");
    a.len() <= b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

#[test]
fn after_the_idle_latch_fires_each_request_keeps_the_previous_one_as_a_prefix() {
    let (_dir, store, _path) = temp_store();
    let session = store.create_session().expect("session");
    let mut clock = Utc
        .with_ymd_and_hms(2026, 1, 2, 9, 0, 0)
        .single()
        .expect("time");
    let mut previous: Option<Value> = None;
    let mut broken = Vec::new();
    for turn in 0..6 {
        if turn == 2 {
            clock += Duration::minutes(10); // idle past the cache's lifetime
        }
        clock += Duration::seconds(2);
        store
            .append(&session, NewMessage::user(format!("turn {turn}")).at(clock))
            .expect("user");
        let body = export(&store, &session, clock);
        if let Some(previous) = &previous {
            if !keeps_prefix(previous, &body) {
                broken.push(turn);
            }
        }
        previous = Some(body);
        clock += Duration::seconds(2);
        store
            .append(
                &session,
                NewMessage::assistant(vec![signed(&format!("r{turn}")), Part::text("done")])
                    .at(clock),
            )
            .expect("assistant");
        store
            .record_completion(&session, clock)
            .expect("completion");
    }
    assert_eq!(
        broken,
        vec![2],
        "only the request where the latch fired breaks the prefix"
    );
    let state = store.thinking_state(&session).expect("state");
    assert!(state.latched);
    assert_eq!(
        state.stripped_through,
        Some(5),
        "fired at the user message of turn 2"
    );
    // Clearing the state forgets where it fired.
    store.clear_thinking_state(&session).expect("clear");
    assert_eq!(
        store
            .thinking_state(&session)
            .expect("state")
            .stripped_through,
        None
    );
}
