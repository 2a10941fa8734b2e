//! The Gemini `generateContent` rules (PROVIDER_RULES 15) over a rendered
//! `{"systemInstruction"?, "contents": [...]}` body. Independent of the renderer: it reads
//! only the JSON.

use std::collections::HashSet;

use serde_json::Value;

use super::{push, require_name, ProviderRule, ProviderViolation};
use crate::history::blank::is_blank;
use crate::history::media::gemini_image_type;

/// The keys that hold a part's data; a part has exactly one.
pub(crate) const DATA_KEYS: &[&str] = &[
    "text",
    "inlineData",
    "fileData",
    "functionCall",
    "functionResponse",
    "executableCode",
    "codeExecutionResult",
    // Gemini 3's server-side tools (built-in tools combined with function calling): the
    // call and its response both sit in the model content, each with its signature.
    "toolCall",
    "toolResponse",
];

/// A function call or response: (path, name, id).
type Called<'a> = (String, &'a str, Option<&'a str>);

/// Every violation of the Gemini rules (15) in `body`.
pub fn check_gemini(body: &Value) -> Vec<ProviderViolation> {
    let mut out = Vec::new();
    if !body.is_object() {
        push(
            &mut out,
            ProviderRule::Shape,
            "",
            "body is not a JSON object",
        );
        return out;
    }
    check_system(body, &mut out);
    let Some(contents) = body.get("contents").and_then(Value::as_array) else {
        push(
            &mut out,
            ProviderRule::Shape,
            "/contents",
            "body has no contents array",
        );
        return out;
    };
    let mut ids = HashSet::new();
    let mut read: Vec<Content<'_>> = Vec::with_capacity(contents.len());
    for (index, content) in contents.iter().enumerate() {
        let path = format!("/contents/{index}");
        let role = content
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or_default();
        check_role(index, role, read.last().map(|c| c.role), &path, &mut out);
        read.push(Content::read(content, role, &path, &mut ids, &mut out));
    }
    check_pairs(&read, &mut out);
    check_signatures(&read, &mut out);
    out
}

/// `systemInstruction`, when present, is `{"parts": [{"text"}, ...]}`.
fn check_system(body: &Value, out: &mut Vec<ProviderViolation>) {
    let Some(system) = body.get("systemInstruction") else {
        return;
    };
    let texts_ok = system
        .get("parts")
        .and_then(Value::as_array)
        .is_some_and(|parts| {
            parts
                .iter()
                .all(|p| p.get("text").and_then(Value::as_str).is_some())
        });
    if !texts_ok {
        push(
            out,
            ProviderRule::Shape,
            "/systemInstruction",
            "systemInstruction is not {\"parts\": [{\"text\"}]}",
        );
    }
}

/// Roles are user or model, the first is user, and they alternate.
fn check_role(
    index: usize,
    role: &str,
    previous: Option<&str>,
    path: &str,
    out: &mut Vec<ProviderViolation>,
) {
    if role != "user" && role != "model" {
        push(
            out,
            ProviderRule::Roles,
            &format!("{path}/role"),
            format!("role {role:?}: expected user or model"),
        );
    }
    if index == 0 && role != "user" {
        push(
            out,
            ProviderRule::FirstMessageUser,
            path,
            format!("first content is {role}"),
        );
    }
    if previous == Some(role) {
        push(
            out,
            ProviderRule::ContentsAlternate,
            path,
            format!("two {role} contents in a row"),
        );
    }
}

/// One content as the pairing and signature rules see it.
struct Content<'a> {
    role: &'a str,
    calls: Vec<Called<'a>>,
    responses: Vec<Called<'a>>,
    /// Holds something besides function responses (a person's turn).
    speaks: bool,
    /// The first function call's path, and whether it carries a `thoughtSignature`.
    first_call: Option<(String, bool)>,
}

