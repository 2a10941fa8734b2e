//! Signed reasoning: which reasoning parts carry a provider signature, and where it lives.
//!
//! Anthropic signs thinking blocks and validates them by position: the thinking blocks of the
//! latest assistant message must come back byte for byte, in the same order and count, with
//! the same blocks between them. The signature sits in the part's provider metadata under
//! `anthropic` (direct API), `bedrock` (AWS) or `vertex` (GCP); the same rules apply to all
//! three (PROVIDER_RULES 9-10).

use serde_json::Value;

use crate::model::Part;

/// The provider-metadata namespaces whose `signature` key signs a reasoning part, in the
/// order they are looked up.
pub const SIGNATURE_NAMESPACES: [&str; 3] = ["anthropic", "bedrock", "vertex"];

/// The signature stored under `anthropic`, `bedrock` or `vertex` in `metadata`, if any
/// (a non-empty string under the first namespace that has one).
pub fn signature_in(metadata: Option<&Value>) -> Option<&str> {
    let metadata = metadata?;
    SIGNATURE_NAMESPACES.iter().find_map(|namespace| {
        metadata
            .get(namespace)?
            .get("signature")?
            .as_str()
            .filter(|signature| !signature.is_empty())
    })
}

/// The signature of a reasoning part; `None` for any other part or an unsigned one.
pub fn signature(part: &Part) -> Option<&str> {
    match part {
        Part::Reasoning {
            provider_metadata, ..
        } => signature_in(provider_metadata.as_ref()),
        _ => None,
    }
}

/// True for a part whose position the provider validates: a signed reasoning part, or a
/// redacted reasoning part with data (Anthropic's `redacted_thinking`, which is validated
/// the same way as a signed `thinking` block).
pub fn is_position_validated(part: &Part) -> bool {
    match part {
        Part::Reasoning { .. } => signature(part).is_some(),
        Part::RedactedReasoning { data, .. } => !data.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn signature_is_found_under_each_namespace() {
        for namespace in SIGNATURE_NAMESPACES {
            let part = Part::reasoning("t", Some(json!({ namespace: {"signature": "sig"} })));
            assert_eq!(signature(&part), Some("sig"), "{namespace}");
            assert!(is_position_validated(&part));
        }
    }

    #[test]
    fn unsigned_or_foreign_reasoning_is_not_signed() {
        let parts = [
            Part::reasoning("t", None),
            Part::reasoning("t", Some(json!({"openai": {"signature": "x"}}))),
            Part::reasoning("t", Some(json!({"anthropic": {"signature": ""}}))),
            Part::reasoning("t", Some(json!({"anthropic": {"signature": 7}}))),
            Part::text("x"),
        ];
        assert!(!parts.iter().any(is_position_validated));
    }
}
