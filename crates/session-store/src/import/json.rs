//! The importers' JSON parse layer: every JSON text an importer reads goes through [`parse`].
//!
//! - A syntax error names its line and byte offset ([`ImportError::Json`]).
//! - An object with the same key twice is refused with the JSON path of the second one
//!   ([`ImportError::DuplicateKey`]): `serde_json` keeps the last value silently, so two
//!   readers of one file could disagree about what it says.
//! - Bytes that are not UTF-8 are refused by [`utf8`] with their line and byte offset.
//!
//! The duplicate check is a first pass with a validating visitor that builds nothing; the
//! value itself is then parsed by `serde_json`'s own `Value`, so numbers are kept exactly as
//! `serde_json` keeps them (with its `arbitrary_precision` feature, digit for digit).

use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::{ImportError, Location};

/// Where a text sits in the input: its first line and byte, for locations in errors.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Origin {
    /// 1-based line of the text's first character in the input.
    pub line: usize,
    /// Byte offset of the text's first character in the input.
    pub byte: usize,
}

impl Origin {
    /// A whole input.
    #[cfg(test)]
    pub(crate) const START: Origin = Origin { line: 1, byte: 0 };
}

/// The UTF-8 byte order mark some editors write first. JSON forbids it (RFC 8259 section
/// 8.1) and a parser would call it "expected value at line 1 column 1"; it is named instead.
const BOM: &[u8] = b"\xef\xbb\xbf";

/// What an input starting with [`BOM`] is told.
pub(crate) const BOM_PROBLEM: &str = "the input starts with a UTF-8 byte order mark (bytes EF BB BF), which JSON does not allow: save it without one";

/// [`BOM_PROBLEM`] at the input's first byte when `start` (the input's first bytes) begins
/// with a byte order mark. Every import meets it: [`utf8_stream`] (streamed imports,
/// samples) and [`crate::import::import`] (in-memory imports).
pub(crate) fn refuse_bom(start: &[u8]) -> Result<(), ImportError> {
    if start.starts_with(BOM) {
        return Err(ImportError::Malformed {
            at: Location {
                line: Some(1),
                byte: Some(0),
                path: String::new(),
            },
            problem: BOM_PROBLEM.to_owned(),
        });
    }
    Ok(())
}

/// Checks that `bytes` are UTF-8; the error names the line and byte offset of the first
/// invalid sequence.
pub fn utf8(bytes: &[u8]) -> Result<&str, ImportError> {
    std::str::from_utf8(bytes).map_err(|e| {
        let byte = e.valid_up_to();
        let line = 1 + bytes[..byte].iter().filter(|&&b| b == b'\n').count();
        ImportError::InvalidUtf8 {
            at: Location {
                line: Some(line),
                byte: Some(byte),
                path: String::new(),
            },
        }
    })
}

/// Parses one JSON text, refusing duplicate keys. `at` is where the text's value sits (a line
/// of a JSON Lines file, or a JSON string inside the document such as a tool call's
/// `arguments`); `origin` where the text starts in the input, when it is a stretch of the
/// input itself (not a JSON string inside it), for line numbers and byte offsets.
pub(crate) fn parse(
    text: &str,
    at: &Location,
    origin: Option<Origin>,
) -> Result<Value, ImportError> {
    let duplicate = RefCell::new(None);
    let mut path = Vec::new();
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let checked = NoDuplicates {
        path: &mut path,
        duplicate: &duplicate,
    }
    .deserialize(&mut deserializer)
    .and_then(|()| deserializer.end());
    if let Err(source) = checked {
        if let Some((path, key)) = duplicate.into_inner() {
            return Err(ImportError::DuplicateKey {
                at: Location {
                    line: origin
                        .map_or(at.line, |o| Some(o.line + source.line().saturating_sub(1))),
                    byte: origin.map(|o| byte_offset(text, &source, o)),
                    path: if path.is_empty() {
                        at.path.clone()
                    } else {
                        at.join(&path).path
                    },
                },
                key,
            });
        }
        return Err(syntax(text, source, at, origin));
    }
    serde_json::from_str(text).map_err(|source| syntax(text, source, at, origin))
}

