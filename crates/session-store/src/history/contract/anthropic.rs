//! The Anthropic Messages rules (PROVIDER_RULES 1-10) over a rendered `{"system"?,
//! "messages": [...]}` body. Independent of the renderer: it reads only the JSON.
//!
//! Each content block is read once: one pass over its keys picks out its `type` and the
//! fields the rules look at ([`Block`]), with no hashed lookup per rule, and a block's JSON
//! pointer is only written out for a violation. (Looking each field up per rule was a tenth
//! of an export's instructions: issue 16.)

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::{push, ProviderRule, ProviderViolation};
use crate::history::blank::is_blank;

/// The most blocks with a `cache_control` mark Anthropic takes in one request ("A maximum
/// of 4 blocks with cache_control may be provided. Found 5.").
pub(crate) const CACHE_MARKS_MAX: usize = 4;

/// The most images and documents Anthropic takes in one request ("too many images and
/// documents: 120 + 0 > 100"; "Too much media: 0 document pages + 102 images > 100"). A
/// session that went past it was dead: every later request, a compaction's too, was refused.
pub(crate) const MEDIA_MAX: usize = 100;

/// The largest request Anthropic takes, in bytes of JSON ("413 request_too_large: Request
/// exceeds the maximum size"): 32 MB. Base64 images add up to it long before the context
/// window fills, and every later request of the session was refused.
pub(crate) const REQUEST_BYTES_MAX: usize = 32_000_000;

/// The bytes of base64 data the images and documents of a request may hold: the rest of
/// [`REQUEST_BYTES_MAX`] is left to the text.
pub(crate) const MEDIA_BYTES_MAX: usize = 24_000_000;

/// The most base64 data one image may hold ("image exceeds 5 MB maximum: 10053760 bytes >
/// 5242880 bytes"; the session stayed stuck on it, whatever was sent after).
pub(crate) const IMAGE_BYTES_MAX: usize = 5 * 1024 * 1024;

/// Past this many images in one request, every image is held to [`MANY_IMAGES_SIDE_MAX`]
/// pixels a side ("At least one of the image dimensions exceed max allowed size for
/// many-image requests: 2000 pixels"); images from earlier turns and inside tool_results
/// count. Below it Anthropic scales a large image down; past it, it refuses the request,
/// and every later one of the session.
pub(crate) const MANY_IMAGES: usize = 20;

/// The longest side an image may have in a request of more than [`MANY_IMAGES`] images.
pub(crate) const MANY_IMAGES_SIDE_MAX: u32 = 2000;

/// One image or document block of a request: where it is, and how many bytes of data its
/// source holds inline (base64 or text; none for a URL or a file).
#[derive(Debug)]
pub(crate) struct Media {
    /// Its JSON pointer.
    pub(crate) path: String,
    /// Bytes of inline data.
    pub(crate) bytes: usize,
    /// An image (else a document).
    pub(crate) image: bool,
}

/// The images of `media` (in a request of more than [`MANY_IMAGES`] images) whose base64
/// data is larger than [`MANY_IMAGES_SIDE_MAX`] on a side: what the renderer describes and
/// the check names. An image by URL or file is the server's to fetch and size.
pub(crate) fn too_large_among_many<'a>(body: &Value, media: &'a [Media]) -> Vec<&'a Media> {
    if media.iter().filter(|m| m.image).count() <= MANY_IMAGES {
        return Vec::new();
    }
    media
        .iter()
        .filter(|m| m.image && m.bytes > 0)
        .filter(|m| {
            let data = body
                .pointer(&m.path)
                .and_then(|b| b.pointer("/source/data"));
            data.and_then(Value::as_str)
                .and_then(crate::history::media::image_size)
                .is_some_and(|(width, height)| width.max(height) > MANY_IMAGES_SIDE_MAX)
        })
        .collect()
}

/// The blocks of a request that Anthropic counts, each by its JSON pointer, in request order:
/// the system blocks, then each message's content blocks, a tool_result's content items
/// right after their block.
#[derive(Debug, Default)]
pub(crate) struct Counted {
    /// The blocks that carry a `cache_control` mark. Marks kept from many requests add up as
    /// a session grows: the renderer keeps the first [`CACHE_MARKS_MAX`] (the bytes before a
    /// new mark never change) and the check names one more.
    pub(crate) cache_marks: Vec<String>,
    /// The image and document blocks. Past [`MEDIA_MAX`] of them, or [`MEDIA_BYTES_MAX`] of
    /// their data, the renderer describes the oldest in text; the check names the one over
    /// the count (and a request over [`REQUEST_BYTES_MAX`]).
    pub(crate) media: Vec<Media>,
}

