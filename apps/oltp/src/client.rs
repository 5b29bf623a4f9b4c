//! The TPC-C terminal: draws each transaction's type from the mix and its
//! inputs by the rules of clauses 2.4.1–2.8.1, seeded.
//!
//! TPC-C binds each terminal to one home warehouse (and Stock-Level to one
//! district). A taillab client stands for the whole terminal population, so it
//! draws the home warehouse and district uniformly per transaction, which gives
//! the same long-run access pattern as one terminal per (warehouse, district).

use rand::{Rng, SeedableRng};

use crate::load::ITEMS;
use crate::rng::{self, TpccRng};
use crate::txn::{CustomerRef, Kind, Line, Txn};

/// The standard mix: New-Order 45 %, Payment 43 %, Order-Status, Delivery and
/// Stock-Level 4 % each (the minimum shares of clause 5.2.3).
pub const STANDARD_MIX: [u32; 5] = [45, 43, 4, 4, 4];

/// A seeded TPC-C terminal population: one transaction per request.
pub struct TpccClient {
    rng: TpccRng,
    warehouses: u32,
    /// Cumulative mix weights, in the order of [`Kind::ALL`].
    cumulative: [u32; 5],
}

impl TpccClient {
    /// A client over warehouses 1..=`warehouses` drawing kinds with weights
    /// `mix` (in [`Kind::ALL`] order, positive sum); `seed` fixes the sequence.
    pub fn new(warehouses: u32, mix: [u32; 5], seed: u64) -> Self {
        let mut cumulative = [0; 5];
        let mut acc = 0;
        for (c, w) in cumulative.iter_mut().zip(mix) {
            acc += w;
            *c = acc;
        }
        TpccClient {
            rng: TpccRng::seed_from_u64(seed),
            warehouses,
            cumulative,
        }
    }

    /// Draws the next transaction and its inputs.
    pub fn next_txn(&mut self) -> Txn {
        let x = self.rng.gen_range(0..self.cumulative[4]);
        let kind = Kind::ALL[self.cumulative.iter().position(|&c| x < c).unwrap_or(4)];
        let w = rng::uniform(&mut self.rng, 1, self.warehouses);
        match kind {
            Kind::NewOrder => self.new_order(w),
            Kind::Payment => self.payment(w),
            Kind::OrderStatus => {
                let d = rng::uniform(&mut self.rng, 1, 10);
                Txn::OrderStatus {
                    w,
                    d,
                    customer: self.customer(),
                }
            }
            Kind::Delivery => Txn::Delivery {
                w,
                carrier: rng::uniform(&mut self.rng, 1, 10),
            },
            Kind::StockLevel => Txn::StockLevel {
                w,
                d: rng::uniform(&mut self.rng, 1, 10),
                threshold: rng::uniform(&mut self.rng, 10, 20),
            },
        }
    }

    /// Another warehouse than `w`, or `w` itself when there is only one.
    fn remote(&mut self, w: u32) -> u32 {
        if self.warehouses == 1 {
            return w;
        }
        let r = rng::uniform(&mut self.rng, 1, self.warehouses - 1);
        if r >= w {
            r + 1
        } else {
            r
        }
    }

    /// 60 % by last name, 40 % by id (clauses 2.5.1.2, 2.6.1.2).
    fn customer(&mut self) -> CustomerRef {
        if rng::uniform(&mut self.rng, 1, 100) <= 60 {
            CustomerRef::LastName(rng::run_last_name_num(&mut self.rng))
        } else {
            CustomerRef::Id(rng::nurand(&mut self.rng, 1023, 1, 3000, rng::C_ID))
        }
    }

    /// Clause 2.4.1.
    fn new_order(&mut self, w: u32) -> Txn {
        let r = &mut self.rng;
        let d = rng::uniform(r, 1, 10);
        let c = rng::nurand(r, 1023, 1, 3000, rng::C_ID);
        let ol_cnt = rng::uniform(r, 5, 15);
        let rollback = rng::uniform(r, 1, 100) == 1;
        let mut lines = Vec::with_capacity(ol_cnt as usize);
        for n in 1..=ol_cnt {
            let i_id = if rollback && n == ol_cnt {
                ITEMS + 1 // an unused item number: the transaction must roll back
            } else {
                rng::nurand(&mut self.rng, 8191, 1, ITEMS, rng::C_OL_I_ID)
            };
            let supply_w = if rng::uniform(&mut self.rng, 1, 100) == 1 {
                self.remote(w)
            } else {
                w
            };
            let qty = rng::uniform(&mut self.rng, 1, 10);
            lines.push(Line {
                i_id,
                supply_w,
                qty,
            });
        }
        Txn::NewOrder { w, d, c, lines }
    }

    /// Clause 2.5.1.
    fn payment(&mut self, w: u32) -> Txn {
        let d = rng::uniform(&mut self.rng, 1, 10);
        let (c_w, c_d) = if rng::uniform(&mut self.rng, 1, 100) <= 85 {
            (w, d)
        } else {
            (self.remote(w), rng::uniform(&mut self.rng, 1, 10))
        };
        let customer = self.customer();
        let amount = rng::uniform(&mut self.rng, 100, 500_000);
        Txn::Payment {
            w,
            d,
            c_w,
            c_d,
            customer,
            amount,
        }
    }
}

impl taillab_core::Client for TpccClient {
    fn next_request(&mut self, out: &mut Vec<u8>) {
        self.next_txn().encode(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_requests_and_the_mix_holds() {
        let mut a = TpccClient::new(3, STANDARD_MIX, 7);
        let mut b = TpccClient::new(3, STANDARD_MIX, 7);
        let mut counts = [0u32; 5];
        let mut rollbacks = 0;
        let mut remote_lines = 0;
        let mut lines = 0;
        let n = 40_000;
        for _ in 0..n {
            let t = a.next_txn();
            assert_eq!(t, b.next_txn());
            assert!(t.max_warehouse() <= 3);
            counts[t.kind() as usize] += 1;
            if let Txn::NewOrder { w, lines: ls, .. } = &t {
                rollbacks += ls.iter().any(|l| l.i_id > ITEMS) as u32;
                remote_lines += ls.iter().filter(|l| l.supply_w != *w).count();
                lines += ls.len();
            }
        }
        for (k, (&got, &want)) in counts.iter().zip(STANDARD_MIX.iter()).enumerate() {
            let share = f64::from(got) / f64::from(n) * 100.0;
            assert!(
                (share - f64::from(want)).abs() < 1.0,
                "kind {k}: {share:.2} % vs {want} %"
            );
        }
        let rb = f64::from(rollbacks) / f64::from(counts[0]) * 100.0;
        assert!(
            (0.5..1.6).contains(&rb),
            "{rb:.2} % of New-Orders roll back, want about 1 %"
        );
        let remote = remote_lines as f64 / lines as f64 * 100.0;
        assert!(
            (0.6..1.4).contains(&remote),
            "{remote:.2} % remote lines, want about 1 %"
        );
        let mut c = TpccClient::new(3, STANDARD_MIX, 8);
        assert!(
            (0..10).any(|_| c.next_txn() != a.next_txn()),
            "seed is ignored"
        );
    }

    #[test]
    fn a_mix_can_select_one_type() {
        let mut c = TpccClient::new(1, [0, 0, 0, 1, 0], 1);
        for _ in 0..100 {
            assert_eq!(c.next_txn().kind(), Kind::Delivery);
        }
    }
}
