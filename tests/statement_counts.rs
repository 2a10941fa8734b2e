//! What an append costs the PostgreSQL server, counted by the server itself
//! (`pg_stat_statements`): the statements of each append shape, under the floor's five
//! (BEGIN, the session's lock, the message, its parts, COMMIT). A store's append to a
//! session it appended to last is one statement outside a transaction: the message with its
//! parts and the session row (its new tail state), which takes the session's lock, checks
//! that the row is the version the store's last append left and that the tail state it
//! remembers matches the rows, and probes the calls' ids. Where another writer wrote the
//! session since: that statement (which writes nothing), then BEGIN, the session's lock
//! with the tail state its row keeps, the same insert checking that state, COMMIT. And the
//! same whatever other sessions do meanwhile (an append reads nothing outside its session, so
//! another session's writes cannot make it fall back to a slower path).
//!
//! The store under test connects as a role only this module uses (`.ci/postgres` creates it
//! and loads `pg_stat_statements`), so the tests running beside it do not blur the counts.
//! Skipped, with a note, when `SESSION_STORE_TEST_PG` is unset or the server lacks either.

use serde_json::json;
use session_store::{
    ExportOptions, NewMessage, Part, Provider, Role, SearchOptions, SessionId, Store,
    TranscriptFormat, Usage,
};

use crate::counted::{Counted, COUNTED};

/// The total number of statements in a count.
fn total(ran: &[(String, i64)]) -> i64 {
    ran.iter().map(|(_, calls)| calls).sum()
}

fn user(text: &str) -> NewMessage {
    NewMessage::new(Role::User, vec![Part::text(text)])
}

/// An assistant message of the project's workload shape: signed reasoning, a short text and
/// `calls` parallel tool_uses.
fn assistant(turn: usize, calls: usize) -> NewMessage {
    let mut parts = vec![
        Part::reasoning(
            "thinking ".repeat(40),
            Some(json!({"anthropic": {"signature": "s".repeat(88)}})),
        ),
        Part::text("Let me look."),
    ];
    parts.extend((0..calls).map(|c| {
        Part::tool_use(
            format!("toolu_{turn:012}{c:012}"),
            "bash",
            json!({"cmd": format!("ls {}", "x".repeat(200))}),
        )
    }));
    NewMessage::new(Role::Assistant, parts)
}

/// One tool message holding every result of `assistant(turn, calls)`.
fn results(turn: usize, calls: usize) -> NewMessage {
    NewMessage::new(
        Role::Tool,
        (0..calls)
            .map(|c| Part::tool_result(format!("toolu_{turn:012}{c:012}"), "out ".repeat(300)))
            .collect(),
    )
}

/// The shapes of one turn, each appended alone, with the statements each may run after
/// the store's own append to the session: one, the message with its parts and the session
/// row (which takes the lock and checks the row's version, the state and the message's
/// call ids first).
fn turn(turn: usize, calls: usize) -> Vec<(&'static str, NewMessage, i64)> {
    vec![
        ("user text", user(&format!("question {turn}")), 1),
        ("assistant with calls", assistant(turn, calls), 1),
        ("tool results", results(turn, calls), 1),
        ("final answer", assistant(turn + 1_000_000, 0), 1),
        (
            "final answer with its usage",
            assistant(turn + 2_000_000, 0).with_usage(Usage::new(1_200, 80)),
            1,
        ),
    ]
}

fn session_store(url: &str) -> (Store, SessionId) {
    let store = Store::open(url).expect("open the counted store");
    let session = store.create_session().expect("session");
    (store, session)
}