/// [`Counted`] of `body`, in one pass.
pub(crate) fn counted<'a>(body: &'a Value) -> Counted {
    let mut counted = Counted::default();
    // One pass over a block's keys (a hashed lookup per key cost an export a tenth more):
    // its mark, its type, its source's data; its own content list comes back.
    let mut count = |block: &'a Value, path: &dyn Fn() -> String| -> Option<&'a Vec<Value>> {
        let Value::Object(fields) = block else {
            return None;
        };
        let (mut marked, mut kind, mut source, mut content) = (false, None, None, None);
        for (key, value) in fields {
            match key.as_str() {
                // A null mark marks nothing; one of another shape is refused on its own.
                "cache_control" => {
                    marked = !value.is_null() && attribute_fault("", key, value).is_none();
                }
                "type" => kind = value.as_str(),
                "source" => source = Some(value),
                "content" => content = value.as_array(),
                _ => {}
            }
        }
        if marked {
            counted.cache_marks.push(path());
        }
        if let Some(kind @ ("image" | "document")) = kind {
            let data = source.and_then(|s| s.get("data")).and_then(Value::as_str);
            counted.media.push(Media {
                path: path(),
                bytes: data.map_or(0, str::len),
                image: kind == "image",
            });
        }
        content
    };
    if let Some(Value::Array(system)) = body.get("system") {
        for (index, block) in system.iter().enumerate() {
            count(block, &|| format!("/system/{index}"));
        }
    }
    let messages = body.get("messages").and_then(Value::as_array);
    for (at, message) in messages.into_iter().flatten().enumerate() {
        let Some(Value::Array(content)) = message.get("content") else {
            continue;
        };
        for (index, block) in content.iter().enumerate() {
            let items = count(block, &|| format!("/messages/{at}/content/{index}"));
            for (item, inner) in items.into_iter().flatten().enumerate() {
                count(inner, &|| {
                    format!("/messages/{at}/content/{index}/content/{item}")
                });
            }
        }
    }
    counted
}

/// Whether `body` written as JSON is longer than [`REQUEST_BYTES_MAX`]. Writing it out costs
/// as much as rendering it, and every export is checked: a walk that adds up its strings'
/// lengths (a floor of the JSON's length: escapes only add) decides unless the floor comes
/// within a fifth of the limit, and only then is the body written out and counted.
fn longer_than_a_request(body: &Value) -> Option<usize> {
    let floor = json_len_floor(body);
    if floor <= REQUEST_BYTES_MAX / 5 * 4 {
        return None;
    }
    let length = json_len(body);
    (length > REQUEST_BYTES_MAX).then_some(length)
}

