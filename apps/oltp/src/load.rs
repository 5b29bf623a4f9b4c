//! The TPC-C schema and the initial database (clauses 1.3 and 4.3.3.1).
//!
//! Money is stored as integer cents and rates (taxes, discounts) as integer
//! ten-thousandths, so the consistency conditions (sums of YTD amounts) compare
//! exact integers instead of floats that drift with every addition.
//!
//! The tables that are only reached by their primary key are `WITHOUT ROWID`
//! (clustered on the key: one B-tree walk per lookup instead of index then
//! table). CUSTOMER keeps a rowid because its 300–500-byte C_DATA makes rows too
//! wide for a clustered B-tree, and HISTORY has no key at all.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rusqlite::{params, Connection, Statement};
use std::path::Path;

use crate::error::OltpError;
use crate::rng::{self, TpccRng};

/// Rows of ITEM and of STOCK per warehouse.
pub const ITEMS: u32 = 100_000;
/// Districts per warehouse (ids 1..=10).
pub const DISTRICTS: u32 = 10;
/// Customers per district (ids 1..=3000).
pub const CUSTOMERS: u32 = 3_000;
/// Orders loaded per district; the last 900 of them are still undelivered.
pub const ORDERS: u32 = 3_000;
/// Id of the first undelivered order per district at load: orders
/// 2101..=[`ORDERS`] start in NEW-ORDER.
pub const FIRST_UNDELIVERED: u32 = 2_101;
/// The generator's seed: the initial database is the same on every machine.
pub const GEN_SEED: u64 = 0x70CC_DA7A;

/// The nine TPC-C tables (money in cents, rates in ten-thousandths) and
/// `tpcc_meta`, which records the scale and the load-time NURand C.
pub const SCHEMA: &str = "
CREATE TABLE warehouse (
  w_id INTEGER PRIMARY KEY, w_name TEXT, w_street_1 TEXT, w_street_2 TEXT, w_city TEXT,
  w_state TEXT, w_zip TEXT, w_tax INTEGER, w_ytd INTEGER);
CREATE TABLE district (
  d_w_id INTEGER, d_id INTEGER, d_name TEXT, d_street_1 TEXT, d_street_2 TEXT, d_city TEXT,
  d_state TEXT, d_zip TEXT, d_tax INTEGER, d_ytd INTEGER, d_next_o_id INTEGER,
  PRIMARY KEY (d_w_id, d_id)) WITHOUT ROWID;
CREATE TABLE customer (
  c_w_id INTEGER, c_d_id INTEGER, c_id INTEGER, c_first TEXT, c_middle TEXT, c_last TEXT,
  c_street_1 TEXT, c_street_2 TEXT, c_city TEXT, c_state TEXT, c_zip TEXT, c_phone TEXT,
  c_since INTEGER, c_credit TEXT, c_credit_lim INTEGER, c_discount INTEGER, c_balance INTEGER,
  c_ytd_payment INTEGER, c_payment_cnt INTEGER, c_delivery_cnt INTEGER, c_data TEXT,
  PRIMARY KEY (c_w_id, c_d_id, c_id));
CREATE TABLE history (
  h_c_id INTEGER, h_c_d_id INTEGER, h_c_w_id INTEGER, h_d_id INTEGER, h_w_id INTEGER,
  h_date INTEGER, h_amount INTEGER, h_data TEXT);
CREATE TABLE new_order (
  no_w_id INTEGER, no_d_id INTEGER, no_o_id INTEGER,
  PRIMARY KEY (no_w_id, no_d_id, no_o_id)) WITHOUT ROWID;
CREATE TABLE orders (
  o_w_id INTEGER, o_d_id INTEGER, o_id INTEGER, o_c_id INTEGER, o_entry_d INTEGER,
  o_carrier_id INTEGER, o_ol_cnt INTEGER, o_all_local INTEGER,
  PRIMARY KEY (o_w_id, o_d_id, o_id)) WITHOUT ROWID;
CREATE TABLE order_line (
  ol_w_id INTEGER, ol_d_id INTEGER, ol_o_id INTEGER, ol_number INTEGER, ol_i_id INTEGER,
  ol_supply_w_id INTEGER, ol_delivery_d INTEGER, ol_quantity INTEGER, ol_amount INTEGER,
  ol_dist_info TEXT,
  PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number)) WITHOUT ROWID;
