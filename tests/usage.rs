//! Token accounting that loses or invents numbers: usage passed to append but not stored, a
//! revert and undo that drop the rows (they cascade with the live messages), imported
//! usage ignored, or a count the provider never reported shown as 0. These tests pin usage
//! per turn and in total through append, import, revert and undo.

use session_store::import::{import as import_transcript, Format};
use session_store::{NewMessage, Part, Store, Usage};

use crate::turn_fixtures::open_store;

fn turn(store: &Store, session: &session_store::SessionId, n: u64) -> anyhow::Result<()> {
    store.append(session, NewMessage::user(format!("question {n}")))?;
    store.append(
        session,
        NewMessage::assistant(vec![Part::text("thinking aloud")])
            .with_usage(Usage::new(100 * n, 10).model("anthropic/claude-sonnet-4-5")),
    )?;
    store.append(
        session,
        NewMessage::assistant(vec![Part::text("answer")])
            .with_usage(Usage::new(n, 1).cache(1000, 50).model("openai/gpt-4.1")),
    )?;
    Ok(())
}

#[test]
fn usage_is_summed_per_turn_and_in_total() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let session = store.create_session()?;
    for n in 1..=3 {
        turn(&store, &session, n)?;
    }
    store.append(&session, NewMessage::user("no usage here"))?;
    let usage = store.usage(&session)?;
    assert_eq!(usage.turns.len(), 3);
    let second = &usage.turns[1];
    assert_eq!(second.turn, 1);
    assert_eq!(second.tokens.messages, 2);
    assert_eq!(second.tokens.input_tokens, Some(202));
    assert_eq!(second.tokens.cache_read_tokens, Some(1000));
    assert_eq!(
        second.models,
        ["anthropic/claude-sonnet-4-5", "openai/gpt-4.1"]
    );
    assert_eq!(usage.total.messages, 6);
    assert_eq!(usage.total.input_tokens, Some(606));
    assert_eq!(usage.total.output_tokens, Some(33));
    assert_eq!(usage.total.cache_write_tokens, Some(150));
    Ok(())
}

#[test]
fn counts_nobody_reported_stay_unknown() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let session = store.create_session()?;
    store.append(&session, NewMessage::user("hi"))?;
    let usage = store.usage(&session)?;
    assert_eq!(usage.total.messages, 0);
    assert_eq!(usage.total.input_tokens, None);
    store.append(
        &session,
        NewMessage::assistant(vec![Part::text("a")]).with_usage(Usage {
            output_tokens: Some(4),
            ..Usage::default()
        }),
    )?;
    let usage = store.usage(&session)?;
    assert_eq!(usage.total.output_tokens, Some(4));
    assert_eq!(usage.total.input_tokens, None);
    Ok(())
}

#[test]
fn revert_and_undo_keep_the_usage_of_the_messages_they_move() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let session = store.create_session()?;
    for n in 1..=3 {
        turn(&store, &session, n)?;
    }
    let before = store.message_usage(&session)?;
    store.revert_to_turn(&session, 1)?;
    assert_eq!(store.usage(&session)?.total.messages, 2);
    store.undo_revert(&session)?;
    assert_eq!(store.message_usage(&session)?, before);
    Ok(())
}

#[test]
fn imported_claude_code_and_openai_usage_is_stored() -> anyhow::Result<()> {
    let (_dir, store) = open_store()?;
    let log = [
        r#"{"type":"user","uuid":"u1","message":{"role":"user","content":"go"}}"#,
        r#"{"type":"assistant","uuid":"a1","message":{"id":"m1","role":"assistant","model":"claude-opus-4-1","content":[{"type":"text","text":"ok"}],"usage":{"input_tokens":4,"output_tokens":9,"cache_read_input_tokens":300,"cache_creation_input_tokens":20}}}"#,
    ]
    .join("\n");
    let session =
        store.import_session(import_transcript(Format::ClaudeCode, &log)?.into_messages())?;
    let usage = store.usage(&session)?;
    assert_eq!(usage.total.input_tokens, Some(4));
    assert_eq!(usage.total.cache_write_tokens, Some(20));
    assert_eq!(usage.turns[0].models, ["anthropic/claude-opus-4-1"]);

    let body = r#"{"messages":[{"role":"user","content":"hi"},
        {"role":"assistant","content":"hello","model":"gpt-4.1",
         "usage":{"prompt_tokens":50,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":40}}}]}"#;
    let session = store.import_session(import_transcript(Format::OpenAi, body)?.into_messages())?;
    let usage = store.usage(&session)?;
    assert_eq!(usage.total.input_tokens, Some(10));
    assert_eq!(usage.total.cache_read_tokens, Some(40));
    Ok(())
}