/// What is wrong with a text `serde_json` refused, in words: JSON nested deeper than its
/// reader follows (valid JSON, but the store could not read it back) is said so, with the
/// limit; anything else is not valid JSON.
pub(crate) fn problem(error: &serde_json::Error) -> String {
    if error.to_string().starts_with("recursion limit exceeded") {
        format!(
            "the JSON nests deeper than {} levels, the most the store reads back",
            crate::store::MAX_JSON_DEPTH
        )
    } else {
        "not valid JSON".to_owned()
    }
}

fn syntax(
    text: &str,
    source: serde_json::Error,
    at: &Location,
    origin: Option<Origin>,
) -> ImportError {
    let at = match origin {
        Some(origin) => Location {
            line: Some(origin.line + source.line().saturating_sub(1)),
            byte: Some(byte_offset(text, &source, origin)),
            path: at.path.clone(),
        },
        None => at.clone(),
    };
    ImportError::Json { at, source }
}

/// The byte offset in the input of a `serde_json` error's line and column.
fn byte_offset(text: &str, error: &serde_json::Error, origin: Origin) -> usize {
    let line_start: usize = text
        .split_inclusive('\n')
        .take(error.line().saturating_sub(1))
        .map(str::len)
        .sum();
    (origin.byte + line_start + error.column().saturating_sub(1)).min(origin.byte + text.len())
}

/// One step of a JSON path.
enum Step {
    Key(String),
    Index(usize),
}

/// Renders steps as `messages[3].content`.
fn render(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Key(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Step::Index(index) => out.push_str(&format!("[{index}]")),
        }
    }
    out
}

/// A visitor that accepts any JSON value, builds nothing, and fails on a repeated key,
/// recording where.
struct NoDuplicates<'a> {
    path: &'a mut Vec<Step>,
    duplicate: &'a RefCell<Option<(String, String)>>,
}

impl<'de> DeserializeSeed<'de> for NoDuplicates<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for NoDuplicates<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_i128<E>(self, _: i128) -> Result<(), E> {
        Ok(())
    }
    fn visit_u128<E>(self, _: u128) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0;
        loop {
            self.path.push(Step::Index(index));
            let more = seq.next_element_seed(NoDuplicates {
                path: self.path,
                duplicate: self.duplicate,
            })?;
            self.path.pop();
            if more.is_none() {
                return Ok(());
            }
            index += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen: HashSet<String> = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if seen.contains(&key) {
                self.path.push(Step::Key(key.clone()));
                *self.duplicate.borrow_mut() = Some((render(self.path), key.clone()));
                return Err(de::Error::custom(format!("duplicate key {key:?}")));
            }
            self.path.push(Step::Key(key.clone()));
            map.next_value_seed(NoDuplicates {
                path: self.path,
                duplicate: self.duplicate,
            })?;
            self.path.pop();
            seen.insert(key);
        }
        Ok(())
    }
}

/// Checks that everything `input` yields is UTF-8, a chunk at a time (nothing is kept); the
/// error names the line and byte offset of the first invalid sequence, as [`utf8`] does.
pub(crate) fn utf8_stream(input: &mut impl Read) -> Result<(), ImportError> {
    let mut buffer = vec![0u8; 64 * 1024];
    // Bytes of a sequence cut by the end of the previous chunk.
    let mut carry = 0;
    // Offset in the input of `buffer[0]`, and lines before it.
    let mut offset = 0;
    let mut lines = 0;
    loop {
        let read = match input.read(&mut buffer[carry..]) {
            Ok(read) => read,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(source) => return Err(ImportError::Io { source }),
        };
        let filled = carry + read;
        let chunk = &buffer[..filled];
        if offset == 0 {
            refuse_bom(chunk)?;
        }
        let invalid_at = |valid: usize| ImportError::InvalidUtf8 {
            at: Location {
                line: Some(1 + lines + chunk[..valid].iter().filter(|&&b| b == b'\n').count()),
                byte: Some(offset + valid),
                path: String::new(),
            },
        };
        let valid = match std::str::from_utf8(chunk) {
            Ok(_) => filled,
            // A sequence cut by the chunk's end: read on, unless the input ended.
            Err(e) if e.error_len().is_none() && read > 0 => e.valid_up_to(),
            Err(e) => return Err(invalid_at(e.valid_up_to())),
        };
        if read == 0 {
            return Ok(());
        }
        lines += chunk[..valid].iter().filter(|&&b| b == b'\n').count();
        offset += valid;
        buffer.copy_within(valid..filled, 0);
        carry = filled - valid;
    }
}

