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

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::history::sanitize::{BlankTurn, View, ViewMessage};
use crate::history::texts::BLANK_TURN;
use crate::model::{Part, Role};

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
    let view = match blank_turn_text(provider) {
        Some(text) if !view.blank_turns.is_empty() => {
            let mut owned = view.clone();
            place_blank_turns(&mut owned, text);
            Cow::Owned(owned)
        }
        _ => Cow::Borrowed(view),
    };
    let view = view.as_ref();
    match provider {
        Provider::Anthropic => anthropic::render(view),
        Provider::OpenAi => openai::render_for(view, model),
        Provider::Responses => responses::render(view),
        Provider::Gemini => gemini::render(view),
    }
}

/// [`render_for`] over a view the caller gives up: the Anthropic renderer moves its strings
/// and values into the body instead of copying them (the export's way, issue 16).
pub(crate) fn render_owned(mut view: View, provider: Provider, model: Option<&str>) -> Value {
    if let Some(text) = blank_turn_text(provider) {
        place_blank_turns(&mut view, text);
    }
    match provider {
        Provider::Anthropic => anthropic::render_owned(view),
        _ => render_for(&view, provider, model),
    }
}

/// What a stored user or assistant message holding only blank text (the view's
/// [`View::blank_turns`]) becomes in `provider`'s body: the one place this is decided.
///
/// - Gemini: `contents` must alternate and a blank text part is refused (the API reads `""`
///   as a part without data), so the turn is sent in its place as a content of its role
///   holding `BLANK_TURN`: the source's turns keep their positions, no user turns around
///   an empty model turn are joined, and no other text is put first. Sent wherever it stood
///   (also last), unless the content before it has its role (it would only be joined into
///   it); decided from what came before alone, so appending a turn never changes what was
///   rendered before it.
/// - Anthropic, OpenAI Chat and Responses: left out (`None`). Consecutive messages of one
///   role are legal there (Anthropic joins them itself), so nothing needs to stand in.
pub fn blank_turn_text(provider: Provider) -> Option<&'static str> {
    match provider {
        Provider::Gemini => Some(BLANK_TURN),
        Provider::Anthropic | Provider::OpenAi | Provider::Responses => None,
    }
}

/// Puts a message holding `text` where each of `view`'s blank turns stood, in one pass; a
/// blank turn right after a message of its own role (a tool block counts as a user's) is
/// left out, as it would only be joined into that message.
fn place_blank_turns(view: &mut View, text: &str) {
    let turns = std::mem::take(&mut view.blank_turns);
    if turns.is_empty() {
        return;
    }
    let messages = std::mem::take(&mut view.messages);
    let mut out: Vec<ViewMessage> = Vec::with_capacity(messages.len() + turns.len());
    let mut turns = turns.into_iter().peekable();
    let place = |out: &mut Vec<ViewMessage>, turn: BlankTurn| {
        let side = |role: Role| if role == Role::Tool { Role::User } else { role };
        let before = out
            .iter()
            .rev()
            .map(|m| m.role)
            .find(|role| *role != Role::System);
        if before.map(side) != Some(turn.role) {
            out.push(stand_in(turn.role, turn.seq, text));
        }
    };
    for (index, message) in messages.into_iter().enumerate() {
        while let Some(turn) = turns.next_if(|turn| turn.position <= index) {
            place(&mut out, turn);
        }
        out.push(message);
    }
    for turn in turns {
        place(&mut out, turn);
    }
    view.messages = out;
}