/// A floor of `value`'s length written as JSON: every string's bytes and quotes, every
/// key's, one byte for each separator and scalar.
fn json_len_floor(value: &Value) -> usize {
    match value {
        Value::String(text) => text.len() + 2,
        // Brackets, the items, a comma between two.
        Value::Array(items) => {
            1 + items.len().max(1) + items.iter().map(json_len_floor).sum::<usize>()
        }
        // Braces, each key quoted with its colon and value, a comma between two.
        Value::Object(fields) => {
            1 + fields.len().max(1)
                + fields
                    .iter()
                    .map(|(key, value)| key.len() + 3 + json_len_floor(value))
                    .sum::<usize>()
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => 1,
    }
}

/// The length of `value` written as JSON, counted without keeping the text.
fn json_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` fails only when the writer does, and this one never does.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// Every violation of the Anthropic Messages rules (1-10) in `body`.
///
/// Rule 9's "the latest assistant message's thinking comes back unchanged" needs the original
/// response to check, so it is not checked here; the renderer passes thinking through as it is.
pub fn check_anthropic(body: &Value) -> Vec<ProviderViolation> {
    let mut out = Vec::new();
    let Some(messages) = super::messages_of(body, &mut out) else {
        return out;
    };
    if let Some(system) = body.get("system") {
        check_system(system, &mut out);
    }
    if let Some(length) = longer_than_a_request(body) {
        push(
            &mut out,
            ProviderRule::RequestTooLarge,
            "",
            format!("the request is {length} bytes of JSON; Anthropic takes at most {REQUEST_BYTES_MAX}"),
        );
    }
    let Counted { cache_marks, media } = counted(body);
    for image in too_large_among_many(body, &media) {
        push(
            &mut out,
            ProviderRule::ManyImagesSize,
            &image.path,
            format!("an image over {MANY_IMAGES_SIDE_MAX} pixels a side in a request of more than {MANY_IMAGES} images"),
        );
    }
    if let Some(over) = media.get(MEDIA_MAX) {
        push(
            &mut out,
            ProviderRule::MediaLimit,
            &over.path,
            format!(
                "{} images and documents; Anthropic takes at most {MEDIA_MAX}",
                media.len()
            ),
        );
    }
    if let Some(over) = cache_marks.get(CACHE_MARKS_MAX) {
        push(
            &mut out,
            ProviderRule::CacheControlLimit,
            over,
            format!(
                "{} blocks carry cache_control; Anthropic takes at most {CACHE_MARKS_MAX}",
                cache_marks.len()
            ),
        );
    }
    // Rule 5: check on the messages as the server joins them.
    let mut joined: Vec<Joined<'_>> = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        let (mut role, mut content) = (None, None);
        if let Value::Object(fields) = message {
            for (key, value) in fields {
                match key.as_str() {
                    "role" => role = Some(value),
                    "content" => content = Some(value),
                    _ => {}
                }
            }
        }
        let Some(role) = role.and_then(Value::as_str) else {
            push(
                &mut out,
                ProviderRule::Shape,
                &format!("/messages/{index}"),
                "message without a string role",
            );
            continue;
        };
        if role != "user" && role != "assistant" {
            push(
                &mut out,
                ProviderRule::Roles,
                &format!("/messages/{index}/role"),
                format!("role {role:?}: only user and assistant (system is top level)"),
            );
            continue;
        }
        if index == 0 && role != "user" {
            push(
                &mut out,
                ProviderRule::FirstMessageUser,
                &format!("/messages/{index}"),
                format!("first message is {role}"),
            );
        }
        let last = match joined.last_mut() {
            Some(last) if last.role == role => last,
            _ => {
                joined.push(Joined {
                    role,
                    blocks: Vec::new(),
                });
                let at = joined.len() - 1;
                &mut joined[at]
            }
        };
        content_blocks(content, index, &mut last.blocks, &mut out);
    }
    let mut seen_ids: HashMap<&str, At> = HashMap::new();
    let latest_assistant = joined.iter().rposition(|m| m.role == "assistant");
    for (at, message) in joined.iter().enumerate() {
        check_joined_blocks(message, &mut seen_ids, &mut out);
        check_server_tools(message, Some(at) == latest_assistant, &mut out);
        if message.role == "assistant" {
            check_answered_next(message, joined.get(at + 1), &mut out);
        } else {
            let previous = at.checked_sub(1).and_then(|p| joined.get(p));
            check_results_answer_previous(message, previous, &mut out);
        }
    }
    if let Some(last) = joined.last() {
        check_final_whitespace(last, &mut out);
    }
    out
}

/// Where a block is: the message's index, and the block's in its content (`None` for string
/// content, which counts as one text block).
#[derive(Clone, Copy)]
struct At {
    message: usize,
    block: Option<usize>,
}

impl At {
    /// The block's JSON pointer.
    fn path(self) -> String {
        match self.block {
            Some(block) => format!("/messages/{}/content/{block}", self.message),
            None => format!("/messages/{}/content", self.message),
        }
    }
}

/// One message as the server sees it after joining consecutive messages of one role.
struct Joined<'a> {
    role: &'a str,
    /// Every content block, in order.
    blocks: Vec<Block<'a>>,
}

/// A content block as the rules read it: its type and the fields they look at (a string
/// field is `None` when absent or not a string).
#[derive(Default)]
struct Block<'a> {
    at: Option<At>,
    kind: Option<&'a str>,
    text: Option<&'a str>,
    thinking: Option<&'a str>,
    signature: Option<&'a str>,
    data: Option<&'a str>,
    id: Option<&'a str>,
    name: Option<&'a str>,
    /// Present (whatever its value): a `*_tool_result` block with one answers a server call.
    tool_use_id: Option<&'a Value>,
    input: Option<&'a Value>,
    content: Option<&'a Value>,
    is_error: Option<&'a Value>,
    source: Option<&'a Value>,
    citations: Option<&'a Value>,
    cache_control: Option<&'a Value>,
}

impl<'a> Block<'a> {
    /// The block `value` at `at`, in one pass over its keys.
    fn read(value: &'a Value, at: At) -> Self {
        let mut block = Block {
            at: Some(at),
            ..Block::default()
        };
        let Value::Object(fields) = value else {
            return block;
        };
        for (key, value) in fields {
            match key.as_str() {
                "type" => block.kind = value.as_str(),
                "text" => block.text = value.as_str(),
                "thinking" => block.thinking = value.as_str(),
                "signature" => block.signature = value.as_str(),
                "data" => block.data = value.as_str(),
                "id" => block.id = value.as_str(),
                "name" => block.name = value.as_str(),
                "tool_use_id" => block.tool_use_id = Some(value),
                "input" => block.input = Some(value),
                "content" => block.content = Some(value),
                "is_error" => block.is_error = Some(value),
                "source" => block.source = Some(value),
                "citations" => block.citations = Some(value),
                "cache_control" => block.cache_control = Some(value),
                _ => {}
            }
        }
        block
    }

    /// String content: one text block.
    fn text(text: &'a str, at: At) -> Self {
        Block {
            at: Some(at),
            kind: Some("text"),
            text: Some(text),
            ..Block::default()
        }
    }

    fn path(&self) -> String {
        self.at.map(At::path).unwrap_or_default()
    }

    fn tool_use_id(&self) -> Option<&'a str> {
        self.tool_use_id.and_then(Value::as_str)
    }
}

/// The block attributes whose shape Anthropic checks and a source may give in any shape:
/// what [`attribute_fault`] judges.
pub(crate) const CHECKED_ATTRIBUTES: [&str; 2] = ["citations", "cache_control"];

/// The types of the citations a text block may carry.
const CITATION_TYPES: [&str; 5] = [
    "char_location",
    "page_location",
    "content_block_location",
    "search_result_location",
    "web_search_result_location",
];

/// Why Anthropic refuses the attribute `key` of `value` on a block of type `kind`, for the
/// [`CHECKED_ATTRIBUTES`]: a text's `citations` are null or a list of citations of the known
/// types, a document's or a search result's null or an object (`{"enabled": true}`), a
/// `cache_control` mark null or `{"type": "ephemeral", ...}`. `None` when it takes it. The
/// renderer leaves out an attribute with a fault (the block itself still goes).
pub(crate) fn attribute_fault(kind: &str, key: &str, value: &Value) -> Option<&'static str> {
    let typed = |value: &Value, types: &[&str]| {
        value
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|kind| types.contains(&kind))
    };
    match (key, kind, value) {
        ("citations" | "cache_control", _, Value::Null) => None,
        ("citations", "text", Value::Array(items))
            if items.iter().all(|item| typed(item, &CITATION_TYPES)) =>
        {
            None
        }
        ("citations", "text", _) => Some("citations that are not a list of citations"),
        ("citations", "document" | "search_result", Value::Object(_)) => None,
        ("citations", "document" | "search_result", _) => {
            Some("a citations setting that is not an object")
        }
        ("cache_control", _, _) if typed(value, &["ephemeral"]) => None,
        ("cache_control", _, _) => Some("a cache_control mark that is not an ephemeral one"),
        _ => None,
    }
}

/// A `Shape` violation at `path` for each of the [`CHECKED_ATTRIBUTES`] that `field` finds on
/// a block of type `kind` with a fault.
pub(crate) fn check_attributes<'v>(
    kind: &str,
    field: impl Fn(&str) -> Option<&'v Value>,
    path: &dyn Fn() -> String,
    out: &mut Vec<ProviderViolation>,
) {
    for key in CHECKED_ATTRIBUTES {
        if let Some(fault) = field(key).and_then(|value| attribute_fault(kind, key, value)) {
            push(
                out,
                ProviderRule::Shape,
                &path(),
                format!("block with {fault}"),
            );
        }
    }
}

fn check_system(system: &Value, out: &mut Vec<ProviderViolation>) {
    match system {
        Value::String(_) => {}
        Value::Array(blocks) => {
            for (index, block) in blocks.iter().enumerate() {
                let path = || format!("/system/{index}");
                check_attributes("text", |key| block.get(key), &path, out);
                match block.get("text").and_then(Value::as_str) {
                    Some(text) if is_blank(text) => {
                        push(
                            out,
                            ProviderRule::NonEmptyText,
                            &path(),
                            "blank system text block",
                        );
                    }
                    Some(_) => {}
                    None => push(
                        out,
                        ProviderRule::Shape,
                        &path(),
                        "system block without text",
                    ),
                }
            }
        }
        _ => push(
            out,
            ProviderRule::Shape,
            "/system",
            "system is neither a string nor blocks",
        ),
    }
}

/// The blocks of message `index`'s `content`, appended to `blocks`.
fn content_blocks<'a>(
    content: Option<&'a Value>,
    index: usize,
    blocks: &mut Vec<Block<'a>>,
    out: &mut Vec<ProviderViolation>,
) {
    match content {
        Some(Value::String(text)) => blocks.push(Block::text(
            text,
            At {
                message: index,
                block: None,
            },
        )),
        Some(Value::Array(values)) => {
            if values.is_empty() {
                push(
                    out,
                    ProviderRule::Shape,
                    &format!("/messages/{index}/content"),
                    "empty content",
                );
            }
            blocks.extend(values.iter().enumerate().map(|(at, value)| {
                Block::read(
                    value,
                    At {
                        message: index,
                        block: Some(at),
                    },
                )
            }));
        }
        _ => push(
            out,
            ProviderRule::Shape,
            &format!("/messages/{index}/content"),
            "content is neither a string nor blocks",
        ),
    }
}

/// Rule 7b: the final message, when it is an assistant message, may not end with whitespace.
fn check_final_whitespace(last: &Joined<'_>, out: &mut Vec<ProviderViolation>) {
    if last.role != "assistant" {
        return;
    }
    // The single space rule 7 allows between signed thinking blocks is not allowed here.
    for block in &last.blocks {
        if block.kind == Some("text")
            && block
                .text
                .is_some_and(|t| !t.is_empty() && t.trim().is_empty())
        {
            push(
                out,
                ProviderRule::FinalAssistantTrailingWhitespace,
                &block.path(),
                "final assistant content cannot hold a whitespace-only text block",
            );
            return;
        }
    }
    let Some(block) = last.blocks.last() else {
        return;
    };
    if block.kind != Some("text") {
        return;
    }
    if block
        .text
        .is_some_and(|text| text.ends_with(char::is_whitespace))
    {
        push(
            out,
            ProviderRule::FinalAssistantTrailingWhitespace,
            &block.path(),
            "final assistant content cannot end with trailing whitespace",
        );
    }
}

/// Server tools within one joined message: only in assistant messages; each result follows
/// its call; a call without result only in the latest assistant message.
fn check_server_tools(message: &Joined<'_>, latest: bool, out: &mut Vec<ProviderViolation>) {
    let mut open: HashMap<&str, &Block<'_>> = HashMap::new();
    for block in &message.blocks {
        let Some(kind) = block.kind else {
            continue;
        };
        let is_call = kind == "server_tool_use" || kind == "mcp_tool_use";
        let is_result =
            kind != "tool_result" && kind.ends_with("_tool_result") && block.tool_use_id.is_some();
        if !is_call && !is_result {
            continue;
        }
        if message.role != "assistant" {
            push(
                out,
                ProviderRule::Shape,
                &block.path(),
                format!("{kind} block in a user message"),
            );
            continue;
        }
        if is_call {
            match block.id {
                Some(id) if !id.is_empty() => {
                    open.insert(id, block);
                }
                _ => push(
                    out,
                    ProviderRule::Shape,
                    &block.path(),
                    format!("{kind} without an id"),
                ),
            }
        } else {
            let id = block.tool_use_id().unwrap_or_default();
            if open.remove(id).is_none() {
                push(
                    out,
                    ProviderRule::ServerToolPaired,
                    &block.path(),
                    format!("{kind} for {id:?} follows no server tool call of its message"),
                );
            }
        }
    }
    if !latest {
        let mut unanswered: Vec<(&str, String)> = open
            .into_iter()
            .map(|(id, block)| (id, block.path()))
            .collect();
        unanswered.sort_by(|a, b| a.1.cmp(&b.1));
        for (id, path) in unanswered {
            push(
                out,
                ProviderRule::ServerToolPaired,
                &path,
                format!("server tool call {id:?} has no result and its turn is over"),
            );
        }
    }
}

/// Rules 4 and 6-9 and the block shapes, within one joined message.
fn check_joined_blocks<'a>(
    message: &Joined<'a>,
    seen_ids: &mut HashMap<&'a str, At>,
    out: &mut Vec<ProviderViolation>,
) {
    let assistant = message.role == "assistant";
    // Rule 7's exception: a single space between signed thinking blocks keeps them in place.
    let is_signed = |block: &Block<'_>| match block.kind {
        Some("thinking") => block.signature.is_some_and(|s| !s.is_empty()),
        Some("redacted_thinking") => true,
        _ => false,
    };
    let first_signed = message.blocks.iter().position(is_signed);
    let last_signed = message.blocks.iter().rposition(is_signed);
    let between_signed = |at: usize| {
        assistant
            && first_signed.is_some_and(|first| first < at)
            && last_signed.is_some_and(|last| at < last)
    };
    let mut other_seen = false;
    for (at, block) in message.blocks.iter().enumerate() {
        let kind = block.kind;
        if kind != Some("tool_result") {
            other_seen = true;
        }
        let attribute = |key: &str| match key {
            "citations" => block.citations,
            _ => block.cache_control,
        };
        check_attributes(kind.unwrap_or_default(), attribute, &|| block.path(), out);
        match kind {
            Some("text") => check_text_block(block, between_signed(at), out),
            Some(kind @ ("thinking" | "redacted_thinking")) => {
                check_thinking_block(block, kind, assistant, out);
            }
            Some("tool_use") => check_tool_use(block, assistant, seen_ids, out),
            Some("tool_result") => check_tool_result_block(block, assistant, other_seen, out),
            Some(kind @ ("image" | "document")) if assistant => {
                push(
                    out,
                    ProviderRule::Shape,
                    &block.path(),
                    format!("{kind} block in an assistant message"),
                );
            }
            Some(kind @ ("image" | "document")) => {
                match source_fit(kind, block.source.unwrap_or(&Value::Null)) {
                    SourceFit::Sendable => {}
                    SourceFit::AsMediaType(actual) => push(
                        out,
                        ProviderRule::Shape,
                        &block.path(),
                        format!("{kind} block whose data is {actual}, not its media_type"),
                    ),
                    SourceFit::Unsendable(why) => push(
                        out,
                        ProviderRule::Shape,
                        &block.path(),
                        format!("{kind} block: {why}"),
                    ),
                }
            }
            Some(_) => {}
            None => push(
                out,
                ProviderRule::Shape,
                &block.path(),
                "content block without a type",
            ),
        }
    }
}

/// Why Anthropic refuses `item` in the content list of a tool_result (an error one when
/// `is_error`), or `None` when it takes it: an item is an object of a type a result holds
/// (`text`, `image`, `document`, `search_result`); an error result holds text only ("all
/// content must be type 'text' if 'is_error' is true"); a text item has non-blank text; an
/// image or a document item has a source it can take as it is ([`source_fit`]). The
/// renderer keeps the items that pass and describes or leaves out the others
/// (`history/render/anthropic.rs`).
pub(crate) fn result_item_fault(
    item: &Value,
    is_error: bool,
) -> Option<(ProviderRule, &'static str)> {
    match item.get("type").and_then(Value::as_str) {
        None | Some("") => Some((
            ProviderRule::Shape,
            "tool_result content item without a type",
        )),
        Some(kind) if is_error && kind != "text" => Some((
            ProviderRule::ErrorResultContent,
            "an error tool_result holds text only",
        )),
        Some("text")
            if item
                .get("text")
                .and_then(Value::as_str)
                .is_none_or(is_blank) =>
        {
            Some((
                ProviderRule::NonEmptyText,
                "blank text block in a tool_result",
            ))
        }
        Some(kind @ ("image" | "document")) => {
            match source_fit(kind, item.get("source").unwrap_or(&Value::Null)) {
                SourceFit::Sendable => None,
                SourceFit::AsMediaType(_) => Some((
                    ProviderRule::Shape,
                    "media in a tool_result whose media_type is not what its data is",
                )),
                SourceFit::Unsendable(_) => Some((
                    ProviderRule::Shape,
                    "media in a tool_result whose source Anthropic does not take",
                )),
            }
        }
        Some("text" | "search_result") => None,
        Some(_) => Some((
            ProviderRule::Shape,
            "tool_result content item of a type a result does not hold",
        )),
    }
}

/// How an image's or a document's stored source fits Anthropic's block `source`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SourceFit {
    /// Sent as it is.
    Sendable,
    /// Base64 data whose bytes are of this type, which Anthropic takes, under another
    /// declared `media_type` ("The image was specified using the image/png media type, but
    /// the image appears to be a image/jpeg image"; or `image/jpg`): sent under this one.
    AsMediaType(&'static str),
    /// Not sendable, and why: the renderer describes it in text.
    Unsendable(&'static str),
}

/// Whether an image's or a document's (`kind`) stored source can be sent to Anthropic as its
/// block's `source`: an object with a non-empty string `type`; base64 data a string, an
/// image's bytes one of the four image types Anthropic takes (whatever `media_type` says: a
/// screenshot saved as `.png` that is a JPEG, an `image/heic` photo, `image/jpg` each made
/// every later request of the session fail), a document's a PDF. What other source types
/// require is the provider's to say. The renderer describes an unsendable part and retypes
/// a mislabelled image (`history/render/anthropic.rs`); the check names both.
pub(crate) fn source_fit(kind: &str, source: &Value) -> SourceFit {
    let Some(source_type) = source.get("type").and_then(Value::as_str) else {
        return SourceFit::Unsendable("source is not an object with a type");
    };
    match source_type {
        "" => SourceFit::Unsendable("source is not an object with a type"),
        "base64" => {
            let Some(data) = source.get("data").and_then(Value::as_str) else {
                return SourceFit::Unsendable("base64 source without its data");
            };
            if kind == "image" && data.len() > IMAGE_BYTES_MAX {
                return SourceFit::Unsendable("image data over 5 MB, the most Anthropic takes");
            }
            let declared = source.get("media_type").and_then(Value::as_str);
            let actual = match kind {
                "image" => crate::history::media::image_type(data),
                _ => crate::history::media::is_pdf(data).then_some("application/pdf"),
            };
            match actual {
                None if kind == "image" => {
                    SourceFit::Unsendable("image data that is not a JPEG, PNG, GIF or WebP")
                }
                None => SourceFit::Unsendable("document data that is not a PDF"),
                Some(actual) if declared == Some(actual) => SourceFit::Sendable,
                Some(actual) => SourceFit::AsMediaType(actual),
            }
        }
        _ => SourceFit::Sendable,
    }
}

/// A text block's shape and rule 7 (no empty or whitespace-only text), except a single
/// space `between_signed` thinking blocks of an assistant message.
fn check_text_block(block: &Block<'_>, between_signed: bool, out: &mut Vec<ProviderViolation>) {
    match block.text {
        None => push(
            out,
            ProviderRule::Shape,
            &block.path(),
            "text block without text",
        ),
        Some(" ") if between_signed => {}
        Some("") => {
            push(
                out,
                ProviderRule::NonEmptyText,
                &block.path(),
                "empty text block",
            );
        }
        Some(text) if is_blank(text) => {
            push(
                out,
                ProviderRule::NonEmptyText,
                &block.path(),
                "whitespace-only text block",
            );
        }
        Some(_) => {}
    }
}

/// A `thinking` or `redacted_thinking` block (its `kind`): rule 9 and its shape.
fn check_thinking_block(
    block: &Block<'_>,
    kind: &str,
    assistant: bool,
    out: &mut Vec<ProviderViolation>,
) {
    if !assistant {
        push(
            out,
            ProviderRule::ThinkingInAssistant,
            &block.path(),
            format!("{kind} block in a user message"),
        );
    }
    let (field, name) = if kind == "thinking" {
        (block.signature, "thinking block without a signature")
    } else {
        (block.data, "redacted_thinking block without data")
    };
    if field.is_none_or(str::is_empty) {
        push(out, ProviderRule::ThinkingSigned, &block.path(), name);
    }
    if kind == "thinking" && block.thinking.is_none() {
        push(
            out,
            ProviderRule::Shape,
            &block.path(),
            "thinking block without thinking text",
        );
    }
}

/// A tool_result block: rules 3 and 4 (only in a user message, before its other blocks,
/// `other_seen` telling whether one came already), its id and rule 8 on its content.
fn check_tool_result_block(
    block: &Block<'_>,
    assistant: bool,
    other_seen: bool,
    out: &mut Vec<ProviderViolation>,
) {
    if assistant {
        push(
            out,
            ProviderRule::ToolResultAnswersPrevious,
            &block.path(),
            "tool_result block in an assistant message",
        );
    } else if other_seen {
        push(
            out,
            ProviderRule::ToolResultsFirst,
            &block.path(),
            "tool_result after another block of the (joined) user message",
        );
    }
    if block.tool_use_id().is_none_or(str::is_empty) {
        push(
            out,
            ProviderRule::Shape,
            &block.path(),
            "tool_result without tool_use_id",
        );
    }
    check_result_content(block, out);
}

/// A tool_use block's shape and rule 6.
fn check_tool_use<'a>(
    block: &Block<'a>,
    assistant: bool,
    seen_ids: &mut HashMap<&'a str, At>,
    out: &mut Vec<ProviderViolation>,
) {
    if !assistant {
        push(
            out,
            ProviderRule::Shape,
            &block.path(),
            "tool_use block in a user message",
        );
    }
    match block.id {
        Some(id) if !id.is_empty() => {
            if !id
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
            {
                push(
                    out,
                    ProviderRule::Shape,
                    &block.path(),
                    format!("tool_use id {id:?} does not match ^[a-zA-Z0-9_-]+$"),
                );
            }
            match seen_ids.entry(id) {
                std::collections::hash_map::Entry::Occupied(first) => push(
                    out,
                    ProviderRule::UniqueToolUseIds,
                    &block.path(),
                    format!("tool_use id {id:?} already used at {}", first.get().path()),
                ),
                std::collections::hash_map::Entry::Vacant(slot) => {
                    if let Some(at) = block.at {
                        slot.insert(at);
                    }
                }
            }
        }
        _ => push(
            out,
            ProviderRule::Shape,
            &block.path(),
            "tool_use without an id",
        ),
    }
    if block.name.is_none_or(str::is_empty) {
        push(
            out,
            ProviderRule::Shape,
            &block.path(),
            "tool_use without a name",
        );
    }
    if !block.input.is_some_and(Value::is_object) {
        push(
            out,
            ProviderRule::Shape,
            &block.path(),
            "tool_use input is not an object",
        );
    }
}

/// Rule 8, and rule 7 for text blocks nested in a result.
fn check_result_content(block: &Block<'_>, out: &mut Vec<ProviderViolation>) {
    let is_error = block.is_error.and_then(Value::as_bool) == Some(true);
    let has_content = match block.content {
        None | Some(Value::Null) => false,
        Some(Value::String(text)) => !is_blank(text),
        Some(Value::Array(items)) => {
            for (index, item) in items.iter().enumerate() {
                let path = || format!("{}/content/{index}", block.path());
                if let Some((rule, detail)) = result_item_fault(item, is_error) {
                    push(out, rule, &path(), detail);
                }
                let kind = item.get("type").and_then(Value::as_str).unwrap_or_default();
                check_attributes(kind, |key| item.get(key), &path, out);
            }
            !items.is_empty()
        }
        Some(_) => {
            push(
                out,
                ProviderRule::Shape,
                &format!("{}/content", block.path()),
                "tool_result content is neither a string nor blocks",
            );
            true
        }
    };
    if is_error && !has_content {
        push(
            out,
            ProviderRule::ErrorResultContent,
            &block.path(),
            "error tool_result without content",
        );
    }
}

/// The ids of `message`'s tool_results (`tool_use_id`) or tool_uses (`id`), when it has
/// `role` (else none).
fn ids_in<'a>(message: Option<&Joined<'a>>, role: &str, results: bool) -> HashSet<&'a str> {
    message
        .filter(|message| message.role == role)
        .map(|message| ids_of(message, results).map(|(_, id)| id).collect())
        .unwrap_or_default()
}

/// Every tool_result's `tool_use_id` (`results`) or every tool_use's `id` of `message`, with
/// its block, when it is a string.
fn ids_of<'m, 'a>(
    message: &'m Joined<'a>,
    results: bool,
) -> impl Iterator<Item = (&'m Block<'a>, &'a str)> + 'm {
    message.blocks.iter().filter_map(move |block| {
        if results {
            (block.kind == Some("tool_result"))
                .then(|| block.tool_use_id())
                .flatten()
                .map(|id| (block, id))
        } else {
            (block.kind == Some("tool_use"))
                .then_some(block.id)
                .flatten()
                .map(|id| (block, id))
        }
    })
}

/// Rule 2: every tool_use of `message` is answered in the next message, a user message.
fn check_answered_next(
    message: &Joined<'_>,
    next: Option<&Joined<'_>>,
    out: &mut Vec<ProviderViolation>,
) {
    let mut calls = ids_of(message, false).peekable();
    if calls.peek().is_none() {
        return;
    }
    let answers = ids_in(next, "user", true);
    for (block, id) in calls {
        if !answers.contains(id) {
            push(
                out,
                ProviderRule::ToolUseAnswered,
                &block.path(),
                format!("tool_use {id:?} has no tool_result in the next message"),
            );
        }
    }
}

/// Rule 3: every tool_result answers a tool_use of the assistant message directly before,
/// once.
fn check_results_answer_previous(
    message: &Joined<'_>,
    previous: Option<&Joined<'_>>,
    out: &mut Vec<ProviderViolation>,
) {
    let mut results = ids_of(message, true).peekable();
    if results.peek().is_none() {
        return;
    }
    let calls = ids_in(previous, "assistant", false);
    let mut answered = HashSet::new();
    for (block, id) in results {
        if !calls.contains(id) {
            push(
                out,
                ProviderRule::ToolResultAnswersPrevious,
                &block.path(),
                format!(
                    "tool_result for {id:?} answers no tool_use of the previous assistant message"
                ),
            );
        } else if !answered.insert(id) {
            push(
                out,
                ProviderRule::ToolResultAnswersPrevious,
                &block.path(),
                format!("tool_use {id:?} is answered twice"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{json, Value};

    use super::check_anthropic;
    use crate::history::contract::reference;
    use crate::history::render::anthropic::render;
    use crate::history::sanitize::sanitize;
    use crate::history::testing::{arb, history};

    /// Any JSON value: strings with quotes, backslashes, control and non-ASCII characters,
    /// numbers of every kind, nested lists and objects.
    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "[\\\"\\\\\\x00-\\x1f a-zé😀]{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec(("[a-z\\\"]{0,6}", inner), 0..6)
                    .prop_map(|fields| Value::Object(fields.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// The walk that spares an export from writing its body out never says more than
        /// the body's JSON length: it may only let the exact count decide.
        #[test]
        fn the_length_floor_is_never_above_the_json_length(value in any_json()) {
            prop_assert!(super::json_len_floor(&value) <= super::json_len(&value));
            prop_assert_eq!(super::json_len(&value), serde_json::to_string(&value).map_or(0, |t| t.len()));
        }
    }

    /// One change to a body, the kinds other code (or a renderer bug) makes: a key removed,
    /// a value of another type, a role changed, a block repeated, two messages swapped.
    #[derive(Clone, Debug)]
    enum Change {
        Remove(usize, usize, &'static str),
        Set(usize, usize, &'static str, Value),
        Role(usize, &'static str),
        Repeat(usize, usize),
        Swap(usize),
        StringContent(usize, &'static str),
    }

    const KEYS: &[&str] = &[
        "type",
        "text",
        "id",
        "name",
        "input",
        "tool_use_id",
        "signature",
        "data",
        "thinking",
        "content",
        "is_error",
        "citations",
        "cache_control",
    ];

    fn change() -> impl Strategy<Value = Change> {
        let key = prop::sample::select(KEYS);
        let value = prop::sample::select(vec![
            Value::Null,
            json!(""),
            json!(" "),
            json!("x y "),
            json!(1),
            json!(true),
            json!([]),
            json!({}),
            json!("tool_use"),
            json!("tool_result"),
            json!("thinking"),
            json!("server_tool_use"),
            json!("web_search_tool_result"),
            json!("a"),
            json!([{"type": "text", "text": " "}]),
        ]);
        let role = prop::sample::select(vec!["user", "assistant", "system", ""]);
        prop_oneof![
            (any::<usize>(), any::<usize>(), key.clone())
                .prop_map(|(m, b, k)| Change::Remove(m, b, k)),
            (any::<usize>(), any::<usize>(), key, value)
                .prop_map(|(m, b, k, v)| Change::Set(m, b, k, v)),
            (any::<usize>(), role).prop_map(|(m, r)| Change::Role(m, r)),
            (any::<usize>(), any::<usize>()).prop_map(|(m, b)| Change::Repeat(m, b)),
            any::<usize>().prop_map(Change::Swap),
            (any::<usize>(), prop::sample::select(vec!["", " ", "hi "]))
                .prop_map(|(m, t)| Change::StringContent(m, t)),
        ]
    }

    fn apply(body: &mut Value, change: &Change) {
        let Some(messages) = body.get_mut("messages").and_then(Value::as_array_mut) else {
            return;
        };
        if messages.is_empty() {
            return;
        }
        let n = messages.len();
        fn fields(
            messages: &mut [Value],
            m: usize,
            b: usize,
        ) -> Option<&mut serde_json::Map<String, Value>> {
            let n = messages.len();
            let content = messages[m % n].get_mut("content")?.as_array_mut()?;
            let len = content.len();
            content.get_mut(b % len.max(1))?.as_object_mut()
        }
        match change {
            Change::Remove(m, b, key) => {
                if let Some(fields) = fields(messages, *m, *b) {
                    fields.shift_remove(*key);
                }
            }
            Change::Set(m, b, key, value) => {
                if let Some(fields) = fields(messages, *m, *b) {
                    fields.insert((*key).to_owned(), value.clone());
                }
            }
            Change::Role(m, role) => {
                messages[m % n]["role"] = json!(role);
            }
            Change::Repeat(m, b) => {
                if let Some(content) = messages[m % n]
                    .get_mut("content")
                    .and_then(Value::as_array_mut)
                {
                    if !content.is_empty() {
                        let copy = content[b % content.len()].clone();
                        content.push(copy);
                    }
                }
            }
            Change::Swap(m) => {
                if n > 1 {
                    messages.swap(m % n, (m + 1) % n);
                }
            }
            Change::StringContent(m, text) => {
                messages[m % n]["content"] = json!(text);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// The one-pass check finds exactly what the check it replaced found (same rules,
        /// paths, details, order), on rendered bodies and on bodies changed afterwards.
        #[test]
        fn the_one_pass_check_agrees_with_the_lookup_per_rule_check(
            raw in arb::messages(14),
            changes in prop::collection::vec(change(), 0..6),
        ) {
            let mut body = render(&sanitize(&history(raw)));
            for change in &changes {
                apply(&mut body, change);
            }
            prop_assert_eq!(check_anthropic(&body), reference::check_anthropic(&body), "{:#}", body);
        }
    }
}
