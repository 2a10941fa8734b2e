//! The vocabulary of a stored conversation: sessions, roles, parts and messages.
//!
//! These types are shared by the pure history logic and the storage layer. They make the
//! contract's closed sets closed in the type system: a [`Role`] is one of four, a [`Part`] is
//! one of ten kinds, and a tool_result cannot exist without the id it answers.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Datelike, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The id of one conversation (the `sessions.id` column).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SessionId(String);

impl SessionId {
    /// Wraps an id chosen by the caller.
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// A fresh random id (UUID v4).
    pub fn random() -> Self {
        Self(uuid::Uuid::new_v4().to_string())
    }

    /// The id as stored.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for SessionId {
    fn from(id: &str) -> Self {
        Self::new(id)
    }
}

impl From<String> for SessionId {
    fn from(id: String) -> Self {
        Self(id)
    }
}

/// Who wrote a message. Tool results live in [`Role::Tool`] messages, never in user messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Instructions from the application; never part of a tool pair.
    System,
    /// A person's turn; each user message opens a new turn.
    User,
    /// The model; may carry reasoning and tool_use parts.
    Assistant,
    /// Results of the tool_uses of the assistant message directly before the block.
    Tool,
}

impl Role {
    /// The value stored in `messages.role`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that is not one of the four roles.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown role {0:?} (expected system, user, assistant or tool)")]
pub struct UnknownRole(pub String);

impl FromStr for Role {
    type Err = UnknownRole;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "system" => Ok(Role::System),
            "user" => Ok(Role::User),
            "assistant" => Ok(Role::Assistant),
            "tool" => Ok(Role::Tool),
            other => Err(UnknownRole(other.to_owned())),
        }
    }
}

/// The `parts.kind` column: which variant of [`Part`] a row holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PartKind {
    /// [`Part::Text`]
    Text,
    /// [`Part::Reasoning`]
    Reasoning,
    /// [`Part::RedactedReasoning`]
    RedactedReasoning,
    /// [`Part::ToolUse`]
    ToolUse,
    /// [`Part::ToolResult`]
    ToolResult,
    /// [`Part::Image`]
    Image,
    /// [`Part::Document`]
    Document,
    /// [`Part::ServerToolUse`]
    ServerToolUse,
    /// [`Part::ServerToolResult`]
    ServerToolResult,
    /// [`Part::Opaque`]
    Opaque,
}

impl PartKind {
    /// The value stored in `parts.kind`.
    pub fn as_str(self) -> &'static str {
        match self {
            PartKind::Text => "text",
            PartKind::Reasoning => "reasoning",
            PartKind::RedactedReasoning => "redacted_reasoning",
            PartKind::ToolUse => "tool_use",
            PartKind::ToolResult => "tool_result",
            PartKind::Image => "image",
            PartKind::Document => "document",
            PartKind::ServerToolUse => "server_tool_use",
            PartKind::ServerToolResult => "server_tool_result",
            PartKind::Opaque => "opaque",
        }
    }
}

impl fmt::Display for PartKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that is not one of the ten part kinds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown part kind {0:?}")]
pub struct UnknownPartKind(pub String);

impl FromStr for PartKind {
    type Err = UnknownPartKind;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "text" => Ok(PartKind::Text),
            "reasoning" => Ok(PartKind::Reasoning),
            "redacted_reasoning" => Ok(PartKind::RedactedReasoning),
            "tool_use" => Ok(PartKind::ToolUse),
            "tool_result" => Ok(PartKind::ToolResult),
            "image" => Ok(PartKind::Image),
            "document" => Ok(PartKind::Document),
            "server_tool_use" => Ok(PartKind::ServerToolUse),
            "server_tool_result" => Ok(PartKind::ServerToolResult),
            "opaque" => Ok(PartKind::Opaque),
            other => Err(UnknownPartKind(other.to_owned())),
        }
    }
}

