//! Characters a person cannot see but that change what they read: C0 and C1 controls, DEL,
//! and the invisible marks that reorder text (bidi embeddings, overrides and isolates). A
//! terminal obeys control sequences (`ESC [2J` clears the screen, OSC 52 writes the
//! clipboard, a carriage return overwrites a line), and a bidi override makes a browser or an
//! editor show text in another order than it is stored. Stored text is somebody else's
//! bytes: everything shown to a person (the CLIs' lines, Markdown and HTML transcripts)
//! passes through [`escape_invisible`], which prints each such character as a visible escape
//! (`\x1b`, `\u{202e}`). The one statement of the rule.

use std::borrow::Cow;
use std::fmt::Write;

/// True for a character that is invisible but acts on what is shown: C0 and C1 controls,
/// DEL, and the bidi marks, embeddings, overrides and isolates.
pub fn is_invisible(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// `text` with every [`is_invisible`] character for which `keep` is false written as a
/// visible escape (`\n`, `\t`, `\r`, `\x1b`, `\u{202e}`); borrowed when there is none.
pub fn escape_invisible(text: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(|c| is_invisible(c) && !keep(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !is_invisible(c) || keep(c) {
            out.push(c);
            continue;
        }
        let _ = match c {
            '\n' => out.write_str("\\n"),
            '\t' => out.write_str("\\t"),
            '\r' => out.write_str("\\r"),
            c if (c as u32) <= 0xff => write!(out, "\\x{:02x}", c as u32),
            c => write!(out, "\\u{{{:x}}}", c as u32),
        };
    }
    Cow::Owned(out)
}

/// A transcript for people (Markdown or HTML) with line breaks and tabs kept (a CR LF
/// line end read as a line break) and every other invisible character shown as an escape.
pub(crate) fn shown(text: String) -> String {
    let text = if text.contains('\r') {
        text.replace("\r\n", "\n")
    } else {
        text
    };
    match escape_invisible(&text, |c| c == '\n' || c == '\t') {
        Cow::Borrowed(_) => text,
        Cow::Owned(escaped) => escaped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invisible_characters_become_escapes_and_the_rest_is_kept() {
        let cases = [
            ("plain é 😀", "plain é 😀"),
            ("a\x1b[31mred", "a\\x1b[31mred"),
            (
                "\u{202e}evil\u{2066}x\u{2069}",
                "\\u{202e}evil\\u{2066}x\\u{2069}",
            ),
            ("bell\x07del\x7f", "bell\\x07del\\x7f"),
            ("c1\u{9b}", "c1\\x9b"),
            ("line\nnext\ttab", "line\nnext\ttab"),
            ("crlf\r\nlone\rcr", "crlf\nlone\\rcr"),
            ("nul\0", "nul\\x00"),
        ];
        for (text, want) in cases {
            assert_eq!(shown(text.to_owned()), want, "{text:?}");
        }
        assert_eq!(escape_invisible("a\nb", |_| false), "a\\nb");
    }
}
