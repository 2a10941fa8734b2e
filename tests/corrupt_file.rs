//! A damaged file: a copy of a healthy database with bytes flipped inside one of its b-tree
//! pages must make `store-repair` exit non-zero and say the file is corrupt, without writing
//! to it (its bytes stay the same, no backup or other file appears beside it, and SQLite's
//! WAL, if one is left, is empty), with and without `--dry-run`.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use session_store::Store;

use crate::fault_support::{raw, tool_turn};

const BIN: &str = env!("CARGO_BIN_EXE_store-repair");

fn listing(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect()
}

/// A healthy database with enough rows that `parts` spans several pages, closed (no WAL).
fn healthy(path: &Path) {
    let store = Store::open(path).expect("open");
    for s in 0..3 {
        let session = store.create_session().expect("session");
        for t in 0..20 {
            store
                .append_batch(&session, tool_turn(&format!("s{s}t{t}")))
                .expect("turn");
        }
    }
}

/// Overwrites the b-tree page header and the start of the cell pointer array of the page
/// that roots `table` with garbage: every read through that table then fails.
fn flip_root_page(path: &Path, table: &str) {
    let (root, page_size): (i64, i64) = {
        let conn = raw(path);
        let root = conn
            .query_row(
                "SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = ?1",
                [table],
                |r| r.get(0),
            )
            .expect("root page");
        let page_size = conn
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .expect("page size");
        (root, page_size)
    };
    let mut bytes = std::fs::read(path).expect("read db");
    let start = ((root - 1) * page_size) as usize;
    for byte in &mut bytes[start..start + 24] {
        *byte ^= 0xa5;
    }
    std::fs::write(path, bytes).expect("write damaged copy");
}

#[test]
fn store_repair_names_a_corrupt_file_and_leaves_it_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("damaged.db");
    healthy(&db);
    flip_root_page(&db, "parts");
    let bytes = std::fs::read(&db).expect("read");
    let files = listing(dir.path());

    for args in [vec!["--dry-run"], vec![], vec!["--json"]] {
        let out = Command::new(BIN)
            .arg("--db")
            .arg(&db)
            .args(&args)
            .output()
            .expect("run store-repair");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
        .to_lowercase();
        assert_eq!(
            out.status.code(),
            Some(2),
            "store-repair {args:?} on a corrupt file: {said}"
        );
        assert!(
            ["corrupt", "malformed", "integrity"]
                .iter()
                .any(|word| said.contains(word)),
            "store-repair {args:?} did not name the corruption: {said}"
        );
        assert_eq!(
            std::fs::read(&db).expect("read"),
            bytes,
            "store-repair {args:?} wrote to a corrupt file"
        );
        // The contract: a file that is unreadable is refused and nothing is created, not
        // even SQLite's side files (the file is checked before anything opens it to write).
        let extra: BTreeSet<String> = listing(dir.path()).difference(&files).cloned().collect();
        assert!(extra.is_empty(), "store-repair {args:?} created {extra:?}");
    }
}
