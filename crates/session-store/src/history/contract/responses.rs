//! The OpenAI Responses API rules (PROVIDER_RULES 14) over a rendered `{"instructions"?,
//! "input": [...]}` body. Independent of the renderer: it reads only the JSON.

use std::collections::HashMap;

use serde_json::Value;

use super::{push, require_id_length, require_name, ProviderRule, ProviderViolation};
use crate::history::blank::is_blank;
use crate::history::provider::Provider;

/// Whether `id` may stand as the `id` of an input item of type `kind`: the API refuses a
/// `function_call` id that does not begin with `fc` and a `reasoning` id that does not begin
/// with `rs` ("Invalid 'input[66].id': 'item_df7e...'. Expected an ID that begins with
/// 'rs'."), such as the ids gateways and SDKs make up for items of other models
/// (`__fake_id__`, `item_...`). The renderer sends an item id only where this holds.
pub(crate) fn item_id_fits(kind: &str, id: &str) -> bool {
    let prefix = match kind {
        "function_call" => "fc",
        "custom_tool_call" => "ctc",
        "reasoning" => "rs",
        _ => return true,
    };
    id.starts_with(prefix)
}

/// Whether `item` (of type `kind`) has no `id` or one the API takes: a string
/// [`item_id_fits`] takes. The renderer sends a block kept verbatim as it came only where
/// this holds.
pub(crate) fn item_id_allowed(item: &Value, kind: &str) -> bool {
    item.get("id")
        .is_none_or(|id| id.as_str().is_some_and(|id| item_id_fits(kind, id)))
}

/// A `Shape` violation when `item` (of type `kind`) has an `id` that is not a string
/// [`item_id_fits`] takes.
fn require_item_id(item: &Value, kind: &str, path: &str, out: &mut Vec<ProviderViolation>) {
    if !item_id_allowed(item, kind) {
        let id = item.get("id").unwrap_or(&Value::Null);
        push(
            out,
            ProviderRule::Shape,
            &format!("{path}/id"),
            format!("{kind} item id {id} is not one the API takes for a {kind}"),
        );
    }
}

/// Every violation of the OpenAI Responses rules (14) in `body`.
pub fn check_responses(body: &Value) -> Vec<ProviderViolation> {
    let mut out = Vec::new();
    let Some(items) = input_items(body, &mut out) else {
        return out;
    };
    let mut calls = Calls::default();
    let mut item_ids: HashMap<&str, String> = HashMap::new();
    for (index, item) in items.iter().enumerate() {
        let path = format!("/input/{index}");
        let Some(kind) = item_kind(item, &path, &mut out) else {
            continue;
        };
        require_item_id(item, kind, &path, &mut out);
        if let Some(id) = item.get("id").and_then(Value::as_str) {
            match item_ids.get(id) {
                Some(first) => push(
                    &mut out,
                    ProviderRule::Shape,
                    &format!("{path}/id"),
                    format!("item id {id:?} already used at {first}"),
                ),
                None => {
                    item_ids.insert(id, path.clone());
                }
            }
        }
        match kind {
            "message" => check_message(item, &path, &mut out),
            "function_call" | "custom_tool_call" => {
                check_function_call(item, kind, &path, &mut calls, &mut out);
            }
            "function_call_output" | "custom_tool_call_output" => {
                check_function_output(item, kind, &path, &mut calls, &mut out);
            }
            "reasoning" => check_reasoning(items, index, &path, &mut out),
            _ => {}
        }
    }
    calls.unanswered(&mut out);
    out
}

/// The body's `input` list, after the top-level shape checks; `None` when there is none.
fn input_items<'a>(body: &'a Value, out: &mut Vec<ProviderViolation>) -> Option<&'a [Value]> {
    if !body.is_object() {
        push(out, ProviderRule::Shape, "", "body is not a JSON object");
        return None;
    }
    if body.get("instructions").is_some_and(|i| !i.is_string()) {
        push(
            out,
            ProviderRule::Shape,
            "/instructions",
            "instructions is not a string",
        );
    }
    let items = body.get("input").and_then(Value::as_array);
    if items.is_none() {
        push(
            out,
            ProviderRule::Shape,
            "/input",
            "body has no input array",
        );
    }
    items.map(Vec::as_slice)
}

