//! The two backends one conformance test runs against: a temporary SQLite file always, and a
//! fresh schema of the PostgreSQL database named by `SESSION_STORE_TEST_PG` when that is set
//! (`.ci/run` always sets it; unset, the PostgreSQL half is skipped with a printed note). A
//! behaviour that holds on one backend and not the other fails here.

use std::path::PathBuf;

use session_store::{Store, StoreOptions};
use tempfile::TempDir;

/// The environment variable that names the test PostgreSQL database.
pub const PG_ENV: &str = "SESSION_STORE_TEST_PG";

/// The test database's URL, or `None` (with a note on stderr) when it is not configured.
pub fn pg_url() -> Option<String> {
    match std::env::var(PG_ENV) {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ => {
            eprintln!(
                "note: {PG_ENV} is unset: the PostgreSQL half of this test is skipped \
                 (README, \"Tests against PostgreSQL\")"
            );
            None
        }
    }
}

/// Held for reading by every statement that creates or drops a schema, for writing by a test
/// while it counts plans (`counted.rs`): a change to `pg_namespace` makes every connection of
/// the server drop every plan it kept (PostgreSQL resets the plan cache on it), so the
/// schemas that tests running beside made and dropped showed as plans of the counted store
/// (every statement planned again, 7 times in 24 runs on a loaded CI machine).
pub static SCHEMA_CHANGES: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Runs `ddl`, a statement that creates or drops a schema, under [`SCHEMA_CHANGES`].
pub fn change_schemas(client: &mut postgres::Client, ddl: &str) -> Result<(), postgres::Error> {
    let _changing = SCHEMA_CHANGES.read().unwrap_or_else(|e| e.into_inner());
    client.batch_execute(ddl)
}

/// A fresh, empty PostgreSQL schema in the test database, dropped with everything in it when
/// this value is dropped.
pub struct PgSchema {
    base: String,
    name: String,
}

impl PgSchema {
    /// Creates `t_<random>` in the test database, or `None` when none is configured.
    pub fn create() -> Option<Self> {
        let base = pg_url()?;
        let name = format!("t_{}", uuid_like());
        let mut client = postgres::Client::connect(&base, postgres::NoTls)
            .unwrap_or_else(|e| panic!("{PG_ENV} is set but the server refused: {e}"));
        change_schemas(&mut client, &format!("CREATE SCHEMA {name}")).expect("create schema");
        Some(Self { base, name })
    }

    /// The URL of the database with this schema first on the search path: a store opened on
    /// it sees only this schema's tables.
    pub fn url(&self) -> String {
        let sep = if self.base.contains('?') { '&' } else { '?' };
        format!("{}{sep}options=-c%20search_path%3D{}", self.base, self.name)
    }

    /// A plain client on this schema, for raw SQL (fixtures, dumps).
    pub fn client(&self) -> postgres::Client {
        postgres::Client::connect(&self.url(), postgres::NoTls).expect("connect")
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        if let Ok(mut client) = postgres::Client::connect(&self.base, postgres::NoTls) {
            let drop = format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name);
            let _ = change_schemas(&mut client, &drop);
        }
    }
}

fn uuid_like() -> String {
    // No uuid dependency here: the process id, a counter and the time are unique enough for
    // schemas that live as long as one test.
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "{}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        nanos
    )
}

/// Where a [`Backend`]'s rows live.
pub enum Place {
    /// A SQLite file in a temporary directory.
    Sqlite {
        /// Keeps the directory alive.
        _dir: TempDir,
        /// The database file.
        path: PathBuf,
    },
    /// A PostgreSQL schema.
    Postgres(PgSchema),
}

/// One backend under test: its name, where it lives, and a store opened on it.
pub struct Backend {
    /// `sqlite` or `postgres`.
    pub name: &'static str,
    /// The database.
    pub place: Place,
    /// A store opened on it.
    pub store: Store,
}

impl Backend {
    /// What `Store::open` takes for this backend (a path or a URL).
    pub fn location(&self) -> String {
        match &self.place {
            Place::Sqlite { path, .. } => path.display().to_string(),
            Place::Postgres(schema) => schema.url(),
        }
    }

    /// Opens another store on the same database (a second process would).
    pub fn reopen(&self) -> Store {
        Store::open(self.location()).expect("reopen")
    }

    /// Runs raw SQL in this backend's dialect (fixtures written by "other code"). On
    /// PostgreSQL a part names its session too (`migrations-postgres/V18`), as other code
    /// writes it there: [`parts_with_sessions`].
    pub fn exec(&self, sql: &str) {
        match &self.place {
            Place::Sqlite { path, .. } => rusqlite::Connection::open(path)
                .and_then(|c| c.execute_batch(sql))
                .expect("raw sqlite"),
            Place::Postgres(schema) => schema
                .client()
                .batch_execute(&parts_with_sessions(sql))
                .expect("raw postgres"),
        }
    }