CREATE TABLE item (
  i_id INTEGER PRIMARY KEY, i_im_id INTEGER, i_name TEXT, i_price INTEGER, i_data TEXT);
CREATE TABLE stock (
  s_w_id INTEGER, s_i_id INTEGER, s_quantity INTEGER,
  s_dist_01 TEXT, s_dist_02 TEXT, s_dist_03 TEXT, s_dist_04 TEXT, s_dist_05 TEXT,
  s_dist_06 TEXT, s_dist_07 TEXT, s_dist_08 TEXT, s_dist_09 TEXT, s_dist_10 TEXT,
  s_ytd INTEGER, s_order_cnt INTEGER, s_remote_cnt INTEGER, s_data TEXT,
  PRIMARY KEY (s_w_id, s_i_id)) WITHOUT ROWID;
CREATE TABLE tpcc_meta (key TEXT PRIMARY KEY, value INTEGER);
";

/// Secondary indexes, built after the bulk load (faster than maintaining them row by row).
/// Payment and Order-Status find customers by last name (sorted by first name),
/// and Order-Status finds a customer's newest order.
pub const INDEXES: &str = "
CREATE INDEX customer_by_name ON customer (c_w_id, c_d_id, c_last, c_first);
CREATE INDEX orders_by_customer ON orders (o_w_id, o_d_id, o_c_id, o_id);
";

/// Seconds since the epoch, the unit of every date column.
pub fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Writes the initial database for `warehouses` warehouses to `path`.
/// `progress` is called with the fraction done (0..=1) now and then.
pub fn build(path: &Path, warehouses: u32, progress: &mut dyn FnMut(f64)) -> Result<(), OltpError> {
    let _ = std::fs::remove_file(path);
    let conn = Connection::open(path)?;
    // The file is thrown away if the build fails, so no journal and no syncs.
    conn.execute_batch(
        "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-262144;",
    )?;
    conn.execute_batch(SCHEMA)?;
    let mut rng = TpccRng::seed_from_u64(GEN_SEED);
    let now = now_secs();
    conn.execute_batch("BEGIN")?;
    conn.execute(
        "INSERT INTO tpcc_meta VALUES ('warehouses', ?1), ('c_last_load', ?2), ('format', 1)",
        params![warehouses, rng::C_LAST_LOAD],
    )?;
    load_items(&conn, &mut rng)?;
    progress(0.05);
    for w in 1..=warehouses {
        load_warehouse(&conn, &mut rng, w, now)?;
        progress(0.05 + 0.9 * f64::from(w) / f64::from(warehouses));
    }
    conn.execute_batch("COMMIT")?;
    conn.execute_batch(INDEXES)?;
    // Rollback-journal mode in the file: oltp-disk switches its copy to WAL,
    // oltp-mem reads it into memory.
    conn.execute_batch("PRAGMA journal_mode=DELETE; ANALYZE;")?;
    progress(1.0);
    Ok(())
}

fn load_items(conn: &Connection, rng: &mut TpccRng) -> Result<(), OltpError> {
    let mut ins = conn.prepare("INSERT INTO item VALUES (?1, ?2, ?3, ?4, ?5)")?;
    for i in 1..=ITEMS {
        ins.execute(params![
            i,
            rng::uniform(rng, 1, 10_000),
            rng::astring(rng, 14, 24),
            rng::uniform(rng, 100, 10_000),
            rng::data_with_original(rng),
        ])?;
    }
    Ok(())
}

fn address(rng: &mut TpccRng) -> [String; 5] {
    [
        rng::astring(rng, 10, 20),
        rng::astring(rng, 10, 20),
        rng::astring(rng, 10, 20),
        rng::state(rng),
        rng::zip(rng),
    ]
}