/// How much of the input a pass reads at once. `serde_json` reads a byte at a time: through
/// a `BufReader` it owns, each byte is a read from the buffer, not a call down the stack.
const PASS_BUFFER: usize = 64 * 1024;

/// Where `error` (found by a pass that started at `start`) lies: its line, and its byte offset
/// in the input, found by reading the input again up to that line (errors are rare; a pass
/// keeps no line table).
fn locate<R: Read + Seek>(input: &mut R, start: u64, error: &serde_json::Error) -> (usize, usize) {
    let line = error.line();
    let Ok(_) = input.seek(SeekFrom::Start(start)) else {
        return (line, 0);
    };
    let mut reader = BufReader::with_capacity(PASS_BUFFER, input);
    let mut line_start = 0;
    let mut read = 0;
    let mut newlines = 0;
    while newlines + 1 < line {
        let Ok(buffer) = reader.fill_buf() else {
            break;
        };
        if buffer.is_empty() {
            break;
        }
        let mut used = buffer.len();
        for (i, &b) in buffer.iter().enumerate() {
            if b == b'\n' {
                newlines += 1;
                if newlines + 1 == line {
                    line_start = read + i + 1;
                    used = i + 1;
                    break;
                }
            }
        }
        read += used;
        reader.consume(used);
    }
    // The end of the input caps an offset past it (an error at the end of the text).
    let mut rest = 0;
    while let Ok(buffer) = reader.fill_buf() {
        if buffer.is_empty() {
            break;
        }
        rest += buffer.len();
        let n = buffer.len();
        reader.consume(n);
    }
    let byte = (line_start + error.column().saturating_sub(1)).min(read + rest);
    (line, byte)
}

/// The top level of a request body, read without building its long array: what
/// [`scan_document`] found.
#[derive(Debug, Default)]
pub(crate) struct Top {
    /// `None` when the document is an object; else the JSON type it is.
    pub(crate) not_an_object: Option<&'static str>,
    /// The fields asked for, as values.
    pub(crate) fields: serde_json::Map<String, Value>,
    /// The streamed field: absent, an array (its elements not kept: an empty array stands for
    /// it), or any other value, kept.
    pub(crate) stream: Option<Value>,
}

/// Pass one over a request body: checks the whole document as [`parse`] does (syntax with
/// line and byte offset, duplicate keys with their path), building only the top-level
/// `fields` asked for and, for the `stream` field, its value unless it is an array. Memory
/// stays bounded by those fields, whatever the input's size.
pub(crate) fn scan_document<R: Read + Seek>(
    input: &mut R,
    fields: &[&str],
    stream: &str,
) -> Result<Top, ImportError> {
    let duplicate = RefCell::new(None);
    let mut path = Vec::new();
    let mut top = Top::default();
    let start = input
        .stream_position()
        .map_err(|source| ImportError::Io { source })?;
    let checked = {
        let reader = BufReader::with_capacity(PASS_BUFFER, &mut *input);
        let mut deserializer = serde_json::Deserializer::from_reader(reader);
        let result = TopVisitor {
            path: &mut path,
            duplicate: &duplicate,
            fields,
            stream,
            top: &mut top,
        }
        .deserialize(&mut deserializer)
        .and_then(|()| deserializer.end());
        result
    };
    let Err(source) = checked else {
        return Ok(top);
    };
    if source.is_io() {
        return Err(ImportError::Io {
            source: source.into(),
        });
    }
    let (line, byte) = locate(input, start, &source);
    if let Some((path, key)) = duplicate.into_inner() {
        return Err(ImportError::DuplicateKey {
            at: Location {
                line: Some(line),
                byte: Some(byte),
                path,
            },
            key,
        });
    }
    Err(ImportError::Json {
        at: Location {
            line: Some(line),
            byte: Some(byte),
            path: String::new(),
        },
        source,
    })
}

