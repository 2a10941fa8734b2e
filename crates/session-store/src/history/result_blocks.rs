//! A structured tool result's content list (`Part::ToolResult::blocks`), in the Anthropic
//! block shape every renderer reads: the one mapping between its items and parts, for the
//! importers that build such a list from another format's output (an OpenAI output list, a
//! Gemini function response's parts) and the renderers that send it to one.

use serde_json::{json, Value};

use crate::history::texts::describe;
use crate::model::Part;

/// Whether `part` is an image or a document.
pub(crate) fn is_media(part: &Part) -> bool {
    matches!(part, Part::Image { .. } | Part::Document { .. })
}

/// Whether a result's content, as `parts`, holds an image or a document: only then is it kept
/// (and sent) as a list rather than as its text.
pub(crate) fn holds_media(parts: &[Part]) -> bool {
    parts.iter().any(is_media)
}

/// `part` as an item of a result's content list: a text, an image or a document with its
/// source (and title); a block kept verbatim as it came, which renderers leave out; anything
/// else as text saying what it was.
pub(crate) fn to_block(part: &Part) -> Value {
    match part {
        Part::Text { text, .. } => json!({"type": "text", "text": text}),
        Part::Image { source, .. } => json!({"type": "image", "source": source}),
        Part::Document { source, title, .. } => {
            let mut block = json!({"type": "document", "source": source});
            if let Some(title) = title {
                block["title"] = json!(title);
            }
            block
        }
        Part::Opaque { block, .. } => block.clone(),
        other => json!({"type": "text", "text": describe(other)}),
    }
}

/// An item of a result's content list as the part it stands for: a text, an image or a
/// document; `None` for an item of another type.
pub(crate) fn from_block(block: &Value) -> Option<Part> {
    let source = || block.get("source").cloned().unwrap_or(Value::Null);
    match block.get("type").and_then(Value::as_str)? {
        "text" => Some(Part::text(block.get("text")?.as_str()?)),
        "image" => Some(Part::image(source())),
        "document" => Some(Part::Document {
            source: source(),
            title: block
                .get("title")
                .and_then(Value::as_str)
                .map(str::to_owned),
            provider_metadata: None,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_go_to_blocks_and_back() {
        let parts = [
            Part::text("here"),
            Part::image(json!({"type": "url", "url": "https://example.com/a.png"})),
            Part::Document {
                source: json!({"type": "file", "file_id": "f"}),
                title: Some("a.pdf".into()),
                provider_metadata: None,
            },
        ];
        assert!(holds_media(&parts));
        assert!(!holds_media(&parts[..1]));
        for part in parts {
            assert_eq!(from_block(&to_block(&part)), Some(part));
        }
        assert_eq!(from_block(&json!({"type": "search_result"})), None);
    }
}
