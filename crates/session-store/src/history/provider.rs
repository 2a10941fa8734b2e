//! The request formats the store renders and checks: one [`Provider`] per provider API.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

/// A request format the store can render.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Provider {
    /// Anthropic Messages API (also Bedrock and Vertex): `{"system": ..., "messages": [...]}`.
    Anthropic,
    /// OpenAI Chat Completions: `{"messages": [...]}`.
    OpenAi,
    /// OpenAI Responses: `{"instructions"?, "input": [...]}`.
    Responses,
    /// Gemini `generateContent`: `{"systemInstruction"?, "contents": [...]}`.
    Gemini,
}

impl Provider {
    /// Every format, in the order the command line lists them.
    pub const ALL: [Provider; 4] = [
        Provider::Anthropic,
        Provider::OpenAi,
        Provider::Responses,
        Provider::Gemini,
    ];

    /// The longest call id the provider takes in a request, where it has a limit: Chat
    /// Completions refuses a `tool_calls[].id` over 40 characters ("string too long.
    /// Expected a string with maximum length 40"), Responses a `call_id` over 64.
    pub(crate) fn call_id_max(self) -> Option<usize> {
        match self {
            Provider::OpenAi => Some(40),
            Provider::Responses => Some(64),
            Provider::Anthropic | Provider::Gemini => None,
        }
    }

    /// The longest call id every provider takes ([`Provider::call_id_max`]): the view's ids,
    /// shared by every renderer, are held to it.
    pub(crate) fn shortest_call_id_max() -> usize {
        Self::ALL
            .iter()
            .filter_map(|provider| provider.call_id_max())
            .min()
            .unwrap_or(usize::MAX)
    }

    /// The name `provider` is sent for a call to the client tool `name`: `name` itself when
    /// the provider's tool declarations take it, else `name` with each character outside the
    /// provider's alphabet as `_`, a `_` before a first character it does not allow, cut to
    /// its length limit (an empty name is `_`).
    ///
    /// A name the provider cannot declare is no tool the caller has there, so the mapping
    /// loses nothing, and a provider refuses such a name in the history too: Chat
    /// Completions answers "Invalid 'messages[9].tool_calls[0].function.name': string does
    /// not match pattern", including for a name the model made up itself
    /// (`multi_tool_use.parallel`), so every later request of the session failed. The
    /// rules, from the providers' own errors for tool declarations:
    /// - Chat Completions and Responses: `^[a-zA-Z0-9_-]{1,64}$`;
    /// - Anthropic: `^[a-zA-Z0-9_-]{1,128}$`;
    /// - Gemini: letters, digits, `_`, `.` and `-`, starting with a letter or `_`, at most 64.
    pub(crate) fn tool_name(self, name: &str) -> Cow<'_, str> {
        let (extra, max, letter_first) = match self {
            Provider::OpenAi | Provider::Responses => ("_-", 64, false),
            Provider::Anthropic => ("_-", 128, false),
            Provider::Gemini => ("_.-", 64, true),
        };
        let allowed = |c: char| c.is_ascii_alphanumeric() || extra.contains(c);
        let first_allowed = |c: char| !letter_first || c.is_ascii_alphabetic() || c == '_';
        let fits = |name: &str| {
            name.len() <= max
                && name.chars().next().is_some_and(first_allowed)
                && name.chars().all(allowed)
        };
        if fits(name) {
            return Cow::Borrowed(name);
        }
        let mut mapped = String::with_capacity(name.len().min(max));
        if !name.chars().next().is_some_and(first_allowed) {
            mapped.push('_');
        }
        mapped.extend(name.chars().map(|c| if allowed(c) { c } else { '_' }));
        // Every character is ASCII now: a byte is a character.
        mapped.truncate(max);
        Cow::Owned(mapped)
    }

    /// [`Provider::tool_name`] of a name the caller owns: moved back when it is sent as it is.
    pub(crate) fn tool_name_owned(self, name: String) -> String {
        if let Cow::Owned(mapped) = self.tool_name(&name) {
            return mapped;
        }
        name
    }

    /// The name used on the command line (`anthropic`, `openai`, `responses`, `gemini`).
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::OpenAi => "openai",
            Provider::Responses => "responses",
            Provider::Gemini => "gemini",
        }
    }
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Provider {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "anthropic" => Ok(Provider::Anthropic),
            "openai" => Ok(Provider::OpenAi),
            "responses" => Ok(Provider::Responses),
            "gemini" => Ok(Provider::Gemini),
            other => Err(format!(
                "unknown provider {other:?} (expected anthropic, openai, responses or gemini)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_name_the_provider_takes_is_sent_as_it_is() {
        for provider in Provider::ALL {
            for name in ["bash", "mcp__github__create_issue", "Read", "get-weather_2"] {
                assert!(
                    matches!(provider.tool_name(name), Cow::Borrowed(n) if n == name),
                    "{provider} {name}"
                );
            }
        }
        assert_eq!(Provider::Gemini.tool_name("files.read"), "files.read");
        assert_eq!(Provider::OpenAi.tool_name("2fa"), "2fa");
        let long = "a".repeat(128);
        assert_eq!(Provider::Anthropic.tool_name(&long), long);
    }

    #[test]
    fn a_tool_name_the_provider_refuses_is_mapped_into_its_rule() {
        let cases = [
            (
                Provider::OpenAi,
                "multi_tool_use.parallel",
                "multi_tool_use_parallel",
            ),
            (Provider::Responses, "get_/whoami", "get__whoami"),
            (
                Provider::Anthropic,
                "service.doSomething",
                "service_doSomething",
            ),
            (
                Provider::OpenAi,
                "Sequential Thinking",
                "Sequential_Thinking",
            ),
            (Provider::OpenAi, "héllo", "h_llo"),
            (Provider::OpenAi, "", "_"),
            (Provider::Gemini, "2fa", "_2fa"),
            (Provider::Gemini, "-x", "_-x"),
            (Provider::Gemini, "ns:tool", "ns_tool"),
            (Provider::Gemini, "é", "__"),
        ];
        for (provider, name, sent) in cases {
            assert_eq!(provider.tool_name(name), sent, "{provider} {name:?}");
            assert_eq!(
                provider.tool_name(sent),
                sent,
                "mapped once: {provider} {sent:?}"
            );
        }
        assert_eq!(Provider::OpenAi.tool_name(&"a".repeat(65)), "a".repeat(64));
        assert_eq!(Provider::Gemini.tool_name(&"é".repeat(80)).len(), 64);
        assert_eq!(Provider::Anthropic.tool_name(&"b".repeat(200)).len(), 128);
    }
}
