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
    pub(crate) const START: Origin = Origin { line: 1, byte: 0 };
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
