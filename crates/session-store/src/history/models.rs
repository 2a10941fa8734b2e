//! Signatures of every provider, and the model that made them (PROVIDER_RULES 10c, 14, 15).
//!
//! A reasoning signature is valid only for the model that produced it: Anthropic refuses
//! thinking signed by another model ("Invalid signature in thinking block"), the OpenAI
//! Responses API cannot decrypt another model's `encrypted_content`, and Gemini refuses a
//! `thoughtSignature` another model made. Each lives in a part's provider metadata under its
//! own namespace:
//!
//! | provider | part | metadata |
//! |---|---|---|
//! | Anthropic (Bedrock, Vertex) | reasoning | `{"anthropic": {"signature": "..."}}` (see [`crate::history::signed`]) |
//! | OpenAI Responses | reasoning | `{"openai": {"encrypted_content": "...", "id"?: "rs_...", "summary"?: [...]}}` |
//! | Gemini | the part it came on: text, tool_use, or reasoning | `{"gemini": {"thoughtSignature": "..."}}` |
//!
//! Gemini may put a signature on an empty text part; since the loader drops blank text, the
//! importers keep such a part as a reasoning part (`{"gemini": {"thoughtSignature": ...,
//! "text": true}}`): it renders back as the text part it was, and is thinking for every other
//! purpose (dropped with the message's thinking, never sent to another provider). A Gemini
//! thought summary (`"thought": true`) is a reasoning part with `{"gemini": {"thought": true}}`.
//!
//! [`bind_to_model`] applies rule 10c before the loader runs: an assistant message written by
//! another model than the target loses all its thinking at once (every reasoning and redacted
//! reasoning part, and the Gemini signatures on its other parts). A message whose model was
//! not recorded (rows written before `messages.model` existed) is taken as the target's.

use serde_json::Value;

use crate::model::{Message, Part, Role};

/// The provider-metadata namespace of OpenAI (Chat Completions and Responses).
pub const OPENAI: &str = "openai";
/// The provider-metadata namespace of Gemini.
pub const GEMINI: &str = "gemini";
/// The key of a Gemini signature in its namespace, as the API spells it.
pub const THOUGHT_SIGNATURE: &str = "thoughtSignature";
/// The key of an OpenAI Responses reasoning item's encrypted reasoning.
pub const ENCRYPTED_CONTENT: &str = "encrypted_content";
/// The value Google documents for a function call Gemini 3 did not make itself (history from
/// another model): it passes the signature check that a missing signature fails.
pub const FOREIGN_THOUGHT_SIGNATURE: &str = "skip_thought_signature_validator";

/// `metadata[namespace][key]` as a non-empty string.
pub fn meta_str<'a>(metadata: Option<&'a Value>, namespace: &str, key: &str) -> Option<&'a str> {
    metadata?
        .get(namespace)?
        .get(key)?
        .as_str()
        .filter(|value| !value.is_empty())
}

/// `metadata[namespace][key]` is `true`.
pub fn meta_flag(metadata: Option<&Value>, namespace: &str, key: &str) -> bool {
    metadata
        .and_then(|m| m.get(namespace))
        .and_then(|n| n.get(key))
        .and_then(Value::as_bool)
        == Some(true)
}

/// The Gemini `thoughtSignature` a part came with.
pub fn gemini_signature(metadata: Option<&Value>) -> Option<&str> {
    meta_str(metadata, GEMINI, THOUGHT_SIGNATURE)
}

/// The OpenAI Responses `encrypted_content` of a reasoning part.
pub fn encrypted_content(metadata: Option<&Value>) -> Option<&str> {
    meta_str(metadata, OPENAI, ENCRYPTED_CONTENT)
}

/// The model of the session's latest assistant message that has one: the target an export
/// assumes when none is named.
pub fn latest_model(messages: &[Message]) -> Option<&str> {
    messages
        .iter()
        .rev()
        .filter(|m| m.role == Role::Assistant)
        .find_map(|m| m.model.as_deref())
}

/// Rule 10c: `messages` with every assistant message written by another model than `target`
/// stripped of its thinking, all of it at once (reasoning and redacted reasoning parts, and
/// Gemini signatures on its other parts). With no target, or for a message whose model is
/// unknown, nothing changes. The rest of each message is untouched, so the loader sees the
/// same calls and results.
#[cfg(test)]
pub(crate) fn bind_to_model(messages: &[Message], target: Option<&str>) -> Vec<Message> {
    bind_owned(messages.to_vec(), target)
}

/// [`bind_to_model`] in place, over messages the caller gives up: only the messages of
/// another model change (the export's way: no copy of the session, issue 16).
pub(crate) fn bind_owned(mut messages: Vec<Message>, target: Option<&str>) -> Vec<Message> {
    let Some(target) = target else {
        return messages;
    };
    for message in &mut messages {
        let foreign = message.role == Role::Assistant
            && message
                .model
                .as_deref()
                .is_some_and(|model| model != target);
        if foreign {
            message.parts = strip_thinking(&message.parts);
        }
    }
    messages
}

