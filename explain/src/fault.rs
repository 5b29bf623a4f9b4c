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
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
    let len = PAGES * page;
    // SAFETY: an anonymous private mapping, unmapped below; no other reference to it.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return 0.0;
    }
    // SAFETY: our mapping; one fault a page, as synth's buffer takes them.
    unsafe { libc::madvise(p, len, libc::MADV_NOHUGEPAGE) };
    let base = p as *mut u8;
    let mut per = Vec::new();
    for round in 0..ROUNDS {
        // SAFETY: `p..p + len` is our mapping.
        unsafe { libc::madvise(p, len, libc::MADV_DONTNEED) };
        let t = now_ns();
        for i in 0..PAGES {
            // SAFETY: within the mapping; a volatile write so the touch is not elided.
            unsafe { std::ptr::write_volatile(base.add(i * page), 1) };
        }
        if round > 0 {
            per.push((now_ns() - t) as f64 / PAGES as f64);
        }
    }
    // SAFETY: our mapping, unmapped once.
    unsafe { libc::munmap(p, len) };
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
