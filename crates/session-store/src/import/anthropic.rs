//! Anthropic Messages API request bodies: `{"system"?: string | blocks, "messages": [...]}`.
//!
//! Roles are `user` and `assistant`; content is a string or an array of blocks (see the
//! module docs of [`crate::import`] for how each block type is kept). A user message's
//! `tool_result` blocks become one `tool` message, followed by a `user` message with the rest
//! of its blocks if there is a rest. Other top-level fields (`model`, `tools`, `thinking`, ...)
//! are request settings, not history, and are not imported.
//!
//! The body is held to the pairing rules strictly: what the API would reject is refused.

use serde_json::Value;

use super::blocks::{content_blocks, split};
use super::json::Top;
use super::stream::Document;
use super::{
    as_object, messages_of, string_field, type_name, Assembler, ImportError, Imported, Leniency,
    Location, Rest,
};
use crate::model::{NewMessage, Part, Role};

/// Imports an Anthropic Messages request body.
pub fn import(text: &str) -> Result<Imported, ImportError> {
    super::stream::collect::<Body>(text)
}

/// A body being read, one message at a time ([`super::stream`]).
pub(crate) struct Body {
    assembler: Assembler,
    model: Option<String>,
}

impl Document for Body {
    const STREAM: &'static str = "messages";
    const FIELDS: &'static [&'static str] = &["system", "model"];

    fn begin(top: Top) -> Result<Self, ImportError> {
        messages_of(&top)?;
        let system = match top.fields.get("system") {
            None | Some(Value::Null) => None,
            Some(system) => system_message(system, &Location::path("system"))?,
        };
        let mut assembler = Assembler::new(Leniency::STRICT);
        assembler.set_system(system);
        let model = super::model_name("anthropic", top.fields.get("model"));
        Ok(Self { assembler, model })
    }

    fn element(&mut self, index: usize, message: Value) -> Result<(), ImportError> {
        let at = Location::path(format!("messages[{index}]"));
        let converted = convert(&message, &at, self.model.as_deref())?;
        if !converted.results.is_empty() {
            self.assembler.results(&at, converted.results, None)?;
        }
        if let Some(message) = converted.message {
            self.assembler.push(&at, message)?;
        }
        Ok(())
    }

    fn assembler(&mut self) -> &mut Assembler {
        &mut self.assembler
    }

    fn finish(self) -> Result<Rest, ImportError> {
        self.assembler.finish_rest(&Location::path("messages"))
    }
}

/// One Anthropic message, converted: the `tool_result` blocks of a user message (in source
/// order) and the message made of the rest, if there is a rest.
struct Converted {
    results: Vec<Part>,
    message: Option<NewMessage>,
}

/// Converts one message of a Messages API body (`{"role", "content"}`), with `model` the
/// model of an assistant message (`provider/model`).
fn convert(message: &Value, at: &Location, model: Option<&str>) -> Result<Converted, ImportError> {
    let object = as_object(message, at, "a message")?;
    let role = string_field(object, "role", at)?;
    let Some(content) = object.get("content") else {
        return Err(ImportError::malformed(at, "missing \"content\""));
    };
    let blocks = content_blocks(content, &at.join("content"))?;
    match role {
        "user" => {
            let (results, rest) = split(blocks);
            let message = (!rest.is_empty() || content_is_empty_array(content))
                .then(|| NewMessage::new(Role::User, non_empty(rest)));
            Ok(Converted { results, message })
        }
        "assistant" => {
            let (results, parts) = split(blocks);
            if !results.is_empty() {
                return Err(ImportError::malformed(
                    &at.join("content"),
                    "an assistant message cannot hold tool_result blocks",
                ));
            }
            let mut message = NewMessage::assistant(non_empty(parts));
            message.model = model.map(str::to_owned);
            message.usage = super::usage::anthropic(object, at)?;
            Ok(Converted {
                results,
                message: Some(message),
            })
        }
        other => Err(ImportError::malformed(
            &at.join("role"),
            format!("expected \"user\" or \"assistant\", found {other:?}"),
        )),
    }
}

