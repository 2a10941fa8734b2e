//! Database files on disk: which paths may be opened, creating a new database all-or-nothing,
//! consistent and verified backups, and refusing files `store-repair` must not touch.
//!
//! Every path is a plain file path, never an SQLite URI: `:memory:`, `file:...` and the empty
//! path (SQLite's private temporary database) are refused by name, and no connection is
//! opened with `SQLITE_OPEN_URI`. A path that exists must be a regular file (a FIFO would
//! block the opener forever, a device would "work" and keep nothing); a path that does not
//! exist must name a file in an existing folder. Both checks run before SQLite sees the path,
//! so a refused path leaves nothing behind (not even a `-journal` beside `/dev/null`).
//!
//! A new database is built under a temporary name in the same folder (create, migrate, close)
//! and then linked to its name, so a failure (a full disk, a kill) never leaves a 0-byte or
//! half-migrated file where the database should be. Backups are written the same way.
//! Temporary files are named `.NAME.tmp-PID-N`; one whose process is gone (killed mid-write)
//! is removed the next time a database or backup is created in that folder.

use std::ffi::OsString;
use std::fs::{self, Metadata};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use super::handle::Store;
use super::schema;
use crate::error::{Error, Result};
use crate::error::{OpenError, PathProblem};

const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// The files SQLite keeps beside a database while it is open.
const SIDE_SUFFIXES: [&str; 3] = ["-journal", "-wal", "-shm"];

/// How a path is going to be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Use {
    /// The file must exist (read-only opens, `store-repair`).
    Existing,
    /// The file may exist, or be created.
    OpenOrCreate,
}

/// What [`check_path`] found at an accepted path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// Nothing: the file is to be created (its folder exists).
    Missing,
    /// A regular file with no bytes (a database with no tables).
    Empty,
    /// A regular file that starts with SQLite's header.
    Database,
}

fn invalid(path: &Path, problem: PathProblem) -> Error {
    Error::InvalidPath {
        path: path.to_path_buf(),
        problem,
    }
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Refuses the names SQLite would not read as a plain file: empty, `:memory:`, `file:...`.
fn check_name(path: &Path) -> Result<()> {
    let text = path.as_os_str().to_string_lossy();
    if text.is_empty() {
        return Err(invalid(path, PathProblem::Empty));
    }
    if text == ":memory:" {
        return Err(invalid(path, PathProblem::Memory));
    }
    if text.starts_with("file:") {
        return Err(invalid(path, PathProblem::Uri));
    }
    Ok(())
}

fn kind_of(metadata: &Metadata) -> &'static str {
    let file_type = metadata.file_type();
    if file_type.is_dir() {
        return "directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "FIFO";
        }
        if file_type.is_char_device() {
            return "character device";
        }
        if file_type.is_block_device() {
            return "block device";
        }
        if file_type.is_socket() {
            return "socket";
        }
    }
    "special file"
}

/// The folder a relative or absolute file path lives in.
fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// Refuses, before any connection touches it, a path that is not a plain file: an SQLite URI
/// or `:memory:`, a directory, FIFO or device, a file in a folder that does not exist, a
/// missing file when `Use::Existing`, or a non-empty file that does not start with SQLite's
/// header ([`Error::NotADatabase`]). Reads at most 16 bytes; creates nothing.
pub(crate) fn check_path(path: &Path, usage: Use) -> Result<Found> {
    check_name(path)?;
    let metadata = match fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && usage == Use::OpenOrCreate => {
            let folder = folder_of(path);
            return match fs::metadata(folder) {
                Ok(m) if m.is_dir() => Ok(Found::Missing),
                Ok(_) | Err(_) => Err(invalid(
                    path,
                    PathProblem::NoFolder {
                        folder: folder.to_path_buf(),
                    },
                )),
            };
        }
        Err(e) => return Err(io(path)(e)),
    };
    if !metadata.is_file() {
        return Err(invalid(
            path,
            PathProblem::NotRegularFile {
                kind: kind_of(&metadata),
            },
        ));
    }
    // Read even when the size is 0: files under /proc report 0 bytes and still have content.
    let mut header = [0u8; 16];
    let mut file = fs::File::open(path).map_err(io(path))?;
    let mut read = 0;
    while read < header.len() {
        let n = file.read(&mut header[read..]).map_err(io(path))?;
        if n == 0 {
            break;
        }
        read += n;
    }
    if read == 0 {
        return Ok(Found::Empty);
    }
    if read < header.len() || &header != SQLITE_MAGIC {
        return Err(Error::NotADatabase {
            path: path.to_path_buf(),
        });
    }
    Ok(Found::Database)
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh temporary name beside `path`: `.NAME.tmp-PID-N`.
fn temp_beside(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "sessions.db".to_owned());
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    folder_of(path).join(format!(".{name}.tmp-{}-{n}", std::process::id()))
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name: OsString = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Removes a temporary file and whatever SQLite left beside it.
fn remove_temp(temp: &Path) {
    let _ = fs::remove_file(temp);
    for suffix in SIDE_SUFFIXES {
        let _ = fs::remove_file(with_suffix(temp, suffix));
    }
}

