//! End-to-end checks of the TPC-C apps on a real one-warehouse database: the
//! generated data follows the spec, answers are right, New-Order ids are
//! consecutive per district even with several workers, the invalid-item
//! New-Order rolls back completely, and consistency conditions 1–4 hold after
//! a few thousand transactions in every storage and lock configuration.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use taillab_core::{App, DataCtx, Params, Worker};
use taillab_oltp::txn::{CustomerRef, Line};
use taillab_oltp::{LockMode, Oltp, Storage, TpccClient, TpccServer, Txn, TxnResult, STANDARD_MIX};

/// The prepared database, built once per test process (and kept in the target
/// folder between runs, since preparing is idempotent).
fn prepared() -> &'static PathBuf {
    static DB: OnceLock<PathBuf> = OnceLock::new();
    DB.get_or_init(|| {
        let ctx = data_ctx();
        Oltp::prepared_db(&ctx, 1).expect("prepare one warehouse")
    })
}

fn data_ctx() -> DataCtx {
    DataCtx {
        root: PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("oltp-data"),
    }
}

fn server(storage: &Storage, lock: LockMode) -> TpccServer {
    TpccServer::open(prepared(), 1, storage, lock).expect("open server")
}

fn disk() -> Storage {
    Storage::Disk {
        scratch_root: data_ctx().root.join(".scratch"),
        cache_mb: 16,
    }
}

#[test]
fn generated_data_follows_the_spec() {
    let s = server(&Storage::Memory, LockMode::Mutex);
    let q = |sql: &str| s.query_i64(sql).unwrap();
    assert_eq!(q("SELECT COUNT(*) FROM item"), 100_000);
    assert_eq!(q("SELECT COUNT(*) FROM stock"), 100_000);
    assert_eq!(q("SELECT COUNT(*) FROM district"), 10);
    assert_eq!(q("SELECT COUNT(*) FROM customer"), 30_000);
    assert_eq!(q("SELECT COUNT(*) FROM history"), 30_000);
    assert_eq!(q("SELECT COUNT(*) FROM orders"), 30_000);
    assert_eq!(q("SELECT COUNT(*) FROM new_order"), 9_000);
    assert_eq!(q("SELECT MIN(no_o_id) FROM new_order"), 2101);
    let lines = q("SELECT COUNT(*) FROM order_line");
    assert!(
        (5 * 30_000..=15 * 30_000).contains(&lines),
        "{lines} order lines"
    );
    // Every customer has exactly one initial order.
    assert_eq!(
        q("SELECT COUNT(DISTINCT o_d_id * 10000 + o_c_id) FROM orders"),
        30_000
    );
    // About 10 % of items carry "ORIGINAL", and 10 % of customers have bad credit.
    let orig = q("SELECT COUNT(*) FROM item WHERE i_data LIKE '%ORIGINAL%'");
    assert!((9_000..11_000).contains(&orig), "{orig} ORIGINAL items");
    let bc = q("SELECT COUNT(*) FROM customer WHERE c_credit = 'BC'");
    assert!((2_600..3_400).contains(&bc), "{bc} BC customers");
    // Every last name occurs in every district (the first 1000 customers).
    assert_eq!(
        q("SELECT COUNT(DISTINCT c_d_id || c_last) FROM customer WHERE c_id <= 1000"),
        10_000
    );
    assert!(s.check_consistency().unwrap().is_empty());
}

/// Runs `n` client transactions on one worker, checking each answer against the
/// database as it goes; returns the committed New-Order ids per district.
fn run_checked(s: &TpccServer, seed: u64, n: usize, mix: [u32; 5]) -> BTreeMap<u32, Vec<u32>> {
    let mut w = s.tpcc_worker().unwrap();
    let mut c = TpccClient::new(1, mix, seed);
    let mut ids: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for _ in 0..n {
        let txn = c.next_txn();
        match (&txn, w.run(&txn).unwrap()) {
            (
                Txn::NewOrder { d, lines, .. },
                TxnResult::NewOrder {
                    o_id,
                    ol_cnt,
                    total,
                    rolled_back,
                },
            ) => {
                assert_eq!(ol_cnt as usize, lines.len());
                assert_eq!(rolled_back, lines.iter().any(|l| l.i_id > 100_000));
                if !rolled_back {
                    assert!(total > 0);
                    ids.entry(*d).or_default().push(o_id);
                }
            }
            (Txn::Payment { .. }, TxnResult::Payment { c_id, .. }) => {
                assert!((1..=3000).contains(&c_id))
            }
            (Txn::OrderStatus { .. }, TxnResult::OrderStatus { o_id, ol_cnt, .. }) => {
                assert!(
                    o_id >= 1 && (5..=15).contains(&ol_cnt),
                    "order {o_id} with {ol_cnt} lines"
                )
            }
            (Txn::Delivery { .. }, TxnResult::Delivery { delivered }) => assert_eq!(delivered, 10),
            (Txn::StockLevel { .. }, TxnResult::StockLevel { low_stock }) => {
                assert!(low_stock <= 300)
            }
            (t, r) => panic!("{t:?} answered with {r:?}"),
        }
    }
    ids
}

