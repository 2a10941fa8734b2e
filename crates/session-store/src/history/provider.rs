//! The request formats the store renders and checks: one [`Provider`] per provider API.

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
