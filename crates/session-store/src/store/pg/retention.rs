//! Size on PostgreSQL (deleting and pruning are `store/retention.rs`'s, written once over
//! the seam). The size report and reclaiming speak of the server's storage instead of a file:
//!
//! - "the database" is the relations (tables with their TOAST data, and indexes) of the schema
//!   that holds the store's `sessions` table: what this store owns, not the whole server; on
//!   Citus, a distributed table's bytes are its shards' on the workers;
//! - reclaiming is `VACUUM` of those tables (dead rows' space reusable, trailing empty pages
//!   given back), and [`crate::Store::vacuum`] is `VACUUM FULL` (every table rewritten,
//!   holding an exclusive lock on it meanwhile).

use super::PgStore;
use crate::error::Result;
use crate::store::reports::{ObjectSize, Reclaimed, SessionSize, SizeReport};
use crate::store::retention::SizeTotals;

/// The relations of the store's schema: tables (`r`), materialized views (`m`) and indexes
/// (`i`); a table's bytes include its TOAST data and maps (`pg_table_size`), its indexes are
/// their own rows.
const OBJECT_SIZES: &str = "
    SELECT c.relname::TEXT,
           (CASE WHEN c.relkind = 'i' THEN pg_relation_size(c.oid) ELSE pg_table_size(c.oid) END)::BIGINT AS bytes
    FROM pg_class c
    WHERE c.relnamespace = (SELECT relnamespace FROM pg_class WHERE oid = to_regclass('sessions'))
      AND c.relkind IN ('r', 'm', 'i')
    ORDER BY bytes DESC, c.relname COLLATE \"C\"";

/// [`OBJECT_SIZES`] where the `citus` extension is installed: a table Citus distributes
/// (`pg_dist_partition`), and each of its indexes, is measured over its shards on the workers
/// (`citus_table_size`, `citus_relation_size`), where its rows are; the coordinator's own
/// relation of it is empty. Other relations as on PostgreSQL.
const OBJECT_SIZES_CITUS: &str = "
    SELECT c.relname::TEXT,
           (CASE
                WHEN c.relkind = 'i' AND EXISTS (
                    SELECT 1 FROM pg_index x JOIN pg_dist_partition d ON d.logicalrelid = x.indrelid
                    WHERE x.indexrelid = c.oid)
                    THEN citus_relation_size(c.oid)
                WHEN c.relkind = 'i' THEN pg_relation_size(c.oid)
                WHEN EXISTS (SELECT 1 FROM pg_dist_partition d WHERE d.logicalrelid = c.oid)
                    THEN citus_table_size(c.oid)
                ELSE pg_table_size(c.oid)
            END)::BIGINT AS bytes
    FROM pg_class c
    WHERE c.relnamespace = (SELECT relnamespace FROM pg_class WHERE oid = to_regclass('sessions'))
      AND c.relkind IN ('r', 'm', 'i')
    ORDER BY bytes DESC, c.relname COLLATE \"C\"";

/// Whether the server runs the `citus` extension (then the sizes are its shards').
const CITUS_INSTALLED: &str = "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')";

