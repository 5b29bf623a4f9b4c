//! taillab-middleware: a Java business-logic service with a garbage
//! collector in the loop, in the role SPECjbb plays in TailBench.
//!
//! The service (`java/taillab/jbb`) is a wholesale company modeled on
//! SPECjbb2005: warehouses, districts, customers, items, stock and orders in
//! Java collections, and the six transactions new-order, payment,
//! order-status, delivery, stock-level and customer-report. It runs inside
//! the harness process: the JVM is started once through the JNI invocation
//! API and every worker thread is attached to it, so a request costs one JNI
//! call and no socket, and the integrated configuration measures the GC's
//! effect on the tail directly.
//!
//! Requests are built by the client (type and inputs drawn from a seeded
//! generator, TPC-C's non-uniform distributions) as a little-endian record:
//!
//! | bytes | field |
//! |---|---|
//! | u8, u16, u8 | type, warehouse, district |
//! | new-order | u16 customer, u8 n, n × (u16 item, u16 supply warehouse, u8 quantity) |
//! | payment | u16 customer warehouse, u8 customer district, u32 cents, selector |
//! | order-status, customer-report | selector |
//! | delivery | u8 carrier |
//! | stock-level | u8 threshold |
//!
//! where a selector is u8 kind (0 = by id, 1 = by TPC-C last-name number)
//! and u16 value. The response is the transaction's result screen (text).
//!
//! One JVM per process: the JVM cannot be restarted with other options, so
//! a second server in the same process must ask for the same `gc` and `heap`.

#![warn(missing_docs)]
mod jvm;

use std::sync::{Arc, Mutex};

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use taillab_core::{App, AppError, Client, DataCtx, KeySpec, Params, Server, Worker};

pub use jvm::{Gc, JvmOptions};

/// The app's name (`--app middleware`), also its data folder.
pub const APP: &str = "middleware";

const KEYS: &[KeySpec] = &[
    KeySpec {
        name: "gc",
        default: "g1",
        help: "JVM garbage collector: g1, parallel, zgc, shenandoah, serial",
    },
    KeySpec {
        name: "heap",
        default: "512m",
        help: "JVM heap size (-Xms and -Xmx), e.g. 256m, 2g",
    },
    KeySpec {
        name: "warehouses",
        default: "2",
        help: "warehouses in the company (1..64); the client spreads requests over all",
    },
];

/// Customers per district; must match `Company.java`.
pub const CUSTOMERS: u16 = 3000;
/// Items in the catalogue (ids 1..=ITEMS); must match `Company.java`.
pub const ITEMS: u16 = 20000;
/// Districts per warehouse (ids 1..=DISTRICTS); must match `Company.java`.
pub const DISTRICTS: u8 = 10;

/// The transaction types, in the Java service's numbering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tx {
    /// Places an order of 1 to 15 item lines, updating stock.
    NewOrder = 0,
    /// Records a customer's payment in warehouse, district and customer totals.
    Payment = 1,
    /// Reads a customer's balance and last order (read-only).
    OrderStatus = 2,
    /// Delivers the oldest undelivered order of each of a warehouse's districts.
    Delivery = 3,
    /// Counts items of a district's 20 newest orders below a stock threshold (read-only).
    StockLevel = 4,
    /// A customer's balance, recent payments and recent orders (read-only).
    CustomerReport = 5,
}

/// SPECjbb2005's operation mix as a deck of 24 cards: 10 new-order,
/// 10 payment, one each of the other four (41.7 % / 41.7 % / 4.2 % × 4).
pub const MIX: [(Tx, u32); 6] = [
    (Tx::NewOrder, 10),
    (Tx::Payment, 10),
    (Tx::OrderStatus, 1),
    (Tx::Delivery, 1),
    (Tx::StockLevel, 1),
    (Tx::CustomerReport, 1),
];

/// The checked `--set` values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Collector and heap for the process's JVM (`gc`, `heap` keys).
    pub jvm: JvmOptions,
    /// Warehouses in the company, 1..=64 (`warehouses` key).
    pub warehouses: u16,
}