/// The process id in a temporary name written by [`temp_beside`] (`.NAME.tmp-PID[-N][-side]`).
fn temp_owner(file_name: &str) -> Option<u32> {
    if !file_name.starts_with('.') {
        return None;
    }
    let (_, tail) = file_name.rsplit_once(".tmp-")?;
    let tail = SIDE_SUFFIXES
        .iter()
        .find_map(|s| tail.strip_suffix(s))
        .unwrap_or(tail);
    let mut fields = tail.split('-');
    let pid = fields.next()?.parse().ok()?;
    match (fields.next(), fields.next()) {
        (None, _) => Some(pid),
        (Some(n), None) if n.parse::<u64>().is_ok() => Some(pid),
        _ => None,
    }
}

/// True unless we can tell that process `pid` is gone (Linux: no `/proc/PID`).
fn process_alive(pid: u32) -> bool {
    if pid == std::process::id() || !Path::new("/proc/self").exists() {
        return true;
    }
    Path::new("/proc").join(pid.to_string()).exists()
}

/// Removes the temporary files (and their side files) a killed process left in `path`'s
/// folder, whatever file they were to become: a backup's name carries the time it started
/// (`sessions.db.<time>.bak`), so a rerun writes under another name than the run it follows.
/// Only names of [`temp_beside`]'s form whose process is gone are removed.
fn clean_stale_temps(path: &Path) {
    let Ok(entries) = fs::read_dir(folder_of(path)) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        if let Some(pid) = temp_owner(&file_name) {
            if !process_alive(pid) {
                tracing::info!(file = %entry.path().display(), "removing a temporary file left by a killed process");
                let _ = fs::remove_file(entry.path());
            }
        }
    }
}

/// Puts the finished temporary file at `dest` without ever replacing a file there: a hard
/// link (fails if `dest` exists), falling back to a rename where links are not supported.
/// Returns false when `dest` appeared meanwhile (the temporary file is then left to the caller).
fn publish(temp: &Path, dest: &Path) -> Result<bool> {
    match fs::hard_link(temp, dest) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
        Err(_) if !dest.exists() => fs::rename(temp, dest).map_err(io(dest))?,
        Err(e) => return Err(io(dest)(e)),
    }
    let _ = fs::remove_file(temp);
    // The new name must survive a power cut as well as the data does.
    if let Ok(folder) = fs::File::open(folder_of(dest)) {
        let _ = folder.sync_all();
    }
    Ok(true)
}

/// Flags for every connection the store opens to a path: never `SQLITE_OPEN_URI` (a path is
/// a path) and never `SQLITE_OPEN_CREATE` (only [`create_database`] makes a database file,
/// and it creates the file itself).
pub(crate) fn flags(read_only: bool) -> OpenFlags {
    let access = if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE
    };
    access | OpenFlags::SQLITE_OPEN_NO_MUTEX
}

/// Creates the database at `path` all-or-nothing: create and migrate under a temporary name
/// in the same folder, then link it into place. On failure nothing is left (the underlying
/// error is returned at once: a full disk is [`Error::is_full`]). When another process created
/// `path` meanwhile, its database is kept and this returns `Ok`.
pub(crate) fn create_database(path: &Path, max_page_count: Option<u64>) -> Result<()> {
    build_database(path, max_page_count, |_| Ok(())).map(|_| ())
}

