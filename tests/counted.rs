//! The statements a store runs on PostgreSQL, as the server itself counts them
//! (`pg_stat_statements`), for the modules that check them (`statement_counts`,
//! `routable`): a store connected as a role only these modules use (`.ci/postgres` creates
//! it and loads `pg_stat_statements`), so the tests running beside them do not blur the
//! counts. `None`, with a note, when `SESSION_STORE_TEST_PG` is unset or the server lacks
//! either.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::backends::{change_schemas, pg_url, SCHEMA_CHANGES};

/// The role `.ci/postgres` creates for this module (password = name).
pub const COUNTED_ROLE: &str = "session_store_counted";

/// One test of this module at a time: they share the role's counters.
pub static COUNTED: Mutex<()> = Mutex::new(());

/// A schema owned by the counted role, dropped at the end.
pub struct Counted {
    /// The store's URL: the counted role, the schema first on its search path.
    pub url: String,
    /// The counted role's own connection (its reads of the counters are left out).
    pub client: postgres::Client,
    /// The schema the store's tables are in.
    pub schema: String,
}

impl Counted {
    /// Connects as the counted role, or `None` (with a note) when it cannot.
    pub fn open() -> Option<Self> {
        let base = pg_url()?;
        let mut config: postgres::Config = base.parse().expect("SESSION_STORE_TEST_PG parses");
        config.user(COUNTED_ROLE).password(COUNTED_ROLE);
        let mut client = match config.connect(postgres::NoTls) {
            Ok(client) => client,
            Err(e) => {
                eprintln!("note: no role {COUNTED_ROLE} ({e}): run .ci/postgres; skipped");
                return None;
            }
        };
        if client
            .query_one("SELECT 1 FROM pg_stat_statements LIMIT 0", &[])
            .is_err()
            && client
                .query("SELECT 1 FROM pg_stat_statements LIMIT 1", &[])
                .is_err()
        {
            eprintln!("note: pg_stat_statements is not loaded: run .ci/postgres; skipped");
            return None;
        }
        let schema = format!("counted_{}", std::process::id());
        change_schemas(
            &mut client,
            &format!("DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"),
        )
        .expect("create the counted schema");
        let url = format!(
            "postgres://{COUNTED_ROLE}:{COUNTED_ROLE}@{}/{}?options=-c%20search_path%3D{schema}",
            host_port(&base),
            config.get_dbname().expect("the test URL names a database"),
        );
        Some(Self {
            url,
            client,
            schema,
        })
    }

    /// The URL of the same tables for the test database's own role (whose statements are
    /// not counted), granted everything on them.
    pub fn shared_with_test_role(&mut self) -> String {
        let base = pg_url().expect("configured");
        let config: postgres::Config = base.parse().expect("SESSION_STORE_TEST_PG parses");
        let role = config.get_user().expect("the test URL names a role");
        let schema = &self.schema;
        self.client
            .batch_execute(&format!(
                "GRANT USAGE ON SCHEMA {schema} TO {role};
                 GRANT ALL ON ALL TABLES IN SCHEMA {schema} TO {role};
                 GRANT ALL ON ALL SEQUENCES IN SCHEMA {schema} TO {role};"
            ))
            .expect("share the counted schema");
        let sep = if base.contains('?') { '&' } else { '?' };
        format!("{base}{sep}options=-c%20search_path%3D{schema}")
    }

    /// Every statement the counted role ran in this database so far, with its calls (this
    /// module's own reads of the counters left out): those the store sent, not those the
    /// server ran inside them (a foreign key's check, a function's body), whatever
    /// `pg_stat_statements.track` says.
    pub fn snapshot(&mut self) -> BTreeMap<String, i64> {
        self.client
            .query(
                "SELECT query, calls FROM pg_stat_statements
                 WHERE userid = (SELECT oid FROM pg_roles WHERE rolname = current_user)
                   AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                   AND query NOT LIKE '%pg_stat_statements%'
                   AND toplevel",
                &[],
            )
            .expect("read pg_stat_statements")
            .into_iter()
            .fold(BTreeMap::new(), |mut all, row| {
                *all.entry(row.get::<_, String>(0)).or_default() += row.get::<_, i64>(1);
                all
            })
    }