/// Loads warehouse `w`: its row, its stock, then each district with its customers and orders.
fn load_warehouse(conn: &Connection, rng: &mut TpccRng, w: u32, now: i64) -> Result<(), OltpError> {
    let [s1, s2, city, st, zip] = address(rng);
    conn.execute(
        "INSERT INTO warehouse VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 30000000)",
        params![
            w,
            rng::astring(rng, 6, 10),
            s1,
            s2,
            city,
            st,
            zip,
            rng::uniform(rng, 0, 2000)
        ],
    )?;
    let mut stock = conn.prepare(
        "INSERT INTO stock VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, 0, 0, 0, ?14)",
    )?;
    for i in 1..=ITEMS {
        let d: Vec<String> = (0..10).map(|_| rng::astring(rng, 24, 24)).collect();
        stock.execute(params![
            w,
            i,
            rng::uniform(rng, 10, 100),
            d[0],
            d[1],
            d[2],
            d[3],
            d[4],
            d[5],
            d[6],
            d[7],
            d[8],
            d[9],
            rng::data_with_original(rng),
        ])?;
    }
    let mut cust = conn.prepare(
        "INSERT INTO customer VALUES (?1, ?2, ?3, ?4, 'OE', ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13,
         5000000, ?14, -1000, 1000, 1, 0, ?15)",
    )?;
    let mut hist = conn.prepare("INSERT INTO history VALUES (?1, ?2, ?3, ?2, ?3, ?4, 1000, ?5)")?;
    let mut order = conn.prepare("INSERT INTO orders VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 1)")?;
    let mut line =
        conn.prepare("INSERT INTO order_line VALUES (?1, ?2, ?3, ?4, ?5, ?1, ?6, 5, ?7, ?8)")?;
    let mut new_order = conn.prepare("INSERT INTO new_order VALUES (?1, ?2, ?3)")?;
    for d in 1..=DISTRICTS {
        let [s1, s2, city, st, zip] = address(rng);
        conn.execute(
            "INSERT INTO district VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 3000000, ?10)",
            params![
                w,
                d,
                rng::astring(rng, 6, 10),
                s1,
                s2,
                city,
                st,
                zip,
                rng::uniform(rng, 0, 2000),
                ORDERS + 1
            ],
        )?;
        load_customers(&mut cust, &mut hist, rng, w, d, now)?;
        load_orders([&mut order, &mut line, &mut new_order], rng, w, d, now)?;
    }
    Ok(())
}

/// District `d`'s customers and one history row each.
fn load_customers(
    cust: &mut Statement,
    hist: &mut Statement,
    rng: &mut TpccRng,
    w: u32,
    d: u32,
    now: i64,
) -> Result<(), OltpError> {
    for c in 1..=CUSTOMERS {
        // The first 1000 customers get every last name once, so a lookup
        // by any name in 0..=999 finds at least one customer.
        let last = if c <= 1000 {
            rng::last_name(c - 1)
        } else {
            rng::last_name(rng::nurand(rng, 255, 0, 999, rng::C_LAST_LOAD))
        };
        let [s1, s2, city, st, zip] = address(rng);
        let credit = if rng.gen_range(0..10) == 0 {
            "BC"
        } else {
            "GC"
        };
        cust.execute(params![
            w,
            d,
            c,
            rng::astring(rng, 8, 16),
            last,
            s1,
            s2,
            city,
            st,
            zip,
            rng::nstring(rng, 16, 16),
            now,
            credit,
            rng::uniform(rng, 0, 5000),
            rng::astring(rng, 300, 500),
        ])?;
        hist.execute(params![c, d, w, now, rng::astring(rng, 12, 24)])?;
    }
    Ok(())
}

/// District `d`'s initial orders, their lines, and the undelivered ones' new-order rows.
fn load_orders(
    [order, line, new_order]: [&mut Statement; 3],
    rng: &mut TpccRng,
    w: u32,
    d: u32,
    now: i64,
) -> Result<(), OltpError> {
    // Each customer places exactly one of the initial orders, in random order.
    let mut perm: Vec<u32> = (1..=CUSTOMERS).collect();
    perm.shuffle(rng);
    for o in 1..=ORDERS {
        let delivered = o < FIRST_UNDELIVERED;
        let ol_cnt = rng::uniform(rng, 5, 15);
        let carrier = delivered.then(|| rng::uniform(rng, 1, 10));
        order.execute(params![
            w,
            d,
            o,
            perm[(o - 1) as usize],
            now,
            carrier,
            ol_cnt
        ])?;
        for n in 1..=ol_cnt {
            let amount = if delivered {
                0
            } else {
                rng::uniform(rng, 1, 999_999)
            };
            line.execute(params![
                w,
                d,
                o,
                n,
                rng::uniform(rng, 1, ITEMS),
                delivered.then_some(now),
                amount,
                rng::astring(rng, 24, 24),
            ])?;
        }
        if !delivered {
            new_order.execute(params![w, d, o])?;
        }
    }
    Ok(())
}