/// [`create_database`] that also fills the new database before it is put in place: `fill`
/// runs on the migrated file under its temporary name (and must close every connection it
/// opens). Nothing is left when it fails. `Ok(None)` when another process created `path`
/// meanwhile: what `fill` wrote is dropped and that database is kept.
pub(crate) fn build_database<T>(
    path: &Path,
    max_page_count: Option<u64>,
    fill: impl FnOnce(&Path) -> Result<T>,
) -> Result<Option<T>> {
    clean_stale_temps(path);
    let temp = temp_beside(path);
    let built = (|| {
        // Created here first, so a folder we may not write to fails with the system's reason
        // (SQLite would only say it cannot open the file).
        fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            .map_err(io(path))?;
        let mut conn = Connection::open_with_flags(&temp, flags(false))?;
        if let Some(pages) = max_page_count {
            conn.pragma_update(
                None,
                "max_page_count",
                i64::try_from(pages).unwrap_or(i64::MAX),
            )?;
        }
        schema::migrate(&mut conn)?;
        conn.close().map_err(|(_, e)| e)?;
        let value = fill(&temp)?;
        // Everything in the main file before it gets its name: the WAL stays behind.
        let conn = Connection::open_with_flags(&temp, flags(false))?;
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        conn.close().map_err(|(_, e)| e)?;
        Ok(publish(&temp, path)?.then_some(value))
    })();
    remove_temp(&temp);
    built
}

/// What [`inspect_database_file`] learned about a file it accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatabaseFile {
    /// The file has no bytes (a database with no tables).
    pub empty: bool,
    /// How many embedded migrations it still needs.
    pub pending_migrations: usize,
}

/// Refuses, without creating or writing anything, a path `store-repair` must not touch: a
/// missing path ([`Error::Io`]), a URI, directory, FIFO or device ([`Error::InvalidPath`]),
/// a file that is not SQLite ([`Error::NotADatabase`]), a database from a newer build
/// ([`Error::FutureSchema`]) or with a foreign migration history ([`Error::DivergentSchema`]),
/// or a damaged file ([`Error::CorruptDatabase`], from `PRAGMA quick_check`).
pub fn inspect_database_file(path: &Path) -> Result<DatabaseFile> {
    let empty = check_path(path, Use::Existing)? == Found::Empty;
    let conn = open_untouched(path)?;
    let pending = schema::pending_migrations(&conn).map_err(|e| not_a_database(e, path))?;
    quick_check(&conn, path)?;
    Ok(DatabaseFile {
        empty,
        pending_migrations: pending.len(),
    })
}

/// Refuses a damaged file before anything opens it for writing: mending on top of corrupt
/// pages could spread the damage, and only a person can decide what to salvage.
fn quick_check(conn: &Connection, path: &Path) -> Result<()> {
    let corrupt = |detail: String| Error::CorruptDatabase {
        path: path.to_path_buf(),
        detail,
    };
    let verdict: String = conn
        .query_row("PRAGMA quick_check(1)", [], |row| row.get(0))
        .map_err(|e| corrupt(e.to_string()))?;
    if verdict == "ok" {
        Ok(())
    } else {
        Err(corrupt(verdict))
    }
}

/// Refuses a backup destination that is not a new plain file, or that is the database or one
/// of its side files (SQLite deletes a `-journal` or `-wal` it finds, backup and all).
fn check_backup_dest(src: &Path, dest: &Path) -> Result<()> {
    check_name(dest)?;
    if dest.exists() {
        return Err(io(dest)(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            "backup path exists",
        )));
    }
    if check_path(dest, Use::OpenOrCreate)? != Found::Missing {
        // A dangling symlink, or a file that appeared meanwhile.
        return Err(io(dest)(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            "backup path exists",
        )));
    }
    let database = fs::canonicalize(src).map_err(io(src))?;
    let folder = fs::canonicalize(folder_of(dest)).map_err(io(dest))?;
    let target = dest.file_name().map(|name| folder.join(name));
    let mut forbidden = vec![database.clone()];
    forbidden.extend(SIDE_SUFFIXES.iter().map(|s| with_suffix(&database, s)));
    if target.is_none_or(|t| forbidden.contains(&t)) {
        return Err(invalid(dest, PathProblem::DatabaseOrSideFile { database }));
    }
    Ok(())
}