/// One content block of a message (one `parts` row).
///
/// `provider_metadata` is opaque JSON kept byte for byte in meaning, for example
/// `{"anthropic": {"signature": "..."}}`; signatures may sit under any namespace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Part {
    /// Plain text. `""` is a value: an empty text part stays at its ordinal.
    Text {
        /// The text, possibly empty.
        text: String,
        /// Opaque provider data.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_metadata: Option<Value>,
    },
    /// Model thinking, usually signed by the provider.
    Reasoning {
        /// The thinking text.
        text: String,
        /// Where the signature lives, e.g. `{"anthropic": {"signature": "..."}}`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_metadata: Option<Value>,
    },
    /// Thinking the provider encrypted; only `data` can be sent back.
    RedactedReasoning {
        /// The opaque payload.
        data: String,
        /// Opaque provider data.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_metadata: Option<Value>,
    },
    /// A call the model asked for.
    ToolUse {
        /// Unique within the session.
        id: String,
        /// The tool's name.
        name: String,
        /// The arguments; the write path requires a JSON object.
        input: Value,
        /// Opaque provider data (e.g. a Gemini thought signature).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_metadata: Option<Value>,
    },
    /// The answer to one tool_use; lives in a [`Role::Tool`] message.
    ToolResult {
        /// The id of the tool_use it answers.
        tool_use_id: String,
        /// The result as text, possibly empty.
        content: String,
        /// True for failures and tombstones.
        is_error: bool,
        /// The whole content list (JSON array of provider blocks) when the result holds more
        /// than text (images, documents); `content` is then its plain-text part. `None` for a
        /// plain text result.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        blocks: Option<Value>,
        /// Opaque provider data.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_metadata: Option<Value>,
    },
    /// An image a user or a tool supplied.
    Image {
        /// Where it comes from, provider-neutral JSON: `{"type": "base64", "media_type": ...,
        /// "data": ...}`, `{"type": "url", "url": ...}` or `{"type": "file", "file_id": ...}`.
        source: Value,
        /// An optional title or alt text.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        /// Opaque provider data (cache-control marks and other block attributes).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_metadata: Option<Value>,
    },
    /// A document (PDF, plain text, ...) a user or a tool supplied.
    Document {
        /// Where it comes from, as for [`Part::Image`] (also `{"type": "text", "media_type":
        /// "text/plain", "data": ...}`).
        source: Value,
        /// An optional title.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        /// Opaque provider data (citations settings, context, cache-control marks).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_metadata: Option<Value>,
    },
    /// A tool the provider runs itself (web search, code execution, web fetch, remote MCP);
    /// lives in an assistant message and is answered in that same message.
    ServerToolUse {
        /// Unique within the session (the provider's id, e.g. `srvtoolu_...`).
        id: String,
        /// The server tool's name (`web_search`, `code_execution`, ...).
        name: String,
        /// Its arguments.
        input: Value,
        /// Opaque provider data.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_metadata: Option<Value>,
    },
    /// What a server tool returned, in the assistant message of its call.
    ServerToolResult {
        /// The id of the [`Part::ServerToolUse`] it answers.
        tool_use_id: String,
        /// The provider's result block verbatim (e.g. a whole `web_search_tool_result`).
        block: Value,
        /// Opaque provider data (names the provider that made the block).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_metadata: Option<Value>,
    },
    /// A provider block the store has no kind for, kept verbatim and sent back only to the
    /// provider that made it (named under `"provider"` in `provider_metadata`).
    Opaque {
        /// The block verbatim.
        block: Value,
        /// `{"provider": "anthropic", ...}`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_metadata: Option<Value>,
    },
}

/// Matches every variant of [`Part`] for a field they all have, so an accessor names the
/// kinds once (a new kind that forgets the field fails to compile here).
macro_rules! every_kind {
    ($part:expr, $field:ident => $body:expr) => {
        match $part {
            Part::Text { $field, .. }
            | Part::Reasoning { $field, .. }
            | Part::RedactedReasoning { $field, .. }
            | Part::ToolUse { $field, .. }
            | Part::ToolResult { $field, .. }
            | Part::Image { $field, .. }
            | Part::Document { $field, .. }
            | Part::ServerToolUse { $field, .. }
            | Part::ServerToolResult { $field, .. }
            | Part::Opaque { $field, .. } => $body,
        }
    };
}