/// One message in the Anthropic Messages shape (`{"role": "user" | "assistant", "content":
/// string | [blocks]}`) as the messages the store keeps, read the way a request body's
/// messages are read: a user message's `tool_result` blocks become a `tool` message (first),
/// the rest of its blocks a `user` message after it (only if there is a rest). Pairing is not
/// checked here: the store checks it when the messages are appended.
pub fn message(message: &Value) -> Result<Vec<NewMessage>, ImportError> {
    let converted = convert(message, &Location::default(), None)?;
    let results = (!converted.results.is_empty()).then(|| NewMessage::tool(converted.results));
    Ok(results.into_iter().chain(converted.message).collect())
}

/// `content: []` is legal JSON but no message: keep it as one empty text part, so the index
/// survives and the renderers decide.
fn content_is_empty_array(content: &Value) -> bool {
    content.as_array().is_some_and(Vec::is_empty)
}

fn non_empty(parts: Vec<Part>) -> Vec<Part> {
    if parts.is_empty() {
        vec![Part::text("")]
    } else {
        parts
    }
}

/// The top-level `system`: a string, or an array of text blocks (one text part each).
fn system_message(system: &Value, at: &Location) -> Result<Option<NewMessage>, ImportError> {
    let parts = match system {
        Value::String(text) => vec![Part::text(text.clone())],
        Value::Array(blocks) => {
            let mut parts = Vec::with_capacity(blocks.len());
            for (index, block) in blocks.iter().enumerate() {
                let at = at.join(&format!("[{index}]"));
                let object = as_object(block, &at, "a text block")?;
                let kind = string_field(object, "type", &at)?;
                if kind != "text" {
                    return Err(ImportError::malformed(
                        &at.join("type"),
                        format!("system blocks must be text, found {kind:?}"),
                    ));
                }
                // Through the block converter, so its attributes (cache_control, ...) stay.
                match super::blocks::convert(block, &at)? {
                    super::blocks::Block::Part(part) => parts.push(part),
                    super::blocks::Block::Result(_) => {
                        return Err(ImportError::malformed(&at, "a system block must be text"))
                    }
                }
            }
            parts
        }
        other => {
            return Err(ImportError::malformed(
                at,
                format!(
                    "expected a string or an array of text blocks, found {}",
                    type_name(other)
                ),
            ))
        }
    };
    Ok((!parts.is_empty()).then(|| NewMessage::new(Role::System, parts)))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::history::pairing::Refusal;

    fn import_json(body: Value) -> Result<Imported, ImportError> {
        import(&body.to_string())
    }

    fn roles(imported: &Imported) -> Vec<Role> {
        imported.messages.iter().map(|m| m.role).collect()
    }

    #[test]
    fn tool_results_in_a_user_message_become_a_tool_message_then_the_users_text() {
        let imported = import_json(json!({"system": "be brief", "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sig=="},
                {"type": "tool_use", "id": "t1", "name": "ls", "input": {}},
            ]},
            {"role": "user", "content": [
                {"type": "text", "text": "also this"},
                {"type": "tool_result", "tool_use_id": "t1", "content": "a b", "is_error": true},
            ]},
        ]}))
        .expect("imports");
        assert_eq!(
            roles(&imported),
            [Role::User, Role::Assistant, Role::Tool, Role::User]
        );
        assert_eq!(
            imported.messages[2].parts,
            [Part::tool_error("t1", "a b")],
            "results first"
        );
        assert_eq!(imported.messages[3].parts, [Part::text("also this")]);
        assert_eq!(
            imported.messages[1].parts[0],
            Part::reasoning("hmm", Some(json!({"anthropic": {"signature": "sig=="}})))
        );
        assert_eq!(imported.system, Some(NewMessage::system("be brief")));
    }

    #[test]
    fn a_user_message_of_only_results_adds_no_user_message() {
        let imported = import_json(json!({"messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]}]},
        ]}))
        .expect("imports");
        assert_eq!(roles(&imported), [Role::User, Role::Assistant, Role::Tool]);
        let Part::ToolResult {
            content, blocks, ..
        } = &imported.messages[2].parts[0]
        else {
            panic!("expected a tool_result");
        };
        assert_eq!(content, "one\ntwo");
        assert!(
            blocks.is_some(),
            "the block list is kept when it is not one text block"
        );
    }

    #[test]
    fn a_system_prompt_keeps_its_cache_control_and_sends_it_back() {
        let body = json!({"system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": "hi"}]});
        let imported = import_json(body.clone()).expect("imports");
        let messages = crate::history::testing::history(
            imported
                .into_messages()
                .into_iter()
                .map(|m| (m.role, m.parts))
                .collect(),
        );
        let out = crate::history::render::render(
            &crate::history::sanitize::sanitize(&messages),
            crate::history::render::Provider::Anthropic,
        );
        assert_eq!(out["system"], body["system"]);
    }

    #[test]
    fn media_and_unknown_blocks_are_kept_as_themselves() {
        let compaction = json!({"type": "compaction", "content": "Summary: user said hello."});
        let source = json!({"type": "base64", "media_type": "image/png", "data": "AAAA"});
        let imported = import_json(json!({"messages": [
            {"role": "user", "content": [{"type": "image", "source": source.clone(), "cache_control": {"type": "ephemeral"}}]},
            {"role": "assistant", "content": [compaction.clone(), {"type": "text", "text": "Hello!"}]},
        ]}))
        .expect("imports");
        assert_eq!(
            imported.messages[0].parts,
            [Part::Image {
                source,
                title: None,
                provider_metadata: Some(
                    json!({"anthropic": {"attributes": {"cache_control": {"type": "ephemeral"}}}})
                )
            }]
        );
        assert_eq!(
            imported.messages[1].parts[0],
            Part::opaque("anthropic", compaction)
        );
    }

    #[test]
    fn malformed_blocks_are_refused_with_their_path() {
        let err = import_json(json!({"messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "text", "text": "ok"}, {"type": "tool_use", "name": "ls"}]},
        ]}))
        .expect_err("missing id");
        assert_eq!(
            err.location().map(ToString::to_string).as_deref(),
            Some("messages[1].content[1]")
        );
        let err = import_json(json!({"messages": [{"role": "robot", "content": "hi"}]}))
            .expect_err("bad role");
        assert_eq!(
            err.to_string(),
            "messages[0].role: expected \"user\" or \"assistant\", found \"robot\""
        );
        let err = import("{\"messages\": [").expect_err("not JSON");
        assert!(matches!(err, ImportError::Json { .. }));
    }

    #[test]
    fn a_result_that_answers_nothing_is_refused_at_its_message() {
        let err = import_json(json!({"messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "nope", "content": "x"}]},
        ]}))
        .expect_err("orphan");
        assert!(matches!(
            err,
            ImportError::Refused { ref at, reason: Refusal::UnexpectedToolResult { .. } } if at.path == "messages[2]"
        ));
    }

    #[test]
    fn an_unanswered_call_before_the_next_message_is_refused_but_legal_at_the_end() {
        let call = json!({"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]});
        let err = import_json(json!({"messages": [
            {"role": "user", "content": "hi"}, call.clone(), {"role": "user", "content": "well?"},
        ]}))
        .expect_err("dangling");
        assert!(matches!(
            err,
            ImportError::Refused { ref at, reason: Refusal::PendingToolUses { .. } } if at.path == "messages[2]"
        ));
        let imported = import_json(json!({"messages": [{"role": "user", "content": "hi"}, call]}))
            .expect("pending at the end");
        assert_eq!(roles(&imported), [Role::User, Role::Assistant]);
    }

    #[test]
    fn an_empty_body_is_refused() {
        assert!(matches!(
            import_json(json!({"messages": []})),
            Err(ImportError::Empty)
        ));
        assert!(matches!(
            import_json(json!([])),
            Err(ImportError::Malformed { .. })
        ));
    }
}