/// New-Order ids of each district must be exactly 3001, 3002, … with no gap
/// or repeat: a gap means a rollback leaked, a repeat means two writers
/// interleaved inside SQLite.
fn assert_consecutive(ids: BTreeMap<u32, Vec<u32>>) {
    for (d, mut v) in ids {
        v.sort_unstable();
        let want: Vec<u32> = (3001..3001 + v.len() as u32).collect();
        assert_eq!(v, want, "district {d}");
    }
}

#[test]
fn single_worker_answers_and_consistency_in_memory() {
    let s = server(&Storage::Memory, LockMode::Mutex);
    let ids = run_checked(&s, 11, 3000, STANDARD_MIX);
    let committed: usize = ids.values().map(Vec::len).sum();
    assert_consecutive(ids);
    assert_eq!(
        s.query_i64("SELECT COUNT(*) FROM orders").unwrap(),
        30_000 + committed as i64
    );
    let v = s.check_consistency().unwrap();
    assert!(v.is_empty(), "{v:#?}");
}

#[test]
fn new_order_total_and_payment_balance_match_the_database() {
    let s = server(&Storage::Memory, LockMode::Mutex);
    let mut w = s.tpcc_worker().unwrap();
    let lines = vec![
        Line {
            i_id: 1,
            supply_w: 1,
            qty: 3,
        },
        Line {
            i_id: 2,
            supply_w: 1,
            qty: 10,
        },
    ];
    let TxnResult::NewOrder {
        o_id,
        total,
        rolled_back: false,
        ..
    } = w
        .run(&Txn::NewOrder {
            w: 1,
            d: 4,
            c: 7,
            lines,
        })
        .unwrap()
    else {
        panic!("New-Order failed");
    };
    assert_eq!(o_id, 3001);
    let sum = s.query_i64("SELECT 3 * (SELECT i_price FROM item WHERE i_id = 1) + 10 * (SELECT i_price FROM item WHERE i_id = 2)").unwrap();
    let stored = s
        .query_i64("SELECT SUM(ol_amount) FROM order_line WHERE ol_d_id = 4 AND ol_o_id = 3001")
        .unwrap();
    assert_eq!(sum, stored);
    let disc = s
        .query_i64("SELECT c_discount FROM customer WHERE c_d_id = 4 AND c_id = 7")
        .unwrap() as f64;
    let tax = s
        .query_i64("SELECT w_tax + d_tax FROM warehouse, district WHERE d_id = 4")
        .unwrap() as f64;
    let want = (sum as f64 * (1.0 - disc / 1e4) * (1.0 + tax / 1e4)).round() as i64;
    assert_eq!(total, want);

    let before = s
        .query_i64("SELECT c_balance FROM customer WHERE c_d_id = 2 AND c_id = 9")
        .unwrap();
    let pay = Txn::Payment {
        w: 1,
        d: 5,
        c_w: 1,
        c_d: 2,
        customer: CustomerRef::Id(9),
        amount: 12_345,
    };
    assert_eq!(
        w.run(&pay).unwrap(),
        TxnResult::Payment {
            c_id: 9,
            c_balance: before - 12_345
        }
    );
    // By last name: the customer at position ceil(n/2) of those sorted by first name.
    let name = taillab_oltp::rng::last_name(42);
    let n = s
        .query_i64(&format!(
            "SELECT COUNT(*) FROM customer WHERE c_d_id = 3 AND c_last = '{name}'"
        ))
        .unwrap();
    let want_id = s
        .query_i64(&format!(
            "SELECT c_id FROM customer WHERE c_d_id = 3 AND c_last = '{name}' ORDER BY c_first LIMIT 1 OFFSET {}",
            (n - 1) / 2
        ))
        .unwrap();
    let pay = Txn::Payment {
        w: 1,
        d: 3,
        c_w: 1,
        c_d: 3,
        customer: CustomerRef::LastName(42),
        amount: 100,
    };
    let TxnResult::Payment { c_id, .. } = w.run(&pay).unwrap() else {
        panic!()
    };
    assert_eq!(i64::from(c_id), want_id);
    let ytd = s.query_i64("SELECT w_ytd FROM warehouse").unwrap();
    assert_eq!(ytd, 30_000_000 + 12_345 + 100);
    assert!(s.check_consistency().unwrap().is_empty());
}

