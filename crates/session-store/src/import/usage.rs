//! Token usage where a source recorded it: the `usage` object of an Anthropic message (Claude
//! Code logs write the API response's, other logs keep it on assistant messages of a request
//! body) and of an OpenAI one (Chat Completions or Responses names).
//!
//! Counts are read as the source states them, never guessed: a missing count stays `None`,
//! and a count the store cannot keep exactly (negative, fractional, a string, above
//! [`crate::MAX_TOKEN_COUNT`]) refuses the import with its JSON path ([`crate::token_count`]).
//! OpenAI's prompt count includes the cached tokens; they are split off, so `input_tokens`
//! means the same for every source (input not read from the cache).

use serde_json::{Map, Value};

use super::{ImportError, Location};
use crate::model::{token_count, Usage};

/// The usage of an Anthropic message: `usage.{input_tokens, output_tokens,
/// cache_read_input_tokens, cache_creation_input_tokens}`, and `model` beside it. `at` is
/// the message's location.
pub(crate) fn anthropic(
    message: &Map<String, Value>,
    at: &Location,
) -> Result<Option<Usage>, ImportError> {
    let Some(usage) = message.get("usage").and_then(Value::as_object) else {
        return Ok(None);
    };
    let at = at.join("usage");
    let found = Usage {
        model: model(message, "anthropic"),
        input_tokens: count(usage, "input_tokens", &at)?,
        output_tokens: count(usage, "output_tokens", &at)?,
        cache_read_tokens: count(usage, "cache_read_input_tokens", &at)?,
        cache_write_tokens: count(usage, "cache_creation_input_tokens", &at)?,
    };
    Ok(counted(found))
}

/// The usage of an OpenAI message: Chat Completions' `usage.{prompt_tokens,
/// completion_tokens, prompt_tokens_details.cached_tokens}` or the Responses API's
/// `usage.{input_tokens, output_tokens, input_tokens_details.cached_tokens}`.
pub(crate) fn openai(
    message: &Map<String, Value>,
    at: &Location,
) -> Result<Option<Usage>, ImportError> {
    let Some(usage) = message.get("usage").and_then(Value::as_object) else {
        return Ok(None);
    };
    let at = at.join("usage");
    let (input, output, details) = if usage.contains_key("prompt_tokens") {
        (
            "prompt_tokens",
            "completion_tokens",
            "prompt_tokens_details",
        )
    } else {
        ("input_tokens", "output_tokens", "input_tokens_details")
    };
    let cached = match usage.get(details).and_then(Value::as_object) {
        Some(d) => count(d, "cached_tokens", &at.join(details))?,
        None => None,
    };
    let prompt = count(usage, input, &at)?;
    // The prompt count includes the cached tokens: a source that says otherwise is refused,
    // not clamped to 0.
    let input_tokens = match (prompt, cached) {
        (Some(prompt), Some(cached)) => Some(prompt.checked_sub(cached).ok_or_else(|| {
            ImportError::malformed(
                &at.join(details).join("cached_tokens"),
                format!(
                    "{cached} cached tokens are more than the {prompt} {input} that include them"
                ),
            )
        })?),
        (prompt, _) => prompt,
    };
    let found = Usage {
        model: model(message, "openai"),
        input_tokens,
        output_tokens: count(usage, output, &at)?,
        cache_read_tokens: cached,
        cache_write_tokens: None,
    };
    Ok(counted(found))
}

/// A usage with no count at all is no usage.
fn counted(usage: Usage) -> Option<Usage> {
    let any = usage.input_tokens.is_some()
        || usage.output_tokens.is_some()
        || usage.cache_read_tokens.is_some()
        || usage.cache_write_tokens.is_some();
    any.then_some(usage)
}

/// The count under `key` of the usage object at `at`: absent or `null` is `None`; what
/// [`token_count`] refuses is refused with its path.
fn count(
    object: &Map<String, Value>,
    key: &str,
    at: &Location,
) -> Result<Option<u64>, ImportError> {
    let Some(value) = object.get(key) else {
        return Ok(None);
    };
    token_count(value).map_err(|problem| ImportError::malformed(&at.join(key), problem))
}

/// `provider/model`, as the contract names models; a name that already has a provider stays.
fn model(message: &Map<String, Value>, provider: &str) -> Option<String> {
    let name = message.get("model")?.as_str()?.trim();
    if name.is_empty() {
        return None;
    }
    Some(if name.contains('/') {
        name.to_owned()
    } else {
        format!("{provider}/{name}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn anthropic_usage_keeps_each_count_and_names_the_model() {
        let message = object(json!({"model": "claude-sonnet-4-5", "usage": {
            "input_tokens": 3, "output_tokens": 40,
            "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 200}}));
        let at = Location::path("messages[1]");
        assert_eq!(
            anthropic(&message, &at).expect("usage"),
            Some(
                Usage::new(3, 40)
                    .cache(1000, 200)
                    .model("anthropic/claude-sonnet-4-5")
            )
        );
        assert_eq!(
            anthropic(&object(json!({"usage": {}})), &at).expect("none"),
            None
        );
    }

    #[test]
    fn openai_cached_tokens_are_split_off_the_prompt_count() {
        let message = object(json!({"model": "gpt-4.1", "usage": {
            "prompt_tokens": 1200, "completion_tokens": 30,
            "prompt_tokens_details": {"cached_tokens": 1000}}}));
        let at = Location::path("messages[1]");
        let usage = openai(&message, &at).expect("valid").expect("usage");
        assert_eq!(usage.input_tokens, Some(200));
        assert_eq!(usage.cache_read_tokens, Some(1000));
        assert_eq!(usage.cache_write_tokens, None);
        assert_eq!(usage.model.as_deref(), Some("openai/gpt-4.1"));
        let responses = object(json!({"usage": {"input_tokens": 5, "output_tokens": 6}}));
        assert_eq!(
            openai(&responses, &at).expect("valid"),
            Some(Usage::new(5, 6))
        );
    }
}