impl<'a> Content<'a> {
    /// Checks each part of `content` and collects its calls and responses; a call id seen
    /// before (in `ids`) breaks uniqueness.
    fn read(
        content: &'a Value,
        role: &'a str,
        path: &str,
        ids: &mut HashSet<&'a str>,
        out: &mut Vec<ProviderViolation>,
    ) -> Self {
        let mut read = Content {
            role,
            calls: Vec::new(),
            responses: Vec::new(),
            speaks: false,
            first_call: None,
        };
        let parts = match content.get("parts").and_then(Value::as_array) {
            Some(parts) if !parts.is_empty() => parts,
            _ => {
                push(
                    out,
                    ProviderRule::Shape,
                    &format!("{path}/parts"),
                    "content without parts",
                );
                return read;
            }
        };
        for (at, part) in parts.iter().enumerate() {
            let part_path = format!("{path}/parts/{at}");
            check_part(part, &part_path, role == "model", out);
            if let Some(call) = part.get("functionCall") {
                read.call(part, call, part_path, ids, out);
            } else if let Some(response) = part.get("functionResponse") {
                let name = response
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let id = response.get("id").and_then(Value::as_str);
                read.responses.push((part_path, name, id));
            } else {
                read.speaks = true;
            }
        }
        read
    }

    fn call(
        &mut self,
        part: &Value,
        call: &'a Value,
        path: String,
        ids: &mut HashSet<&'a str>,
        out: &mut Vec<ProviderViolation>,
    ) {
        let name = call.get("name").and_then(Value::as_str).unwrap_or_default();
        let id = call.get("id").and_then(Value::as_str);
        if let Some(id) = id.filter(|id| !ids.insert(id)) {
            push(
                out,
                ProviderRule::UniqueToolUseIds,
                &path,
                format!("function call id {id:?} used twice"),
            );
        }
        if self.first_call.is_none() {
            let signed = part
                .get("thoughtSignature")
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty());
            self.first_call = Some((path.clone(), signed));
        }
        self.calls.push((path, name, id));
    }
}

