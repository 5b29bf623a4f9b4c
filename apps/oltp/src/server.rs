//! The TPC-C server: where the database lives, how workers reach it, and how
//! they wait for SQLite's single write lock.
//!
//! SQLite lets one transaction write at a time, and 92 % of the TPC-C mix
//! writes, so N workers mostly take turns. What differs between the lock
//! modes is *how a worker waits for its turn*, and that shows in the tail:
//! - [`LockMode::Mutex`]: one connection shared by all workers behind a
//!   parking mutex. Every transaction, reads included, runs alone; a waiter is
//!   woken by the futex the moment the holder is done.
//! - [`LockMode::Gate`]: one connection per worker. Writers first take an
//!   in-process parking mutex (the gate), then `BEGIN IMMEDIATE`, so they never
//!   collide inside SQLite; readers run beside them (under WAL without any
//!   waiting; in memory they can still meet a committing writer, and then wait
//!   in a yield-then-sleep busy handler, [`busy_spin`]).
//! - [`LockMode::Sqlite`]: one connection per worker, `BEGIN IMMEDIATE`, and
//!   SQLite's own `busy_timeout`, which sleeps 1, 2, 5, 10 … ms between tries.
//!   A writer that finds the lock taken waits at least a millisecond even when
//!   the holder finishes microseconds later: this mode shows what an
//!   unmodified SQLite application's tail looks like under contention.

use parking_lot::Mutex;
use rusqlite::{Connection, ErrorCode, OpenFlags};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::error::OltpError;
use crate::load::now_secs;
use crate::txn::{execute, Kind, Txn, TxnResult};

/// How workers wait for SQLite's write lock (`lock` key; see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    /// One shared connection behind a parking mutex; every transaction runs alone.
    Mutex,
    /// A connection per worker; writers queue on an in-process mutex first.
    Gate,
    /// A connection per worker; SQLite's own `busy_timeout` sleeps between tries.
    Sqlite,
}

impl LockMode {
    /// The mode named `s` (`mutex`, `gate`, `sqlite`); `None` for any other string.
    pub fn parse(s: &str) -> Option<LockMode> {
        match s {
            "mutex" => Some(LockMode::Mutex),
            "gate" => Some(LockMode::Gate),
            "sqlite" => Some(LockMode::Sqlite),
            _ => None,
        }
    }
    /// The name the `lock` key takes.
    pub fn name(self) -> &'static str {
        match self {
            LockMode::Mutex => "mutex",
            LockMode::Gate => "gate",
            LockMode::Sqlite => "sqlite",
        }
    }
}

/// Where the run's database lives.
#[derive(Debug, Clone)]
pub enum Storage {
    /// In RAM, read from the prepared file when the server starts.
    Memory,
    /// A fresh copy of the prepared file in a new folder under `scratch_root`,
    /// in WAL mode with `synchronous=FULL`; the folder is removed when the
    /// server and its workers are gone.
    Disk {
        /// Folder that receives the run's copy (`scratch` key; put it on the device to measure).
        scratch_root: PathBuf,
        /// SQLite page cache per connection, MiB (`cache_mb` key).
        cache_mb: u32,
    },
}

/// Attempts at a transaction that keeps meeting SQLITE_BUSY before giving up.
const MAX_ATTEMPTS: u32 = 1000;

/// Busy handler of [`LockMode::Gate`]: yield the CPU for the first tries (the
/// holder is usually a few microseconds from done), then sleep briefly so a
/// long wait (a WAL checkpoint, an fsync) does not burn a core. Gives up after
/// about 10 s, which surfaces as a retry and, past `MAX_ATTEMPTS` (1000), an error.
pub fn busy_spin(tries: i32) -> bool {
    if tries < 100 {
        std::thread::yield_now();
    } else {
        std::thread::sleep(Duration::from_micros(50));
    }
    tries < 100_000
}

/// Transactions by type and outcome, for `summary.json`.
#[derive(Default)]
struct Stats {
    done: [AtomicU64; 5],
    rolled_back: AtomicU64,
    busy_retries: AtomicU64,
}