#[test]
fn invalid_item_rolls_the_whole_new_order_back() {
    let s = server(&Storage::Memory, LockMode::Mutex);
    let mut w = s.tpcc_worker().unwrap();
    let stock = || {
        s.query_i64("SELECT s_ytd * 1000 + s_order_cnt FROM stock WHERE s_i_id = 5")
            .unwrap()
    };
    let before = (
        stock(),
        s.query_i64("SELECT COUNT(*) FROM order_line").unwrap(),
    );
    let lines = vec![
        Line {
            i_id: 5,
            supply_w: 1,
            qty: 4,
        },
        Line {
            i_id: 100_001,
            supply_w: 1,
            qty: 1,
        },
    ];
    let r = w
        .run(&Txn::NewOrder {
            w: 1,
            d: 6,
            c: 1,
            lines,
        })
        .unwrap();
    assert_eq!(
        r,
        TxnResult::NewOrder {
            o_id: 3001,
            ol_cnt: 2,
            total: 0,
            rolled_back: true
        }
    );
    assert_eq!(
        (
            stock(),
            s.query_i64("SELECT COUNT(*) FROM order_line").unwrap()
        ),
        before
    );
    assert_eq!(
        s.query_i64("SELECT d_next_o_id FROM district WHERE d_id = 6")
            .unwrap(),
        3001
    );
    // The id is not burnt: the next New-Order of the district gets it.
    let lines = vec![Line {
        i_id: 5,
        supply_w: 1,
        qty: 4,
    }];
    let TxnResult::NewOrder {
        o_id, rolled_back, ..
    } = w
        .run(&Txn::NewOrder {
            w: 1,
            d: 6,
            c: 1,
            lines,
        })
        .unwrap()
    else {
        panic!()
    };
    assert_eq!((o_id, rolled_back), (3001, false));
    assert_eq!(stock(), before.0 + 4 * 1000 + 1);
    assert!(s.check_consistency().unwrap().is_empty());
}

#[test]
fn bad_requests_are_refused_with_a_message() {
    let s = server(&Storage::Memory, LockMode::Mutex);
    let mut w = s.tpcc_worker().unwrap();
    let mut resp = Vec::new();
    let e = w.handle(&[7, 1], &mut resp).unwrap_err().to_string();
    assert!(e.contains("unknown transaction type"), "{e}");
    let mut req = Vec::new();
    Txn::Delivery { w: 2, carrier: 1 }.encode(&mut req);
    let e = w.handle(&req, &mut resp).unwrap_err().to_string();
    assert!(e.contains("warehouses="), "{e}");
}