    /// The statements `work` made the server run: text and number of executions.
    pub fn count(&mut self, work: impl FnOnce()) -> Vec<(String, i64)> {
        let before = self.snapshot();
        work();
        let after = self.snapshot();
        after
            .into_iter()
            .filter_map(|(query, calls)| {
                let ran = calls - before.get(&query).copied().unwrap_or(0);
                (ran > 0).then_some((query, ran))
            })
            .collect()
    }

    /// How many times the statements whose text starts with `prefix` were planned over
    /// `work`, and how many times they ran, each text on its own; `None` (with a note) when
    /// the server does not count plans (`pg_stat_statements.track_planning`, which
    /// `.ci/postgres` sets).
    pub fn plans_of(
        &mut self,
        prefix: &str,
        work: impl FnOnce(),
    ) -> Option<Vec<(String, i64, i64)>> {
        let tracked: String = self
            .client
            .query_one("SHOW pg_stat_statements.track_planning", &[])
            .expect("read the setting")
            .get(0);
        if tracked != "on" {
            eprintln!("note: pg_stat_statements.track_planning is off: run .ci/postgres; skipped");
            return None;
        }
        let pattern = format!("{prefix}%");
        // By statement id: each schema's tables make texts of their own ids.
        let read = |client: &mut postgres::Client| -> BTreeMap<i64, (String, i64, i64)> {
            client
                .query(
                    "SELECT queryid, query, plans, calls FROM pg_stat_statements
                     WHERE userid = (SELECT oid FROM pg_roles WHERE rolname = current_user)
                       AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                       AND query LIKE $1 AND query NOT LIKE '%pg_stat_statements%'
                       AND toplevel",
                    &[&pattern],
                )
                .expect("read pg_stat_statements")
                .into_iter()
                .map(|row| (row.get(0), (row.get(1), row.get(2), row.get(3))))
                .collect()
        };
        // No schema made or dropped beside while counting ([`SCHEMA_CHANGES`]).
        let _counting = SCHEMA_CHANGES.write().unwrap_or_else(|e| e.into_inner());
        let before = read(&mut self.client);
        work();
        let after = read(&mut self.client);
        Some(
            after
                .into_iter()
                .map(|(id, (query, plans, calls))| {
                    let (plans_before, calls_before) = before
                        .get(&id)
                        .map_or((0, 0), |&(_, plans, calls)| (plans, calls));
                    (query, plans - plans_before, calls - calls_before)
                })
                .filter(|&(_, _, calls)| calls > 0)
                .collect(),
        )
    }

    /// The shared buffers (hit or read) that the statements whose text holds `marker` took
    /// over `work`, and how many times they ran: what the server touched for them, nested
    /// statements included.
    pub fn blocks_of(&mut self, marker: &str, work: impl FnOnce()) -> (i64, i64) {
        let pattern = format!("%{marker}%");
        let read = |client: &mut postgres::Client| -> (i64, i64) {
            let row = client
                .query_one(
                    "SELECT COALESCE(SUM(shared_blks_hit + shared_blks_read), 0)::BIGINT,
                            COALESCE(SUM(calls), 0)::BIGINT
                     FROM pg_stat_statements
                     WHERE userid = (SELECT oid FROM pg_roles WHERE rolname = current_user)
                       AND query LIKE $1
                       AND query NOT LIKE '%pg_stat_statements%'",
                    &[&pattern],
                )
                .expect("read pg_stat_statements");
            (row.get(0), row.get(1))
        };
        let before = read(&mut self.client);
        work();
        let after = read(&mut self.client);
        (after.0 - before.0, after.1 - before.1)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        let drop = format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema);
        let _ = change_schemas(&mut self.client, &drop);
    }
}

/// `host:port` of a `postgres://user:password@host:port/db...` URL.
fn host_port(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, rest)| rest);
    rest.split(['/', '?']).next().unwrap_or(rest)
}
