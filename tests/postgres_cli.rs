//! The tools on a PostgreSQL URL, run as processes: `store-repair` that wrote a file backup
//! of a database that has no file, or a dry run that changed rows, or a password printed in
//! a message; `session-store copy` that lost rows between backends. Skipped, with a note,
//! when `SESSION_STORE_TEST_PG` is unset.

use std::process::{Command, Output};

use serde_json::Value;
use session_store::{SessionId, Store};

use crate::backends::{postgres, sqlite};
use crate::conformance::BROKEN;

const REPAIR: &str = env!("CARGO_BIN_EXE_store-repair");
const TOOL: &str = env!("CARGO_BIN_EXE_session-store");

fn run(bin: &str, args: &[&str]) -> Output {
    Command::new(bin)
        .args(args)
        .env_remove("SESSION_STORE_DB")
        .output()
        .expect("run the tool")
}

fn dry_report_changes(dry: &Output) -> Value {
    let report: Value = serde_json::from_slice(&dry.stdout).expect("json");
    report["would_change"].clone()
}

fn code(output: &Output) -> i32 {
    output.status.code().unwrap_or(-1)
}

#[test]
fn store_repair_on_a_url_refuses_a_backup_dry_runs_without_writing_and_mends() {
    let Some(pg) = postgres() else { return };
    pg.exec(BROKEN);
    let url = pg.location();
    let before = pg.dump();

    let refused = run(
        REPAIR,
        &["--db", &url, "--backup", "/nonexistent/backup.db"],
    );
    assert_eq!(code(&refused), 2, "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("pg_dump"), "{stderr}");
    assert!(
        !stderr.contains(":session_store@"),
        "password printed: {stderr}"
    );
    assert_eq!(pg.dump(), before, "a refused run wrote");

    let dry = run(REPAIR, &["--db", &url, "--dry-run", "--json"]);
    assert_eq!(code(&dry), 1, "{dry:?}");
    let report: Value = serde_json::from_slice(&dry.stdout).expect("json");
    assert_eq!(
        report["broken_sessions"][0]["session_id"], "broken",
        "{report}"
    );
    assert_eq!(report["would_repair"], 3, "{report}");
    assert!(report["would_change"].as_u64().unwrap_or(0) > 0, "{report}");
    assert_eq!(pg.dump(), before, "a dry run wrote");

    let real = run(REPAIR, &["--db", &url, "--json"]);
    assert_eq!(code(&real), 0, "{real:?}");
    let report: Value = serde_json::from_slice(&real.stdout).expect("json");
    assert_eq!(report["changes"], dry_report_changes(&dry), "{report}");
    assert!(report["backup"].is_null(), "{report}");
    let check = pg
        .store
        .check(&[], &Default::default())
        .expect("check after the mend");
    assert!(check.violations.is_empty(), "{:?}", check.violations);

    let again = run(REPAIR, &["--db", &url]);
    assert_eq!(code(&again), 0, "{again:?}");
}

#[test]
fn a_wrong_password_is_refused_without_printing_it() {
    let Some(pg) = postgres() else { return };
    let url = pg.location();
    let without = url.replacen(":session_store@", "@", 1);
    // Every place a URL can carry a password: the userinfo, `?password=` (first parameter),
    // `&password=` (a later one), a percent-encoded parameter name, `sslpassword`.
    let (base, query) = without.split_once('?').expect("the test URL has a query");
    let forms = [
        url.replacen(":session_store@", ":not-the-password@", 1),
        format!("{base}?password=not-the-password&{query}"),
        format!("{without}&password=not-the-password"),
        format!("{without}&pass%77ord=not-the-password"),
        format!("{without}&PASSWORD=not-the-password"),
    ];
    for form in &forms {
        for (bin, args) in [
            (REPAIR, vec!["--db", form.as_str()]),
            (REPAIR, vec!["--db", form.as_str(), "--json"]),
            (TOOL, vec!["--db", form.as_str(), "sessions"]),
            (
                TOOL,
                vec!["copy", "--from", form.as_str(), "--to", form.as_str()],
            ),
        ] {
            let output = run(bin, &args);
            assert_eq!(code(&output), 2, "{form}: {output:?}");
            let printed = format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            assert!(!printed.contains("not-the-password"), "{form}: {printed}");
            assert!(
                printed.contains("127.0.0.1"),
                "{form}: says which database: {printed}"
            );
        }
    }
}

#[test]
fn copy_from_a_file_to_a_url_and_back_exports_the_same_bodies() {
    let Some(pg) = postgres() else { return };
    let file = sqlite();
    let source = &file.store;
    let session = source.create_session().expect("session");
    for turn in 0..3 {
        source
            .append_batch(&session, crate::conformance::turn_for_tests(turn))
            .expect("append");
    }
    source.compact(&session, 2, "the start").expect("compact");

    let to_pg = run(
        TOOL,
        &["copy", "--from", &file.location(), "--to", &pg.location()],
    );
    assert_eq!(code(&to_pg), 0, "{to_pg:?}");
    let stdout = String::from_utf8_lossy(&to_pg.stdout);
    assert!(
        stdout.contains("copied 1 session") && stdout.contains("verified"),
        "{stdout}"
    );

    let back_dir = tempfile::tempdir().expect("tempdir");
    let back = back_dir.path().join("back.db");
    let to_file = run(
        TOOL,
        &[
            "copy",
            "--from",
            &pg.location(),
            "--to",
            &back.display().to_string(),
        ],
    );
    assert_eq!(code(&to_file), 0, "{to_file:?}");

    let export = |db: &str| {
        let output = run(
            TOOL,
            &["--db", db, "export", "--format", "openai", session.as_str()],
        );
        assert_eq!(code(&output), 0, "{output:?}");
        output.stdout
    };
    let original = export(&file.location());
    assert_eq!(export(&pg.location()), original);
    assert_eq!(export(&back.display().to_string()), original);
    // The copy is a store like any other: it takes the next turn.
    let reopened = Store::open(&back).expect("open the copy");
    reopened
        .append(
            &SessionId::new(session.as_str()),
            session_store::NewMessage::user("more"),
        )
        .expect("append to the copy");
    assert_eq!(
        reopened
            .messages(&session)
            .expect("messages")
            .last()
            .map(|m| m.turn_index),
        Some(3)
    );

    // Again: the session is there with the same rows, so it is skipped and named.
    let again = run(
        TOOL,
        &["copy", "--from", &file.location(), "--to", &pg.location()],
    );
    assert_eq!(code(&again), 0, "copying again: {again:?}");
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        stderr.contains(&format!("skipped session {session}")),
        "{stderr}"
    );
    // Once the source's session differs, the copy is refused and writes nothing.
    source
        .append(&session, session_store::NewMessage::user("diverging"))
        .expect("append");
    let refused = run(
        TOOL,
        &["copy", "--from", &file.location(), "--to", &pg.location()],
    );
    assert_eq!(
        code(&refused),
        2,
        "copying onto a differing session: {refused:?}"
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("with other rows") && stderr.contains("nothing was copied"),
        "{stderr}"
    );
}