/// An input item's `type` (`message` for an item with a role and no type); `None`, with a
/// violation, for an item that is no object or has neither.
fn item_kind<'a>(item: &'a Value, path: &str, out: &mut Vec<ProviderViolation>) -> Option<&'a str> {
    let Some(object) = item.as_object() else {
        push(
            out,
            ProviderRule::Shape,
            path,
            "input item is not an object",
        );
        return None;
    };
    match object.get("type").and_then(Value::as_str) {
        Some(kind) => Some(kind),
        None if object.contains_key("role") => Some("message"),
        None => {
            push(out, ProviderRule::Shape, path, "input item without a type");
            None
        }
    }
}

/// The calls seen so far, by `call_id`: where each is, its type (`function_call` or
/// `custom_tool_call`) and whether it was answered.
#[derive(Default)]
struct Calls<'a> {
    by_id: HashMap<&'a str, (String, &'a str, bool)>,
    order: Vec<&'a str>,
}

impl<'a> Calls<'a> {
    /// A violation for every call no output answered, in the order of the calls.
    fn unanswered(&self, out: &mut Vec<ProviderViolation>) {
        for id in &self.order {
            if let Some((path, kind, false)) = self.by_id.get(id) {
                push(
                    out,
                    ProviderRule::FunctionCallAnswered,
                    path,
                    format!("no {kind}_output for call_id {id:?}"),
                );
            }
        }
    }
}

/// A `function_call` or a `custom_tool_call` (`kind`): a call id of its own, a name, and its
/// arguments as a JSON string (a function call) or its free-form input as a string.
fn check_function_call<'a>(
    item: &'a Value,
    kind: &'a str,
    path: &str,
    calls: &mut Calls<'a>,
    out: &mut Vec<ProviderViolation>,
) {
    match item.get("call_id").and_then(Value::as_str) {
        Some(id) if !id.is_empty() => {
            require_id_length(id, Provider::Responses, path, out);
            if let Some((first, _, _)) = calls.by_id.get(id) {
                push(
                    out,
                    ProviderRule::UniqueToolUseIds,
                    path,
                    format!("call_id {id:?} already used at {first}"),
                );
            } else {
                calls.by_id.insert(id, (path.to_owned(), kind, false));
                calls.order.push(id);
            }
        }
        _ => push(
            out,
            ProviderRule::Shape,
            path,
            format!("{kind} without a call_id"),
        ),
    }
    let unnamed = match kind {
        "custom_tool_call" => "custom_tool_call without a name",
        _ => "function_call without a name",
    };
    require_name(
        item,
        "/name",
        path,
        (unnamed, Some(Provider::Responses)),
        out,
    );
    if kind == "custom_tool_call" {
        if !item.get("input").is_some_and(Value::is_string) {
            push(
                out,
                ProviderRule::Shape,
                &format!("{path}/input"),
                "custom_tool_call input is not a string",
            );
        }
        return;
    }
    let arguments = format!("{path}/arguments");
    match item.get("arguments") {
        Some(Value::String(raw)) if serde_json::from_str::<Value>(raw).is_ok() => {}
        Some(Value::String(_)) => push(
            out,
            ProviderRule::ArgumentsJsonString,
            &arguments,
            "arguments are not valid JSON",
        ),
        _ => push(
            out,
            ProviderRule::ArgumentsJsonString,
            &arguments,
            "arguments are not a string",
        ),
    }
}