/// Pass two over a request body [`scan_document`] accepted: hands each element of the
/// `stream` array to `each` as it is read, one at a time; everything else is skipped. The
/// first error `each` returns stops the reading and is returned.
pub(crate) fn each_element<H, R: Read + Seek>(
    input: &mut R,
    stream: &str,
    each: impl FnMut(usize, Value) -> Result<(), H>,
) -> Result<(), Pass<H>> {
    let mut halted = None;
    let start = input
        .stream_position()
        .map_err(|source| Pass::Import(ImportError::Io { source }))?;
    let result = {
        let reader = BufReader::with_capacity(PASS_BUFFER, &mut *input);
        let mut deserializer = serde_json::Deserializer::from_reader(reader);
        let mut elements = Elements {
            stream,
            each,
            halted: &mut halted,
        };
        de::Deserializer::deserialize_map(&mut deserializer, &mut elements)
            .and_then(|()| deserializer.end())
    };
    if let Some(halt) = halted {
        return Err(Pass::Halted(halt));
    }
    result.map_err(|source| {
        if source.is_io() {
            return Pass::Import(ImportError::Io {
                source: source.into(),
            });
        }
        // The input changed between the two passes.
        let (line, byte) = locate(input, start, &source);
        Pass::Import(ImportError::Json {
            at: Location {
                line: Some(line),
                byte: Some(byte),
                path: String::new(),
            },
            source,
        })
    })
}

/// Why [`each_element`] stopped.
pub(crate) enum Pass<H> {
    /// The input could not be read again.
    Import(ImportError),
    /// `each` said stop.
    Halted(H),
}

struct Elements<'a, F, H> {
    stream: &'a str,
    each: F,
    halted: &'a mut Option<H>,
}

impl<'de, F, H> Visitor<'de> for &mut Elements<'_, F, H>
where
    F: FnMut(usize, Value) -> Result<(), H>,
{
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            if key == self.stream {
                map.next_value_seed(&mut *self)?;
            } else {
                map.next_value::<de::IgnoredAny>()?;
            }
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0;
        while let Some(value) = seq.next_element::<Value>()? {
            if let Err(halt) = (self.each)(index, value) {
                *self.halted = Some(halt);
                return Err(de::Error::custom("stopped"));
            }
            index += 1;
        }
        Ok(())
    }
}

impl<'de, F, H> DeserializeSeed<'de> for &mut Elements<'_, F, H>
where
    F: FnMut(usize, Value) -> Result<(), H>,
{
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

/// The top-level visitor of [`scan_document`].
struct TopVisitor<'a> {
    path: &'a mut Vec<Step>,
    duplicate: &'a RefCell<Option<(String, String)>>,
    fields: &'a [&'a str],
    stream: &'a str,
    top: &'a mut Top,
}

impl TopVisitor<'_> {
    fn check(&mut self) -> Checked<'_> {
        Checked {
            path: self.path,
            duplicate: self.duplicate,
            mode: Mode::Check,
        }
    }
}

impl<'de> DeserializeSeed<'de> for TopVisitor<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TopVisitor<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        self.top.not_an_object = Some("a boolean");
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        self.top.not_an_object = Some("a number");
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        self.top.not_an_object = Some("a number");
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        self.top.not_an_object = Some("a number");
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        self.top.not_an_object = Some("a string");
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        self.top.not_an_object = Some("null");
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, seq: A) -> Result<(), A::Error> {
        self.top.not_an_object = Some("an array");
        self.check().visit_seq(seq).map(drop)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen: HashSet<String> = HashSet::new();
        let mut first = true;
        while let Some(key) = map.next_key::<String>()? {
            if first && key == NUMBER_TOKEN {
                // `arbitrary_precision`'s form of a number.
                map.next_value::<de::IgnoredAny>()?;
                self.top.not_an_object = Some("a number");
                return Ok(());
            }
            first = false;
            self.path.push(Step::Key(key.clone()));
            if seen.contains(&key) {
                *self.duplicate.borrow_mut() = Some((render(self.path), key.clone()));
                return Err(de::Error::custom(format!("duplicate key {key:?}")));
            }
            let mode = if key == self.stream {
                Mode::Stream
            } else if self.fields.contains(&key.as_str()) {
                Mode::Build
            } else {
                Mode::Check
            };
            let value = map.next_value_seed(Checked {
                path: self.path,
                duplicate: self.duplicate,
                mode,
            })?;
            self.path.pop();
            match mode {
                Mode::Stream => self.top.stream = Some(value),
                Mode::Build => {
                    self.top.fields.insert(key.clone(), value);
                }
                Mode::Check => {}
            }
            seen.insert(key);
        }
        Ok(())
    }
}