fn stand_in(role: Role, seq: i64, text: &str) -> ViewMessage {
    ViewMessage {
        role,
        parts: vec![Part::text(text)],
        seqs: vec![seq],
        opens_turn: role == Role::User,
        model: None,
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

    /// Chat Completions refuses a call id over 40 characters and Responses one over 64: the
    /// view's ids are held to 40 (a longer id cut, a repeated one's suffix inside the limit
    /// too), each result follows its call's new id, and every provider's check passes; the
    /// checks name an id one character over each limit.
    #[test]
    fn call_ids_longer_than_a_provider_takes_are_cut_for_every_provider() {
        let long = "call_".to_owned() + &"x".repeat(295);
        let forty = "f".repeat(40);
        let odd = "portkey-6aa6db90-1b84-4155-9f32-f658c97d6b1b:0";
        let mut messages = Vec::new();
        for id in [
            long.as_str(),
            forty.as_str(),
            forty.as_str(),
            odd,
            long.as_str(),
        ] {
            messages.push((Role::User, vec![Part::text("q")]));
            messages.push((Role::Assistant, vec![Part::tool_use(id, "t", json!({}))]));
            messages.push((Role::Tool, vec![Part::tool_result(id, "r")]));
        }
        let view = sanitize(&history(messages));
        let ids: Vec<String> = view
            .messages
            .iter()
            .flat_map(|m| m.parts.iter().filter_map(Part::call_id).map(str::to_owned))
            .collect();
        assert_eq!(ids.len(), 5, "{ids:?}");
        assert!(ids.iter().all(|id| id.len() <= 40), "{ids:?}");
        assert_eq!(ids[1], forty);
        let unique: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!(unique.len(), 5, "{ids:?}");
        for provider in Provider::ALL {
            rendered_valid(&view, provider);
        }
        let over = |max: usize| "i".repeat(max + 1);
        let [chat, _] = one_call(&over(40), "t");
        let [_, responses] = one_call(&over(64), "t");
        names_one([chat, responses], "characters long");
    }

    /// `view` rendered for `provider`, which its check passes.
    fn rendered_valid(view: &View, provider: Provider) -> Value {
        let body = render(view, provider);
        assert_eq!(
            crate::history::contract::check(provider, &body),
            vec![],
            "{body:#}"
        );
        body
    }

    /// A Chat Completions and a Responses body, each of one call `id` to `name` and its
    /// answer.
    fn one_call(id: &str, name: &str) -> [(Provider, Value); 2] {
        let chat = json!({"messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": id, "type": "function", "function": {"name": name, "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": id, "content": "r"},
        ]});
        let responses = json!({"input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "q"}]},
            {"type": "function_call", "call_id": id, "name": name, "arguments": "{}"},
            {"type": "function_call_output", "call_id": id, "output": "r"},
        ]});
        [(Provider::OpenAi, chat), (Provider::Responses, responses)]
    }

    /// Each body's check names exactly one violation, and it says `what`.
    fn names_one(bodies: [(Provider, Value); 2], what: &str) {
        for (provider, body) in bodies {
            let named: Vec<_> = crate::history::contract::check(provider, &body)
                .into_iter()
                .map(|violation| violation.detail)
                .collect();
            assert_eq!(named.len(), 1, "{provider}: {named:?}");
            assert!(named[0].contains(what), "{named:?}");
        }
    }

    /// Chat Completions refuses a history whose call names a tool outside
    /// `^[a-zA-Z0-9_-]+$` ("Invalid 'messages[9].tool_calls[0].function.name': string does
    /// not match pattern"), including the `multi_tool_use.parallel` models make up: every
    /// provider is sent a name its tool declarations take, Gemini's response the same name as
    /// its call, a usual name unchanged; the OpenAI and Responses checks name such a name.
    #[test]
    fn tool_names_a_provider_refuses_are_sent_in_its_rule() {
        let names = [
            "multi_tool_use.parallel",
            "get_/whoami",
            "Sequential Thinking",
            "2fa",
            "bash",
        ];
        let mut messages = vec![(Role::User, vec![Part::text("q")])];
        for (at, name) in names.iter().enumerate() {
            let id = format!("call_{at}");
            messages.push((Role::Assistant, vec![Part::tool_use(&id, *name, json!({}))]));
            messages.push((Role::Tool, vec![Part::tool_result(&id, "r")]));
        }
        let view = sanitize(&history(messages));
        for provider in Provider::ALL {
            let body = rendered_valid(&view, provider);
            let text = body.to_string();
            for name in names {
                let sent = provider.tool_name(name);
                assert!(
                    text.contains(&format!("\"{sent}\"")),
                    "{provider}: {sent} in {body:#}"
                );
            }
            // Gemini takes a dot.
            let dotted = provider == Provider::Gemini;
            assert_eq!(
                text.contains("multi_tool_use.parallel"),
                dotted,
                "{provider}: {body:#}"
            );
            assert!(text.contains("\"bash\""), "{provider}");
        }
        let gemini = render(&view, Provider::Gemini).to_string();
        assert_eq!(
            gemini.matches("\"_2fa\"").count(),
            2,
            "call and response: {gemini}"
        );
        let [chat, _] = one_call("c", "a.b");
        let [_, responses] = one_call("c", "a b");
        names_one([chat, responses], "tool name");
    }

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

    /// The roles and texts of a Gemini body's contents.
    fn gemini_turns(messages: Vec<(Role, Vec<Part>)>) -> Vec<(String, Vec<String>)> {
        let body = render(&sanitize(&history(messages)), Provider::Gemini);
        assert_eq!(
            crate::history::contract::check_gemini(&body),
            vec![],
            "{body:#}"
        );
        body["contents"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let texts = c["parts"].as_array().into_iter().flatten();
                let texts = texts.map(|p| p["text"].as_str().unwrap_or("(not text)").to_owned());
                (
                    c["role"].as_str().unwrap_or_default().to_owned(),
                    texts.collect(),
                )
            })
            .collect()
    }

    #[test]
    fn blank_turns_keep_their_places_for_gemini_only() {
        let (user, assistant, tool) = (Role::User, Role::Assistant, Role::Tool);
        let t = |text: &str| vec![Part::text(text)];
        let turn = |role: &str, texts: &[&str]| {
            let texts = texts.iter().map(|t| (*t).to_owned()).collect();
            (role.to_owned(), texts)
        };
        let blank = BLANK_TURN;
        // Two blank turns in a row, first: each keeps its place.
        assert_eq!(
            gemini_turns(vec![(user, t("")), (assistant, t(" ")), (user, t("q"))]),
            vec![
                turn("user", &[blank]),
                turn("model", &[blank]),
                turn("user", &["q"])
            ]
        );
        // A blank assistant message between calls and their results stays invisible (the
        // health check's reading: it breaks the pair); one after the results keeps its place.
        let call = || vec![Part::tool_use("c1", "f", json!({}))];
        let result = || vec![Part::tool_result("c1", "ok")];
        let answered = gemini_turns(vec![
            (user, t("q")),
            (assistant, call()),
            (tool, result()),
            (assistant, t("")),
            (user, t("next")),
        ]);
        assert_eq!(
            answered,
            vec![
                turn("user", &["q"]),
                turn("model", &["(not text)"]),
                turn("user", &["(not text)"]),
                turn("model", &[blank]),
                turn("user", &["next"]),
            ]
        );
        let between = gemini_turns(vec![
            (user, t("q")),
            (assistant, call()),
            (assistant, t("")),
            (tool, result()),
        ]);
        assert!(
            between
                .iter()
                .all(|(_, texts)| !texts.iter().any(|t| t == blank)),
            "{between:?}"
        );
        // Other providers leave blank turns out.
        let view = sanitize(&history(vec![(user, t("")), (assistant, t("a"))]));
        assert_eq!(view.blank_turns.len(), 1);
        for provider in [Provider::Anthropic, Provider::OpenAi, Provider::Responses] {
            assert_eq!(blank_turn_text(provider), None);
            assert!(!render(&view, provider).to_string().contains(BLANK_TURN));
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