impl Config {
    /// Reads and checks the app's `--set` keys; an error names the bad key and its allowed values.
    pub fn from_params(params: &Params) -> Result<Self, AppError> {
        params.check_keys(APP, KEYS)?;
        let gc = params.get("gc").unwrap_or("g1").parse::<Gc>()?;
        let heap = params.get("heap").unwrap_or("512m").to_string();
        let ok = heap.len() > 1
            && heap[..heap.len() - 1].bytes().all(|b| b.is_ascii_digit())
            && heap.ends_with(['k', 'm', 'g', 'K', 'M', 'G']);
        if !ok {
            return Err(AppError::BadParam {
                key: "heap".into(),
                value: heap,
                expected: "a size with unit k, m or g, e.g. 512m or 2g".into(),
            });
        }
        let warehouses: u16 = params.get_parsed("warehouses", 2, "a count from 1 to 64")?;
        if !(1..=64).contains(&warehouses) {
            return Err(AppError::BadParam {
                key: "warehouses".into(),
                value: warehouses.to_string(),
                expected: "a count from 1 to 64".into(),
            });
        }
        Ok(Config {
            jvm: JvmOptions { gc, heap },
            warehouses,
        })
    }
}

/// The `middleware` app (the [`App`] the CLI registers).
pub struct MiddlewareApp;

/// The app, as the CLI's app list holds it.
pub fn app() -> Arc<dyn App> {
    Arc::new(MiddlewareApp)
}

impl App for MiddlewareApp {
    /// Its tail is its collector's pauses, about one per 10 000 requests: 20 000 requests
    /// see one or two (the app moved 50–93 % against itself). They come in clusters (G1's
    /// young collections a few thousand requests apart, then a long quiet): 200 000 requests
    /// held about 17 pauses but only 3 clusters (2026-11-25), and the 70 % point missed by
    /// 55 %; 1 000 000 hold about 17 clusters. The JIT warms for a few seconds.
    fn point_length(&self) -> taillab_core::PointLength {
        taillab_core::PointLength {
            requests: 1_000_000,
            warmup_secs: Some(5.0),
            ..Default::default()
        }
    }
    taillab_core::app_info!(
        APP,
        "Java wholesale company (SPECjbb2005-style) in an embedded JVM; GC pauses in the tail (µs to ms)",
        KEYS
    );

    fn prepare(&self, data: &DataCtx, params: &Params) -> Result<(), AppError> {
        Config::from_params(params)?;
        jvm::install_jar(data).map(|_| ())
    }

    fn server(
        &self,
        data: &DataCtx,
        params: &Params,
        _threads: usize,
    ) -> Result<Arc<dyn Server>, AppError> {
        Ok(Arc::new(typed_server(data, params)?))
    }

    fn client(
        &self,
        _data: &DataCtx,
        params: &Params,
        seed: u64,
    ) -> Result<Box<dyn Client>, AppError> {
        let cfg = Config::from_params(params)?;
        Ok(Box::new(MiddlewareClient::new(cfg.warehouses, seed)))
    }
}

/// [`App::server`] with its concrete type, for callers that want
/// [`MiddlewareServer::check`]. Starts the JVM if this process has none and
/// (re)builds the company, so servers in one process must not overlap.
pub fn typed_server(data: &DataCtx, params: &Params) -> Result<MiddlewareServer, AppError> {
    let cfg = Config::from_params(params)?;
    let jar = jvm::install_jar(data)?;
    let vm = jvm::Jvm::get_or_start(&jar, &cfg.jvm)?;
    // A fixed seed: the company's initial state is the same in every run.
    vm.init(cfg.warehouses, 2005)?;
    let server = MiddlewareServer {
        vm,
        baseline: Mutex::new(None),
    };
    // The first gcStats call loads the JVM's management beans (10–20 ms). It
    // is made here, before the run: `begin_measurement` runs on a worker just
    // before the first measured request, and every request due meanwhile
    // waited for it (a dispatch gap the environment check called a stall).
    server.gc_stats()?;
    Ok(server)
}

/// A server over the process's JVM: workers are threads attached to it,
/// and `report` gives the GC pauses of the measured phase.
pub struct MiddlewareServer {
    vm: &'static jvm::Jvm,
    /// GC statistics when the measured phase began, subtracted in `report`.
    baseline: Mutex<Option<serde_json::Value>>,
}

impl MiddlewareServer {
    /// Checks the company's invariants (district order counters against the
    /// order table, new-order queue against undelivered orders, warehouse
    /// and district year-to-date totals against customer payments). Returns
    /// one line per violation; empty when consistent. Locks every warehouse.
    pub fn check(&self) -> Result<String, AppError> {
        self.vm.call_string("check")
    }