/// The relations' sizes query for this server: [`OBJECT_SIZES_CITUS`] on Citus, else
/// [`OBJECT_SIZES`].
fn object_sizes_sql(tx: &mut super::Tx<'_>) -> Result<&'static str> {
    let citus: bool = tx.query_one(CITUS_INSTALLED, &[])?.try_get(0)?;
    Ok(if citus {
        OBJECT_SIZES_CITUS
    } else {
        OBJECT_SIZES
    })
}

/// The store's tables, quoted, for `VACUUM`.
const TABLES: &str = "
    SELECT format('%I.%I', n.nspname, c.relname)
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.relnamespace = (SELECT relnamespace FROM pg_class WHERE oid = to_regclass('sessions'))
      AND c.relkind = 'r'
    ORDER BY c.relname COLLATE \"C\"";

/// `store/retention.rs`'s per-session bytes: `octet_length` counts bytes, as SQLite's
/// `length(CAST(x AS BLOB))`.
const SESSION_SIZES: &str = "
    SELECT s.id,
           (SELECT COUNT(*) FROM messages c WHERE c.session_id = s.id),
           COALESCE(SUM(COALESCE(octet_length(p.text), 0) + COALESCE(octet_length(p.input), 0)
                        + COALESCE(octet_length(p.tool_use_id), 0) + COALESCE(octet_length(p.tool_name), 0)
                        + COALESCE(octet_length(p.provider_metadata), 0)), 0)::BIGINT AS bytes,
           COALESCE(SUM(CASE WHEN p.kind IN ('tool_result', 'server_tool_result')
                             THEN COALESCE(octet_length(p.text), 0) + COALESCE(octet_length(p.input), 0)
                             ELSE 0 END), 0)::BIGINT
    FROM sessions s LEFT JOIN messages m ON m.session_id = s.id
    LEFT JOIN parts p ON p.session_id = m.session_id AND p.message_id = m.id
    GROUP BY s.id ORDER BY bytes DESC, s.id COLLATE \"C\"";

/// The full-text index of migration V11.
const SEARCH_INDEX: &str = "parts_search";

impl PgStore {
    /// `Store::size_report` on PostgreSQL, in one snapshot. The figures, as PostgreSQL has
    /// them (the field documentation of [`SizeReport`] says what each is on SQLite):
    /// - `file_bytes`: the bytes of every relation of the store's schema (tables with TOAST,
    ///   and indexes), the sum of `objects`;
    /// - `free_bytes`: 0: PostgreSQL keeps no count of free space inside a table without an
    ///   extension (`pgstattuple`); `VACUUM` makes dead rows' space reusable in place;
    /// - `wal_bytes`: 0: the server's write-ahead log is shared by every database on it;
    /// - `objects`: each table (`pg_table_size`) and index (`pg_relation_size`);
    /// - `search_index_bytes`: the GIN index `parts_search` (the indexed values, the
    ///   column `parts.search_document`, are part of the `parts` table's bytes);
    /// - the per-session figures: the same content bytes as SQLite (`octet_length`).
    pub(crate) fn size_report(&self, top: usize) -> Result<SizeReport> {
        self.read(|tx| {
            let sizes = object_sizes_sql(tx)?;
            let objects = tx
                .query(sizes, &[])?
                .iter()
                .map(|row| {
                    Ok(ObjectSize {
                        name: row.try_get(0)?,
                        bytes: u64::try_from(row.try_get::<_, i64>(1)?).unwrap_or(0),
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            let mut totals = SizeTotals::new(top);
            for row in tx.query(SESSION_SIZES, &[])? {
                totals.add(SessionSize::from_counts(
                    row.try_get(0)?,
                    row.try_get(1)?,
                    row.try_get(2)?,
                    row.try_get(3)?,
                ));
            }
            Ok(SizeReport {
                file_bytes: objects.iter().map(|o| o.bytes).sum(),
                free_bytes: 0,
                wal_bytes: 0,
                search_index_bytes: objects
                    .iter()
                    .filter(|o| o.name == SEARCH_INDEX)
                    .map(|o| o.bytes)
                    .sum(),
                objects,
                sessions: totals.sessions,
                content_bytes: totals.content_bytes,
                tool_output_bytes: totals.tool_output_bytes,
                largest: totals.largest,
            })
        })
    }

    /// The bytes of the store's relations (`file_bytes` of the size report).
    pub(crate) fn bytes_on_disk(&self) -> Result<u64> {
        self.read(|tx| {
            let sizes = object_sizes_sql(tx)?;
            let bytes: i64 = tx
                .query_one(
                    &format!("SELECT COALESCE(SUM(bytes), 0)::BIGINT FROM ({sizes}) o"),
                    &[],
                )?
                .try_get(0)?;
            Ok(u64::try_from(bytes).unwrap_or(0))
        })
    }

    /// `Store::reclaim_space` (`full` false: `VACUUM`) and `Store::vacuum` (`full`:
    /// `VACUUM FULL`) over the store's tables, measured before and after. `VACUUM` cannot
    /// run inside a transaction: it runs on a pooled connection outside one.
    pub(crate) fn reclaim(&self, full: bool) -> Result<Reclaimed> {
        let before_bytes = self.bytes_on_disk()?;
        let tables: Vec<String> = self
            .read(|tx| tx.query(TABLES, &[]))?
            .iter()
            .map(|row| row.try_get(0))
            .collect::<std::result::Result<_, _>>()?;
        if !tables.is_empty() {
            let verb = if full { "VACUUM FULL" } else { "VACUUM" };
            // The names were quoted by the server (`%I`).
            self.outside_transaction(&format!("{verb} {}", tables.join(", ")))?;
        }
        Ok(Reclaimed {
            before_bytes,
            after_bytes: self.bytes_on_disk()?,
            full_vacuum: full,
        })
    }
}
