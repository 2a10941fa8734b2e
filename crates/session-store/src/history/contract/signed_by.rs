//! Rule 10c against the stored history: no signature in a rendered body, in any format, was
//! made by another model than the target.
//!
//! The stored messages say which model wrote each assistant message; every signature those
//! of another model carry (Anthropic `signature` and redacted `data`, OpenAI
//! `encrypted_content`, Gemini `thoughtSignature`) must be absent from the body, wherever it
//! would sit. A signature string that a message of the target model (or of no recorded
//! model) also carries is not counted as foreign.

use std::collections::HashSet;

use serde_json::Value;

use super::{ProviderRule, ProviderViolation};
use crate::history::models::{encrypted_content, gemini_signature, FOREIGN_THOUGHT_SIGNATURE};
use crate::history::signed::signature;
use crate::model::{Message, Part, Role};

/// The keys a signature sits under in a rendered body.
const SIGNATURE_KEYS: &[&str] = &["signature", "data", "encrypted_content", "thoughtSignature"];

/// Every signature of `body` made by another model than `target`, as a
/// [`ProviderRule::SignedByTargetModel`] violation. Nothing without a target.
pub fn check_signed_by_target(
    messages: &[Message],
    target: Option<&str>,
    body: &Value,
) -> Vec<ProviderViolation> {
    let Some(target) = target else {
        return Vec::new();
    };
    check_foreign_signatures(&foreign_signatures(messages, target), target, body)
}

/// The signatures `messages` say another model than `target` made (and no message of the
/// target model or of no recorded model also carries): what
/// [`check_signed_by_target`] looks for in a body, taken before the messages are consumed.
pub(crate) fn foreign_signatures(messages: &[Message], target: &str) -> HashSet<String> {
    let (mut foreign, mut own) = (HashSet::new(), HashSet::new());
    for message in messages.iter().filter(|m| m.role == Role::Assistant) {
        let set = match message.model.as_deref() {
            Some(model) if model != target => &mut foreign,
            _ => &mut own,
        };
        for part in &message.parts {
            set.extend(signatures_of(part));
        }
    }
    // The value Google documents for calls Gemini did not make is nobody's signature.
    foreign
        .into_iter()
        .filter(|s| !own.contains(s) && *s != FOREIGN_THOUGHT_SIGNATURE)
        .map(str::to_owned)
        .collect()
}

/// [`check_signed_by_target`] with the foreign signatures already taken.
pub(crate) fn check_foreign_signatures(
    foreign: &HashSet<String>,
    target: &str,
    body: &Value,
) -> Vec<ProviderViolation> {
    let mut out = Vec::new();
    if !foreign.is_empty() {
        walk(body, String::new(), foreign, target, &mut out);
    }
    out
}

fn signatures_of(part: &Part) -> Vec<&str> {
    let metadata = part.provider_metadata();
    let mut out: Vec<&str> = Vec::new();
    out.extend(signature(part));
    out.extend(encrypted_content(metadata));
    out.extend(gemini_signature(metadata));
    if let Part::RedactedReasoning { data, .. } = part {
        if !data.is_empty() {
            out.push(data);
        }
    }
    out
}

fn walk(
    value: &Value,
    path: String,
    foreign: &HashSet<String>,
    target: &str,
    out: &mut Vec<ProviderViolation>,
) {
    match value {
        Value::Object(object) => {
            for (key, inner) in object {
                let inner_path = format!("{path}/{key}");
                if let Some(text) = inner.as_str() {
                    if SIGNATURE_KEYS.contains(&key.as_str()) && foreign.contains(text) {
                        out.push(ProviderViolation {
                            rule: ProviderRule::SignedByTargetModel,
                            path: inner_path.clone(),
                            detail: format!("a signature another model than {target} made"),
                        });
                    }
                }
                walk(inner, inner_path, foreign, target, out);
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                walk(item, format!("{path}/{index}"), foreign, target, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::history::testing::history;

    #[test]
    fn signed_by_target_model() {
        let mut messages = history(vec![
            (Role::User, vec![Part::text("q")]),
            (
                Role::Assistant,
                vec![
                    Part::reasoning("t", Some(json!({"anthropic": {"signature": "SIG-A"}}))),
                    Part::text("a"),
                ],
            ),
        ]);
        messages[1].model = Some("anthropic/claude-opus-4-6".into());
        let body = json!({"messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "SIG-A"}]},
        ]});
        let found = check_signed_by_target(&messages, Some("anthropic/claude-sonnet-4-5"), &body);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].rule, ProviderRule::SignedByTargetModel);
        assert_eq!(found[0].path, "/messages/1/content/0/signature");
        assert_eq!(
            check_signed_by_target(&messages, Some("anthropic/claude-opus-4-6"), &body),
            vec![]
        );
        assert_eq!(check_signed_by_target(&messages, None, &body), vec![]);
    }
}