/// Removes the run's scratch folder when the last connection into it is gone.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Removes scratch folders left by runs whose process is gone (one that
/// exited without dropping its server), so copies do not pile up on disk.
fn remove_stale_scratch(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("oltp-disk-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

static NEXT_DB: AtomicU64 = AtomicU64::new(0);

/// A run's database and its workers' shared state (lock, statistics, scratch copy).
pub struct TpccServer {
    warehouses: u32,
    lock: LockMode,
    /// How a worker opens its own connection (None: workers share `keeper`).
    open: Option<Opener>,
    /// Keeps an in-memory database alive, serves [`LockMode::Mutex`] workers,
    /// and runs the consistency check.
    keeper: Arc<Mutex<Connection>>,
    gate: Arc<Mutex<()>>,
    stats: Arc<Stats>,
    scratch: Option<Arc<Scratch>>,
    description: String,
}

#[derive(Clone)]
enum Opener {
    MemDb(String),
    File { path: PathBuf, cache_mb: u32 },
}

impl Opener {
    fn open(&self, lock: LockMode) -> Result<Connection, OltpError> {
        let conn = match self {
            Opener::MemDb(uri) => {
                let c = Connection::open_with_flags(
                    uri,
                    OpenFlags::SQLITE_OPEN_READ_WRITE
                        | OpenFlags::SQLITE_OPEN_URI
                        | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                )?;
                // The memdb VFS keeps only the database in RAM; a rollback journal
                // would go to a real file, so keep it in the heap too.
                c.execute_batch("PRAGMA journal_mode=MEMORY; PRAGMA temp_store=MEMORY;")?;
                c
            }
            Opener::File { path, cache_mb } => {
                let c = Connection::open_with_flags(
                    path,
                    OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                )?;
                // WAL is a property of the file (set once by the server);
                // FULL syncs the WAL at every commit, so each commit reaches storage.
                c.execute_batch(&format!(
                    "PRAGMA synchronous=FULL; PRAGMA cache_size=-{};",
                    u64::from(*cache_mb) * 1024
                ))?;
                c
            }
        };
        setup(&conn, lock)?;
        Ok(conn)
    }
}

fn setup(conn: &Connection, lock: LockMode) -> Result<(), OltpError> {
    // Every transaction's statements stay compiled (the 10 stock variants included).
    conn.set_prepared_statement_cache_capacity(64);
    match lock {
        LockMode::Sqlite => conn.busy_timeout(Duration::from_secs(10))?,
        LockMode::Gate | LockMode::Mutex => conn.busy_handler(Some(busy_spin))?,
    }
    Ok(())
}

/// The memdb VFS caps a database at 1 GiB (about 12 warehouses) unless told
/// otherwise; lift the cap to 1 TiB so the machine's RAM is the only limit, as
/// it is for `:memory:`.
fn raise_memdb_limit(conn: &Connection, path: &Path) -> Result<(), OltpError> {
    let mut limit: i64 = 1 << 40;
    // SAFETY: the handle is valid while `conn` lives and is used on this thread
    // only; SQLITE_FCNTL_SIZE_LIMIT takes a pointer to an sqlite3_int64, which
    // outlives the call.
    let rc = unsafe {
        rusqlite::ffi::sqlite3_file_control(
            conn.handle(),
            c"main".as_ptr(),
            rusqlite::ffi::SQLITE_FCNTL_SIZE_LIMIT,
            (&mut limit as *mut i64).cast(),
        )
    };
    if rc != rusqlite::ffi::SQLITE_OK || limit < 1 << 40 {
        let why = format!("code {rc}, limit now {limit} bytes");
        return Err(db_err("raising the in-memory size limit", path, why));
    }
    Ok(())
}

fn db_err(what: &str, path: &Path, e: impl std::fmt::Display) -> OltpError {
    OltpError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::other(format!("{what}: {e}")),
    }
}

impl TpccServer {
    /// Opens a run's database from the prepared file `prepared`.
    pub fn open(
        prepared: &Path,
        warehouses: u32,
        storage: &Storage,
        lock: LockMode,
    ) -> Result<TpccServer, OltpError> {
        let (keeper, open, scratch, description) = match storage {
            Storage::Memory => {
                let (mut keeper, open) = if lock == LockMode::Mutex {
                    (Connection::open_in_memory()?, None)
                } else {
                    // A memdb database whose name starts with '/' is shared by
                    // every connection of this process that opens the same name.
                    let uri = format!(
                        "file:/taillab-tpcc-{}-{}?vfs=memdb",
                        std::process::id(),
                        NEXT_DB.fetch_add(1, Ordering::Relaxed)
                    );
                    let opener = Opener::MemDb(uri.clone());
                    let c = Connection::open_with_flags(
                        &uri,
                        OpenFlags::SQLITE_OPEN_READ_WRITE
                            | OpenFlags::SQLITE_OPEN_CREATE
                            | OpenFlags::SQLITE_OPEN_URI
                            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                    )?;
                    c.execute_batch("PRAGMA journal_mode=MEMORY;")?;
                    raise_memdb_limit(&c, prepared)?;
                    (c, Some(opener))
                };
                keeper
                    .restore(
                        rusqlite::MAIN_DB,
                        prepared,
                        None::<fn(rusqlite::backup::Progress)>,
                    )
                    .map_err(|e| db_err("loading into memory", prepared, e))?;
                let d = match lock {
                    LockMode::Mutex => {
                        "in memory (:memory:), one connection for all workers".into()
                    }
                    _ => "in memory (shared memdb), one connection per worker".into(),
                };
                (keeper, open, None, d)
            }
            Storage::Disk {
                scratch_root,
                cache_mb,
            } => {
                remove_stale_scratch(scratch_root);
                let dir = scratch_root.join(format!(
                    "oltp-disk-{}-{}",
                    std::process::id(),
                    NEXT_DB.fetch_add(1, Ordering::Relaxed)
                ));
                std::fs::create_dir_all(&dir).map_err(|e| OltpError::Io {
                    path: dir.clone(),
                    source: e,
                })?;
                let scratch = Arc::new(Scratch(dir.clone()));
                let path = dir.join("tpcc.sqlite");
                std::fs::copy(prepared, &path).map_err(|e| OltpError::Io {
                    path: path.clone(),
                    source: e,
                })?;
                let opener = Opener::File {
                    path: path.clone(),
                    cache_mb: *cache_mb,
                };
                let keeper = opener.open(lock)?;
                let mode: String = keeper.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
                if !mode.eq_ignore_ascii_case("wal") {
                    return Err(db_err(
                        "switching to WAL",
                        &path,
                        format!("got mode {mode}"),
                    ));
                }
                let open = (lock != LockMode::Mutex).then_some(opener);
                let d = format!(
                    "on disk at {} (WAL, synchronous=FULL, cache {cache_mb} MiB per connection), {}",
                    path.display(),
                    if lock == LockMode::Mutex { "one connection" } else { "one connection per worker" }
                );
                (keeper, open, Some(scratch), d)
            }
        };
        setup(&keeper, lock)?;
        Ok(TpccServer {
            warehouses,
            lock,
            open,
            keeper: Arc::new(Mutex::new(keeper)),
            gate: Arc::new(Mutex::new(())),
            stats: Arc::new(Stats::default()),
            scratch,
            description,
        })
    }

    /// A worker with its own connection, or on the shared one ([`LockMode::Mutex`]).
    pub fn tpcc_worker(&self) -> Result<TpccWorker, OltpError> {
        let conn = match &self.open {
            Some(o) => Conn::Own(o.open(self.lock)?),
            None => Conn::Shared(self.keeper.clone()),
        };
        Ok(TpccWorker {
            conn,
            gate: (self.lock == LockMode::Gate).then(|| self.gate.clone()),
            warehouses: self.warehouses,
            stats: self.stats.clone(),
            _scratch: self.scratch.clone(),
        })
    }

    /// Runs TPC-C's consistency conditions 1–4 on the current database;
    /// returns one line per violation (empty when all hold).
    pub fn check_consistency(&self) -> Result<Vec<String>, OltpError> {
        Ok(crate::check::consistency(&self.keeper.lock())?)
    }

    /// Runs SQL that returns one integer on the shared connection (tests read
    /// with it, and corrupt the database with `UPDATE ... RETURNING` to test the check).
    pub fn query_i64(&self, sql: &str) -> Result<i64, OltpError> {
        Ok(self.keeper.lock().query_row(sql, [], |r| r.get(0))?)
    }
}

impl taillab_core::Server for TpccServer {
    fn worker(
        &self,
        _index: usize,
    ) -> Result<Box<dyn taillab_core::Worker>, taillab_core::AppError> {
        Ok(Box::new(self.tpcc_worker()?))
    }

    fn report(&self) -> serde_json::Value {
        let mut by_type = serde_json::Map::new();
        for k in Kind::ALL {
            by_type.insert(
                k.name().into(),
                self.stats.done[k as usize].load(Ordering::Relaxed).into(),
            );
        }
        serde_json::json!({
            "database": self.description,
            "warehouses": self.warehouses,
            "lock": self.lock.name(),
            "transactions": by_type,
            "new_order_rollbacks": self.stats.rolled_back.load(Ordering::Relaxed),
            "busy_retries": self.stats.busy_retries.load(Ordering::Relaxed),
        })
    }
}

enum Conn {
    Own(Connection),
    Shared(Arc<Mutex<Connection>>),
}

/// One worker thread's connection. Field order matters: the connection is
/// closed before the scratch folder it lives in can be removed.
pub struct TpccWorker {
    conn: Conn,
    gate: Option<Arc<Mutex<()>>>,
    warehouses: u32,
    stats: Arc<Stats>,
    _scratch: Option<Arc<Scratch>>,
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy) | Some(ErrorCode::DatabaseLocked)
    )
}