/// Per message, the floor plus what pairing needs, on every shape: and the same again while
/// another session (written by another role, so uncounted) takes writes between ours, which
/// a read outside the session (the largest part id of the whole database) would notice.
#[test]
fn append_runs_the_floor_plus_pairing_whatever_other_sessions_do() {
    let _one = COUNTED.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut counted) = Counted::open() else {
        return;
    };
    let (store, session) = session_store(&counted.url);
    // The other writer works on the same tables as another role: its statements are not
    // counted, but every part it inserts moves the database's largest part id.
    let other = Store::open(counted.shared_with_test_role()).expect("other store");
    let other_session = other.create_session().expect("other session");
    // Statements are prepared once per pooled connection: warm every shape first.
    for message in turn(0, 3).into_iter().map(|(_, m, _)| m) {
        store.append(&session, message).expect("warm-up append");
    }
    let mut report = Vec::new();
    let mut wrong = Vec::new();
    let mut other_turns = 0;
    for (round, interleaved) in [(1, false), (2, true), (3, false), (4, true)] {
        for calls in [1, 2, 4] {
            let number = round * 10 + calls;
            for (shape, message, allowed) in turn(number, calls) {
                if interleaved {
                    other_turns += 1;
                    other
                        .append_batch(
                            &other_session,
                            turn(other_turns, 2)
                                .into_iter()
                                .map(|(_, m, _)| m)
                                .collect(),
                        )
                        .expect("the other session's write");
                }
                let ran = counted.count(|| {
                    store.append(&session, message).expect("counted append");
                });
                if total(&ran) != allowed {
                    wrong.push(format!(
                        "{shape} with {calls} calls (another session written meanwhile: \
                         {interleaved}): {} statements, not {allowed}: {ran:#?}",
                        total(&ran)
                    ));
                }
                report.push(format!(
                    "{shape}, {calls} calls, other writer {interleaved}: {}",
                    total(&ran)
                ));
            }
        }
    }
    eprintln!("{}", report.join("\n"));
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The text an append that is one statement starts with.
const ONE_STATEMENT: &str = "/* one-statement append */ WITH m AS (INSERT INTO messages";

/// An append to a session another store wrote since this store's last append to it: the one
/// statement, which writes nothing, then the transaction (BEGIN, the lock with the state,
/// the insert checking it, COMMIT). The session then sits out the one statement for two
/// appends (a transaction each), and the next is one statement again.
#[test]
fn an_append_after_another_store_wrote_the_session_runs_in_a_transaction() {
    let _one = COUNTED.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut counted) = Counted::open() else {
        return;
    };
    let (store, session) = session_store(&counted.url);
    let other = Store::open(counted.shared_with_test_role()).expect("other store");
    for message in turn(0, 2).into_iter().map(|(_, m, _)| m) {
        store.append(&session, message).expect("warm-up append");
    }
    other
        .append(&session, user("the other store's question"))
        .expect("the other store's append");
    let mut ran = Vec::new();
    for number in 1..=4 {
        let message = user(&format!("question {number}"));
        ran.push(total(&counted.count(|| {
            store.append(&session, message).expect("counted append");
        })));
    }
    assert_eq!(ran, [5, 4, 4, 1]);
    assert_eq!(
        store.messages(&session).expect("read").len(),
        turn(0, 2).len() + 1 + 4
    );
}

/// A keyed append is one statement too, its key row written with the message (the
/// statement holds only where the session stores none of its key). After another store
/// wrote the session: that statement (which writes nothing), then the transaction (BEGIN,
/// the lock with the state, the stored-key read, the insert with the key row, COMMIT); the
/// next two are transactions, then one statement again. A retry of the last key: the one
/// statement, which writes nothing, then the transaction that replays it.
#[test]
fn a_keyed_append_is_one_statement_and_its_key_row_goes_in_with_the_message() {
    let _one = COUNTED.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut counted) = Counted::open() else {
        return;
    };
    let (store, session) = session_store(&counted.url);
    let other = Store::open(counted.shared_with_test_role()).expect("other store");
    let keyed = |number: usize| {
        user(&format!("question {number}")).with_idempotency_key(format!("key-{number}"))
    };
    for number in 0..3 {
        store
            .append(&session, keyed(number))
            .expect("warm-up append");
    }
    let mut ran = Vec::new();
    for number in 3..6 {
        ran.push(total(&counted.count(|| {
            store
                .append(&session, keyed(number))
                .expect("counted append");
        })));
    }
    other
        .append(&session, user("the other store's question"))
        .expect("the other store's append");
    for number in 6..10 {
        ran.push(total(&counted.count(|| {
            store
                .append(&session, keyed(number))
                .expect("counted append");
        })));
    }
    assert_eq!(ran, [1, 1, 1, 6, 5, 5, 1]);
    let appended = store.append(&session, keyed(10)).expect("append");
    let retried = counted.count(|| {
        assert_eq!(store.append(&session, keyed(10)).expect("retry"), appended);
    });
    assert!(
        retried
            .iter()
            .any(|(text, _)| text.starts_with(ONE_STATEMENT)),
        "{retried:#?}"
    );
    assert_eq!(store.messages(&session).expect("read").len(), 12);
}

