//! The session total a Markdown or HTML transcript shows is exact: usage rows whose counts
//! sum past 64 bits (rows a person wrote with `sqlite3`, each count within the contract's
//! 64-bit integers) are shown as their true sum, never clamped to `u64::MAX`.

use session_store::{NewMessage, Part, Store};

use crate::util::session_store_ok;

/// `n` with thousands separators, computed here independently of the renderer.
fn grouped(n: u128) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (at, d) in digits.chars().enumerate() {
        if at > 0 && (digits.len() - at).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

#[test]
fn transcript_totals_past_64_bits_are_exact() {
    let max = i64::MAX;
    for counts in [vec![max, max], vec![max; 12], vec![max, 1], vec![5, 7, 11]] {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("s.db");
        let store = Store::open(&db).expect("open");
        let session = store.create_session().expect("session");
        let mut batch = Vec::new();
        for n in 0..counts.len() {
            batch.push(NewMessage::user(format!("question {n}")));
            batch.push(NewMessage::assistant(vec![Part::text(format!(
                "answer {n}"
            ))]));
        }
        store.append_batch(&session, batch).expect("append");
        drop(store);
        let conn = rusqlite::Connection::open(&db).expect("sqlite3");
        let ids: Vec<i64> = conn
            .prepare("SELECT id FROM messages WHERE role = 'assistant' ORDER BY seq")
            .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
            .expect("ids");
        for (id, count) in ids.iter().zip(&counts) {
            conn.execute(
                "INSERT INTO usage (message_id, input_tokens, output_tokens) VALUES (?1, ?2, 1)",
                rusqlite::params![id, count],
            )
            .expect("usage");
        }
        drop(conn);
        let total: u128 = counts.iter().map(|&c| c as u128).sum();
        let want = format!("tokens: {} in · {} out", grouped(total), counts.len());
        for format in ["markdown", "html"] {
            let out = session_store_ok(&db, &["export", session.as_str(), "--format", format]);
            assert!(
                out.contains(&want),
                "{format} {counts:?}: no {want:?} in the header"
            );
            assert!(
                total <= u128::from(u64::MAX) || !out.contains(&grouped(u128::from(u64::MAX))),
                "{format} {counts:?}: clamped"
            );
        }
    }
}
