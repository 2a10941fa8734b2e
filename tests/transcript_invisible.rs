//! `export --format markdown|html` on hostile stored text: control characters (terminal
//! escapes, bells, a lone carriage return, NUL, C1 controls) and bidi overrides are shown as
//! visible escapes, never written raw, wherever the text sits (a user's text, reasoning, a
//! call's name and input, a result); line breaks, tabs and other text are kept.

use serde_json::json;
use session_store::{is_invisible, NewMessage, Part, Store};

use crate::util::session_store_ok;

/// Hostile texts and the escape each one's first invisible character is shown as.
const HOSTILE: [(&str, &str); 7] = [
    ("a\x1b[2Jcleared", "\\x1b[2Jcleared"),
    ("\u{202e}gnp.exe", "\\u{202e}gnp.exe"),
    ("x\u{2066}isolated\u{2069}", "\\u{2066}isolated"),
    ("bell\x07", "bell\\x07"),
    ("over\rwrite", "over\\rwrite"),
    ("c1\u{9b}31m", "c1\\x9b31m"),
    ("osc\x1b]52;c;Zm9v\x07", "\\x1b]52;c;Zm9v\\x07"),
];

#[test]
fn transcripts_show_invisible_characters_as_escapes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("s.db");
    let store = Store::open(&db).expect("open");
    let session = store.create_session().expect("session");
    let mut batch = Vec::new();
    for (n, (text, _)) in HOSTILE.iter().enumerate() {
        let id = format!("call_{n}");
        batch.push(NewMessage::user(format!("user {text}\r\nnext\tline")));
        batch.push(NewMessage::assistant(vec![
            Part::reasoning(format!("think {text}"), None),
            Part::tool_use(&id, format!("tool{text}"), json!({ "arg": text })),
        ]));
        batch.push(NewMessage::tool(vec![Part::tool_result(
            &id,
            format!("result {text}"),
        )]));
        batch.push(NewMessage::assistant(vec![Part::text(format!(
            "done {text}"
        ))]));
    }
    store.append_batch(&session, batch).expect("append");
    drop(store);
    for format in ["markdown", "html"] {
        let out = session_store_ok(&db, &["export", session.as_str(), "--format", format]);
        let raw: Vec<char> = out
            .chars()
            .filter(|&c| is_invisible(c) && c != '\n' && c != '\t')
            .collect();
        assert!(raw.is_empty(), "{format}: raw invisible characters {raw:?}");
        for (text, shown) in HOSTILE {
            assert!(
                out.contains(shown),
                "{format}: {text:?} not shown as {shown:?}"
            );
        }
        assert!(
            out.contains("next\tline"),
            "{format}: a tab or line break was escaped"
        );
        assert!(
            !out.contains("\\r\\n") && !out.contains("\\n"),
            "{format}: a line break was escaped"
        );
    }
}