/// A whole turn in one transaction: one lock and tail read, each message with its parts (the
/// first with the check of the state and the calls' probe, the last with the session row),
/// whatever the number of messages.
#[test]
fn a_turn_in_one_transaction_runs_one_lock_one_probe_and_one_update() {
    let _one = COUNTED.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut counted) = Counted::open() else {
        return;
    };
    let (store, session) = session_store(&counted.url);
    // The first append of a session writes its tail state: start from there.
    store.append(&session, user("hello")).expect("first append");
    for (number, calls) in [(1, 1), (2, 3), (3, 4), (4, 2)] {
        let batch: Vec<NewMessage> = turn(number, calls).into_iter().map(|(_, m, _)| m).collect();
        let messages = i64::try_from(batch.len()).expect("small");
        let ran = counted.count(|| {
            store.append_batch(&session, batch).expect("counted batch");
        });
        // BEGIN, the lock with the tail, each message with its parts (one statement; the
        // first with the check and the calls' probe, the last with the session row), COMMIT.
        assert_eq!(
            total(&ran),
            3 + messages,
            "a turn of {messages} messages with {calls} calls ran {ran:#?}"
        );
    }
}

/// Every statement an append runs names the session it reads or writes, by the rule
/// `routable.rs` holds (the session row by its id, every other table through `session_id`,
/// the tail function's own statements included): the server's plans for these use the
/// session's indexes, and a read of another session's rows would need a statement without
/// one of them.
#[test]
fn every_reading_statement_of_an_append_names_its_session() {
    let _one = COUNTED.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut counted) = Counted::open() else {
        return;
    };
    let (store, session) = session_store(&counted.url);
    let mut wrong = Vec::new();
    for (number, calls) in [(1, 1), (2, 4)] {
        for (shape, message, _) in turn(number, calls) {
            wrong.extend(crate::routable::check(&mut counted, shape, || {
                store.append(&session, message).expect("counted append");
            }));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The tail read of every append touches about the same buffers early in a session as at
/// 1,000 messages, on both of its paths: each of its statements is answered by a key of the
/// session. PL/pgSQL and the statement cache keep the plans made in their first runs, when
/// the tables were nearly empty and never analysed (a new database); plans that scan the
/// session's rows and sort them were cheapest then, and were kept while the session grew
/// (1.2 ms an append at 2,000 messages). The paths: the tail read from the rows
/// (`session_store_tail`), taken where the session row keeps no state the append can check
/// (here cleared before each append), and the check of the state the row keeps, in the
/// insert of the append's first message.
#[test]
fn the_tail_read_stays_keyed_when_its_plans_were_made_on_near_empty_tables() {
    let _one = COUNTED.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut counted) = Counted::open() else {
        return;
    };
    let (store, session) = session_store(&counted.url);
    let forget = std::cell::RefCell::new(
        postgres::Client::connect(&counted.url, postgres::NoTls).expect("a client"),
    );
    // Appends after the row's state was cleared read the tail; the others check the state.
    let append = |number: usize, read: bool| {
        for (_, message, _) in turn(number, 2) {
            if read {
                forget
                    .borrow_mut()
                    .execute(
                        "UPDATE sessions SET tail_state = NULL WHERE id = $1",
                        &[&session.as_str()],
                    )
                    .expect("the state cleared");
            }
            store.append(&session, message).expect("append");
        }
    };
    // The plans are made here, on tables of a few rows (a generic plan is kept after five
    // runs), and the session reaches 40 messages.
    for number in 0..10 {
        append(number, number % 2 == 0);
    }
    let per_append = |counted: &mut Counted, first: usize| {
        let mut measured = Vec::new();
        let paths = [
            ("session_store_tail(", true, first),
            ("AND id > CAST(", false, first + 10),
            ("FROM m, (VALUES", true, first + 20),
        ];
        for (marker, read, first) in paths {
            let (blocks, calls) = counted.blocks_of(marker, || {
                for number in first..first + 3 {
                    append(number, read);
                }
            });
            assert!(calls >= 5, "{marker} ran {calls} times in 12 appends");
            measured.push(blocks as f64 / calls as f64);
        }
        measured
    };
    let small = per_append(&mut counted, 100);
    // The session grows to about 1,000 messages, with the same connections' kept plans.
    for number in 200..440 {
        let batch: Vec<NewMessage> = turn(number, 2).into_iter().map(|(_, m, _)| m).collect();
        store.append_batch(&session, batch).expect("growing append");
    }
    let large = per_append(&mut counted, 1_000);
    // The check's own reads: its statements less the same messages' plain inserts. Each of
    // the few keys it reads deepens by a level or so as the session grows (and the two
    // measures differ by some heap fetches run to run); a scan of the session's rows costs
    // hundreds of buffers at ~1,000 messages (V18's tail read: 47.8 at 40, 242.2 there).
    let own = |measured: &[f64]| [measured[0], measured[1] - measured[2]];
    let (small, large) = (own(&small), own(&large));
    for (path, (small, large)) in ["tail read", "check of the row's state"]
        .iter()
        .zip(small.iter().zip(&large))
    {
        eprintln!("{path}: {small:.1} buffers a run at 40 messages, {large:.1} at ~1,000");
        assert!(
            *large <= small * 2.0 + 10.0,
            "the {path} touched {large:.1} buffers a run at ~1,000 messages, {small:.1} at \
             40: it reads rows of the session beyond its end"
        );
    }
}

/// On tables that already hold many sessions, analysed (a deployment's tables), the server
/// plans each statement of an append a few times per connection and then keeps its generic
/// plan, instead of planning it again on every append (0.3-0.4 ms each, more than the
/// statement's execution). It plans again when a plan for the run's values looks cheaper
/// than the kept one: the check of the tail state once counted the open block's parts
/// above a part id with no upper bound, a range the server estimates at a third of the
/// session's parts for unknown values and at one part for known ones.
#[test]
fn an_append_is_planned_once_per_connection_on_tables_that_hold_data() {
    let turns = |numbers: std::ops::Range<usize>| {
        move |store: &Store, session: &SessionId| {
            for number in numbers {
                for (_, message, _) in turn(number, 2) {
                    store.append(session, message).expect("append");
                }
            }
        }
    };
    let Some(planned) =
        planned_on_tables_that_hold_data(ONE_STATEMENT, turns(0..WARM_UP), turns(WARM_UP..40))
    else {
        return;
    };
    assert!(!planned.is_empty(), "no append statement was counted");
    for (_, plans, calls) in planned {
        eprintln!("planned {plans} times in {calls} runs");
        assert!(
            calls >= 39 - WARM_UP as i64,
            "a shape of the turn ran {calls} times in {} turns",
            40 - WARM_UP
        );
        assert!(
            plans * 4 <= calls,
            "an append's statement was planned {plans} times in {calls} runs"
        );
    }
}

/// Turns run before the counted ones: the server plans a statement 5 times for its values
/// and once more for its generic plan before it keeps that, so what is counted after these
/// is what a connection that has settled plans. (Counting from the first run left one
/// plan of headroom: a second connection, or the server dropping its kept plans once, as
/// it does for every statement when a backend falls behind the catalog changes of tests
/// migrating beside it, failed the test with nothing wrong.)
const WARM_UP: usize = 8;

/// What `work` made the server plan and run (see [`Counted::plans_of`]), after `warm_up`
/// on the same store and session, a new one beside 300 resident sessions of 100 one-part
/// messages, analysed; `None` (with a note) where the server cannot tell.
fn planned_on_tables_that_hold_data(
    prefix: &str,
    warm_up: impl FnOnce(&Store, &SessionId),
    work: impl FnOnce(&Store, &SessionId),
) -> Option<Vec<(String, i64, i64)>> {
    let _one = COUNTED.lock().unwrap_or_else(|e| e.into_inner());
    let mut counted = Counted::open()?;
    let (store, session) = session_store(&counted.url);
    resident_sessions(&mut counted);
    warm_up(&store, &session);
    counted.plans_of(prefix, || work(&store, &session))
}

/// 300 sessions of 100 one-part messages beside the store's, vacuumed and analysed, and no
/// autovacuum on the schema's tables while the test counts.
fn resident_sessions(counted: &mut Counted) {
    let schema = counted.schema.clone();
    counted
        .client
        .batch_execute(&format!(
            "SET search_path = {schema};
             INSERT INTO sessions (id, created_at, updated_at)
             SELECT 'resident-' || s, 'now', 'now' FROM generate_series(0, 299) AS s;
             INSERT INTO messages (session_id, seq, turn_index, role, created_at)
             SELECT 'resident-' || (g / 100), g % 100 + 1, (g % 100) / 2 + 1,
                    CASE WHEN g % 2 = 0 THEN 'user' ELSE 'assistant' END, 'now'
             FROM generate_series(0, 29999) AS g;
             INSERT INTO parts (message_id, ordinal, kind, text, session_id)
             SELECT m.id, 0, 'text', 'resident', m.session_id
             FROM messages AS m WHERE m.session_id LIKE 'resident-%';
             RESET search_path;
             DO $$ DECLARE t TEXT; BEGIN
               FOR t IN SELECT tablename FROM pg_tables WHERE schemaname = '{schema}' LOOP
                 EXECUTE format('ALTER TABLE {schema}.%I SET (autovacuum_enabled = off)', t);
               END LOOP;
             END $$;"
        ))
        .expect("resident sessions");
    // Settled as a deployment's tables are, and left so: an autovacuum of the 30,000 rows
    // just inserted, run by the server while the test counts, writes the tables' sizes anew
    // and so drops every kept plan on them. (Schemas that tests beside create and drop do
    // the same to every plan of the server: `backends::SCHEMA_CHANGES` keeps them out of the
    // count.) VACUUM runs alone: not in a transaction.
    counted
        .client
        .batch_execute(&format!(
            "VACUUM (ANALYZE) {schema}.sessions, {schema}.messages, {schema}.parts"
        ))
        .expect("settle the resident sessions");
}

/// The same for what an agent does to one session between its appends (read it whole, its
/// last turns, a page, its provider requests, its pending calls, a search in it, its
/// overview, row, usage, provider history and transcript), on the same tables: each
/// statement that runs on every iteration is planned a few times per connection, not on
/// every run.
#[test]
fn a_session_s_reads_are_planned_once_per_connection_on_tables_that_hold_data() {
    let now = chrono::TimeZone::with_ymd_and_hms(&chrono::Utc, 2026, 11, 27, 6, 0, 0).unwrap();
    each_turn_planned_once_on_tables_that_hold_data(|store, session, number| {
        for (_, message, _) in turn(number, 2) {
            store.append(session, message).expect("append");
        }
        store.messages(session).expect("messages");
        store.last_turns(session, 3).expect("last turns");
        store.page(session, None, 10).expect("page");
        for provider in [Provider::Anthropic, Provider::OpenAi] {
            store
                .export_request(session, provider, now, &ExportOptions::default())
                .expect("request");
        }
        store.pending_tool_uses(session).expect("pending");
        let options = SearchOptions {
            session: Some(session.clone()),
            ..SearchOptions::default()
        };
        store.search("question", &options).expect("search");
        store.session_overview(session).expect("overview");
        store.session(session).expect("session row");
        store.provider_history(session).expect("provider history");
        store
            .transcript(session, TranscriptFormat::Markdown)
            .expect("transcript");
        store.usage(session).expect("usage");
    });
}

/// The same for the other writes an agent makes to one session on every turn (a streamed
/// answer, a turn in one transaction, a title, a completion, a cancel with nothing
/// pending), on the same tables. (A compaction, rare, is planned for its cut: its ranges
/// of seqs up to the cut are worth a plan for their values.)
#[test]
fn a_session_s_writes_are_planned_once_per_connection_on_tables_that_hold_data() {
    let at = chrono::TimeZone::with_ymd_and_hms(&chrono::Utc, 2026, 11, 27, 6, 0, 0).unwrap();
    each_turn_planned_once_on_tables_that_hold_data(|store, session, number| {
        store
            .append(session, user(&format!("question {number}")))
            .expect("question");
        let mut streamed = store
            .begin_message(session, Role::Assistant)
            .expect("begin");
        streamed.push(Part::text("Looking.")).expect("push");
        streamed.push(Part::text("Done.")).expect("push");
        streamed.finish().expect("finish");
        let batch: Vec<NewMessage> = turn(number + 1_000, 2)
            .into_iter()
            .map(|(_, message, _)| message)
            .collect();
        store.append_batch(session, batch).expect("a turn at once");
        store
            .set_title(session, Some(&format!("title {number}")))
            .expect("title");
        store.record_completion(session, at).expect("completion");
        store.cancel_pending(session, "stop").expect("cancel");
    });
}

/// Runs `turn` (given the turn's number) on 24 turns of a session, after [`WARM_UP`] turns,
/// beside resident sessions ([`planned_on_tables_that_hold_data`]) and asserts that every statement that ran on
/// each turn was planned at most once in four runs.
fn each_turn_planned_once_on_tables_that_hold_data(turn: impl Fn(&Store, &SessionId, usize)) {
    const TURNS: usize = 24;
    let turns = |numbers: std::ops::Range<usize>| {
        let turn = &turn;
        move |store: &Store, session: &SessionId| {
            for number in numbers {
                turn(store, session, number);
            }
        }
    };
    let Some(planned) =
        planned_on_tables_that_hold_data("", turns(0..WARM_UP), turns(WARM_UP..WARM_UP + TURNS))
    else {
        return;
    };
    let frequent: Vec<_> = planned
        .into_iter()
        .filter(|&(_, _, calls)| calls >= TURNS as i64)
        .collect();
    assert!(
        frequent.len() >= 10,
        "only {} statements ran on every turn",
        frequent.len()
    );
    let replanned: Vec<String> = frequent
        .into_iter()
        .filter(|&(_, plans, calls)| plans * 4 > calls)
        .map(|(query, plans, calls)| format!("planned {plans} times in {calls} runs: {query}"))
        .collect();
    assert!(replanned.is_empty(), "{}", replanned.join("\n\n"));
}