impl Part {
    /// The first id of this part longer than [`MAX_ID_BYTES`], as its field name (`id`,
    /// `tool_use_id`) and length in bytes; `None` when none is.
    pub(crate) fn long_id(&self) -> Option<(&'static str, usize)> {
        let (field, id) = match self {
            Part::ToolUse { id, .. } | Part::ServerToolUse { id, .. } => ("id", id),
            Part::ToolResult { tool_use_id, .. } | Part::ServerToolResult { tool_use_id, .. } => {
                ("tool_use_id", tool_use_id)
            }
            _ => return None,
        };
        id_too_long(id).map(|bytes| (field, bytes))
    }

    /// The first of this part's text fields (stored as text columns, not as JSON) that holds
    /// a NUL character (U+0000), by its field name: PostgreSQL's text cannot keep one, so
    /// the store refuses such a part on every engine, with this name in the refusal. JSON
    /// values (`input`, `block`, `provider_metadata`) keep a NUL escaped and pass.
    pub fn nul_field(&self) -> Option<&'static str> {
        let texts: [(&'static str, Option<&str>); 2] = match self {
            Part::Text { text, .. } | Part::Reasoning { text, .. } => {
                [("text", Some(text)), ("", None)]
            }
            Part::RedactedReasoning { data, .. } => [("data", Some(data)), ("", None)],
            Part::ToolUse { id, name, .. } | Part::ServerToolUse { id, name, .. } => {
                [("id", Some(id)), ("name", Some(name))]
            }
            Part::ToolResult {
                tool_use_id,
                content,
                ..
            } => [
                ("tool_use_id", Some(tool_use_id)),
                ("content", Some(content)),
            ],
            Part::Image { title, .. } | Part::Document { title, .. } => {
                [("title", title.as_deref()), ("", None)]
            }
            Part::ServerToolResult { tool_use_id, .. } => {
                [("tool_use_id", Some(tool_use_id)), ("", None)]
            }
            Part::Opaque { .. } => [("", None), ("", None)],
        };
        texts
            .into_iter()
            .find(|(_, text)| text.is_some_and(|t| memchr::memchr(0, t.as_bytes()).is_some()))
            .map(|(field, _)| field)
    }

    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Part::Text {
            text: text.into(),
            provider_metadata: None,
        }
    }

    /// A reasoning part with its provider metadata (where the signature lives).
    pub fn reasoning(text: impl Into<String>, provider_metadata: Option<Value>) -> Self {
        Part::Reasoning {
            text: text.into(),
            provider_metadata,
        }
    }

    /// A tool_use part.
    pub fn tool_use(id: impl Into<String>, name: impl Into<String>, input: Value) -> Self {
        Part::ToolUse {
            id: id.into(),
            name: name.into(),
            input,
            provider_metadata: None,
        }
    }

    /// A successful tool_result part.
    pub fn tool_result(tool_use_id: impl Into<String>, content: impl Into<String>) -> Self {
        Part::ToolResult {
            tool_use_id: tool_use_id.into(),
            content: content.into(),
            is_error: false,
            blocks: None,
            provider_metadata: None,
        }
    }

    /// A failed tool_result part (`is_error = 1`).
    pub fn tool_error(tool_use_id: impl Into<String>, content: impl Into<String>) -> Self {
        Part::ToolResult {
            tool_use_id: tool_use_id.into(),
            content: content.into(),
            is_error: true,
            blocks: None,
            provider_metadata: None,
        }
    }

    /// An image part from its source JSON.
    pub fn image(source: Value) -> Self {
        Part::Image {
            source,
            title: None,
            provider_metadata: None,
        }
    }

    /// A document part from its source JSON.
    pub fn document(source: Value) -> Self {
        Part::Document {
            source,
            title: None,
            provider_metadata: None,
        }
    }

    /// A server tool call.
    pub fn server_tool_use(id: impl Into<String>, name: impl Into<String>, input: Value) -> Self {
        Part::ServerToolUse {
            id: id.into(),
            name: name.into(),
            input,
            provider_metadata: None,
        }
    }

    /// A server tool's result block, kept verbatim.
    pub fn server_tool_result(tool_use_id: impl Into<String>, block: Value) -> Self {
        Part::ServerToolResult {
            tool_use_id: tool_use_id.into(),
            block,
            provider_metadata: None,
        }
    }

    /// A block only `provider` understands, kept verbatim.
    pub fn opaque(provider: &str, block: Value) -> Self {
        Part::Opaque {
            block,
            provider_metadata: Some(serde_json::json!({ "provider": provider })),
        }
    }

    /// For an opaque part: the provider that made it (`None` when unknown: then it goes to
    /// no provider).
    pub fn opaque_provider(&self) -> Option<&str> {
        match self {
            Part::Opaque {
                provider_metadata, ..
            } => provider_metadata
                .as_ref()
                .and_then(|m| m.get("provider"))
                .and_then(Value::as_str),
            _ => None,
        }
    }

    /// Which kind of part this is.
    pub fn kind(&self) -> PartKind {
        match self {
            Part::Text { .. } => PartKind::Text,
            Part::Reasoning { .. } => PartKind::Reasoning,
            Part::RedactedReasoning { .. } => PartKind::RedactedReasoning,
            Part::ToolUse { .. } => PartKind::ToolUse,
            Part::ToolResult { .. } => PartKind::ToolResult,
            Part::Image { .. } => PartKind::Image,
            Part::Document { .. } => PartKind::Document,
            Part::ServerToolUse { .. } => PartKind::ServerToolUse,
            Part::ServerToolResult { .. } => PartKind::ServerToolResult,
            Part::Opaque { .. } => PartKind::Opaque,
        }
    }

    /// The provider metadata, whatever the kind.
    pub fn provider_metadata(&self) -> Option<&Value> {
        every_kind!(self, provider_metadata => provider_metadata.as_ref())
    }

    /// The provider metadata, whatever the kind, to change it.
    pub fn provider_metadata_mut(&mut self) -> &mut Option<Value> {
        every_kind!(self, provider_metadata => provider_metadata)
    }

    /// The `tool_use_id` column: a tool_use's own id, or the id a tool_result answers (and
    /// the same for server tool calls and results).
    pub fn tool_use_id(&self) -> Option<&str> {
        match self {
            Part::ServerToolUse { id, .. } => Some(id),
            Part::ServerToolResult { tool_use_id, .. } => Some(tool_use_id),
            _ => self.call_id().or(self.answers()),
        }
    }

    /// The id of a tool_use part (`None` for every other kind).
    pub fn call_id(&self) -> Option<&str> {
        match self {
            Part::ToolUse { id, .. } => Some(id),
            _ => None,
        }
    }

    /// The id a tool_result part answers.
    pub fn answers(&self) -> Option<&str> {
        match self {
            Part::ToolResult { tool_use_id, .. } => Some(tool_use_id),
            _ => None,
        }
    }
}

