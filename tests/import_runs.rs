//! `import` of several files or a folder is one run: a refusal names the file at fault and
//! says what is wrong with the run, and nothing of the run is stored. `--format bundle`
//! takes one bundle (a folder holding only it included); named with several files it is
//! refused as a run, not by calling a transcript a bundle.

use std::path::Path;

use crate::util::{dump, one_exchange, session_store, session_store_ok, transcripts};

/// A database holding one session, and a bundle of it at `dir/bundle.jsonl`.
fn database_and_bundle(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let db = dir.join("s.db");
    let (store, session) = one_exchange(&db);
    let bundle = dir.join("bundle.jsonl");
    std::fs::write(&bundle, store.export_bundle(&session).expect("bundle")).expect("write");
    (db, bundle)
}

fn claude_log() -> std::path::PathBuf {
    transcripts().join("agentcmd/claude/full-session-two.jsonl")
}

#[test]
fn a_run_that_cannot_be_imported_is_refused_for_what_is_wrong_and_stores_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, bundle) = database_and_bundle(dir.path());
    let mixed = dir.path().join("mixed");
    std::fs::create_dir(&mixed).expect("mkdir");
    std::fs::copy(claude_log(), mixed.join("a.jsonl")).expect("copy");
    std::fs::copy(&bundle, mixed.join("b.jsonl")).expect("copy");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    let broken = dir.path().join("broken.json");
    std::fs::write(
        &broken,
        "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}",
    )
    .expect("write");
    let (log, b, m, e, x) = (
        claude_log().display().to_string(),
        bundle.display().to_string(),
        mixed.display().to_string(),
        empty.display().to_string(),
        broken.display().to_string(),
    );
    let cases: Vec<(Vec<&str>, &str)> = vec![
        // --format bundle with several files: the run is refused, no file is called a bundle
        // that is not one.
        (
            vec!["--format", "bundle", &b, &b],
            "imports one bundle file, not 2",
        ),
        (
            vec!["--format", "bundle", &m],
            "imports one bundle file, not 2",
        ),
        (
            vec!["--format", "bundle", &log, &b],
            "imports one bundle file, not 2",
        ),
        // auto: the file that is a bundle is named.
        (vec![&m], "b.jsonl is a bundle"),
        (vec![&log, &b], "bundle.jsonl is a bundle"),
        (vec![&e], "holds no files to import"),
        // A refused file in the middle of a run: nothing of the files before it is stored.
        (vec![&log, &x, &log], "broken.json refused"),
    ];
    for (args, words) in cases {
        let before = dump(&db);
        let mut full = vec!["import"];
        full.extend(args.iter().copied());
        let out = session_store(&db, &full);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(stderr.contains(words), "{args:?}: {stderr}");
        if words.starts_with("imports one") {
            assert!(!stderr.contains(" is a bundle"), "{args:?}: {stderr}");
        }
        assert_eq!(
            dump(&db),
            before,
            "{args:?}: a refused run stored something"
        );
    }
}

#[test]
fn a_folder_holding_one_bundle_imports_it_with_format_bundle() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, bundle) = database_and_bundle(dir.path());
    let folder = dir.path().join("only");
    std::fs::create_dir(&folder).expect("mkdir");
    std::fs::copy(&bundle, folder.join("one.jsonl")).expect("copy");
    for args in [
        vec![
            "import",
            "--format",
            "bundle",
            folder.to_str().expect("utf-8"),
        ],
        vec![
            "import",
            "--format",
            "bundle",
            bundle.to_str().expect("utf-8"),
        ],
        vec!["import", bundle.to_str().expect("utf-8")],
    ] {
        let id = session_store_ok(&db, &args);
        assert_eq!(id.lines().count(), 1, "{args:?}: {id}");
    }
    let listed = session_store_ok(&db, &["sessions", "--json"]);
    let rows: serde_json::Value = serde_json::from_str(&listed).expect("json");
    assert_eq!(rows.as_array().map(Vec::len), Some(4), "{listed}");
}
