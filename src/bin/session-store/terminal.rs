//! Text for a terminal, shared by both binaries: imported transcripts are somebody else's bytes, and a terminal obeys
//! control sequences. `ESC [2J` clears the screen, OSC 52 writes the clipboard, a carriage
//! return overwrites what was printed, bidi overrides reorder what a person reads. Every
//! person-facing line (`show`, `sessions`, errors) passes through [`escape`] or
//! [`escape_line`], which print such characters as visible escapes (`\x1b`, `\u{202e}`):
//! the library's rule (`session_store::escape_invisible`), which its transcripts follow too.
//! JSON output needs none of this: serde_json escapes control characters itself. Tracing
//! output (`-v`) goes through the same escape ([`init_tracing`]).

use std::borrow::Cow;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// `text` with every control character except newline and tab shown as an escape.
pub fn escape(text: &str) -> Cow<'_, str> {
    escape_with(text, |c| c == '\n' || c == '\t')
}

/// `text` on one line: newlines and tabs escaped as well.
pub fn escape_line(text: &str) -> Cow<'_, str> {
    escape_with(text, |_| false)
}

fn escape_with(text: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    session_store::escape_invisible(text, keep)
}

/// Set when SIGXFSZ arrived: a write went past the file size limit (`ulimit -f`).
static FILE_SIZE_LIMIT: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// Catches SIGXFSZ instead of dying by it: a write past `ulimit -f` then fails with EFBIG,
/// its transaction rolls back, and the error is reported with [`file_size_limit_note`].
/// Called first thing by each binary.
pub fn catch_file_size_limit() {
    let flag = Arc::new(AtomicBool::new(false));
    if signal_hook::flag::register(signal_hook::consts::SIGXFSZ, Arc::clone(&flag)).is_ok() {
        let _ = FILE_SIZE_LIMIT.set(flag);
    }
}

/// What to say about a failure when a write hit the file size limit on its way.
pub fn file_size_limit_note() -> Option<&'static str> {
    FILE_SIZE_LIMIT
        .get()
        .filter(|flag| flag.load(Ordering::SeqCst))
        .map(|_| "a write went past the file size limit (`ulimit -f`, SIGXFSZ): the file could not grow; what the command was writing was not committed")
}

/// `-v` (info), `-vv` (debug), `-vvv` (trace) on stderr; `RUST_LOG` overrides the level.
/// Without either, nothing is traced. Plain text (no colours), escaped like everything else:
/// a traced session id or path is somebody else's text too.
pub fn init_tracing(verbose: u8) {
    let level = match verbose {
        0 => None,
        1 => Some("info"),
        2 => Some("debug"),
        _ => Some("trace"),
    };
    let filter = match std::env::var("RUST_LOG") {
        Ok(filter) if !filter.is_empty() => filter,
        _ => match level {
            Some(level) => level.to_owned(),
            None => return,
        },
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_ansi(false)
        .with_writer(|| EscapedStderr)
        .try_init();
}

/// Stderr, with control characters escaped (newlines and tabs kept).
struct EscapedStderr;

impl io::Write for EscapedStderr {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        io::stderr().lock().write_all(escape(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stderr().flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_controls_are_shown_not_obeyed() {
        assert_eq!(escape("clear\u{1b}[2J now"), "clear\\x1b[2J now");
        assert_eq!(
            escape("\u{1b}]52;c;aGVsbG8=\u{7}"),
            "\\x1b]52;c;aGVsbG8=\\x07"
        );
        assert_eq!(escape("a\rb"), "a\\rb");
        assert_eq!(escape("\u{9b}31m"), "\\x9b31m");
        assert_eq!(escape("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(escape("two\nlines\tand a tab"), "two\nlines\tand a tab");
        assert_eq!(escape_line("two\nlines"), "two\\nlines");
        assert!(matches!(escape("plain, ünïcödé"), Cow::Borrowed(_)));
    }
}
