//! What only the PostgreSQL backend has to get right: processes that open a fresh database
//! together (each migration must run once, under the advisory lock, or two of them fail on
//! the same `CREATE TABLE`), a migration history from a newer build or a foreign one (refused
//! before anything is written, as on SQLite), and a read-only store (every write refused with
//! a typed error). Skipped, with a note, when `SESSION_STORE_TEST_PG` is unset.

use session_store::{Error, NewMessage, Store, StoreOptions};

use crate::backends::PgSchema;

#[test]
fn stores_opening_a_fresh_database_together_migrate_it_once() {
    let Some(schema) = PgSchema::create() else {
        return;
    };
    let url = schema.url();
    let opened: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..6)
            .map(|_| scope.spawn(|| Store::open(&url).map(|_| ())))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("opener panicked"))
            .collect()
    });
    for result in opened {
        result.expect("every concurrent open succeeds");
    }
    let mut client = schema.client();
    let versions: Vec<i32> = client
        .query(
            "SELECT version FROM refinery_schema_history ORDER BY version",
            &[],
        )
        .expect("history")
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut unique = versions.clone();
    unique.dedup();
    assert_eq!(versions, unique, "a migration recorded twice");
    assert!(versions.starts_with(&[1, 2, 3, 4, 5]), "{versions:?}");
}

#[test]
fn a_history_from_a_newer_or_foreign_build_is_refused_before_any_write() {
    let Some(schema) = PgSchema::create() else {
        return;
    };
    drop(Store::open(schema.url()).expect("migrate"));
    let mut client = schema.client();
    client
        .batch_execute(
            "INSERT INTO refinery_schema_history (version, name, applied_on, checksum)
             VALUES (99, 'from_the_future', '2030-01-01T00:00:00Z', '1')",
        )
        .expect("future row");
    assert!(matches!(
        Store::open(schema.url()),
        Err(Error::FutureSchema { version: 99, .. })
    ));
    client
        .batch_execute(
            "DELETE FROM refinery_schema_history WHERE version = 99;
             UPDATE refinery_schema_history SET checksum = '12345' WHERE version = 2;",
        )
        .expect("divergent row");
    assert!(matches!(
        Store::open(schema.url()),
        Err(Error::DivergentSchema { version: 2, .. })
    ));
}

#[test]
fn a_read_only_store_refuses_every_write_with_a_typed_error() {
    let Some(schema) = PgSchema::create() else {
        return;
    };
    let writer = Store::open(schema.url()).expect("migrate");
    let session = writer.create_session().expect("session");
    let options = StoreOptions {
        read_only: true,
        ..StoreOptions::default()
    };
    let reader = Store::open_with(schema.url(), &options).expect("read-only open");
    let err = reader
        .append(&session, NewMessage::user("hi"))
        .expect_err("a read-only store writes nothing");
    assert!(err.is_read_only(), "{err:?}");
    assert!(reader.messages(&session).expect("reads work").is_empty());
    // The second release's writes too: fork, delete, prune, and VACUUM (which runs outside
    // a transaction, so the read-only transaction cannot refuse it by itself).
    let far = session_store::clock() + chrono::TimeDelta::days(1);
    let refused = [
        reader.fork(&session, 0).map(drop),
        reader.delete_session(&session).map(drop),
        reader.prune(far).map(drop),
        reader.reclaim_space().map(drop),
        reader.vacuum().map(drop),
    ];
    for result in refused {
        let err = result.expect_err("a read-only store writes nothing");
        assert!(err.is_read_only(), "{err:?}");
    }
    assert!(reader.has_session(&session).expect("still there"));
    // Reads of the second release work.
    assert_eq!(reader.prune_candidates(far).expect("candidates").len(), 1);
    assert_eq!(reader.lineage().expect("lineage").len(), 1);
    reader.size_report(1).expect("size report");
    reader.usage(&session).expect("usage");
    reader
        .search("anything", &Default::default())
        .expect("search");
}