/// A `function_call_output` or a `custom_tool_call_output` (`kind`) answers a call of its
/// own type before it, once.
fn check_function_output(
    item: &Value,
    kind: &str,
    path: &str,
    calls: &mut Calls<'_>,
    out: &mut Vec<ProviderViolation>,
) {
    let id = item
        .get("call_id")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let call_kind = kind.strip_suffix("_output").unwrap_or(kind);
    match calls.by_id.get_mut(id) {
        Some((_, called, answered)) if !*answered && *called == call_kind => *answered = true,
        Some((_, called, false)) => push(
            out,
            ProviderRule::FunctionOutputAnswersCall,
            path,
            format!("a {kind} answers the {called} {id:?}"),
        ),
        Some((_, called, true)) => push(
            out,
            ProviderRule::FunctionOutputAnswersCall,
            path,
            format!("{called} {id:?} is answered twice"),
        ),
        None => push(
            out,
            ProviderRule::FunctionOutputAnswersCall,
            path,
            format!("no {call_kind} with call_id {id:?} before this output"),
        ),
    }
    let output_path = format!("{path}/output");
    match item.get("output") {
        Some(Value::String(_)) => {}
        Some(Value::Array(parts)) if !parts.is_empty() => {
            let allowed = ["input_text", "input_image", "input_file"];
            check_parts(parts, &allowed, &format!("a {kind}"), &output_path, out);
        }
        _ => push(
            out,
            ProviderRule::Shape,
            &output_path,
            format!("{kind} without an output"),
        ),
    }
}

/// A reasoning item (`items[index]`) carries its encrypted content and summary list, and is
/// followed, past any other reasoning, by the output item it preceded.
fn check_reasoning(items: &[Value], index: usize, path: &str, out: &mut Vec<ProviderViolation>) {
    let item = &items[index];
    if item
        .get("encrypted_content")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        push(
            out,
            ProviderRule::ReasoningEncrypted,
            path,
            "reasoning item without encrypted_content",
        );
    }
    if !item.get("summary").is_some_and(Value::is_array) {
        push(
            out,
            ProviderRule::Shape,
            &format!("{path}/summary"),
            "reasoning item without a summary list",
        );
    }
    let follower = items[index + 1..]
        .iter()
        .find(|next| next.get("type").and_then(Value::as_str) != Some("reasoning"));
    // An output item: an assistant message or a call of any kind, not an input.
    let followed = follower.is_some_and(|next| match next.get("type").and_then(Value::as_str) {
        Some("message") | None => next.get("role").and_then(Value::as_str) == Some("assistant"),
        Some(kind) => !kind.ends_with("_output") && kind != "item_reference",
    });
    if !followed {
        push(
            out,
            ProviderRule::ReasoningFollowed,
            path,
            "reasoning item not followed by the assistant item it preceded",
        );
    }
}

fn check_message(item: &Value, path: &str, out: &mut Vec<ProviderViolation>) {
    let role = item.get("role").and_then(Value::as_str).unwrap_or_default();
    let allowed: &[&str] = match role {
        "user" | "system" | "developer" => {
            &["input_text", "input_image", "input_file", "input_audio"]
        }
        "assistant" => &["output_text", "refusal"],
        other => {
            push(
                out,
                ProviderRule::Roles,
                &format!("{path}/role"),
                format!("role {other:?}: expected user, assistant, system or developer"),
            );
            return;
        }
    };
    let content_path = format!("{path}/content");
    match item.get("content") {
        Some(Value::String(text)) => {
            if is_blank(text) {
                push(
                    out,
                    ProviderRule::NonEmptyText,
                    &content_path,
                    "blank message content",
                );
            }
        }
        Some(Value::Array(parts)) => {
            if parts.is_empty() {
                push(
                    out,
                    ProviderRule::Shape,
                    &content_path,
                    "empty message content",
                );
            }
            check_parts(
                parts,
                allowed,
                &format!("a {role} message"),
                &content_path,
                out,
            );
        }
        _ => push(
            out,
            ProviderRule::Shape,
            &content_path,
            "content is neither a string nor parts",
        ),
    }
}