/// A message to append. The store assigns `seq` and `turn_index`; callers never do.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NewMessage {
    /// Who wrote it.
    pub role: Role,
    /// Its content blocks, in order. Must not be empty.
    pub parts: Vec<Part>,
    /// When it was written; the store's clock when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<DateTime<Utc>>,
    /// Which model wrote it (`messages.model`), `"provider/model"` such as
    /// `"anthropic/claude-sonnet-4-5"`; `None` when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// What the provider reported this message cost (a `usage` row), where it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The caller's key for this message, unique within the session: appending a message
    /// whose key is already stored returns the stored message instead of storing it twice
    /// (a retry after a timeout or a crash between commit and acknowledgement).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

impl NewMessage {
    /// A message with the given role and parts.
    pub fn new(role: Role, parts: Vec<Part>) -> Self {
        Self {
            role,
            parts,
            created_at: None,
            model: None,
            usage: None,
            idempotency_key: None,
        }
    }

    /// A user message holding one text part.
    pub fn user(text: impl Into<String>) -> Self {
        Self::new(Role::User, vec![Part::text(text)])
    }

    /// A system message holding one text part.
    pub fn system(text: impl Into<String>) -> Self {
        Self::new(Role::System, vec![Part::text(text)])
    }

    /// An assistant message.
    pub fn assistant(parts: Vec<Part>) -> Self {
        Self::new(Role::Assistant, parts)
    }