/// Copies the whole database at `src` to `dest`, consistently even while others write to it,
/// and verifies the copy before it is visible:
///
/// - the copy is written under a temporary name in `dest`'s folder, created with no access
///   for others and given `src`'s permission bits, then linked to `dest` (never replacing a
///   file); a temporary file left by a kill is removed by the next backup or create there;
/// - it is taken with SQLite's backup API inside one read transaction on `src`, which also
///   counts every table's rows; the copy must pass `PRAGMA integrity_check` and hold the
///   same counts ([`Error::BackupFailed`] otherwise);
/// - `dest` must not exist and may not be `src` or its `-journal`, `-wal` or `-shm`
///   ([`Error::InvalidPath`]).
///
/// `src` is only read. On failure nothing is left at `dest` or under the temporary name.
pub fn backup_database(src: &Path, dest: &Path) -> Result<()> {
    check_path(src, Use::Existing)?;
    check_backup_dest(src, dest)?;
    clean_stale_temps(dest);
    let temp = temp_beside(dest);
    let result = copy_verified(src, &temp).and_then(|()| {
        if publish(&temp, dest)? {
            Ok(())
        } else {
            Err(io(dest)(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "backup path exists",
            )))
        }
    });
    remove_temp(&temp);
    result
}

/// Creates `temp` empty, readable by its owner only; returns `src`'s permission bits.
fn create_private(src: &Path, temp: &Path) -> Result<fs::Permissions> {
    let permissions = fs::metadata(src).map_err(io(src))?.permissions();
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(temp).map_err(io(temp))?;
    Ok(permissions)
}

/// Rows per table (virtual tables skipped: their shadow tables are counted).
fn row_counts(conn: &Connection) -> Result<Vec<(String, i64)>> {
    let tables: Vec<String> = conn
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table'
             AND COALESCE(sql, '') NOT LIKE 'CREATE VIRTUAL%' ORDER BY name",
        )?
        .query_map([], |row| row.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    tables
        .into_iter()
        .map(|table| {
            let quoted = table.replace('"', "\"\"");
            let count: i64 =
                conn.query_row(&format!("SELECT COUNT(*) FROM \"{quoted}\""), [], |row| {
                    row.get(0)
                })?;
            Ok((table, count))
        })
        .collect()
}

/// The first finding of `PRAGMA integrity_check` that is damage to the file. Rows that break
/// a CHECK or NOT NULL constraint are not damage: databases written by other code hold them,
/// and they are copied as they are (the check reports them as `unreadable_row`).
fn damage(conn: &Connection) -> Result<Option<String>> {
    let findings: Vec<String> = conn
        .prepare("PRAGMA integrity_check(100)")?
        .query_map([], |row| row.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(findings.into_iter().find(|finding| {
        finding != "ok"
            && !finding.starts_with("CHECK constraint failed")
            && !finding.starts_with("NULL value in ")
    }))
}

fn copy_verified(src: &Path, temp: &Path) -> Result<()> {
    let failed = |detail: String| Error::BackupFailed {
        path: temp.to_path_buf(),
        detail,
    };
    let permissions = create_private(src, temp)?;
    let mut source = open_untouched(src)?;
    let mut copy = Connection::open_with_flags(temp, flags(false))?;
    // One read transaction: the counts and the pages copied come from the same snapshot
    // (the backup API uses the source connection's open transaction).
    let snapshot = source.transaction_with_behavior(TransactionBehavior::Deferred)?;
    let expected = row_counts(&snapshot)?;
    {
        let backup = Backup::new(&snapshot, &mut copy)?;
        match backup.step(-1)? {
            StepResult::Done => {}
            other => return Err(failed(format!("backup stopped: {other:?}"))),
        }
    }
    snapshot.finish()?;
    if let Some(damage) = damage(&copy)? {
        return Err(failed(format!("integrity_check: {damage}")));
    }
    let copied = row_counts(&copy)?;
    if copied != expected {
        return Err(failed(format!(
            "row counts differ: source {expected:?}, copy {copied:?}"
        )));
    }
    copy.close().map_err(|(_, e)| e)?;
    fs::set_permissions(temp, permissions).map_err(io(temp))?;
    fs::File::open(temp)
        .and_then(|f| f.sync_all())
        .map_err(io(temp))?;
    Ok(())
}

/// Opens `path` to read it without creating or changing any file.
///
/// A read-only connection to a WAL database creates the `-wal` and `-shm` files when they are
/// missing, and cannot remove them when it closes. They are missing only when no connection
/// has the database open, so then nothing can change under us and the file is opened as
/// `immutable` (no locks, no side files). Otherwise (a live database, or the rollback
/// journal) a plain read-only connection creates nothing.
fn open_untouched(path: &Path) -> Result<Connection> {
    let conn = if is_wal(path) && !with_suffix(path, "-wal").exists() {
        Connection::open_with_flags(immutable_uri(path)?, immutable_flags())?
    } else {
        Connection::open_with_flags(path, flags(true))?
    };
    conn.busy_timeout(Duration::from_secs(30))?;
    Ok(conn)
}

/// True when the file's header says WAL mode (read and write versions 2).
fn is_wal(path: &Path) -> bool {
    let mut header = [0u8; 20];
    fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut header))
        .is_ok()
        && header[18] == 2
}