#[test]
fn sessions_show_cancel_and_delete_run_on_a_url() {
    let Some(pg) = postgres() else { return };
    let url = pg.location();
    let session = pg.store.create_session().expect("session");
    pg.store
        .append_batch(&session, crate::conformance::turn_for_tests(1))
        .expect("append");
    pg.store
        .append(&session, session_store::NewMessage::user("next"))
        .expect("append");
    pg.store
        .append(
            &session,
            session_store::NewMessage::assistant(vec![session_store::Part::tool_use(
                "open",
                "read",
                serde_json::json!({}),
            )]),
        )
        .expect("append");
    let listing = run(TOOL, &["--db", &url, "sessions", "--json"]);
    assert_eq!(code(&listing), 0, "{listing:?}");
    let list: Value = serde_json::from_slice(&listing.stdout).expect("json");
    assert_eq!(list[0]["id"], session.as_str(), "{list}");
    let show = run(TOOL, &["--db", &url, "show", &session.as_str()[..8]]);
    assert_eq!(code(&show), 0, "{show:?}");
    let cancel = run(TOOL, &["--db", &url, "cancel", session.as_str()]);
    assert_eq!(code(&cancel), 0, "{cancel:?}");
    assert_eq!(String::from_utf8_lossy(&cancel.stdout).trim(), "open");
    let delete = run(TOOL, &["--db", &url, "delete", session.as_str()]);
    assert_eq!(code(&delete), 0, "{delete:?}");
    assert!(!pg.store.has_session(&session).expect("has_session"));
}

