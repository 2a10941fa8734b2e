//! The OpenAI Chat Completions body: `{"messages": [...]}`.
//!
//! - System messages stay in place with role `system` (the view never puts one inside a tool
//!   pair).
//! - An assistant message carries its text as `content` (a string, the text parts joined with
//!   a newline; `null` when it has only tool calls) and its tool_uses as `tool_calls`, each
//!   `{"id", "type": "function", "function": {"name", "arguments"}}` with `arguments` the
//!   input as a JSON string. Reasoning that came as an OpenAI-compatible `reasoning_content`
//!   (DeepSeek and others) goes back as `reasoning_content` on its message when the target
//!   model is the one that wrote it; other reasoning is left out. A message left with
//!   nothing is left out.
//! - Each tool_result becomes one `tool` message `{"role": "tool", "tool_call_id", "content"}`
//!   (its plain text: a tool message takes text only).
//! - User messages carry their text as a string, or a list of content parts when they hold
//!   images (`image_url`) or documents (`file`).
//! - What Chat Completions has no shape for (server tool calls and results, images outside a
//!   user message, documents it cannot take) is sent as the text
//!   [`crate::history::texts::describe`] gives it; opaque blocks of other providers are left
//!   out.

use serde_json::{json, Map, Value};

use crate::history::blank::is_blank;
use crate::history::media::openai_image_url;
use crate::history::provider::Provider;
use crate::history::sanitize::View;
use crate::history::texts::describe;
use crate::model::{Part, Role};

/// The field a reasoning part came from and goes back to, as the importer marks it:
/// `{"openai": {"field": "reasoning_content"}}`.
pub const REASONING_CONTENT: &str = "reasoning_content";

/// Renders `view` as an OpenAI Chat Completions request body, for the model that wrote the
/// latest assistant message.
#[cfg(test)]
pub fn render(view: &View) -> Value {
    render_for(view, None)
}

/// Renders `view` for `model` (`None`: the model of the latest assistant message).
pub fn render_for(view: &View, model: Option<&str>) -> Value {
    let target = model.map(str::to_owned).or_else(|| {
        view.messages
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant)
            .and_then(|m| m.model.clone())
    });
    let mut messages = Vec::new();
    for message in &view.messages {
        match message.role {
            Role::System => {
                let text = texts(&message.parts).join("\n\n");
                if !is_blank(&text) {
                    messages.push(json!({"role": "system", "content": text}));
                }
            }
            Role::User => {
                if let Some(content) = user_content(&message.parts) {
                    messages.push(json!({"role": "user", "content": content}));
                }
            }
            Role::Assistant => {
                let same_model = match (&target, &message.model) {
                    (Some(target), Some(model)) => target == model,
                    _ => true,
                };
                if let Some(rendered) = assistant(&message.parts, same_model) {
                    messages.push(rendered);
                }
            }
            Role::Tool => {
                for part in &message.parts {
                    if let Part::ToolResult {
                        tool_use_id,
                        content,
                        ..
                    } = part
                    {
                        messages.push(json!({
                            "role": "tool",
                            "tool_call_id": tool_use_id,
                            "content": content,
                        }));
                    }
                }
            }
        }
    }
    // Moved in, not `json!`: the macro would serialize (deep-copy) every message.
    let mut body = Map::new();
    body.insert("messages".to_owned(), Value::Array(messages));
    Value::Object(body)
}

/// The non-blank texts of `parts`, what cannot be sent as itself described.
fn texts(parts: &[Part]) -> Vec<String> {
    parts
        .iter()
        .filter_map(|part| match part {
            Part::Text { text, .. } if !is_blank(text) => Some(text.clone()),
            Part::Text { .. }
            | Part::Reasoning { .. }
            | Part::RedactedReasoning { .. }
            | Part::ToolUse { .. }
            | Part::ToolResult { .. } => None,
            Part::Opaque { .. } => None,
            Part::Image { .. }
            | Part::Document { .. }
            | Part::ServerToolUse { .. }
            | Part::ServerToolResult { .. } => Some(describe(part)),
        })
        .collect()
}