/// The one URI the store opens: `file:PATH?immutable=1`, built here from a checked path with
/// every character a URI reads specially escaped, so the path itself is never read as a URI.
fn immutable_uri(path: &Path) -> Result<String> {
    let text = path.to_str().ok_or_else(|| Error::Io {
        path: path.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "path is not UTF-8"),
    })?;
    let escaped = text
        .replace('%', "%25")
        .replace('?', "%3f")
        .replace('#', "%23");
    Ok(format!("file:{escaped}?immutable=1"))
}

fn immutable_flags() -> OpenFlags {
    OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX
}

/// How a read-only store reaches its file (see [`read_only_access`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// A plain read-only connection (`SQLITE_OPEN_READ_ONLY`).
    Plain,
    /// The file as `immutable`, through this URI.
    Immutable(String),
}

impl Access {
    /// What a connection opens, and with which flags.
    pub(crate) fn target(&self, path: &Path) -> (PathBuf, OpenFlags) {
        match self {
            Access::Plain => (path.to_path_buf(), flags(true)),
            Access::Immutable(uri) => (PathBuf::from(uri), immutable_flags()),
        }
    }
}

/// How a store that may not write reads `path`: the one rule for reading a database on a
/// read-only mount or another user's file.
///
/// A plain read-only connection, when SQLite can read through one: it can unless the file is
/// in WAL mode and its `-shm` is missing in a folder nobody here may write (SQLite needs the
/// `-shm`, and cannot create it). Then, when the `-wal` is missing or empty, every commit is
/// in the file itself and no writer can be at work (a writer would need those side files),
/// so the file is read as `immutable`: no locks, no side files, the same rows. When the
/// `-wal` holds commits the file alone would miss, reading is refused
/// ([`Error::UnreadableWal`]) rather than answered from the file without them.
pub(crate) fn read_only_access(path: &Path) -> Result<Access> {
    let probe = Connection::open_with_flags(path, flags(true)).and_then(|conn| {
        conn.query_row("SELECT COUNT(*) FROM sqlite_master", [], |row| {
            row.get::<_, i64>(0)
        })
    });
    let error = match probe {
        Ok(_) => return Ok(Access::Plain),
        Err(error) => error,
    };
    if !is_wal(path) || with_suffix(path, "-shm").exists() {
        return Err(error.into());
    }
    let wal_len = fs::metadata(with_suffix(path, "-wal")).map_or(0, |m| m.len());
    if wal_len > 0 {
        return Err(Error::UnreadableWal {
            path: path.to_path_buf(),
        });
    }
    tracing::info!(db = %path.display(), "no -shm and no way to create one: reading the file as immutable");
    Ok(Access::Immutable(immutable_uri(path)?))
}