#[test]
fn fork_tree_search_usage_prune_and_size_run_on_a_url() {
    let Some(pg) = postgres() else { return };
    let url = pg.location();
    let session = pg.store.create_session().expect("session");
    pg.store
        .append_batch(&session, crate::conformance::turn_for_tests(1))
        .expect("append");
    pg.store
        .append_batch(
            &session,
            vec![
                session_store::NewMessage::user("deploy the staging cluster"),
                session_store::NewMessage::assistant(vec![session_store::Part::text("deployed")])
                    .with_usage(session_store::Usage::new(120, 30).model("m")),
            ],
        )
        .expect("append");

    let fork = run(
        TOOL,
        &["--db", &url, "fork", session.as_str(), "--at-turn", "1"],
    );
    assert_eq!(code(&fork), 0, "{fork:?}");
    let child = SessionId::new(String::from_utf8_lossy(&fork.stdout).trim());
    assert_eq!(
        pg.store.messages(&child).expect("fork's messages").len(),
        crate::conformance::turn_for_tests(1).len()
    );
    let tree = run(TOOL, &["--db", &url, "sessions", "--tree"]);
    assert_eq!(code(&tree), 0, "{tree:?}");
    assert!(
        String::from_utf8_lossy(&tree.stdout).contains(child.as_str()),
        "{tree:?}"
    );

    let search = run(TOOL, &["--db", &url, "search", "staging", "--json"]);
    assert_eq!(code(&search), 0, "{search:?}");
    let hits: Value = serde_json::from_slice(&search.stdout).expect("json");
    assert_eq!(hits[0]["session"], session.as_str(), "{hits}");
    assert_eq!(hits[0]["snippet"], "deploy the [staging] cluster", "{hits}");

    let usage = run(TOOL, &["--db", &url, "usage", session.as_str(), "--json"]);
    assert_eq!(code(&usage), 0, "{usage:?}");
    let usage: Value = serde_json::from_slice(&usage.stdout).expect("json");
    assert_eq!(usage["total"]["input_tokens"], 120, "{usage}");

    let size = run(TOOL, &["--db", &url, "size", "--json", "--reclaim"]);
    assert_eq!(code(&size), 0, "{size:?}");
    let size: Value = serde_json::from_slice(&size.stdout).expect("json");
    assert_eq!(size["sessions"], 2, "{size}");
    assert!(size["file_bytes"].as_u64().unwrap_or(0) > 0, "{size}");
    assert!(
        size["reclaimed"]["after_bytes"].as_u64().unwrap_or(0) > 0,
        "{size}"
    );
    let text = run(TOOL, &["--db", &url, "size", "--vacuum"]);
    assert_eq!(code(&text), 0, "{text:?}");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("(full VACUUM)") && text.contains("tables and indexes"),
        "{text}"
    );

    // Nothing is that old: a dry run and a prune keep everything.
    let before = pg.dump();
    let dry = run(
        TOOL,
        &[
            "--db",
            &url,
            "prune",
            "--older-than",
            "1d",
            "--dry-run",
            "--json",
        ],
    );
    assert_eq!(code(&dry), 0, "{dry:?}");
    assert_eq!(pg.dump(), before, "a dry run wrote");
    pg.exec(&format!(
        "UPDATE sessions SET updated_at = '2020-01-01T00:00:00Z' WHERE id = '{}'",
        child.as_str()
    ));
    let prune = run(
        TOOL,
        &[
            "--db",
            &url,
            "prune",
            "--older-than",
            "1d",
            "--yes",
            "--json",
        ],
    );
    assert_eq!(code(&prune), 0, "{prune:?}");
    let pruned: Value = serde_json::from_slice(&prune.stdout).expect("json");
    assert_eq!(pruned["deleted"], 1, "{pruned}");
    assert_eq!(pruned["sessions"][0]["session"], child.as_str(), "{pruned}");
    assert!(!pg.store.has_session(&child).expect("has_session"));
    assert!(pg.store.has_session(&session).expect("has_session"));
}
