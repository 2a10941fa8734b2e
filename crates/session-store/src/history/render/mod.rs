//! Rendering a [`View`] as a provider's request body, deterministically.
//!
//! Provider prompt caches hit only when a request starts with the bytes of the one before.
//! So rendering is a pure function of the view: keys are inserted in a fixed order (the
//! workspace enables serde_json's `preserve_order`), nothing carries a timestamp or a random
//! id, and each message renders from itself and what came before it. Appending a turn
//! therefore leaves every earlier rendered message byte for byte unchanged, except where the
//! idle latch or a compaction changes the history on purpose, or a synthetic tombstone is
//! replaced by the real result. [`digests`] fingerprints each rendered message so two requests
//! can be compared to find where they diverge.
//!
//! One further exception, on Anthropic only: its `system` is a top-level field, so a system
//! message appended mid-session changes `system`, not the messages. And a final assistant
//! message (a prefill, or a turn paused with `pause_turn`) is sent as a final message must
//! be: without trailing whitespace (rule 7b); and the latest assistant message sends its
//! unanswered server tool calls as calls. Once a turn follows, such a message is sent as an
//! earlier one must be (its text whole, a server call that never got its result described
//! in text).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::history::sanitize::View;

pub use super::provider::Provider;

pub mod anthropic;
pub mod gemini;
pub mod openai;
pub mod responses;

/// Renders `view` as `provider`'s request body, for the model that wrote the latest
/// assistant message.
pub fn render(view: &View, provider: Provider) -> Value {
    render_for(view, provider, None)
}

/// Renders `view` as `provider`'s request body for `model` (`"provider/model"`; `None`: the
/// model of the latest assistant message). Reasoning that came as an OpenAI-compatible
/// `reasoning_content` goes back only to the model that wrote it.
pub fn render_for(view: &View, provider: Provider, model: Option<&str>) -> Value {
    match provider {
        Provider::Anthropic => anthropic::render(view),
        Provider::OpenAi => openai::render_for(view, model),
        Provider::Responses => responses::render(view),
        Provider::Gemini => gemini::render(view),
    }
}

/// [`render_for`] over a view the caller gives up: the Anthropic renderer moves its strings
/// and values into the body instead of copying them (the export's way, issue 16).
pub(crate) fn render_owned(view: View, provider: Provider, model: Option<&str>) -> Value {
    match provider {
        Provider::Anthropic => anthropic::render_owned(view),
        _ => render_for(&view, provider, model),
    }
}

/// The fingerprint of one rendered message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageDigest {
    /// JSON pointer of the rendered value: `/system` or `/messages/{i}`.
    pub path: String,
    /// 64-bit FNV-1a of the value's compact JSON serialization, as 16 lowercase hex digits.
    pub digest: String,
}

/// One digest per rendered message of `body` (and one for the system prompt first, when
/// present: Anthropic's `system`, Responses' `instructions`, Gemini's `systemInstruction`),
/// in order; the messages are `messages`, Responses' `input` items or Gemini's `contents`.
/// Two bodies diverge at the first path whose digests differ.
///
/// The hash is FNV-1a 64 over `serde_json::to_string` of the value: cheap, dependency-free
/// and stable across builds; it finds divergence, it is not a cryptographic hash.
pub fn digests(body: &Value) -> Vec<MessageDigest> {
    let mut out = Vec::new();
    for key in ["system", "instructions", "systemInstruction"] {
        if let Some(system) = body.get(key) {
            out.push(digest_of(format!("/{key}"), system));
        }
    }
    for key in ["messages", "input", "contents"] {
        if let Some(messages) = body.get(key).and_then(Value::as_array) {
            for (index, message) in messages.iter().enumerate() {
                out.push(digest_of(format!("/{key}/{index}"), message));
            }
        }
    }
    out
}

