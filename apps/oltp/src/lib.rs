//! TPC-C on SQLite: the `oltp-mem` and `oltp-disk` apps (the roles silo and
//! shore play in TailBench).
//!
//! One TPC-C implementation (the five transactions, NURand, the spec's initial
//! database) and two places for the database: in RAM, or on disk with a
//! write-ahead log synced at every commit. The client draws each transaction
//! and all its inputs; the server executes it and answers with a summary
//! (order id, totals, rolled-back flag) that tests check. See README.md.

#![warn(missing_docs)]
pub mod check;
pub mod client;
pub mod error;
pub mod load;
pub mod rng;
pub mod server;
pub mod txn;

use std::path::PathBuf;
use std::sync::Arc;

use taillab_core::{App, AppError, Client, DataCtx, KeySpec, Params, Server};

pub use client::{TpccClient, STANDARD_MIX};
pub use server::{LockMode, Storage, TpccServer, TpccWorker};
pub use txn::{Kind, Txn, TxnResult};

/// Bump when the generated database changes, so old prepared data is rebuilt.
pub const DATA_VERSION: &str = "tpcc-sqlite-1";
/// Largest `warehouses` accepted: ~80 MB and ~5 s of loading per warehouse.
pub const MAX_WAREHOUSES: u32 = 200;

/// Both apps: `oltp-mem` and `oltp-disk`.
pub fn apps() -> Vec<Arc<dyn App>> {
    vec![
        Arc::new(Oltp { disk: false }),
        Arc::new(Oltp { disk: true }),
    ]
}

const MEM_KEYS: &[KeySpec] = &[
    KeySpec { name: "warehouses", default: "1", help: "TPC-C warehouses (scale); each adds ~80 MB and ~5 s to prepare" },
    KeySpec { name: "mix", default: "45,43,4,4,4", help: "weights of New-Order,Payment,Order-Status,Delivery,Stock-Level" },
    KeySpec { name: "lock", default: "mutex", help: "mutex (one shared connection) | gate (connection per worker, writers queue on a mutex) | sqlite (connection per worker, SQLite busy_timeout)" },
];

const DISK_KEYS: &[KeySpec] = &[
    KeySpec { name: "warehouses", default: "1", help: "TPC-C warehouses (scale); each adds ~80 MB and ~5 s to prepare" },
    KeySpec { name: "mix", default: "45,43,4,4,4", help: "weights of New-Order,Payment,Order-Status,Delivery,Stock-Level" },
    KeySpec { name: "lock", default: "gate", help: "gate (connection per worker, writers queue on a mutex) | sqlite (SQLite busy_timeout) | mutex (one shared connection)" },
    KeySpec { name: "cache_mb", default: "16", help: "SQLite page cache per connection, MiB (the rest is read through the OS page cache)" },
    KeySpec { name: "scratch", default: "DATA/.scratch", help: "folder for the run's copy of the database (put it on the device to measure); removed after the run" },
];

/// Parsed `--set` values.
struct Config {
    warehouses: u32,
    mix: [u32; 5],
    lock: LockMode,
    cache_mb: u32,
    scratch: Option<PathBuf>,
}

/// The `oltp-mem` or `oltp-disk` app (see [`apps`]).
pub struct Oltp {
    disk: bool,
}

impl Oltp {
    fn config(&self, params: &Params) -> Result<Config, AppError> {
        params.check_keys(self.name(), self.keys())?;
        let warehouses = params.get_parsed(
            "warehouses",
            1u32,
            &format!("a whole number of warehouses, 1..={MAX_WAREHOUSES}"),
        )?;
        if !(1..=MAX_WAREHOUSES).contains(&warehouses) {
            return Err(AppError::BadParam {
                key: "warehouses".into(),
                value: warehouses.to_string(),
                expected: format!("1..={MAX_WAREHOUSES}"),
            });
        }
        let mix = match params.get("mix") {
            None => STANDARD_MIX,
            Some(v) => parse_mix(v)?,
        };
        let default_lock = if self.disk {
            LockMode::Gate
        } else {
            LockMode::Mutex
        };
        let lock = match params.get("lock") {
            None => default_lock,
            Some(v) => LockMode::parse(v).ok_or_else(|| AppError::BadParam {
                key: "lock".into(),
                value: v.into(),
                expected: "mutex, gate or sqlite".into(),
            })?,
        };
        let cache_mb = params.get_parsed("cache_mb", 16u32, "MiB of page cache, e.g. 16")?;
        let scratch = params
            .get("scratch")
            .filter(|s| !s.is_empty())
            .map(PathBuf::from);
        Ok(Config {
            warehouses,
            mix,
            lock,
            cache_mb,
            scratch,
        })
    }

    /// The prepared database both apps share for a given scale.
    pub fn data_name(warehouses: u32) -> String {
        format!("tpcc-w{warehouses}")
    }