/// Several workers, each with its own client; New-Order ids stay consecutive
/// per district and the conditions hold, so the lock mode isolates writers.
fn multi_worker(storage: Storage, lock: LockMode, workers: u64, per_worker: usize) {
    let s = Arc::new(server(&storage, lock));
    let all: Vec<BTreeMap<u32, Vec<u32>>> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..workers)
            .map(|i| {
                let s = &s;
                // Delivery answers 10 only while undelivered orders last, which
                // they do for this many transactions (900 per district).
                sc.spawn(move || run_checked(s, 100 + i, per_worker, STANDARD_MIX))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut merged: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for m in all {
        for (d, v) in m {
            merged.entry(d).or_default().extend(v);
        }
    }
    assert_consecutive(merged);
    let v = s.check_consistency().unwrap();
    assert!(v.is_empty(), "{lock:?}: {v:#?}");
}

#[test]
fn three_workers_gate_in_memory() {
    multi_worker(Storage::Memory, LockMode::Gate, 3, 1000);
}

#[test]
fn three_workers_sqlite_busy_timeout_in_memory() {
    multi_worker(Storage::Memory, LockMode::Sqlite, 3, 700);
}

#[test]
fn two_workers_mutex_in_memory() {
    multi_worker(Storage::Memory, LockMode::Mutex, 2, 1000);
}

#[test]
fn on_disk_wal_two_workers_then_scratch_is_removed() {
    let s = server(&disk(), LockMode::Gate);
    let dir = {
        let report = taillab_core::Server::report(&s);
        let db = report["database"].as_str().unwrap().to_string();
        let path = db
            .split_once("on disk at ")
            .unwrap()
            .1
            .split(' ')
            .next()
            .unwrap()
            .to_string();
        PathBuf::from(path).parent().unwrap().to_path_buf()
    };
    assert!(dir.join("tpcc.sqlite").exists());
    drop(s);
    assert!(!dir.exists(), "scratch {dir:?} left behind");
    // A folder left by a process that is gone is cleaned up by the next server.
    let root = data_ctx().root.join(".scratch");
    let stale = root.join("oltp-disk-4194305-0");
    std::fs::create_dir_all(&stale).unwrap();
    drop(server(&disk(), LockMode::Gate));
    assert!(!stale.exists(), "stale scratch {stale:?} kept");
    // Each commit syncs the WAL, so keep this run short.
    multi_worker(disk(), LockMode::Gate, 2, 150);
}

#[test]
fn the_app_api_prepares_serves_and_answers() {
    let apps = taillab_oltp::apps();
    let names: Vec<&str> = apps.iter().map(|a| a.name()).collect();
    assert_eq!(names, ["oltp-mem", "oltp-disk"]);
    prepared();
    let app: &Arc<dyn App> = &apps[1];
    let params = Params::parse(["warehouses=1", "mix=1,1,1,1,1"]).unwrap();
    let server = app.server(&data_ctx(), &params, 1).unwrap();
    let mut w = server.worker(0).unwrap();
    let mut c = app.client(&data_ctx(), &params, 5).unwrap();
    let (mut req, mut resp) = (Vec::new(), Vec::new());
    for _ in 0..50 {
        req.clear();
        resp.clear();
        c.next_request(&mut req);
        w.handle(&req, &mut resp).unwrap();
        TxnResult::decode(&resp).unwrap();
    }
    let r = server.report();
    let done: u64 = r["transactions"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(done, 50);
}

#[test]
fn the_consistency_check_catches_each_broken_condition() {
    let s = server(&Storage::Memory, LockMode::Mutex);
    for sql in [
        "UPDATE district SET d_ytd = d_ytd + 1 WHERE d_id = 1 RETURNING d_ytd",
        "UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_id = 2 RETURNING d_id",
        "DELETE FROM new_order WHERE no_d_id = 3 AND no_o_id = 2500 RETURNING no_o_id",
        "DELETE FROM order_line WHERE ol_d_id = 4 AND ol_o_id = 10 AND ol_number = 1 RETURNING ol_number",
    ] {
        s.query_i64(sql).unwrap();
    }
    let v = s.check_consistency().unwrap();
    for (cond, district) in [
        ("condition 1", "warehouse 1"),
        ("condition 2", "district 1/2"),
        ("condition 3", "district 1/3"),
        ("condition 4", "district 1/4"),
    ] {
        assert!(
            v.iter()
                .any(|l| l.starts_with(cond) && l.contains(district)),
            "{cond} not caught: {v:#?}"
        );
    }
    assert_eq!(v.len(), 4, "{v:#?}");
}

#[test]
fn delivery_order_status_and_stock_level_answers_match_the_database() {
    let s = server(&Storage::Memory, LockMode::Mutex);
    let mut w = s.tpcc_worker().unwrap();
    let q = |sql: &str| s.query_i64(sql).unwrap();
    let oldest = q("SELECT MIN(no_o_id) FROM new_order WHERE no_d_id = 7");
    let c = q(&format!(
        "SELECT o_c_id FROM orders WHERE o_d_id = 7 AND o_id = {oldest}"
    ));
    let owed = q(&format!(
        "SELECT SUM(ol_amount) FROM order_line WHERE ol_d_id = 7 AND ol_o_id = {oldest}"
    ));
    let bal = format!("SELECT c_balance FROM customer WHERE c_d_id = 7 AND c_id = {c}");
    let before = q(&bal);
    assert_eq!(
        w.run(&Txn::Delivery { w: 1, carrier: 6 }).unwrap(),
        TxnResult::Delivery { delivered: 10 }
    );
    assert_eq!(
        q("SELECT MIN(no_o_id) FROM new_order WHERE no_d_id = 7"),
        oldest + 1
    );
    assert_eq!(q("SELECT COUNT(*) FROM new_order"), 9_000 - 10);
    assert_eq!(
        q(&format!(
            "SELECT o_carrier_id FROM orders WHERE o_d_id = 7 AND o_id = {oldest}"
        )),
        6
    );
    let undelivered = format!(
        "SELECT COUNT(*) FROM order_line WHERE ol_d_id = 7 AND ol_o_id = {oldest} AND ol_delivery_d IS NULL"
    );
    assert_eq!(q(&undelivered), 0);
    assert_eq!(q(&bal), before + owed);

    // Order-Status: the customer's newest order and its line count.
    let TxnResult::OrderStatus {
        c_id,
        o_id,
        ol_cnt,
        c_balance,
    } = w
        .run(&Txn::OrderStatus {
            w: 1,
            d: 7,
            customer: CustomerRef::Id(c as u32),
        })
        .unwrap()
    else {
        panic!()
    };
    assert_eq!((i64::from(c_id), c_balance), (c, before + owed));
    assert_eq!(
        i64::from(o_id),
        q(&format!(
            "SELECT MAX(o_id) FROM orders WHERE o_d_id = 7 AND o_c_id = {c}"
        ))
    );
    assert_eq!(
        i64::from(ol_cnt),
        q(&format!(
            "SELECT o_ol_cnt FROM orders WHERE o_d_id = 7 AND o_id = {o_id}"
        ))
    );

    // Stock-Level, against the same question asked another way.
    for (d, t) in [(1, 10), (2, 15), (3, 20)] {
        let TxnResult::StockLevel { low_stock } = w
            .run(&Txn::StockLevel {
                w: 1,
                d,
                threshold: t,
            })
            .unwrap()
        else {
            panic!()
        };
        let want = q(&format!(
            "SELECT COUNT(*) FROM stock WHERE s_w_id = 1 AND s_quantity < {t} AND s_i_id IN
               (SELECT ol_i_id FROM order_line, district
                WHERE ol_d_id = {d} AND d_id = {d} AND ol_o_id BETWEEN d_next_o_id - 20 AND d_next_o_id - 1)"
        ));
        assert_eq!(i64::from(low_stock), want, "district {d} threshold {t}");
    }
}

#[test]
fn two_warehouses_remote_lines_and_payments_keep_consistency() {
    let ctx = data_ctx();
    let db = Oltp::prepared_db(&ctx, 2).expect("prepare two warehouses");
    let s = TpccServer::open(&db, 2, &Storage::Memory, LockMode::Mutex).unwrap();
    let mut w = s.tpcc_worker().unwrap();
    let mut c = TpccClient::new(2, [10, 10, 1, 1, 1], 3);
    for _ in 0..2000 {
        w.run(&c.next_txn()).unwrap();
    }
    let q = |sql: &str| s.query_i64(sql).unwrap();
    assert!(
        q("SELECT SUM(s_remote_cnt) FROM stock") > 0,
        "no remote order line was applied"
    );
    assert!(
        q("SELECT COUNT(*) FROM history WHERE h_c_w_id != h_w_id") > 0,
        "no remote payment"
    );
    assert!(q("SELECT COUNT(*) FROM orders WHERE o_all_local = 0") > 0);
    let v = s.check_consistency().unwrap();
    assert!(v.is_empty(), "{v:#?}");
}

#[test]
fn same_seed_gives_the_same_answers_in_memory_and_on_disk() {
    let answers = |storage: &Storage, lock: LockMode| -> Vec<TxnResult> {
        let s = server(storage, lock);
        let mut w = s.tpcc_worker().unwrap();
        let mut c = TpccClient::new(1, STANDARD_MIX, 77);
        (0..300).map(|_| w.run(&c.next_txn()).unwrap()).collect()
    };
    let mem = answers(&Storage::Memory, LockMode::Mutex);
    assert_eq!(mem, answers(&Storage::Memory, LockMode::Gate));
    assert_eq!(mem, answers(&disk(), LockMode::Gate));
}