/// One attempt: BEGIN, the body, COMMIT (or ROLLBACK for New-Order's invalid item).
fn attempt(conn: &Connection, txn: &Txn, now: i64) -> rusqlite::Result<TxnResult> {
    // IMMEDIATE takes the write lock up front: a writer that started as a
    // reader could deadlock with another one upgrading, and SQLite answers
    // that with an immediate SQLITE_BUSY instead of waiting.
    let begin = if txn.kind().writes() {
        "BEGIN IMMEDIATE"
    } else {
        "BEGIN"
    };
    conn.prepare_cached(begin)?.execute([])?;
    let out = execute(conn, txn, now).and_then(|(res, commit)| {
        conn.prepare_cached(if commit { "COMMIT" } else { "ROLLBACK" })?
            .execute([])?;
        Ok(res)
    });
    if out.is_err() && !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    out
}

impl TpccWorker {
    /// Executes one decoded transaction, retrying it while SQLite reports busy.
    pub fn run(&mut self, txn: &Txn) -> Result<TxnResult, OltpError> {
        if txn.max_warehouse() > self.warehouses {
            return Err(OltpError::NoSuchWarehouse {
                got: txn.max_warehouse(),
                have: self.warehouses,
            });
        }
        for n in 1..=MAX_ATTEMPTS {
            let now = now_secs();
            let r = match &self.conn {
                Conn::Shared(m) => attempt(&m.lock(), txn, now),
                Conn::Own(c) => {
                    let _turn = match (&self.gate, txn.kind().writes()) {
                        (Some(g), true) => Some(g.lock()),
                        _ => None,
                    };
                    attempt(c, txn, now)
                }
            };
            match r {
                Ok(res) => {
                    self.stats.done[txn.kind() as usize].fetch_add(1, Ordering::Relaxed);
                    if let TxnResult::NewOrder {
                        rolled_back: true, ..
                    } = res
                    {
                        self.stats.rolled_back.fetch_add(1, Ordering::Relaxed);
                    }
                    return Ok(res);
                }
                Err(e) if is_busy(&e) && n < MAX_ATTEMPTS => {
                    self.stats.busy_retries.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) if is_busy(&e) => return Err(OltpError::Busy(n)),
                Err(e) => return Err(e.into()),
            }
        }
        Err(OltpError::Busy(MAX_ATTEMPTS))
    }
}

impl taillab_core::Worker for TpccWorker {
    fn handle(&mut self, req: &[u8], resp: &mut Vec<u8>) -> Result<(), taillab_core::AppError> {
        let txn = Txn::decode(req)?;
        self.run(&txn)?.encode(resp);
        Ok(())
    }
}