/// A user message's content: a string when it is text only, else a list of content parts;
/// `None` when nothing is left.
fn user_content(parts: &[Part]) -> Option<Value> {
    if !parts.iter().any(|p| {
        matches!(p, Part::Image { .. } | Part::Document { .. })
            || p.opaque_provider() == Some("openai")
    }) {
        let text = texts(parts).join("\n\n");
        return (!is_blank(&text)).then_some(Value::String(text));
    }
    let mut content = Vec::new();
    for part in parts {
        match part {
            Part::Image {
                source,
                provider_metadata,
                ..
            } => match openai_image_url(source) {
                Some(url) => {
                    let mut image = json!({"url": url});
                    if let Some(detail) = image_detail(provider_metadata.as_ref()) {
                        image["detail"] = json!(detail);
                    }
                    content.push(json!({"type": "image_url", "image_url": image}));
                }
                None => content.push(json!({"type": "text", "text": describe(part)})),
            },
            Part::Document { source, title, .. } => match file(source, title.as_deref()) {
                Some(file) => content.push(file),
                None => content.push(json!({"type": "text", "text": describe(part)})),
            },
            Part::Opaque { block, .. } if part.opaque_provider() == Some("openai") => {
                content.push(block.clone());
            }
            other => {
                for text in texts(std::slice::from_ref(other)) {
                    content.push(json!({"type": "text", "text": text}));
                }
            }
        }
    }
    (!content.is_empty()).then_some(Value::Array(content))
}

/// A document as a Chat Completions `file` part: PDF data, or a file id. Plain-text sources
/// go as text; anything else is `None` (described instead).
fn file(source: &Value, title: Option<&str>) -> Option<Value> {
    match source.get("type")?.as_str()? {
        "base64" if source.get("media_type")?.as_str()? == "application/pdf" => {
            let data = source.get("data")?.as_str()?;
            Some(json!({"type": "file", "file": {
                "filename": title.unwrap_or("document.pdf"),
                "file_data": format!("data:application/pdf;base64,{data}"),
            }}))
        }
        "file" => {
            let id = source.get("file_id")?.as_str()?;
            Some(json!({"type": "file", "file": {"file_id": id}}))
        }
        "text" => {
            let data = source.get("data")?.as_str()?;
            (!is_blank(data)).then(|| json!({"type": "text", "text": data}))
        }
        _ => None,
    }
}

/// True for reasoning that came as an OpenAI-compatible `reasoning_content`.
pub fn is_reasoning_content(part: &Part) -> bool {
    matches!(part, Part::Reasoning { provider_metadata: Some(m), .. }
        if m.get("openai").and_then(|o| o.get("field")).and_then(Value::as_str) == Some(REASONING_CONTENT))
}