/// The key under which `serde_json` (with `arbitrary_precision`) hands a number to a visitor.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// What [`Checked`] builds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Nothing (`Value::Null` stands for every value).
    Check,
    /// The value, as `serde_json`'s `Value` would.
    Build,
    /// The value, unless it is an array: its elements are checked, an empty array returned.
    Stream,
}

/// The parts of a JSON-value `Visitor` that do not depend on the seed: `expecting`, and every
/// scalar but strings, which each seed keeps in its own way.
macro_rules! json_scalars {
    () => {
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
            Ok(Value::Bool(v))
        }
        fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
            Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
        }
        fn visit_unit<E>(self) -> Result<Value, E> {
            Ok(Value::Null)
        }
        fn visit_none<E>(self) -> Result<Value, E> {
            Ok(Value::Null)
        }
    };
}

/// A seed that is its own visitor: reads any JSON value.
macro_rules! seed_of_visitor {
    ($seed:ident) => {
        impl<'de> DeserializeSeed<'de> for $seed<'_> {
            type Value = Value;

            fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
                deserializer.deserialize_any(self)
            }
        }
    };
}

/// A visitor that refuses repeated keys, recording where, and builds the value or not.
struct Checked<'a> {
    path: &'a mut Vec<Step>,
    duplicate: &'a RefCell<Option<(String, String)>>,
    mode: Mode,
}

impl Checked<'_> {
    fn child(&mut self, mode: Mode) -> Checked<'_> {
        Checked {
            path: self.path,
            duplicate: self.duplicate,
            mode,
        }
    }

    fn building(&self) -> bool {
        self.mode != Mode::Check
    }
}

seed_of_visitor!(Checked);

impl<'de> Visitor<'de> for Checked<'_> {
    type Value = Value;

    json_scalars!();

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(if self.building() {
            Value::String(v.to_owned())
        } else {
            Value::Null
        })
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Value, A::Error> {
        let mode = match self.mode {
            Mode::Build => Mode::Build,
            Mode::Check | Mode::Stream => Mode::Check,
        };
        let mut out = Vec::new();
        let mut index = 0;
        loop {
            self.path.push(Step::Index(index));
            let element = seq.next_element_seed(self.child(mode))?;
            self.path.pop();
            match element {
                None => break,
                Some(value) if mode == Mode::Build => out.push(value),
                Some(_) => {}
            }
            index += 1;
        }
        Ok(if self.building() {
            Value::Array(out)
        } else {
            Value::Null
        })
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Value, A::Error> {
        let mode = match self.mode {
            Mode::Check => Mode::Check,
            Mode::Build | Mode::Stream => Mode::Build,
        };
        let mut seen: HashSet<String> = HashSet::new();
        let mut out = serde_json::Map::new();
        let mut first = true;
        while let Some(key) = map.next_key::<String>()? {
            if first && key == NUMBER_TOKEN {
                // `arbitrary_precision`'s form of a number, kept digit for digit as
                // `serde_json`'s `Value` keeps it.
                if !self.building() {
                    map.next_value::<de::IgnoredAny>()?;
                    return Ok(Value::Null);
                }
                let digits: String = map.next_value()?;
                let number: serde_json::Number = digits.parse().map_err(de::Error::custom)?;
                return Ok(Value::Number(number));
            }
            first = false;
            if seen.contains(&key) {
                self.path.push(Step::Key(key.clone()));
                *self.duplicate.borrow_mut() = Some((render(self.path), key.clone()));
                return Err(de::Error::custom(format!("duplicate key {key:?}")));
            }
            self.path.push(Step::Key(key.clone()));
            let value = map.next_value_seed(self.child(mode))?;
            self.path.pop();
            if mode == Mode::Build {
                out.insert(key.clone(), value);
            }
            seen.insert(key);
        }
        Ok(if self.building() {
            Value::Object(out)
        } else {
            Value::Null
        })
    }
}