/// The parts without their thinking: reasoning and redacted reasoning left out, Gemini
/// signatures removed from the others. Never empty when `parts` was not: a message made of
/// thinking only keeps an empty text part, which the loader then drops with the message.
pub fn strip_thinking(parts: &[Part]) -> Vec<Part> {
    let mut out: Vec<Part> = parts
        .iter()
        .filter(|part| {
            !matches!(
                part,
                Part::Reasoning { .. } | Part::RedactedReasoning { .. }
            )
        })
        .cloned()
        .map(|mut part| {
            if let Some(metadata) = part_metadata_mut(&mut part) {
                remove_gemini_signature(metadata);
            }
            unpair_call_item(&mut part);
            // A Gemini part kept verbatim carries its signature in itself.
            if let Part::Opaque {
                block: Value::Object(block),
                ..
            } = &mut part
            {
                block.remove(THOUGHT_SIGNATURE);
            }
            part
        })
        .collect();
    if out.is_empty() && !parts.is_empty() {
        out.push(Part::text(""));
    }
    out
}

/// Takes the Responses item id (`fc_...`) off a call whose message lost its reasoning: the
/// API pairs that id with the reasoning item the call came after, and refuses it without
/// that item ("Item 'fc_...' of type 'function_call' was provided without its required
/// 'reasoning' item"). The call goes by its `call_id` alone.
pub(crate) fn unpair_call_item(part: &mut Part) {
    let Part::ToolUse {
        provider_metadata, ..
    } = part
    else {
        return;
    };
    let Some(Value::Object(outer)) = provider_metadata.as_mut() else {
        return;
    };
    let Some(Value::Object(openai)) = outer.get_mut(OPENAI) else {
        return;
    };
    openai.remove("id");
    if openai.is_empty() {
        outer.remove(OPENAI);
    }
    if outer.is_empty() {
        *provider_metadata = None;
    }
}

fn part_metadata_mut(part: &mut Part) -> Option<&mut Option<Value>> {
    match part {
        Part::Text {
            provider_metadata, ..
        }
        | Part::ToolUse {
            provider_metadata, ..
        }
        | Part::ToolResult {
            provider_metadata, ..
        } => Some(provider_metadata),
        _ => None,
    }
}

