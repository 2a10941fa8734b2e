use serde_json::json;

use super::html::escape;
use super::*;
use crate::history::testing::{assistant, call, history, t0, tool, user};
use crate::history::texts::tombstone;

fn session() -> SessionId {
    SessionId::new("s-1")
}

fn render(messages: &[Message], summaries: &[Summary]) -> (String, String) {
    let id = session();
    let t = Transcript {
        session: &id,
        title: Some("A <b>title</b>"),
        forked_from: Some(("parent-<id>", 3)),
        messages,
        summaries,
        usage: &[(2, Usage::new(1200, 34))],
    };
    (markdown(&t), html(&t))
}

#[test]
fn every_answered_call_is_shown_with_its_result_and_the_tool_message_is_not_repeated() {
    let messages = history(vec![
        user("list it"),
        assistant(vec![call("call-alpha"), call("call-beta")]),
        tool(vec![
            Part::tool_result("call-beta", "second output"),
            Part::tool_result("call-alpha", "first output"),
        ]),
        assistant(vec![Part::text("done")]),
    ]);
    let id = session();
    let t = Transcript {
        session: &id,
        title: None,
        forked_from: None,
        messages: &messages,
        summaries: &[],
        usage: &[],
    };
    let entries = layout(&t);
    let shown: Vec<&Shown<'_>> = entries
        .iter()
        .filter_map(|e| match e {
            Entry::Message(s) => Some(s),
            _ => None,
        })
        .collect();
    assert_eq!(shown.len(), 3, "the tool message is folded into the calls");
    let outputs: Vec<&str> = shown[1]
        .blocks
        .iter()
        .filter_map(|b| match b {
            Block::Call(Call {
                outcome: Outcome::Answered(a),
                ..
            }) => Some(a.content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(outputs, ["first output", "second output"]);
    let (md, page) = render(&messages, &[]);
    for text in [&md, &page] {
        let call = text.find("call-alpha").expect("call shown");
        let result = text.find("first output").expect("result shown");
        let next = text.find("call-beta").expect("second call shown");
        assert!(
            call < result && result < next,
            "each result follows its own call"
        );
    }
}

#[test]
fn tombstones_pending_and_orphans_are_marked_in_both_formats() {
    let cases = [
        (
            history(vec![
                user("go"),
                assistant(vec![call("c1")]),
                tool(vec![Part::tool_error("c1", tombstone("user interrupted"))]),
            ]),
            ("**Tombstone**", "badge tombstone"),
        ),
        (
            history(vec![user("go"), assistant(vec![call("c1")])]),
            ("**Pending:**", "badge pending"),
        ),
        (
            history(vec![
                user("go"),
                tool(vec![Part::tool_result("zz", "stray")]),
            ]),
            ("answers no call", "call stray"),
        ),
        (
            history(vec![
                user("go"),
                assistant(vec![call("c1")]),
                tool(vec![Part::tool_error("c1", "exit 1")]),
            ]),
            ("**Error result**", "badge error"),
        ),
    ];
    for (messages, (md_mark, html_mark)) in cases {
        let (md, page) = render(&messages, &[]);
        assert!(md.contains(md_mark), "{md_mark} missing in:\n{md}");
        assert!(page.contains(html_mark), "{html_mark} missing");
    }
}

#[test]
fn compacted_messages_are_marked_and_the_summary_follows_the_head_it_replaces() {
    let mut messages = history(vec![
        user("first"),
        assistant(vec![Part::text("one")]),
        user("second"),
        assistant(vec![Part::text("two")]),
    ]);
    messages[0].compacted = true;
    messages[1].compacted = true;
    let summary = Summary {
        id: 1,
        first_turn: 0,
        last_turn: 0,
        compacted_from_turn: 0,
        through_seq: 2,
        text: "They said one.".to_owned(),
        created_at: t0(),
    };
    let (md, page) = render(&messages, std::slice::from_ref(&summary));
    for (text, mark) in [(&md, "*compacted"), (&page, "badge compacted")] {
        assert_eq!(
            text.matches(mark).count(),
            2,
            "two compacted messages marked"
        );
        let one = text.find("one").expect("head shown");
        let sum = text.find("They said one.").expect("summary shown");
        let second = text.find("second").expect("tail shown");
        assert!(one < sum && sum < second, "summary between head and tail");
    }
}

#[test]
fn long_results_fold_and_short_ones_do_not() {
    for (content, folded) in [
        ("short".to_owned(), false),
        ("line\n".repeat(FOLD_LINES + 1), true),
        ("x".repeat(FOLD_BYTES + 1), true),
        ("line\n".repeat(FOLD_LINES), false),
    ] {
        let messages = history(vec![
            user("go"),
            assistant(vec![call("c1")]),
            tool(vec![Part::tool_result("c1", content.as_str())]),
        ]);
        let (_, page) = render(&messages, &[]);
        assert_eq!(
            page.contains("<details class=\"result\">"),
            folded,
            "{} bytes",
            content.len()
        );
    }
}

#[test]
fn the_escape_leaves_no_markup_character_and_markdown_fences_cannot_be_closed_from_inside() {
    for hostile in [
        "<script>alert(1)</script>",
        "</pre><img src=x onerror=alert(1)>",
        "a\"b'c&d",
    ] {
        let escaped = escape(hostile);
        assert!(!escaped.contains(['<', '>', '"', '\'']), "{escaped}");
        let messages = history(vec![
            user(hostile),
            assistant(vec![Part::tool_use("c1", hostile, json!({"q": hostile}))]),
            tool(vec![Part::tool_result("c1", hostile)]),
        ]);
        let (_, page) = render(&messages, &[]);
        assert!(!page.contains(hostile), "raw hostile text in the page");
    }
    for inside in ["```", "````", "`````\n```"] {
        let messages = history(vec![
            user("go"),
            assistant(vec![call("c1")]),
            tool(vec![Part::tool_result("c1", inside)]),
        ]);
        let (md, _) = render(&messages, &[]);
        let after = md.split("**Result**:\n\n").nth(1).unwrap_or_default();
        let fence_line = after.lines().next().map(str::len);
        let longest = inside.split('\n').map(str::len).max().unwrap_or(0);
        assert!(fence_line.unwrap_or(0) > longest.max(2), "{md}");
    }
}

#[test]
fn usage_model_and_totals_are_shown_when_present() {
    let messages = history(vec![user("hi"), assistant(vec![Part::text("hello")])]);
    let (md, page) = render(&messages, &[]);
    for text in [&md, &page] {
        assert!(text.contains("1,200 in · 34 out"), "{text}");
    }
    assert!(page.contains("A &lt;b&gt;title&lt;/b&gt;"));
    assert!(page.contains("forked from parent-&lt;id&gt; at turn 3"));
    assert!(md.contains("forked from parent-\\<id> at turn 3"));
    assert_eq!(grouped(0), "0");
    assert_eq!(grouped(999), "999");
    assert_eq!(grouped(1_000), "1,000");
    assert_eq!(grouped(12_345_678), "12,345,678");
}

#[test]
fn markdown_prose_shows_no_raw_html_and_closes_a_fence_left_open() {
    for (text, raw_tag, fences) in [
        ("<script>alert(1)</script>", false, 0),
        ("```rust\nfn main() {}", false, 2),
        ("```\nclosed\n```", false, 2),
        ("plain", false, 0),
    ] {
        let messages = history(vec![user(text), assistant(vec![Part::text("next")])]);
        let (md, _) = render(&messages, &[]);
        let body = md.split("### User").nth(1).unwrap_or_default();
        let raw = body
            .char_indices()
            .any(|(at, c)| c == '<' && !body[..at].ends_with('\\'));
        assert_eq!(raw, raw_tag, "{md}");
        assert!(
            md.starts_with("# A \\<b>title\\</b>\n"),
            "the title is prose too"
        );
        let before_next = body.split("### Assistant").next().unwrap_or_default();
        assert_eq!(
            before_next.lines().filter(|l| l.starts_with("```")).count(),
            fences,
            "{md}"
        );
    }
}

#[test]
fn every_part_kind_is_shown_in_both_formats() {
    let messages = history(vec![
        (
            Role::User,
            vec![
                Part::text("look"),
                Part::image(json!({"type": "base64", "media_type": "image/png", "data": "AAAA"})),
                Part::document(json!({"type": "url", "url": "https://example.com/a.pdf"})),
            ],
        ),
        assistant(vec![
            Part::RedactedReasoning {
                data: "xyz".into(),
                provider_metadata: None,
            },
            Part::server_tool_use("srv_1", "web_search", json!({"query": "q"})),
            Part::server_tool_result(
                "srv_1",
                json!({"type": "web_search_tool_result", "content": ["hit"]}),
            ),
            Part::opaque("anthropic", json!({"type": "container_upload"})),
            Part::text("done"),
        ]),
    ]);
    let (md, page) = render(&messages, &[]);
    for text in [&md, &page] {
        for shown in [
            "image (image/png)",
            "document from https://example.com/a.pdf",
            "[redacted reasoning]",
            "web_search",
            "web_search_tool_result",
            "container_upload",
            "done",
        ] {
            assert!(text.contains(shown), "{shown} missing:\n{text}");
        }
    }
    assert!(!page.contains("AAAA"), "image data is not shown");
}