    /// The JVM's collector statistics and transaction counts, since start.
    pub fn gc_stats(&self) -> Result<serde_json::Value, AppError> {
        let s = self.vm.call_string("gcStats")?;
        serde_json::from_str(&s).map_err(|e| AppError::Engine {
            engine: "jvm".into(),
            why: format!("gcStats returned malformed JSON ({e}): {s}"),
        })
    }
}

impl Server for MiddlewareServer {
    fn worker(&self, _index: usize) -> Result<Box<dyn Worker>, AppError> {
        Ok(Box::new(self.vm.attach_worker()?))
    }

    fn begin_measurement(&self, _at_ns: u64) {
        let now = self.gc_stats().ok();
        *self.baseline.lock().unwrap_or_else(|e| e.into_inner()) = now;
    }

    fn report(&self) -> serde_json::Value {
        let now = match self.gc_stats() {
            Ok(v) => v,
            Err(e) => return serde_json::json!({ "error": e.to_string() }),
        };
        let base = self
            .baseline
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        summarize(self.vm.options(), &now, base.as_ref())
    }
}

/// `app_stats` for summary.json: per collector the collections and their
/// accumulated time during the measured phase (since `base`), and totals.
///
/// What a collector bean counts differs by GC: for the stop-the-world
/// collectors (Serial, Parallel, G1) every collection is a pause and its
/// time is pause time; ZGC and Shenandoah publish a "… Pauses" bean (pauses
/// only) next to a "… Cycles" bean (mostly concurrent work). `pauses` and
/// `pause_ms` therefore sum the "Pauses" beans when there are any, else all
/// beans.
pub fn summarize(
    opts: &JvmOptions,
    now: &serde_json::Value,
    base: Option<&serde_json::Value>,
) -> serde_json::Value {
    let get = |v: &serde_json::Value, name: &str, field: &str| -> i64 {
        v["collectors"]
            .as_array()
            .and_then(|a| a.iter().find(|c| c["name"] == name))
            .and_then(|c| c[field].as_i64())
            .unwrap_or(0)
    };
    let mut collectors = Vec::new();
    let (mut all, mut pauses) = ((0, 0), None::<(i64, i64)>);
    for c in now["collectors"].as_array().into_iter().flatten() {
        let name = c["name"].as_str().unwrap_or("?");
        let count = get(now, name, "count") - base.map_or(0, |b| get(b, name, "count"));
        let ms = get(now, name, "time_ms") - base.map_or(0, |b| get(b, name, "time_ms"));
        collectors.push(serde_json::json!({ "name": name, "count": count, "time_ms": ms }));
        all = (all.0 + count, all.1 + ms);
        if name.contains("Pauses") {
            let p = pauses.unwrap_or((0, 0));
            pauses = Some((p.0 + count, p.1 + ms));
        }
    }
    let (pc, pm) = pauses.unwrap_or(all);
    serde_json::json!({
        "gc": opts.gc.name(),
        "heap": opts.heap,
        "collectors": collectors,
        "pauses": pc,
        "pause_ms": pm,
        "heap_used": now["heap_used"],
        "heap_max": now["heap_max"],
        "transactions_total": now["transactions"],
    })
}

/// Draws transactions from SPECjbb2005's mix with TPC-C's input
/// distributions.
pub struct MiddlewareClient {
    warehouses: u16,
    rng: Xoshiro256PlusPlus,
}

impl MiddlewareClient {
    /// A client spreading requests over warehouses 1..=`warehouses`; `seed` fixes the sequence.
    pub fn new(warehouses: u16, seed: u64) -> Self {
        MiddlewareClient {
            warehouses,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        }
    }

    /// TPC-C's NURand(A, x, y) with C = 0: skewed towards some values, as
    /// real customers and items are.
    fn nurand(&mut self, a: u32, x: u32, y: u32) -> u32 {
        ((self.rng.gen_range(0..=a) | self.rng.gen_range(x..=y)) % (y - x + 1)) + x
    }

    /// A warehouse other than `home` (or `home` when there is only one).
    fn remote(&mut self, home: u16) -> u16 {
        if self.warehouses == 1 {
            return home;
        }
        let w = self.rng.gen_range(1..self.warehouses);
        if w >= home {
            w + 1
        } else {
            w
        }
    }