/// The rules for each part of a content list at `content_path` (a message's, or an output's),
/// of which `allowed` names the types `owner` takes.
fn check_parts(
    parts: &[Value],
    allowed: &[&str],
    owner: &str,
    content_path: &str,
    out: &mut Vec<ProviderViolation>,
) {
    for (index, part) in parts.iter().enumerate() {
        let part_path = format!("{content_path}/{index}");
        let kind = part.get("type").and_then(Value::as_str).unwrap_or_default();
        if !allowed.contains(&kind) {
            push(
                out,
                ProviderRule::Shape,
                &part_path,
                format!("content part {kind:?} in {owner}"),
            );
            continue;
        }
        if kind == "input_file" && part.get("file_data").is_some() {
            let missing = ("input_file with file_data but no filename", None);
            require_name(part, "/filename", &part_path, missing, out);
        }
        let url = part.get("image_url").and_then(Value::as_str);
        if let Some(fault) = url.and_then(crate::history::media::image_url_fault) {
            push(out, ProviderRule::Shape, &part_path, fault);
        }
        let field = if kind == "refusal" { "refusal" } else { "text" };
        if kind.ends_with("text") || kind == "refusal" {
            match part.get(field).and_then(Value::as_str) {
                Some(text) if is_blank(text) => {
                    push(
                        out,
                        ProviderRule::NonEmptyText,
                        &part_path,
                        "blank text part",
                    );
                }
                Some(_) => {}
                None => push(
                    out,
                    ProviderRule::Shape,
                    &part_path,
                    "text part without text",
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_item_id_is_used_once() {
        let body = json!({"input": [
            {"type": "message", "id": "msg_1", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]},
            {"type": "message", "id": "msg_1", "role": "assistant", "content": [{"type": "output_text", "text": "b"}]},
        ]});
        let named: Vec<String> = check_responses(&body)
            .into_iter()
            .map(|violation| violation.path)
            .collect();
        assert_eq!(named, ["/input/1/id"]);
    }

    #[test]
    fn a_custom_tool_call_is_answered_by_a_custom_tool_call_output() {
        let body = |call: Value, output: Value| json!({"input": [call, output]});
        let custom = json!({"type": "custom_tool_call", "call_id": "c", "name": "p", "input": "x"});
        let function =
            json!({"type": "function_call", "call_id": "c", "name": "p", "arguments": "{}"});
        let custom_out = json!({"type": "custom_tool_call_output", "call_id": "c", "output": "ok"});
        let function_out = json!({"type": "function_call_output", "call_id": "c", "output": "ok"});
        assert!(check_responses(&body(custom.clone(), custom_out.clone())).is_empty());
        assert!(check_responses(&body(function.clone(), function_out.clone())).is_empty());
        for (call, output) in [(custom.clone(), function_out), (function, custom_out)] {
            assert_eq!(
                rules(body(call, output)),
                [
                    ProviderRule::FunctionOutputAnswersCall,
                    ProviderRule::FunctionCallAnswered
                ]
            );
        }
        let mut free_form = custom;
        free_form["input"] = json!({"patch": "x"});
        assert_eq!(
            check_responses(&json!({"input": [free_form]}))
                .iter()
                .map(|v| v.path.as_str())
                .collect::<Vec<_>>(),
            ["/input/0/input", "/input/0"]
        );
    }

    #[test]
    fn an_output_list_holds_input_parts_the_api_takes() {
        let with_output = |output: Value| {
            json!({"input": [
                {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c", "output": output},
            ]})
        };
        let paths = |output: Value| -> Vec<String> {
            check_responses(&with_output(output))
                .into_iter()
                .map(|violation| violation.path)
                .collect()
        };
        assert!(paths(json!([{"type": "input_text", "text": "ok"}])).is_empty());
        assert_eq!(paths(json!([])), ["/input/1/output"]);
        assert_eq!(
            paths(
                json!([{"type": "output_text", "text": "x"}, {"type": "input_text", "text": " "}])
            ),
            ["/input/1/output/0", "/input/1/output/1"]
        );
        assert_eq!(
            paths(
                json!([{"type": "input_image", "image_url": "data:image/heic;base64,AAAAGGZ0eXBoZWljAAAAAA=="}])
            ),
            ["/input/1/output/0"]
        );
    }

    fn rules(body: Value) -> Vec<ProviderRule> {
        check_responses(&body).iter().map(|v| v.rule).collect()
    }

    fn call(id: &str) -> Value {
        json!({"type": "function_call", "call_id": id, "name": "f", "arguments": "{}"})
    }

    fn output(id: &str) -> Value {
        json!({"type": "function_call_output", "call_id": id, "output": "ok"})
    }

    fn reasoning() -> Value {
        json!({"type": "reasoning", "summary": [], "encrypted_content": "E"})
    }

    fn user(text: &str) -> Value {
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
    }

    #[test]
    fn a_healthy_body_passes() {
        let body = json!({"instructions": "be brief", "input": [
            user("q"), reasoning(), call("a"), call("b"), output("b"), output("a"),
            {"role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
        ]});
        assert_eq!(check_responses(&body), vec![]);
    }

    #[test]
    fn function_call_answered() {
        assert_eq!(
            rules(json!({"input": [user("q"), call("a")]})),
            [ProviderRule::FunctionCallAnswered]
        );
    }

    #[test]
    fn function_output_answers_call() {
        assert_eq!(
            rules(json!({"input": [user("q"), output("a"), call("a"), output("a"), output("a")]})),
            [
                ProviderRule::FunctionOutputAnswersCall,
                ProviderRule::FunctionOutputAnswersCall
            ]
        );
    }

    #[test]
    fn reasoning_followed() {
        assert_eq!(
            rules(json!({"input": [user("q"), reasoning()]})),
            [ProviderRule::ReasoningFollowed]
        );
        assert_eq!(
            rules(json!({"input": [user("q"), reasoning(), user("r")]})),
            [ProviderRule::ReasoningFollowed]
        );
        assert_eq!(
            rules(json!({"input": [user("q"), reasoning(), reasoning(), call("a"), output("a")]})),
            []
        );
    }

    #[test]
    fn reasoning_encrypted() {
        let body = json!({"input": [user("q"), {"type": "reasoning", "summary": []}, call("a"), output("a")]});
        assert_eq!(rules(body), [ProviderRule::ReasoningEncrypted]);
    }

    #[test]
    fn unique_call_ids_arguments_roles_and_text_are_checked() {
        let found = rules(json!({"input": [
            {"role": "tool", "content": "x"},
            user(" "),
            call("a"), output("a"), call("a"),
            {"type": "function_call", "call_id": "b", "name": "f", "arguments": {"k": 1}},
            output("b"),
        ]}));
        for rule in [
            ProviderRule::Roles,
            ProviderRule::NonEmptyText,
            ProviderRule::UniqueToolUseIds,
            ProviderRule::ArgumentsJsonString,
        ] {
            assert!(found.contains(&rule), "{rule} not in {found:?}");
        }
        assert_eq!(rules(json!({"messages": []})), [ProviderRule::Shape]);
    }

    mod rendered {
        use proptest::prelude::*;

        use super::super::check_responses;
        use crate::history::render::responses::render;
        use crate::history::sanitize::sanitize;
        use crate::history::testing::{arb, history};

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(128))]

            /// Any stored history, however broken, renders into a body the provider accepts.
            #[test]
            fn rendered_random_histories_pass_the_responses_contract(raw in arb::messages(14)) {
                let body = render(&sanitize(&history(raw)));
                prop_assert_eq!(check_responses(&body), vec![], "{:#}", body);
            }
        }
    }
}