/// `input` as one JSON document, cut to a sample of about `budget` bytes of text (strings and
/// keys): each array keeps elements while the budget lasts (at least its first), each string
/// its first [`SAMPLE_STRING`] bytes; the rest is read and dropped. Built as `serde_json`'s
/// `Value` is (the last of repeated keys wins, numbers digit for digit).
pub(crate) fn bounded_document(input: impl Read, budget: usize) -> serde_json::Result<Value> {
    let left = std::cell::Cell::new(budget);
    let reader = BufReader::with_capacity(PASS_BUFFER, input);
    let mut deserializer = serde_json::Deserializer::from_reader(reader);
    let value = Bounded { left: &left }.deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// The longest string a [`bounded_document`] sample keeps whole.
const SAMPLE_STRING: usize = 64 * 1024;

/// The visitor of [`bounded_document`]: `left` is the budget not spent yet.
#[derive(Clone, Copy)]
struct Bounded<'a> {
    left: &'a std::cell::Cell<usize>,
}

impl Bounded<'_> {
    fn spend(&self, bytes: usize) {
        self.left.set(self.left.get().saturating_sub(bytes));
    }

    fn string(&self, text: &str) -> Value {
        let mut end = text.len().min(SAMPLE_STRING);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        self.spend(end);
        Value::String(text[..end].to_owned())
    }
}

seed_of_visitor!(Bounded);

impl<'de> Visitor<'de> for Bounded<'_> {
    type Value = Value;

    json_scalars!();

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(self.string(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while out.is_empty() || self.left.get() > 0 {
            match seq.next_element_seed(self)? {
                Some(value) => out.push(value),
                None => return Ok(Value::Array(out)),
            }
        }
        while seq.next_element::<de::IgnoredAny>()?.is_some() {}
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = serde_json::Map::new();
        let mut first = true;
        while let Some(key) = map.next_key::<String>()? {
            if first && key == NUMBER_TOKEN {
                let digits: String = map.next_value()?;
                let number: serde_json::Number = digits.parse().map_err(de::Error::custom)?;
                return Ok(Value::Number(number));
            }
            first = false;
            self.spend(key.len());
            let value = map.next_value_seed(self)?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> Location {
        Location::default()
    }

    #[test]
    fn duplicate_keys_are_refused_with_their_path() {
        let text =
            "{\"messages\": [{\"role\": \"user\", \"content\": \"a\", \"role\": \"assistant\"}]}";
        let err = parse(text, &at(), Some(Origin::START)).expect_err("duplicate");
        let ImportError::DuplicateKey { at, key } = &err else {
            panic!("{err:?}");
        };
        assert_eq!(key, "role");
        assert_eq!(at.path, "messages[0].role");
        assert_eq!(at.line, Some(1));
    }

    #[test]
    fn the_same_key_in_two_objects_is_fine() {
        let text = r#"[{"a": 1}, {"a": 2, "b": {"a": 3}}]"#;
        assert!(parse(text, &at(), Some(Origin::START)).is_ok());
    }

    #[test]
    fn syntax_errors_name_line_and_byte() {
        let text = "{\n  \"a\": 1,\n  \"b\": ?\n}";
        let err = parse(text, &at(), Some(Origin::START)).expect_err("syntax");
        let location = err.location().expect("location").clone();
        assert_eq!(location.line, Some(3));
        let byte = location.byte.expect("byte");
        assert!((16..=text.len()).contains(&byte), "{byte}");
    }

    #[test]
    fn invalid_utf8_names_line_and_byte() {
        let bytes = b"{\"a\": 1}\n{\"b\": \"\xff\"}\n";
        let err = utf8(bytes).expect_err("invalid");
        let location = err.location().expect("location");
        assert_eq!(location.line, Some(2));
        assert_eq!(location.byte, Some(16));
        assert!(err.to_string().contains("byte 16"), "{err}");
    }

    #[test]
    fn big_numbers_parse_as_serde_json_parses_them() {
        let text = r#"{"n": 123456789012345678901234567890, "m": 18446744073709551615}"#;
        let ours = parse(text, &at(), Some(Origin::START)).expect("parses");
        let theirs: Value = serde_json::from_str(text).expect("parses");
        assert_eq!(ours, theirs);
    }
}