    /// A tool message holding tool_results.
    pub fn tool(parts: Vec<Part>) -> Self {
        Self::new(Role::Tool, parts)
    }

    /// Sets the creation time instead of reading the store's clock.
    pub fn at(mut self, created_at: DateTime<Utc>) -> Self {
        self.created_at = Some(created_at);
        self
    }

    /// Records which model wrote the message (`"provider/model"`).
    pub fn by_model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Records what the provider reported this message cost (stored as a `usage` row).
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }

    /// Sets the caller's idempotency key (see [`NewMessage::idempotency_key`]).
    pub fn with_idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }
}

/// Tokens one message cost, as the provider reported them (one `usage` row). Every count is
/// optional: a source that does not report cache tokens leaves them `None`, not 0.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// The model that answered, e.g. `anthropic/claude-sonnet-4-5`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Input (prompt) tokens, not counting cache reads and writes where the provider splits them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Output (completion) tokens, reasoning included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Input tokens read from the provider's prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<u64>,
    /// Input tokens written to the provider's prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
}

impl Usage {
    /// Input and output tokens, the two every provider reports.
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Self {
            input_tokens: Some(input_tokens),
            output_tokens: Some(output_tokens),
            ..Self::default()
        }
    }

    /// Names the model that answered.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Adds the prompt-cache counts.
    pub fn cache(mut self, read_tokens: u64, write_tokens: u64) -> Self {
        self.cache_read_tokens = Some(read_tokens);
        self.cache_write_tokens = Some(write_tokens);
        self
    }

    /// True when no count and no model is known.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// Each count with its field name, in the order of the struct.
    pub fn counts(&self) -> [(&'static str, Option<u64>); 4] {
        [
            ("input_tokens", self.input_tokens),
            ("output_tokens", self.output_tokens),
            ("cache_read_tokens", self.cache_read_tokens),
            ("cache_write_tokens", self.cache_write_tokens),
        ]
    }

    /// The first count the store cannot keep exactly (above [`MAX_TOKEN_COUNT`]), as its
    /// field name and value; `None` when every count can be stored as it is.
    pub fn unkeepable_count(&self) -> Option<(&'static str, u64)> {
        self.counts()
            .into_iter()
            .find_map(|(field, count)| count.filter(|&n| n > MAX_TOKEN_COUNT).map(|n| (field, n)))
    }
}

/// The longest identifier the store keeps, in bytes of UTF-8: a session's id, a tool_use's
/// id (and the id a result answers), an idempotency key. Each is a key of an index on
/// PostgreSQL, whose B-tree entries hold at most 2,704 bytes (a session's id and a call's
/// together); a longer one is refused on every engine, so that a session means the same
/// wherever it is stored ([`crate::Refusal::IdTooLong`], [`crate::Error::InvalidSessionId`]).
pub const MAX_ID_BYTES: usize = 1024;

/// `id`'s length in bytes when it is longer than [`MAX_ID_BYTES`].
pub(crate) fn id_too_long(id: &str) -> Option<usize> {
    (id.len() > MAX_ID_BYTES).then_some(id.len())
}

/// Why `id` (a session's id, a call's id, a key) cannot be kept on every engine: too long
/// ([`MAX_ID_BYTES`]) or holding a NUL character; `None` when it can.
pub(crate) fn unkeepable_id(id: &str) -> Option<String> {
    if let Some(bytes) = id_too_long(id) {
        return Some(format!(
            "is {bytes} bytes long, more than the {MAX_ID_BYTES} an id may be"
        ));
    }
    memchr::memchr(0, id.as_bytes()).map(|_| "holds a NUL character (U+0000)".to_owned())
}