/// Each model content's calls are answered in the next user content, and each user
/// content's responses answer an open call of the model content before.
fn check_pairs(contents: &[Content<'_>], out: &mut Vec<ProviderViolation>) {
    for (index, content) in contents.iter().enumerate() {
        let answers: &[Called<'_>] = match contents.get(index + 1) {
            Some(next) if next.role == "user" => &next.responses,
            _ => &[],
        };
        let previous_calls: &[Called<'_>] = match index.checked_sub(1).map(|p| &contents[p]) {
            Some(previous) if previous.role == "model" => &previous.calls,
            _ => &[],
        };
        let mut used = vec![false; answers.len()];
        for (path, name, id) in &content.calls {
            let found = answers
                .iter()
                .enumerate()
                .find(|(at, answer)| !used[*at] && matches(answer, name, *id));
            match found {
                Some((at, _)) => used[at] = true,
                None => push(
                    out,
                    ProviderRule::FunctionCallAnswered,
                    path,
                    format!(
                        "function call {name:?} has no functionResponse in the next user content"
                    ),
                ),
            }
        }
        let mut taken = vec![false; previous_calls.len()];
        for (path, name, id) in &content.responses {
            let found = previous_calls
                .iter()
                .enumerate()
                .find(|(at, (_, call_name, call_id))| {
                    !taken[*at] && *call_name == *name && (id.is_none() || *id == *call_id)
                });
            match found {
                Some((at, _)) => taken[at] = true,
                None => push(
                    out,
                    ProviderRule::FunctionOutputAnswersCall,
                    path,
                    format!("functionResponse {name:?} answers no open call of the model content before"),
                ),
            }
        }
    }
}

/// In the current turn (everything after the last user content a person wrote), the first
/// function call of each step carries a `thoughtSignature`.
fn check_signatures(contents: &[Content<'_>], out: &mut Vec<ProviderViolation>) {
    let current = contents
        .iter()
        .rposition(|c| c.speaks && c.role == "user")
        .map_or(0, |at| at + 1);
    for content in &contents[current..] {
        if let Some((path, false)) = &content.first_call {
            push(
                out,
                ProviderRule::ThoughtSignatureOnCall,
                path,
                "the first function call of a step in the current turn has no thoughtSignature",
            );
        }
    }
}

fn matches(answer: &Called<'_>, name: &str, id: Option<&str>) -> bool {
    let (_, answer_name, answer_id) = answer;
    *answer_name == name && (id.is_none() || answer_id.is_none() || *answer_id == id)
}

fn check_part(part: &Value, path: &str, model: bool, out: &mut Vec<ProviderViolation>) {
    let Some(object) = part.as_object() else {
        push(out, ProviderRule::Shape, path, "part is not an object");
        return;
    };
    let data: Vec<&&str> = DATA_KEYS
        .iter()
        .filter(|k| object.contains_key(**k))
        .collect();
    if data.len() != 1 {
        push(
            out,
            ProviderRule::Shape,
            path,
            format!(
                "a part holds exactly one of text, functionCall, functionResponse, ... (found {})",
                data.len()
            ),
        );
    }
    let signature = object.get("thoughtSignature");
    let thought = object.get("thought").and_then(Value::as_bool) == Some(true);
    check_thought(signature, thought, path, model, out);
    if let Some(text) = object.get("text") {
        match text.as_str() {
            None => push(out, ProviderRule::Shape, path, "text is not a string"),
            // A model part may be empty text carrying a signature, or a thought.
            Some(text) if is_blank(text) && !(model && (signature.is_some() || thought)) => {
                push(out, ProviderRule::NonEmptyText, path, "blank text part");
            }
            Some(_) => {}
        }
    }
    if let Some(inline) = object.get("inlineData") {
        let field = |key| inline.get(key).and_then(Value::as_str);
        if let (Some(mime), Some(data)) = (field("mimeType"), field("data")) {
            if mime.starts_with("image/") && gemini_image_type(data) != Some(mime) {
                push(
                    out,
                    ProviderRule::Shape,
                    path,
                    format!("inlineData declared {mime} whose data is no image of that type Gemini takes"),
                );
            }
        }
    }
    if let Some(call) = object.get("functionCall") {
        check_call(call, path, model, out);
    }
    if let Some(response) = object.get("functionResponse") {
        check_response(response, path, model, out);
    }
}

/// A part's `thoughtSignature` (on a model part, a non-empty string) and `thought` flag (in
/// a model content only).
fn check_thought(
    signature: Option<&Value>,
    thought: bool,
    path: &str,
    model: bool,
    out: &mut Vec<ProviderViolation>,
) {
    if let Some(signature) = signature {
        if !model {
            push(
                out,
                ProviderRule::ThoughtSignatureOnCall,
                path,
                "thoughtSignature on a user part",
            );
        }
        if signature.as_str().is_none_or(str::is_empty) {
            push(
                out,
                ProviderRule::ThoughtSignatureOnCall,
                path,
                "thoughtSignature is not a non-empty string",
            );
        }
    }
    if thought && !model {
        push(
            out,
            ProviderRule::ThinkingInAssistant,
            path,
            "thought part in a user content",
        );
    }
}

/// A `functionCall`: in a model content, with a name, and args that are an object.
fn check_call(call: &Value, path: &str, model: bool, out: &mut Vec<ProviderViolation>) {
    if !model {
        push(
            out,
            ProviderRule::Shape,
            path,
            "functionCall in a user content",
        );
    }
    require_name(
        call,
        "/name",
        path,
        ("functionCall without a name", None),
        out,
    );
    if call.get("args").is_some_and(|a| !a.is_object()) {
        push(
            out,
            ProviderRule::Shape,
            path,
            "functionCall args is not an object",
        );
    }
}

/// A `functionResponse`: in a user content, with a name, and a response that is an object.
fn check_response(response: &Value, path: &str, model: bool, out: &mut Vec<ProviderViolation>) {
    if model {
        push(
            out,
            ProviderRule::Shape,
            path,
            "functionResponse in a model content",
        );
    }
    require_name(
        response,
        "/name",
        path,
        ("functionResponse without a name", None),
        out,
    );
    if !response.get("response").is_some_and(Value::is_object) {
        push(
            out,
            ProviderRule::Shape,
            path,
            "functionResponse response is not an object",
        );
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rules(body: Value) -> Vec<ProviderRule> {
        check_gemini(&body).iter().map(|v| v.rule).collect()
    }

    fn user(text: &str) -> Value {
        json!({"role": "user", "parts": [{"text": text}]})
    }

    fn call(name: &str, signature: Option<&str>) -> Value {
        let mut part = json!({"functionCall": {"name": name, "args": {}}});
        if let Some(signature) = signature {
            part["thoughtSignature"] = json!(signature);
        }
        part
    }

    fn response(name: &str) -> Value {
        json!({"functionResponse": {"name": name, "response": {"output": "ok"}}})
    }

    #[test]
    fn a_healthy_body_passes() {
        let body = json!({"systemInstruction": {"parts": [{"text": "s"}]}, "contents": [
            user("q"),
            {"role": "model", "parts": [call("a", Some("S")), call("b", None)]},
            {"role": "user", "parts": [response("b"), response("a")]},
            {"role": "model", "parts": [{"text": "", "thoughtSignature": "T"}, {"text": "done"}]},
        ]});
        assert_eq!(check_gemini(&body), vec![]);
    }

    #[test]
    fn contents_alternate() {
        assert_eq!(
            rules(json!({"contents": [user("a"), user("b")]})),
            [ProviderRule::ContentsAlternate]
        );
    }

    #[test]
    fn function_call_answered() {
        let body = json!({"contents": [
            user("q"),
            {"role": "model", "parts": [call("a", Some("S")), call("b", None)]},
            {"role": "user", "parts": [response("a")]},
        ]});
        assert_eq!(rules(body), [ProviderRule::FunctionCallAnswered]);
    }

    #[test]
    fn function_output_answers_call() {
        let body = json!({"contents": [
            user("q"),
            {"role": "model", "parts": [call("a", Some("S"))]},
            {"role": "user", "parts": [response("a"), response("a"), response("z")]},
        ]});
        assert_eq!(
            rules(body),
            [
                ProviderRule::FunctionOutputAnswersCall,
                ProviderRule::FunctionOutputAnswersCall
            ]
        );
    }

    #[test]
    fn thought_signature_on_call() {
        let body = |signature: Option<&str>| {
            json!({"contents": [
                user("q"),
                {"role": "model", "parts": [call("a", signature)]},
                {"role": "user", "parts": [response("a")]},
            ]})
        };
        assert_eq!(rules(body(None)), [ProviderRule::ThoughtSignatureOnCall]);
        assert!(rules(body(Some(""))).contains(&ProviderRule::ThoughtSignatureOnCall));
        assert_eq!(rules(body(Some("S"))), []);
        // An earlier turn's unsigned call is not validated.
        let earlier = json!({"contents": [
            user("q"),
            {"role": "model", "parts": [call("a", None)]},
            {"role": "user", "parts": [response("a")]},
            {"role": "model", "parts": [{"text": "ok"}]},
            user("next"),
        ]});
        assert_eq!(rules(earlier), []);
    }

    #[test]
    fn roles_first_user_shape_and_text_are_checked() {
        let found = rules(json!({"contents": [
            {"role": "model", "parts": [{"text": " "}]},
            {"role": "assistant", "parts": [{"text": "x", "functionCall": {"name": "f"}}]},
            {"role": "user", "parts": []},
        ]}));
        for rule in [
            ProviderRule::FirstMessageUser,
            ProviderRule::Roles,
            ProviderRule::NonEmptyText,
            ProviderRule::Shape,
        ] {
            assert!(found.contains(&rule), "{rule} not in {found:?}");
        }
    }

    mod rendered {
        use proptest::prelude::*;

        use super::super::check_gemini;
        use crate::history::render::{render, Provider};
        use crate::history::sanitize::sanitize;
        use crate::history::testing::{arb, history};

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(128))]

            /// Any stored history, however broken, renders into a body the provider accepts
            /// (blank turns sent as their stand-ins, as the export sends them).
            #[test]
            fn rendered_random_histories_pass_the_gemini_contract(raw in arb::messages(14)) {
                let body = render(&sanitize(&history(raw)), Provider::Gemini);
                prop_assert_eq!(check_gemini(&body), vec![], "{:#}", body);
            }
        }
    }
}