fn remove_gemini_signature(metadata: &mut Option<Value>) {
    let Some(Value::Object(outer)) = metadata.as_mut() else {
        return;
    };
    let Some(Value::Object(gemini)) = outer.get_mut(GEMINI) else {
        return;
    };
    gemini.remove(THOUGHT_SIGNATURE);
    if gemini.is_empty() {
        outer.remove(GEMINI);
    }
    if outer.is_empty() {
        *metadata = None;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::history::testing::history;

    fn with_model(mut messages: Vec<Message>, models: &[Option<&str>]) -> Vec<Message> {
        for (message, model) in messages.iter_mut().zip(models) {
            message.model = model.map(str::to_owned);
        }
        messages
    }

    #[test]
    fn another_models_message_loses_all_its_thinking_at_once() {
        let call = Part::ToolUse {
            id: "c".into(),
            name: "f".into(),
            input: json!({}),
            provider_metadata: Some(json!({"gemini": {"thoughtSignature": "g"}, "x": 1})),
        };
        let messages = with_model(
            history(vec![
                (Role::User, vec![Part::text("q")]),
                (
                    Role::Assistant,
                    vec![
                        Part::reasoning("t", Some(json!({"anthropic": {"signature": "s"}}))),
                        Part::text("a"),
                        call.clone(),
                    ],
                ),
            ]),
            &[None, Some("anthropic/claude-sonnet-4-5")],
        );
        let same = bind_to_model(&messages, Some("anthropic/claude-sonnet-4-5"));
        assert_eq!(same, messages);
        let other = bind_to_model(&messages, Some("gemini/gemini-3-pro"));
        assert_eq!(
            other[1].parts,
            vec![
                Part::text("a"),
                Part::ToolUse {
                    id: "c".into(),
                    name: "f".into(),
                    input: json!({}),
                    provider_metadata: Some(json!({"x": 1})),
                }
            ]
        );
        assert_eq!(bind_to_model(&messages, None), messages);
        assert_eq!(latest_model(&messages), Some("anthropic/claude-sonnet-4-5"));
    }

    /// Switching from one OpenAI model to another drops the first one's reasoning; its calls'
    /// `fc_` item ids were paired with that reasoning and go with it (the other metadata
    /// stays), so the Responses API does not ask for the missing reasoning item.
    #[test]
    fn another_models_calls_lose_the_item_ids_paired_with_their_reasoning() {
        let call = |metadata: Value| Part::ToolUse {
            id: "c".into(),
            name: "f".into(),
            input: json!({}),
            provider_metadata: Some(metadata),
        };
        let messages = with_model(
            history(vec![
                (Role::User, vec![Part::text("q")]),
                (
                    Role::Assistant,
                    vec![
                        Part::reasoning(
                            "t",
                            Some(json!({"openai": {"id": "rs_1", "encrypted_content": "E"}})),
                        ),
                        call(json!({"openai": {"id": "fc_1", "status": "completed"}})),
                    ],
                ),
            ]),
            &[None, Some("openai/gpt-5-mini")],
        );
        assert_eq!(
            bind_to_model(&messages, Some("openai/gpt-5-mini")),
            messages
        );
        let other = bind_to_model(&messages, Some("openai/gpt-5.2-codex"));
        assert_eq!(
            other[1].parts,
            [call(json!({"openai": {"status": "completed"}}))]
        );
        let mut bare = call(json!({"openai": {"id": "fc_1"}}));
        unpair_call_item(&mut bare);
        assert_eq!(bare.provider_metadata(), None);
    }

    #[test]
    fn a_message_of_thinking_only_keeps_an_empty_text() {
        let parts = vec![Part::reasoning("t", None)];
        assert_eq!(strip_thinking(&parts), vec![Part::text("")]);
    }

    mod any_session {
        use proptest::prelude::*;
        use serde_json::json;

        use super::super::latest_model;
        use crate::history::contract::check_signed_by_target;
        use crate::history::render::Provider;
        use crate::history::request::build_request;
        use crate::history::testing::{arb, history, t0};
        use crate::history::thinking::{ThinkingConfig, ThinkingState};
        use crate::model::{Part, Role};

        const MODELS: [&str; 4] = [
            "anthropic/claude-sonnet-4-5",
            "anthropic/claude-opus-4-6",
            "openai/gpt-5-codex",
            "gemini/gemini-3-pro",
        ];

        /// A part signed the way one of the four providers signs.
        fn signed_part() -> impl Strategy<Value = Part> {
            let signature = prop::sample::select(vec!["s1", "s2", "s3"]);
            prop_oneof![
                signature.clone().prop_map(|s| Part::reasoning(
                    "t",
                    Some(json!({"anthropic": {"signature": s}}))
                )),
                signature.clone().prop_map(|s| Part::reasoning(
                    "t",
                    Some(json!({"openai": {"encrypted_content": s}}))
                )),
                signature.clone().prop_map(|s| Part::reasoning(
                    "",
                    Some(json!({"gemini": {"text": true, "thoughtSignature": s}}))
                )),
                signature.clone().prop_map(|s| Part::reasoning(
                    "t",
                    Some(json!({"gemini": {"thought": true, "thoughtSignature": s}}))
                )),
                signature.clone().prop_map(|s| Part::Text {
                    text: "x".into(),
                    provider_metadata: Some(json!({"gemini": {"thoughtSignature": s}}))
                }),
                (signature, prop::sample::select(vec!["a", "b", "z"])).prop_map(|(s, id)| {
                    Part::ToolUse {
                        id: id.into(),
                        name: "f".into(),
                        input: json!({}),
                        provider_metadata: Some(json!({"gemini": {"thoughtSignature": s}})),
                    }
                }),
            ]
        }

        fn session() -> impl Strategy<Value = Vec<(Role, Vec<Part>)>> {
            let message = prop_oneof![
                3 => arb::message(),
                2 => prop::collection::vec(prop_oneof![signed_part(), arb::part()], 1..4)
                    .prop_map(|parts| (Role::Assistant, parts)),
            ];
            prop::collection::vec(message, 0..14)
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            /// Any stored session, healthy or broken, recorded by any mix of models, exports
            /// valid in all four formats for any target model, and sends no signature another
            /// model made.
            #[test]
            fn any_session_exports_valid_for_any_provider_and_model(
                raw in session(),
                writers in prop::collection::vec(prop::option::of(prop::sample::select(MODELS.to_vec())), 14),
                target in prop::option::of(prop::sample::select(MODELS.to_vec())),
            ) {
                let mut messages = history(raw);
                for (message, writer) in messages.iter_mut().zip(&writers) {
                    if message.role == Role::Assistant {
                        message.model = writer.map(str::to_owned);
                    }
                }
                let config = ThinkingConfig { keep_recent: usize::MAX, ..ThinkingConfig::default() };
                for provider in Provider::ALL {
                    let request = build_request(None, &messages, &ThinkingState::default(), t0(), &config, provider, target);
                    prop_assert_eq!(&request.violations, &vec![], "{} for {:?}: {:#}", provider, target, request.body);
                    let assumed = target.or_else(|| latest_model(&messages));
                    prop_assert_eq!(request.model.as_deref(), assumed);
                    prop_assert_eq!(check_signed_by_target(&messages, assumed, &request.body), vec![]);
                }
            }
        }
    }
}