fn digest_of(path: String, value: &Value) -> MessageDigest {
    // The compact serialization streamed into the hash, never held as a string.
    let mut hasher = Fnv1a64(crate::fnv::OFFSET);
    // Writing into the hasher cannot fail, nor can serializing a `Value`.
    let _ = serde_json::to_writer(&mut hasher, value);
    MessageDigest {
        path,
        digest: format!("{:016x}", hasher.0),
    }
}

/// FNV-1a 64 as an `io::Write`, so a serializer can feed it directly.
struct Fnv1a64(u64);

impl std::io::Write for Fnv1a64 {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 = crate::fnv::fold(self.0, bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The index of the first digest that differs between `a` and `b` (in path or value), or the
/// length of the shorter list when one is a prefix of the other; `None` when they are equal.
#[cfg(test)]
fn first_divergence(a: &[MessageDigest], b: &[MessageDigest]) -> Option<usize> {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .or_else(|| (a.len() != b.len()).then(|| a.len().min(b.len())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    use crate::history::sanitize::sanitize;
    use crate::history::testing::{arb, history};
    use crate::model::{Part, Role};

    /// A turn to append: a user message that opens it, then any messages but system ones
    /// (on Anthropic a system message changes the top-level `system`, by design).
    fn turn() -> impl Strategy<Value = Vec<(Role, Vec<Part>)>> {
        let role = prop_oneof![Just(Role::User), Just(Role::Assistant), Just(Role::Tool)];
        prop::collection::vec((role, prop::collection::vec(arb::part(), 0..4)), 0..6).prop_map(
            |rest| {
                let mut turn = vec![(Role::User, vec![Part::text("next question")])];
                turn.extend(rest);
                turn
            },
        )
    }

    fn rendered_messages(body: &Value) -> Vec<String> {
        body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .map(Value::to_string)
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Appending a turn leaves every message rendered before it byte for byte unchanged,
        /// for both providers, whatever the history before (broken ones included).
        #[test]
        fn appending_a_turn_keeps_the_rendered_prefix(
            before in arb::messages(12),
            turn in turn(),
        ) {
            let mut after = before.clone();
            after.extend(turn);
            let (old_view, new_view) = (sanitize(&history(before)), sanitize(&history(after)));
            for provider in [Provider::Anthropic, Provider::OpenAi] {
                let (old, new) = (render(&old_view, provider), render(&new_view, provider));
                let (mut old_messages, new_messages) = (rendered_messages(&old), rendered_messages(&new));
                prop_assert!(new_messages.len() >= old_messages.len());
                // The latest assistant message (with its tool block) is rendered as the latest
                // one when it holds server tool calls or is final (see the module docs).
                let latest = old["messages"].as_array().and_then(|m| m.iter().rposition(|m| m["role"] == "assistant"));
                let cut = latest.filter(|&i| {
                    let message = &old["messages"][i];
                    i + 1 == old_messages.len() || message.to_string().contains("server_tool_use")
                });
                let final_assistant = cut.is_some();
                if let Some(cut) = cut {
                    old_messages.truncate(cut);
                }
                prop_assert_eq!(&new_messages[..old_messages.len()], &old_messages[..], "{}", provider);
                prop_assert_eq!(old.get("system"), new.get("system"));
                // Deterministic: the same view renders to the same bytes.
                prop_assert_eq!(render(&new_view, provider).to_string(), new.to_string());
                let (mut old_digests, new_digests) = (digests(&old), digests(&new));
                if final_assistant {
                    old_digests.truncate(old_messages.len() + usize::from(old.get("system").is_some()));
                }
                prop_assert_eq!(&new_digests[..old_digests.len()], &old_digests[..]);
            }
        }
    }

    #[test]
    fn divergence_points_at_the_first_changed_message() {
        let a = json!({"system": "s", "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]});
        let b = json!({"system": "s", "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "c"}]});
        let (da, db) = (digests(&a), digests(&b));
        assert_eq!(da.len(), 3);
        assert_eq!(da[0].path, "/system");
        assert_eq!(first_divergence(&da, &db), Some(2));
        assert_eq!(first_divergence(&da, &da), None);
        assert_eq!(first_divergence(&da[..2], &da), Some(2));
    }
}
