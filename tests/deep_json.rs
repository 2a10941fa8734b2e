//! JSON nested deeper than the store's reader follows (127 levels, `serde_json`'s limit) is
//! refused on write with a typed error, nothing written: written, it would read back as a
//! string, and the provider would be sent `{"value": "..."}` instead of the call's input.
//! JSON up to the limit reads back exactly as written.

use serde_json::{json, Value};
use session_store::{Error, NewMessage, Part, Role};

use crate::util::{dump, temp_store};

/// An object nested `depth` levels deep (`{"n": {"n": ... {"leaf": 1}}}`).
fn nested(depth: usize) -> Value {
    let mut value = json!({"leaf": 1});
    for _ in 1..depth {
        value = json!({ "n": value });
    }
    value
}

#[test]
fn json_nested_past_the_readers_limit_is_refused_and_nothing_is_written() {
    let (_dir, store, path) = temp_store();
    let session = store.create_session().expect("session");
    store
        .append(&session, NewMessage::user("go"))
        .expect("user");
    for depth in [128, 129, 200, 1_000] {
        let cases: Vec<(&str, Part)> = vec![
            ("input", Part::tool_use("call_deep", "f", nested(depth))),
            ("input", Part::image(nested(depth))),
            ("provider_metadata", {
                let mut part = Part::text("hi");
                *part.provider_metadata_mut() = Some(json!({"anthropic": nested(depth - 1)}));
                part
            }),
        ];
        for (field, part) in cases {
            let before = dump(&path);
            let message = if matches!(part, Part::Image { .. }) {
                NewMessage::new(Role::User, vec![part])
            } else {
                NewMessage::assistant(vec![part])
            };
            match store.append(&session, message) {
                Err(Error::JsonTooDeep {
                    field: f,
                    depth: d,
                    limit,
                    ..
                }) => {
                    assert_eq!(f, field);
                    assert!(d > limit, "{d} {limit}");
                    assert_eq!(d, depth, "{field}");
                }
                other => panic!("depth {depth} {field}: not refused: {other:?}"),
            }
            assert_eq!(dump(&path), before, "depth {depth} {field}: written");
        }
    }
}

#[test]
fn json_up_to_the_limit_reads_back_exactly() {
    let (_dir, store, _path) = temp_store();
    let session = store.create_session().expect("session");
    store
        .append(&session, NewMessage::user("go"))
        .expect("user");
    for (n, depth) in [1usize, 64, 126, 127].into_iter().enumerate() {
        let id = format!("call_{n}");
        store
            .append_batch(
                &session,
                vec![
                    NewMessage::assistant(vec![Part::tool_use(&id, "f", nested(depth))]),
                    NewMessage::tool(vec![Part::tool_result(&id, "ok")]),
                ],
            )
            .expect("append");
        let messages = store.messages(&session).expect("read");
        let stored = messages
            .iter()
            .flat_map(|m| &m.parts)
            .find_map(|p| match p {
                Part::ToolUse { id: i, input, .. } if *i == id => Some(input.clone()),
                _ => None,
            })
            .expect("call");
        assert_eq!(stored, nested(depth), "depth {depth}");
    }
}

/// A transcript whose JSON nests past the reader's limit is refused on import saying so,
/// with the limit, whether its format is named or told from the text (it is valid JSON: "not
/// a transcript" or "not valid JSON" would send a person looking for the wrong fault).
#[test]
fn a_transcript_nested_past_the_readers_limit_is_refused_saying_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("s.db");
    let file = dir.path().join("deep.json");
    let deep = "[".repeat(200) + &"]".repeat(200);
    std::fs::write(
        &file,
        format!(
            r#"{{"messages":[{{"role":"user","content":"hi"}},{{"role":"assistant","content":[{{"type":"tool_use","id":"t","name":"n","input":{{"a":{deep}}}}}]}}]}}"#
        ),
    )
    .expect("write");
    let path = file.to_str().expect("utf-8");
    for args in [
        vec!["import", path],
        vec!["import", "--format", "anthropic", path],
    ] {
        let out = crate::util::session_store(&db, &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("nests deeper than 127 levels"),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("not valid JSON"), "{args:?}: {stderr}");
    }
}
