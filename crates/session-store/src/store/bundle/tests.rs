use super::*;

fn header(rows: &str) -> String {
    format!(r#"{{"format":"session-store-bundle","version":1,"session":"s","rows":{rows}}}"#)
}

const SESSION: &str = r#"{"table":"sessions","row":{"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}}"#;
const MESSAGE: &str = r#"{"table":"messages","row":{"id":1,"seq":1,"turn_index":0,"role":"user","compacted":0,"created_at":"2026-01-01T00:00:00Z"}}"#;
const PART: &str = r#"{"table":"parts","row":{"id":1,"message_id":1,"ordinal":0,"kind":"text","text":"hi","is_error":0}}"#;

fn refused_at(text: &str) -> (usize, String) {
    match parse(text.as_bytes()) {
        Err(Error::Bundle { line, detail }) => (line, detail),
        other => panic!("not refused: {other:?}"),
    }
}

#[test]
fn a_well_formed_bundle_parses_with_every_row() {
    let text = [
        header(r#"{"sessions":1,"messages":1,"parts":1}"#),
        SESSION.to_owned(),
        MESSAGE.to_owned(),
        PART.to_owned(),
    ]
    .join("\n");
    assert_eq!(validate_bundle(text.as_bytes()).ok(), Some(3));
}

#[test]
fn each_malformed_bundle_is_refused_at_the_line_that_is_wrong() {
    let counts = r#"{"sessions":1,"messages":1,"parts":1}"#;
    let cases: Vec<(Vec<String>, usize, &str)> = vec![
        (vec![], 1, "empty"),
        (vec!["{}".into()], 1, "not a session bundle"),
        (
            vec![header(counts).replace("\"version\":1", "\"version\":2")],
            1,
            "version 2",
        ),
        (
            vec![header(counts), SESSION.into(), "not json".into()],
            3,
            "not a JSON row",
        ),
        (
            vec![
                header(counts),
                SESSION.into(),
                MESSAGE.into(),
                PART.into(),
                MESSAGE.replace("\"id\":1", "\"id\":2"),
            ],
            5,
            "out of order",
        ),
        (
            vec![
                header(counts),
                SESSION.into(),
                MESSAGE.replace("\"seq\":1", "\"seq\":\"1\""),
            ],
            3,
            "integer",
        ),
        (
            vec![
                header(counts),
                SESSION.into(),
                MESSAGE.replace("\"seq\"", "\"sequence\""),
            ],
            3,
            "no column \"sequence\"",
        ),
        (
            vec![
                header(counts),
                SESSION.into(),
                MESSAGE.into(),
                PART.replace("\"message_id\":1", "\"message_id\":7"),
            ],
            4,
            "names messages row 7",
        ),
        (
            vec![
                header(counts),
                SESSION.into(),
                MESSAGE.into(),
                MESSAGE.into(),
            ],
            4,
            "a second messages row 1",
        ),
        (
            vec![header(counts), SESSION.into(), MESSAGE.into()],
            4,
            "promises 1 parts",
        ),
        (
            vec![header(counts), MESSAGE.into()],
            2,
            "sessions row must come first",
        ),
        (
            vec![header(r#"{"sessions":1,"videos":2}"#)],
            1,
            "unknown table",
        ),
        (
            vec![
                header(counts),
                SESSION.replace("\"created_at\"", "\"session_id\":\"x\",\"created_at\""),
            ],
            2,
            "no column \"session_id\"",
        ),
    ];
    for (lines, line, words) in cases {
        let text = lines.join("\n");
        let (at, detail) = refused_at(&text);
        assert_eq!(at, line, "{words}: {detail}");
        assert!(detail.contains(words), "{detail:?} lacks {words:?}");
    }
}