/// The default backup path: next to the database, named after it and the time, e.g.
/// `sessions.db.20261125T214230Z.bak` (with `-2`, `-3`, ... if that exists).
pub fn default_backup_path(db: &Path, now: DateTime<Utc>) -> PathBuf {
    let name = db
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "sessions.db".to_owned());
    let stamp = now.format("%Y%m%dT%H%M%SZ");
    let mut candidate = db.with_file_name(format!("{name}.{stamp}.bak"));
    let mut n = 2;
    while candidate.exists() {
        candidate = db.with_file_name(format!("{name}.{stamp}-{n}.bak"));
        n += 1;
    }
    candidate
}

impl Store {
    /// Opens the database at `path` for a caller that mostly reads it: as [`Store::open`]
    /// does (migrating it) when this process may write it, and read-only
    /// ([`StoreOptions::read_only`](super::StoreOptions::read_only)) when it may not: a
    /// read-only mount, another user's file, a folder where SQLite cannot create its side
    /// files, WAL side files or not. Reads then return what a writable open returns; writes
    /// fail with [`Error::is_read_only`]. A `postgres://` URL opens as [`Store::open`].
    pub fn open_readable(path: impl AsRef<Path>) -> Result<Self, OpenError> {
        Self::open_readable_with(path, &super::StoreOptions::default())
    }

    /// [`Store::open_readable`] with explicit options (`read_only` is set when the
    /// database cannot be written).
    pub fn open_readable_with(
        path: impl AsRef<Path>,
        options: &super::StoreOptions,
    ) -> Result<Self, OpenError> {
        let path = path.as_ref();
        match Self::open_with(path, options) {
            Err(error) if cannot_write(&error) => {
                tracing::info!(db = %path.display(), %error, "cannot write the database: opening it read-only");
                Self::open_with(
                    path,
                    &super::StoreOptions {
                        read_only: true,
                        ..options.clone()
                    },
                )
            }
            other => other,
        }
    }

    /// A consistent, verified copy of the whole database at `dest` (see [`backup_database`]);
    /// [`Error::Unsupported`] on a PostgreSQL store, which has no file (use `pg_dump`).
    pub fn backup_to(&self, dest: &Path) -> Result<()> {
        self.engine.backup_to(dest)
    }
}

/// True when `error` says this process may not write the database (or create its side
/// files), rather than that something is wrong with it.
fn cannot_write(error: &OpenError) -> bool {
    error.is_read_only()
        || error.sqlite_code().is_some_and(|code| {
            matches!(
                code,
                rusqlite::ErrorCode::CannotOpen | rusqlite::ErrorCode::PermissionDenied
            )
        })
        || matches!(error, OpenError::Io { source, .. } if source.kind() == std::io::ErrorKind::PermissionDenied)
}

/// SQLite says `NotADatabase` only once it reads a page; name the file when it does.
pub(super) fn not_a_database(error: Error, path: &Path) -> Error {
    match &error {
        _ if error.sqlite().and_then(rusqlite::Error::sqlite_error_code)
            == Some(rusqlite::ErrorCode::NotADatabase) =>
        {
            Error::NotADatabase {
                path: path.to_path_buf(),
            }
        }
        _ => error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names_are_recognised_and_nothing_else() {
        assert_eq!(temp_owner(".db.sqlite.tmp-123-4"), Some(123));
        assert_eq!(temp_owner(".db.sqlite.tmp-123-4-journal"), Some(123));
        assert_eq!(temp_owner(".db.sqlite.tmp-77"), Some(77));
        assert_eq!(temp_owner("db.sqlite.tmp-123-4"), None);
        assert_eq!(temp_owner(".db.tmp-abc"), None);
        assert_eq!(temp_owner(".db.tmp-1-2-3"), None);
    }

    #[test]
    fn names_sqlite_would_read_specially_are_refused() {
        for name in ["", ":memory:", "file:x.db?nolock=1", "file:x.db"] {
            let err = check_path(Path::new(name), Use::OpenOrCreate).expect_err(name);
            assert!(matches!(err, Error::InvalidPath { .. }), "{name}: {err:?}");
        }
    }
}
