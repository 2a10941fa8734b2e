//! Property: whatever sequence of valid and invalid appends an agent throws at the store,
//! every session in the file satisfies the contract's invariants (checked with SQL over the
//! tables, independently of the Rust pairing code), a refused append leaves the file's
//! contents unchanged, and appends that are valid are never refused.

use std::collections::HashSet;

use proptest::prelude::*;
use serde_json::json;
use session_store::{NewMessage, Part, Role, SessionId, Store};

use crate::util::{dump, temp_store, violations};

#[derive(Clone, Debug)]
enum Op {
    User,
    System,
    Assistant { calls: Vec<u8> },
    Tool { answers: Vec<u8> },
    UserWithResult { answer: u8 },
    Cancel,
    Batch(Vec<Op>),
    Switch,
}

fn simple_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::User),
        1 => Just(Op::System),
        4 => prop::collection::vec(0u8..10, 0..4).prop_map(|calls| Op::Assistant { calls }),
        4 => prop::collection::vec(0u8..10, 0..3).prop_map(|answers| Op::Tool { answers }),
        1 => (0u8..10).prop_map(|answer| Op::UserWithResult { answer }),
        1 => Just(Op::Cancel),
        1 => Just(Op::Switch),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => simple_op(),
        1 => prop::collection::vec(simple_op(), 1..5).prop_map(Op::Batch),
    ]
}

fn id(n: u8) -> String {
    format!("call_{n}")
}

fn message(op: &Op) -> Option<NewMessage> {
    Some(match op {
        Op::User => NewMessage::user("hello"),
        Op::System => NewMessage::system("be brief"),
        Op::Assistant { calls } => {
            let mut parts = vec![Part::text("")];
            parts.extend(
                calls
                    .iter()
                    .map(|&n| Part::tool_use(id(n), "bash", json!({"n": n}))),
            );
            NewMessage::assistant(parts)
        }
        Op::Tool { answers } => NewMessage::tool(
            answers
                .iter()
                .map(|&n| Part::tool_result(id(n), ""))
                .collect(),
        ),
        Op::UserWithResult { answer } => NewMessage::new(
            Role::User,
            vec![Part::tool_result(id(*answer), "x"), Part::text("and")],
        ),
        Op::Cancel | Op::Batch(_) | Op::Switch => return None,
    })
}

/// Whether the store must accept `op` as one message, judged from the pending calls and the
/// ids already used, without the library's pairing code.
fn must_accept(op: &Op, pending: &[String], used: &HashSet<String>) -> bool {
    match op {
        Op::User | Op::System => pending.is_empty(),
        Op::Assistant { calls } => {
            let ids: Vec<String> = calls.iter().map(|&n| id(n)).collect();
            let unique: HashSet<&String> = ids.iter().collect();
            pending.is_empty() && unique.len() == ids.len() && ids.iter().all(|i| !used.contains(i))
        }
        Op::Tool { answers } => {
            let ids: Vec<String> = answers.iter().map(|&n| id(n)).collect();
            let unique: HashSet<&String> = ids.iter().collect();
            !ids.is_empty() && unique.len() == ids.len() && ids.iter().all(|i| pending.contains(i))
        }
        _ => false,
    }
}

fn used_ids(store: &Store, session: &SessionId) -> HashSet<String> {
    store
        .messages(session)
        .expect("read")
        .iter()
        .flat_map(|m| {
            m.parts
                .iter()
                .filter_map(Part::call_id)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    #[test]
    fn random_appends_keep_every_session_healthy(ops in prop::collection::vec(op(), 1..30)) {
        let (_dir, store, path) = temp_store();
        let sessions = [store.create_session().expect("session"), store.create_session().expect("session")];
        let mut current = 0;
        let mut expected_messages = 0usize;
        for op in &ops {
            let session = &sessions[current];
            let before = dump(&path);
            let pending = store.pending_tool_uses(session).expect("pending");
            let used = used_ids(&store, session);
            let outcome = match op {
                Op::Switch => { current = 1 - current; continue; }
                Op::Cancel => {
                    let cancelled = store.cancel_pending(session, "property test").expect("cancel never fails");
                    prop_assert_eq!(&cancelled, &pending);
                    expected_messages += usize::from(!cancelled.is_empty());
                    Ok(())
                }
                Op::Batch(ops) => {
                    let messages: Vec<NewMessage> = ops.iter().filter_map(message).collect();
                    let count = messages.len();
                    let result = store.append_batch(session, messages);
                    if let Ok(appended) = &result {
                        prop_assert_eq!(appended.len(), count);
                        expected_messages += count;
                    }
                    result.map(|_| ())
                }
                single => {
                    let message = message(single).expect("single message op");
                    let accepted = store.append(session, message);
                    if must_accept(single, &pending, &used) {
                        prop_assert!(accepted.is_ok(), "valid {:?} refused: {:?}", single, accepted);
                    }
                    accepted.map(|_| { expected_messages += 1; })
                }
            };
            if let Err(error) = outcome {
                prop_assert!(error.refusal().is_some(), "unexpected error {:?}", error);
                prop_assert_eq!(dump(&path), before, "refused {:?} changed the file", op);
            }
            let found = violations(&path);
            prop_assert!(found.is_empty(), "after {:?}: {:?}", op, found);
        }
        let stored: usize = sessions.iter().map(|s| store.messages(s).expect("read").len()).sum();
        prop_assert_eq!(stored, expected_messages);
    }
}
