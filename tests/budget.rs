//! `Store::budget` / `session-store budget`: the next request's size from the usage ledger
//! of imported logs (checked against the log's own last reported usage, read here
//! independently), and a property test with the store: compacting through the planned turn
//! never splits a turn and brings the estimate under the limit whenever any cut can.

use proptest::prelude::*;
use serde_json::Value;
use session_store::import::{import as import_transcript, Format};
use session_store::{CompactionOutcome, NewMessage, Part, SessionId, Store, Usage, SUMMARY_TOKENS};

/// The logs with reported usage this test reads.
const LOGS: &[&str] = &[
    "tests/fixtures/transcripts/spotter/short.jsonl",
    "tests/fixtures/transcripts/spotter/tool_heavy.jsonl",
    "tests/fixtures/transcripts/agentcmd/claude/full-session-five.jsonl",
    "tests/fixtures/transcripts/fasthooks/sample_main_transcript.jsonl",
];

/// The last usage of the main conversation's assistant lines, as the log states it:
/// input + cache read + cache creation tokens; none after a compaction (`compact_boundary`)
/// that came later, as the report no longer describes the prompt.
fn last_reported(log: &str) -> Option<u64> {
    let mut last = None;
    for line in log.lines() {
        let Ok(entry) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if entry["subtype"] == "compact_boundary" {
            last = None;
        }
        if entry["type"] != "assistant" || entry["isSidechain"] == true {
            continue;
        }
        let usage = &entry["message"]["usage"];
        let count = |key: &str| usage[key].as_u64();
        let fields = [
            count("input_tokens"),
            count("cache_read_input_tokens"),
            count("cache_creation_input_tokens"),
        ];
        if fields.iter().any(Option::is_some) {
            last = Some(fields.iter().map(|n| n.unwrap_or(0)).sum());
        }
    }
    last
}

#[test]
fn budget_reads_the_ledger_of_imported_logs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("b.db")).expect("open");
    let mut anchored = 0;
    for path in LOGS {
        let text = std::fs::read_to_string(path).expect("fixture");
        let imported = import_transcript(Format::ClaudeCode, &text).expect("import");
        let session = store.import(&imported).expect("store").session;
        let expected = last_reported(&text);
        let budget = store.budget(&session, 1_000_000).expect("budget");
        assert_eq!(budget.reported_input_tokens, expected, "{path}");
        assert_eq!(
            budget.estimate,
            budget.reported_input_tokens.unwrap_or(0) + budget.estimated_since,
            "{path}"
        );
        assert_eq!(budget.over, budget.estimate > budget.limit);
        anchored += usize::from(expected.is_some());
        // A limit just under the estimate is over; a cut, when one is found, fits.
        let tight = store.budget(&session, budget.estimate - 1).expect("budget");
        assert!(tight.over, "{path}");
        if let Some(keep) = tight.keep_messages {
            let outcome = store.compact(&session, keep, "summary").expect("compact");
            assert!(
                matches!(outcome, CompactionOutcome::Compacted { .. }),
                "{outcome:?}"
            );
            let after = store.budget(&session, budget.estimate - 1).expect("after");
            assert!(!after.over, "{path}: {after:?}");
            assert_eq!(
                after.reported_input_tokens, None,
                "the report predates the compaction"
            );
        }
    }
    assert!(anchored >= 2, "only {anchored} logs had reported usage");
}

#[test]
fn budget_of_an_unknown_session_is_a_typed_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("b.db")).expect("open");
    let missing = store.budget(&SessionId::new("nope"), 10);
    assert!(matches!(
        missing,
        Err(session_store::Error::UnknownSession(_))
    ));
}

/// A session of turns: user text, an assistant call and its result, an answer with usage.
fn build(store: &Store, turns: &[(usize, usize, Option<u64>)]) -> SessionId {
    let session = store.create_session().expect("session");
    for (i, (asked, result, reported)) in turns.iter().enumerate() {
        let mut answer = NewMessage::assistant(vec![Part::text("a".repeat(40))]);
        if let Some(input) = reported {
            answer = answer.with_usage(Usage::new(*input, 30));
        }
        store
            .append_batch(
                &session,
                vec![
                    NewMessage::user("q".repeat(*asked)),
                    NewMessage::assistant(vec![Part::tool_use(
                        format!("c{i}"),
                        "read",
                        serde_json::json!({}),
                    )]),
                    NewMessage::tool(vec![Part::tool_result(
                        format!("c{i}"),
                        "r".repeat(*result),
                    )]),
                    answer,
                ],
            )
            .expect("turn");
    }
    session
}

/// A summary the budget estimates at exactly the tokens a planned compaction reserves for
/// it (two frames and four bytes a token), so the estimate after the compaction is the
/// one the plan predicted.
fn summary() -> String {
    "s".repeat(4 * (SUMMARY_TOKENS as usize - 8))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn compacting_through_the_planned_turn_fits_and_keeps_turns_whole(
        turns in prop::collection::vec((1usize..3_000, 1usize..12_000, prop::option::of(100u64..20_000)), 2..7),
        limit in 500u64..15_000,
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path().join("p.db")).expect("open");
        let session = build(&store, &turns);
        let budget = store.budget(&session, limit).expect("budget");
        prop_assert_eq!(budget.over, budget.estimate > limit);
        if let (Some(turn), Some(keep)) = (budget.compact_through_turn, budget.keep_messages) {
            store.compact(&session, keep, &summary()).expect("compact");
            let messages = store.messages(&session).expect("messages");
            for m in &messages {
                prop_assert_eq!(m.compacted, m.turn_index <= turn, "seq {} of turn {}", m.seq, m.turn_index);
            }
            let after = store.budget(&session, limit).expect("after");
            prop_assert!(after.estimate <= limit, "{} > {}", after.estimate, limit);
        } else if budget.over {
            // No cut fits: not even compacting every turn but the last (4 messages).
            store.compact(&session, 4, &summary()).expect("compact");
            let after = store.budget(&session, limit).expect("after");
            prop_assert!(after.over, "a cut fitted: {:?}", after);
        }
    }
}

#[test]
fn budget_cli_prints_the_contract_fields() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("cli.db");
    let bin = env!("CARGO_BIN_EXE_session-store");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(bin)
            .arg("--db")
            .arg(&db)
            .args(args)
            .output()
            .expect("run");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8")
    };
    let id = run(&["import", "--format", "claude-code", LOGS[0]]);
    let id = id.trim();
    for (limit, over) in [("100", true), ("100000000", false)] {
        let json: Value =
            serde_json::from_str(&run(&["budget", id, "--limit", limit, "--json"])).expect("json");
        for key in [
            "reported_input_tokens",
            "estimated_since",
            "estimate",
            "limit",
            "over",
            "compact_through_turn",
        ] {
            assert!(json.get(key).is_some(), "{key} missing: {json}");
        }
        assert_eq!(json["over"], over);
        assert_eq!(json["limit"].as_u64(), limit.parse().ok());
        let text = run(&["budget", id, "--limit", limit]);
        assert!(
            text.contains(if over { "over\tyes" } else { "over\tno" }),
            "{text}"
        );
    }
    let bad = std::process::Command::new(bin)
        .arg("--db")
        .arg(&db)
        .args(["budget", id, "--limit", "-5"])
        .output()
        .expect("run");
    assert_eq!(bad.status.code(), Some(2));
}