    /// The prepared database file for `warehouses`, built if missing.
    pub fn prepared_db(data: &DataCtx, warehouses: u32) -> Result<PathBuf, AppError> {
        let name = Self::data_name(warehouses);
        data.prepare_atomically(&name, DATA_VERSION, |dir| {
            load::build(&dir.join("tpcc.sqlite"), warehouses, &mut |_| {}).map_err(|e| {
                AppError::Prepare {
                    app: name.clone(),
                    why: e.to_string(),
                }
            })
        })?;
        Ok(data.app_dir(&name).join("tpcc.sqlite"))
    }
}

fn parse_mix(v: &str) -> Result<[u32; 5], AppError> {
    let bad = || {
        AppError::BadParam {
        key: "mix".into(),
        value: v.into(),
        expected: "five whole-number weights for New-Order,Payment,Order-Status,Delivery,Stock-Level with a positive sum, e.g. 45,43,4,4,4".into(),
    }
    };
    let parts: Vec<u32> = v
        .split(',')
        .map(|p| p.trim().parse::<u32>())
        .collect::<Result<_, _>>()
        .map_err(|_| bad())?;
    let mix: [u32; 5] = parts.try_into().map_err(|_| bad())?;
    let sum: u64 = mix.iter().map(|&w| u64::from(w)).sum();
    if sum == 0 || sum > u64::from(u32::MAX) {
        return Err(bad());
    }
    Ok(mix)
}

impl App for Oltp {
    /// oltp-disk's requests take ~0.3 ms and its checkpoints 6 ms: 3 000 per point. Each
    /// run starts on a fresh copy of the database with SQLite's page cache empty: its first
    /// 75 requests took 1.4-1.9x the rest, the next 25 1.1x and the next 150 about 1.05x
    /// (48 blocks per load, 2026-11-26), so every run warms up for 200.
    fn point_length(&self) -> taillab_core::PointLength {
        if self.disk {
            taillab_core::PointLength {
                requests: 3_000,
                warmup_requests: Some(200),
                ..Default::default()
            }
        } else {
            // µs transactions: 30 s per point, so the host's slow stretches of ~100 ms
            // fall on every point many times (see kv's).
            taillab_core::PointLength {
                secs: Some(30.0),
                ..Default::default()
            }
        }
    }
    fn name(&self) -> &'static str {
        if self.disk {
            "oltp-disk"
        } else {
            "oltp-mem"
        }
    }

    fn about(&self) -> &'static str {
        if self.disk {
            "TPC-C on SQLite on disk (WAL, synchronous=FULL, fresh copy per run): the on-disk OLTP database (shore's role)"
        } else {
            "TPC-C on SQLite in memory: the in-memory OLTP database (silo's role)"
        }
    }

    fn keys(&self) -> &'static [KeySpec] {
        if self.disk {
            DISK_KEYS
        } else {
            MEM_KEYS
        }
    }

    fn prepare(&self, data: &DataCtx, params: &Params) -> Result<(), AppError> {
        let cfg = self.config(params)?;
        Self::prepared_db(data, cfg.warehouses).map(|_| ())
    }

    fn server(
        &self,
        data: &DataCtx,
        params: &Params,
        _threads: usize,
    ) -> Result<Arc<dyn Server>, AppError> {
        let cfg = self.config(params)?;
        let db = Self::prepared_db(data, cfg.warehouses)?;
        let storage = if self.disk {
            Storage::Disk {
                scratch_root: cfg.scratch.unwrap_or_else(|| data.root.join(".scratch")),
                cache_mb: cfg.cache_mb,
            }
        } else {
            Storage::Memory
        };
        Ok(Arc::new(TpccServer::open(
            &db,
            cfg.warehouses,
            &storage,
            cfg.lock,
        )?))
    }

    fn client(
        &self,
        _data: &DataCtx,
        params: &Params,
        seed: u64,
    ) -> Result<Box<dyn Client>, AppError> {
        let cfg = self.config(params)?;
        Ok(Box::new(TpccClient::new(cfg.warehouses, cfg.mix, seed)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_settings_name_the_key() {
        let app = Oltp { disk: false };
        for (set, key) in [
            ("warehouses=0", "warehouses"),
            ("warehouses=x", "warehouses"),
            ("mix=1,2,3", "mix"),
            ("mix=0,0,0,0,0", "mix"),
            ("mix=a,1,1,1,1", "mix"),
            ("lock=spin", "lock"),
            ("cache_mb=1", "cache_mb"),
        ] {
            let p = Params::parse([set]).unwrap();
            let e = app
                .config(&p)
                .err()
                .unwrap_or_else(|| panic!("{set} accepted"))
                .to_string();
            assert!(e.contains(key), "{set}: {e}");
        }
        let ok = Params::parse(["warehouses=2", "mix=1,0,0,0,1", "lock=gate"]).unwrap();
        let cfg = app.config(&ok).unwrap();
        assert_eq!(
            (cfg.warehouses, cfg.mix, cfg.lock),
            (2, [1, 0, 0, 0, 1], LockMode::Gate)
        );
        let disk = Oltp { disk: true };
        assert_eq!(disk.config(&Params::new()).unwrap().lock, LockMode::Gate);
        assert!(disk
            .config(&Params::parse(["cache_mb=64"]).unwrap())
            .is_ok());
    }
}