/// Whether the store keeps `time` as given: years 0 to 9999, what RFC 3339 writes with its
/// four-digit year. Both engines store times as RFC 3339 text, which sorts in time order
/// only in that range; a later or earlier time (chrono writes `+10000-01-01T...`) would sort
/// out of order (a prune or a listing by time would be wrong) and no RFC 3339 reader reads it
/// back. Refused on every engine ([`crate::Refusal::TimeOutOfRange`],
/// [`crate::Error::TimeOutOfRange`]).
pub(crate) fn keepable_time(time: DateTime<Utc>) -> bool {
    (0..=9999).contains(&time.year())
}

/// Whether a block of type `kind` is a provider's server tool result (`web_search_tool_result`,
/// `code_execution_tool_result`, `mcp_tool_result`, ...): any `*_tool_result` but a client
/// `tool_result`. What the importer takes as one and what a [`Part::ServerToolResult`] holds.
pub(crate) fn is_server_result_kind(kind: &str) -> bool {
    kind != "tool_result" && kind.ends_with("_tool_result")
}

/// Whether `block` can be the block of a [`Part::ServerToolResult`] answering `tool_use_id`:
/// a server tool result block ([`is_server_result_kind`]) naming that call. It goes back to
/// the provider verbatim, which pairs it with its call by that id.
pub(crate) fn answers_server_call(block: &Value, tool_use_id: &str) -> bool {
    block
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(is_server_result_kind)
        && block.get("tool_use_id").and_then(Value::as_str) == Some(tool_use_id)
}

/// The largest token count the store keeps exactly: the usage columns are signed 64-bit
/// integers on both engines. A larger count is refused, never clamped
/// ([`crate::Refusal::TokenCountOutOfRange`]); importers refuse it, and any count that is
/// negative, fractional or not a number, with its JSON path ([`token_count`]).
pub const MAX_TOKEN_COUNT: u64 = i64::MAX as u64;

/// A token count as a source wrote it, read exactly: `Ok(None)` when absent (JSON `null`),
/// `Ok(Some(n))` for a whole number written in digits from 0 to [`MAX_TOKEN_COUNT`], and
/// otherwise `Err` with what was wrong (negative, fractional, exponent notation, too large,
/// not a number). The one reader of counts for every importer.
pub fn token_count(value: &serde_json::Value) -> std::result::Result<Option<u64>, String> {
    use serde_json::Value;
    let number = match value {
        Value::Null => return Ok(None),
        Value::Number(number) => number,
        Value::Bool(_) => return Err(format!("a token count must be a number, found {value}")),
        Value::String(_) => {
            return Err(format!(
                "a token count must be a number, found the string {value}"
            ))
        }
        Value::Array(_) | Value::Object(_) => {
            return Err("a token count must be a number, found an array or object".to_owned())
        }
    };
    if let Some(n) = number.as_u64().filter(|&n| n <= MAX_TOKEN_COUNT) {
        return Ok(Some(n));
    }
    let text = number.to_string();
    let problem = if text.starts_with('-') {
        "is negative"
    } else if text.contains(['.', 'e', 'E']) {
        "is not a whole number written in digits"
    } else {
        "is above the largest count the store keeps exactly (9223372036854775807)"
    };
    Err(format!("token count {text} {problem}"))
}

/// A stored message (one `messages` row with its `parts`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// `messages.id`.
    pub id: i64,
    /// Order within the session.
    pub seq: i64,
    /// The turn it belongs to (see the contract's "Turns").
    pub turn_index: i64,
    /// Who wrote it.
    pub role: Role,
    /// Replaced by a summary in what the provider sees.
    pub compacted: bool,
    /// When it was written.
    pub created_at: DateTime<Utc>,
    /// Which model wrote it (`messages.model`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Whether it is still streaming in, finished, or was cut off (`messages.state`).
    #[serde(default, skip_serializing_if = "MessageState::is_complete")]
    pub state: MessageState,
    /// Its content blocks, in ordinal order.
    pub parts: Vec<Part>,
}

/// Where a sub-agent's session stands (`sessions.state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SubagentState {
    /// The call that spawned it is still waiting for its result.
    Active,
    /// It returned: the spawning call has its result (or, with no call known, its
    /// conversation ends with an answer).
    Completed,
    /// It was cut off: the spawning call was cancelled or failed (or, with no call known,
    /// its conversation stops mid-turn).
    Incomplete,
}