/// An assistant message: text as `content` (null without text), tool_uses as `tool_calls`,
/// `reasoning_content` when `same_model`; `None` when nothing is left.
fn assistant(parts: &[Part], same_model: bool) -> Option<Value> {
    // A blank text is the signed-reasoning placeholder; it means nothing here.
    let texts = texts(parts);
    let calls: Vec<Value> = parts
        .iter()
        .filter_map(|part| match part {
            Part::ToolUse {
                id, name, input, ..
            } => Some(json!({
                "id": id,
                "type": "function",
                "function": {
                    "name": Provider::OpenAi.tool_name(name),
                    "arguments": input.to_string(),
                },
            })),
            _ => None,
        })
        .collect();
    let reasoning: Vec<&str> = parts
        .iter()
        .filter(|part| same_model && is_reasoning_content(part))
        .filter_map(|part| match part {
            Part::Reasoning { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    if texts.is_empty() && calls.is_empty() {
        return None;
    }
    let mut message = Map::new();
    message.insert("role".to_owned(), json!("assistant"));
    let content = if texts.is_empty() {
        Value::Null
    } else {
        Value::String(texts.join("\n\n"))
    };
    message.insert("content".to_owned(), content);
    if !reasoning.is_empty() {
        message.insert(
            REASONING_CONTENT.to_owned(),
            Value::String(reasoning.concat()),
        );
    }
    if !calls.is_empty() {
        message.insert("tool_calls".to_owned(), Value::Array(calls));
    }
    Some(Value::Object(message))
}

/// The `detail` an OpenAI source gave an image (kept under `openai.attributes`), when it is
/// one Chat Completions takes: how closely the model looks at it.
fn image_detail(provider_metadata: Option<&Value>) -> Option<&str> {
    provider_metadata
        .and_then(|m| m.get("openai")?.get("attributes")?.get("detail")?.as_str())
        .filter(|detail| matches!(*detail, "auto" | "low" | "high"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::history::sanitize::sanitize;
    use crate::history::testing::history;

    fn deepseek_loop() -> Vec<crate::model::Message> {
        let reasoning = Part::reasoning(
            "think",
            Some(json!({"openai": {"field": REASONING_CONTENT}})),
        );
        let mut messages = history(vec![
            (Role::User, vec![Part::text("go")]),
            (
                Role::Assistant,
                vec![reasoning, Part::tool_use("c1", "f", json!({}))],
            ),
            (Role::Tool, vec![Part::tool_result("c1", "ok")]),
        ]);
        messages[1].model = Some("deepseek/deepseek-reasoner".to_owned());
        messages
    }

    #[test]
    fn reasoning_content_goes_back_to_the_model_that_wrote_it_only() {
        let view = sanitize(&deepseek_loop());
        let same = render_for(&view, None);
        assert_eq!(same["messages"][1]["reasoning_content"], "think");
        let named = render_for(&view, Some("deepseek/deepseek-reasoner"));
        assert_eq!(named["messages"][1]["reasoning_content"], "think");
        let other = render_for(&view, Some("openai/gpt-5"));
        assert!(other["messages"][1].get("reasoning_content").is_none());
        assert_eq!(crate::history::contract::check_openai(&other), vec![]);
    }

    /// The `detail` an OpenAI source gave an image goes back with it; a value Chat
    /// Completions does not take does not.
    #[test]
    fn an_images_detail_goes_back_with_it() {
        let image = |detail: &str| Part::Image {
            source: json!({"type": "url", "url": "https://example.com/a.png"}),
            title: None,
            provider_metadata: Some(json!({"openai": {"attributes": {"detail": detail}}})),
        };
        let view = sanitize(&history(vec![(
            Role::User,
            vec![Part::text("look"), image("high"), image("sharpest")],
        )]));
        let body = render_for(&view, None);
        let content = &body["messages"][0]["content"];
        assert_eq!(
            content[1]["image_url"],
            json!({"url": "https://example.com/a.png", "detail": "high"})
        );
        assert_eq!(
            content[2]["image_url"],
            json!({"url": "https://example.com/a.png"})
        );
    }

    #[test]
    fn images_go_as_image_url_and_what_chat_completions_cannot_take_is_described() {
        let messages = history(vec![(
            Role::User,
            vec![
                Part::text("look"),
                // A PNG's first bytes, declared as a JPEG.
                Part::image(
                    json!({"type": "base64", "media_type": "image/jpeg", "data": "iVBORw0KGgo="}),
                ),
                Part::document(json!({"type": "url", "url": "https://example.com/a.pdf"})),
                // Bytes that are no image OpenAI takes ("You uploaded an unsupported image").
                Part::image(json!({"type": "base64", "media_type": "image/heic", "data": "AA=="})),
            ],
        )]);
        let body = render(&sanitize(&messages));
        assert_eq!(crate::history::contract::check_openai(&body), vec![]);
        let content = &body["messages"][0]["content"];
        assert_eq!(
            content[1]["image_url"]["url"],
            "data:image/png;base64,iVBORw0KGgo="
        );
        assert_eq!(content[3]["type"], "text");
        let refused = json!({"messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/heic;base64,AA=="}}]}]});
        let named: Vec<String> = crate::history::contract::check_openai(&refused)
            .into_iter()
            .map(|violation| violation.path)
            .collect();
        assert_eq!(named, ["/messages/0/content/0/image_url"]);
        assert!(
            content[2]["text"].as_str().is_some_and(
                |t| t.starts_with("[document") && t.contains("https://example.com/a.pdf")
            )
        );
    }
}