    /// One integer from a raw query (counts).
    pub fn count(&self, sql: &str) -> i64 {
        match &self.place {
            Place::Sqlite { path, .. } => rusqlite::Connection::open(path)
                .and_then(|c| c.query_row(sql, [], |r| r.get(0)))
                .expect("raw sqlite count"),
            Place::Postgres(schema) => schema
                .client()
                .query_one(sql, &[])
                .and_then(|r| r.try_get::<_, i64>(0))
                .expect("raw postgres count"),
        }
    }

    /// Every row of the store's tables in a stable text form: equal dumps, equal contents.
    pub fn dump(&self) -> String {
        let mut out = String::new();
        match &self.place {
            Place::Sqlite { path, .. } => {
                let conn = rusqlite::Connection::open(path).expect("open");
                for table in TABLES {
                    out.push_str(&format!("-- {table}\n"));
                    let mut stmt = conn
                        .prepare(&format!("SELECT * FROM {table} ORDER BY 1"))
                        .expect("select");
                    let columns = stmt.column_count();
                    let mut rows = stmt.query([]).expect("query");
                    while let Some(row) = rows.next().expect("row") {
                        let values: Vec<String> = (0..columns)
                            .map(|i| format!("{:?}", row.get_ref(i).expect("value")))
                            .collect();
                        out.push_str(&values.join("|"));
                        out.push('\n');
                    }
                }
            }
            Place::Postgres(schema) => {
                let mut client = schema.client();
                for table in TABLES {
                    out.push_str(&format!("-- {table}\n"));
                    let rows = client
                        .query(
                            &format!("SELECT row_to_json(t)::TEXT FROM {table} t ORDER BY t.id"),
                            &[],
                        )
                        .expect("select");
                    for row in rows {
                        out.push_str(&row.get::<_, String>(0));
                        out.push('\n');
                    }
                }
            }
        }
        out
    }
}

/// The tables a dump covers: the contract's and the store's own.
pub const TABLES: &[&str] = &[
    "sessions",
    "messages",
    "parts",
    "summaries",
    "reverts",
    "reverted_messages",
    "reverted_parts",
    "repair_log",
];

/// A fresh SQLite backend.
pub fn sqlite() -> Backend {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("sessions.db");
    let store = Store::open_with(&path, &StoreOptions::default()).expect("open sqlite store");
    Backend {
        name: "sqlite",
        place: Place::Sqlite { _dir: dir, path },
        store,
    }
}

/// A fresh PostgreSQL backend, when the test database is configured.
pub fn postgres() -> Option<Backend> {
    let schema = PgSchema::create()?;
    let store = Store::open(schema.url()).expect("open postgres store");
    Some(Backend {
        name: "postgres",
        place: Place::Postgres(schema),
        store,
    })
}

/// Every backend this run can test: SQLite, and PostgreSQL when configured.
pub fn backends() -> Vec<Backend> {
    let mut all = vec![sqlite()];
    all.extend(postgres());
    all
}

/// A fixture's `INSERT INTO parts (message_id, ...)` as other code writes it on PostgreSQL,
/// where every part names its session (`migrations-postgres/V18`): `session_id` first, its
/// value taken from each row's `(SELECT id FROM messages WHERE session_id = '<id>' ...)`.
/// Other statements are left as they are; a parts row in another form is left too (and
/// PostgreSQL refuses it: its `session_id` is NOT NULL).
pub fn parts_with_sessions(sql: &str) -> String {
    const INSERT: &str = "INSERT INTO parts (message_id,";
    const ROW: &str = "((SELECT id FROM messages WHERE session_id = '";
    let mut out = String::with_capacity(sql.len() + 64);
    for statement in sql.split_inclusive(';') {
        let Some(at) = statement.find(INSERT) else {
            out.push_str(statement);
            continue;
        };
        out.push_str(&statement[..at]);
        out.push_str("INSERT INTO parts (session_id, message_id,");
        let mut rest = &statement[at + INSERT.len()..];
        while let Some(row) = rest.find(ROW) {
            let id_start = row + ROW.len();
            let id_len = rest[id_start..].find('\'').unwrap_or(0);
            let id = &rest[id_start..id_start + id_len];
            out.push_str(&rest[..row]);
            out.push_str(&format!(
                "('{id}', (SELECT id FROM messages WHERE session_id = '"
            ));
            rest = &rest[id_start..];
        }
        out.push_str(rest);
    }
    out
}
