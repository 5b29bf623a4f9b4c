//! The cost of one user page fault on this host, measured before a run: fault time is
//! estimated from it, since `exceptions:page_fault_user` marks a fault's entry only.

use taillab_core::clock::now_ns;

/// Pages faulted per round.
const PAGES: usize = 256;

/// Rounds measured (the first warms the page tables and is dropped).
const ROUNDS: usize = 6;

/// Median ns per fault of an anonymous page dropped (`MADV_DONTNEED`) and touched again,
/// the kind synth's planted faults take; 0 when the mapping fails.
pub fn fault_cost_ns() -> f64 {
    let Some(mut pages) = taillab_core::pages::Pages::new(PAGES) else {
        return 0.0;
    };
    let mut per = Vec::new();
    for round in 0..ROUNDS {
        let t = now_ns();
        pages.fault(PAGES);
        if round > 0 {
            per.push((now_ns() - t) as f64 / PAGES as f64);
        }
    }
    per.sort_by(f64::total_cmp);
    per[per.len() / 2]
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_fault_costs_more_than_nothing_and_less_than_a_millisecond() {
        // A minor fault is 0.1-10 µs on any host; outside that the loop measured nothing.
        let ns = super::fault_cost_ns();
        assert!((50.0..1e6).contains(&ns), "{ns} ns per fault");
    }
}