impl SubagentState {
    /// The column's text: `active`, `completed` or `incomplete`.
    pub fn as_str(self) -> &'static str {
        match self {
            SubagentState::Active => "active",
            SubagentState::Completed => "completed",
            SubagentState::Incomplete => "incomplete",
        }
    }
}

impl FromStr for SubagentState {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "active" => Ok(SubagentState::Active),
            "completed" => Ok(SubagentState::Completed),
            "incomplete" => Ok(SubagentState::Incomplete),
            other => Err(format!("unknown sub-agent state {other:?}")),
        }
    }
}

/// A sub-agent: a session another session's call spawned (`sessions.parent_id`,
/// `sessions.parent_tool_use_id`, `sessions.state`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subagent {
    /// The sub-agent's session.
    pub id: SessionId,
    /// The session that spawned it.
    pub parent: Option<SessionId>,
    /// The tool_use (a Task call) in the parent that spawned it, when known.
    pub parent_tool_use_id: Option<String>,
    /// Where it stands, when known.
    pub state: Option<SubagentState>,
}

/// Where a stored message stands (`messages.state`): written whole or finished, still
/// streaming in ([`crate::Store::begin_message`]), or cut off when its writer went away.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MessageState {
    /// Written whole, or streamed and finished.
    #[default]
    Complete,
    /// Streaming in: its writer may still push parts.
    Open,
    /// Its writer went away before finishing it (a process that died, a handle dropped
    /// unfinished). Its parts stay; its unanswered calls were answered with tombstones.
    Interrupted,
}

impl MessageState {
    /// The column's text: `complete`, `open` or `interrupted`.
    pub fn as_str(self) -> &'static str {
        match self {
            MessageState::Complete => "complete",
            MessageState::Open => "open",
            MessageState::Interrupted => "interrupted",
        }
    }

    /// True for [`MessageState::Complete`].
    pub fn is_complete(&self) -> bool {
        *self == MessageState::Complete
    }
}

impl FromStr for MessageState {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "complete" => Ok(MessageState::Complete),
            "open" => Ok(MessageState::Open),
            "interrupted" => Ok(MessageState::Interrupted),
            other => Err(format!("unknown message state {other:?}")),
        }
    }
}

/// What an append stored for one message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Appended {
    /// `messages.id` of the new row.
    pub id: i64,
    /// The `seq` the store assigned.
    pub seq: i64,
    /// The `turn_index` the store assigned.
    pub turn_index: i64,
}

/// One line of the session list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionInfo {
    /// The session's id.
    pub id: SessionId,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
    /// How many messages it holds.
    pub message_count: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_id_is_kept_up_to_max_id_bytes_and_without_a_nul() {
        assert_eq!(unkeepable_id(&"a".repeat(MAX_ID_BYTES)), None);
        assert_eq!(unkeepable_id(""), None);
        let long = unkeepable_id(&"a".repeat(MAX_ID_BYTES + 1)).expect("too long");
        assert!(long.contains("1025 bytes"), "{long}");
        let nul = unkeepable_id("a\u{0}b").expect("a NUL");
        assert!(nul.contains("NUL"), "{nul}");
    }

    #[test]
    fn role_and_kind_round_trip_through_their_column_values() {
        for role in [Role::System, Role::User, Role::Assistant, Role::Tool] {
            assert_eq!(role.as_str().parse::<Role>(), Ok(role));
        }
        for kind in [
            PartKind::Text,
            PartKind::Reasoning,
            PartKind::RedactedReasoning,
            PartKind::ToolUse,
            PartKind::ToolResult,
            PartKind::Image,
            PartKind::Document,
            PartKind::ServerToolUse,
            PartKind::ServerToolResult,
            PartKind::Opaque,
        ] {
            assert_eq!(kind.as_str().parse::<PartKind>(), Ok(kind));
        }
        assert!("developer".parse::<Role>().is_err());
        assert!("video".parse::<PartKind>().is_err());
    }
}