    fn selector(&mut self, out: &mut Vec<u8>) {
        // TPC-C: 60 % of lookups are by last name.
        if self.rng.gen_bool(0.6) {
            out.push(1);
            out.extend_from_slice(&(self.nurand(255, 0, 999) as u16).to_le_bytes());
        } else {
            out.push(0);
            out.extend_from_slice(&(self.nurand(1023, 1, CUSTOMERS.into()) as u16).to_le_bytes());
        }
    }

    /// Writes a request of type `tx` with freshly drawn inputs.
    pub fn request(&mut self, tx: Tx, out: &mut Vec<u8>) {
        let w = self.rng.gen_range(1..=self.warehouses);
        let d = self.rng.gen_range(1..=DISTRICTS);
        out.push(tx as u8);
        out.extend_from_slice(&w.to_le_bytes());
        out.push(d);
        match tx {
            Tx::NewOrder => {
                let c = self.nurand(1023, 1, CUSTOMERS.into()) as u16;
                out.extend_from_slice(&c.to_le_bytes());
                let n = self.rng.gen_range(5..=15u8);
                out.push(n);
                for _ in 0..n {
                    let item = self.nurand(8191, 1, ITEMS.into()) as u16;
                    // 1 % of lines are supplied by another warehouse.
                    let supply = if self.rng.gen_bool(0.01) {
                        self.remote(w)
                    } else {
                        w
                    };
                    out.extend_from_slice(&item.to_le_bytes());
                    out.extend_from_slice(&supply.to_le_bytes());
                    out.push(self.rng.gen_range(1..=10));
                }
            }
            Tx::Payment => {
                // 15 % of payments are by a customer of another warehouse.
                let cw = if self.rng.gen_bool(0.15) {
                    self.remote(w)
                } else {
                    w
                };
                let cd = if cw == w {
                    d
                } else {
                    self.rng.gen_range(1..=DISTRICTS)
                };
                out.extend_from_slice(&cw.to_le_bytes());
                out.push(cd);
                let cents: u32 = self.rng.gen_range(100..=500_000);
                out.extend_from_slice(&cents.to_le_bytes());
                self.selector(out);
            }
            Tx::OrderStatus | Tx::CustomerReport => self.selector(out),
            Tx::Delivery => out.push(self.rng.gen_range(1..=10)),
            Tx::StockLevel => out.push(self.rng.gen_range(10..=20)),
        }
    }
}

impl Client for MiddlewareClient {
    fn next_request(&mut self, out: &mut Vec<u8>) {
        let total: u32 = MIX.iter().map(|m| m.1).sum();
        let mut card = self.rng.gen_range(0..total);
        let mut tx = Tx::NewOrder;
        for (t, n) in MIX {
            if card < n {
                tx = t;
                break;
            }
            card -= n;
        }
        self.request(tx, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_are_checked() {
        let ok =
            Config::from_params(&Params::parse(["gc=zgc", "heap=1g", "warehouses=4"]).unwrap())
                .unwrap();
        assert_eq!(ok.jvm.gc, Gc::Z);
        for bad in [
            "gc=cms",
            "heap=lots",
            "heap=12",
            "warehouses=0",
            "warehouses=100",
            "wh=1",
        ] {
            let e = Config::from_params(&Params::parse([bad]).unwrap())
                .unwrap_err()
                .to_string();
            let key = bad.split('=').next().unwrap();
            assert!(e.contains(key), "{bad}: {e}");
        }
    }

    #[test]
    fn client_follows_the_mix_and_is_seeded() {
        let mut c = MiddlewareClient::new(3, 9);
        let mut counts = [0u32; 6];
        let mut first = Vec::new();
        for i in 0..24_000 {
            let mut r = Vec::new();
            c.next_request(&mut r);
            counts[r[0] as usize] += 1;
            let w = u16::from_le_bytes([r[1], r[2]]);
            assert!((1..=3).contains(&w) && (1..=DISTRICTS).contains(&r[3]));
            if i < 10 {
                first.push(r);
            }
        }
        // 10/24 expected for the big two, 1/24 for the others (±15 %).
        for (i, (_, n)) in MIX.iter().enumerate() {
            let want = 1000.0 * *n as f64;
            assert!((counts[i] as f64 - want).abs() < 0.15 * want, "{counts:?}");
        }
        let mut again = MiddlewareClient::new(3, 9);
        for r in first {
            let mut s = Vec::new();
            again.next_request(&mut s);
            assert_eq!(r, s);
        }
    }
}
