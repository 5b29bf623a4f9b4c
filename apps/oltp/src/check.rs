//! TPC-C consistency conditions 1–4 (clause 3.3.2), checked with SQL.
//!
//! They hold in the initial database and must still hold after any number of
//! committed transactions, so a lost update, a half-applied or wrongly
//! rolled-back New-Order, or a Delivery that skipped a step shows up here.

use rusqlite::Connection;

/// Each query returns the districts (or warehouses) that violate one condition,
/// as one human-readable line each.
const CONDITIONS: [(&str, &str); 4] = [
    (
        "1: W_YTD = sum(D_YTD)",
        "SELECT 'warehouse ' || w_id || ': w_ytd ' || w_ytd || ' != sum(d_ytd) ' || s
         FROM warehouse JOIN (SELECT d_w_id, SUM(d_ytd) AS s FROM district GROUP BY d_w_id)
           ON d_w_id = w_id
         WHERE w_ytd != s",
    ),
    (
        "2: D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)",
        "SELECT 'district ' || d_w_id || '/' || d_id || ': d_next_o_id - 1 = ' || (d_next_o_id - 1)
                || ', max(o_id) = ' || IFNULL(mo, 'none') || ', max(no_o_id) = ' || IFNULL(mno, 'none')
         FROM district
           LEFT JOIN (SELECT o_w_id, o_d_id, MAX(o_id) AS mo FROM orders GROUP BY o_w_id, o_d_id)
             ON o_w_id = d_w_id AND o_d_id = d_id
           LEFT JOIN (SELECT no_w_id, no_d_id, MAX(no_o_id) AS mno FROM new_order
                      GROUP BY no_w_id, no_d_id)
             ON no_w_id = d_w_id AND no_d_id = d_id
         WHERE mo IS NOT d_next_o_id - 1 OR (mno IS NOT NULL AND mno != d_next_o_id - 1)",
    ),
    (
        "3: max(NO_O_ID) - min(NO_O_ID) + 1 = rows in NEW-ORDER",
        "SELECT 'district ' || no_w_id || '/' || no_d_id || ': ' || (MAX(no_o_id) - MIN(no_o_id) + 1)
                || ' ids but ' || COUNT(*) || ' rows'
         FROM new_order GROUP BY no_w_id, no_d_id
         HAVING MAX(no_o_id) - MIN(no_o_id) + 1 != COUNT(*)",
    ),
    (
        "4: sum(O_OL_CNT) = rows in ORDER-LINE",
        "SELECT 'district ' || o_w_id || '/' || o_d_id || ': sum(o_ol_cnt) ' || s || ' but '
                || IFNULL(n, 0) || ' order lines'
         FROM (SELECT o_w_id, o_d_id, SUM(o_ol_cnt) AS s FROM orders GROUP BY o_w_id, o_d_id)
           LEFT JOIN (SELECT ol_w_id, ol_d_id, COUNT(*) AS n FROM order_line
                      GROUP BY ol_w_id, ol_d_id)
             ON ol_w_id = o_w_id AND ol_d_id = o_d_id
         WHERE n IS NOT s",
    ),
];

/// Returns one line per violation, prefixed by the condition; empty when all hold.
pub fn consistency(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut out = Vec::new();
    for (name, sql) in CONDITIONS {
        let mut st = conn.prepare(sql)?;
        let rows = st.query_map([], |r| r.get::<_, String>(0))?;
        for row in rows {
            out.push(format!("condition {name}: {}", row?));
        }
    }
    Ok(out)
}
