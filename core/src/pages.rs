//! Anonymous pages dropped and touched again: one minor page fault each, on demand. synth's
//! planted faults (`faults=K,every=N`) take them inside a request; `--explain` times them
//! before a run to estimate what a fault it counts cost.

/// A private anonymous mapping whose pages can be made to fault again.
pub struct Pages {
    base: *mut u8,
    len: usize,
    page: usize,
}

// SAFETY: the mapping is owned by its holder and only touched through `&mut self`.
unsafe impl Send for Pages {}

impl Pages {
    /// A mapping of `n` pages, not yet touched (huge pages off: one fault a page); `None`
    /// when the kernel refuses it.
    pub fn new(n: usize) -> Option<Pages> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let len = n * page;
        // SAFETY: a fresh anonymous private mapping, owned by the returned value.
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
            return None;
        }
        // SAFETY: our fresh mapping; a transparent huge page would take 512 pages in one fault.
        unsafe { libc::madvise(p, len, libc::MADV_NOHUGEPAGE) };
        Some(Pages {
            base: p as *mut u8,
            len,
            page,
        })
    }

    /// Drops the first `n` pages (`MADV_DONTNEED`) and writes to each: that many faults.
    pub fn fault(&mut self, n: usize) {
        let n = n.min(self.len / self.page);
        // SAFETY: within our mapping; a volatile write so the touch is not elided.
        unsafe {
            libc::madvise(self.base as *mut _, n * self.page, libc::MADV_DONTNEED);
            for i in 0..n {
                std::ptr::write_volatile(self.base.add(i * self.page), 1);
            }
        }
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        // SAFETY: our mapping, unmapped once.
        unsafe { libc::munmap(self.base as *mut _, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minor_faults() -> u64 {
        // SAFETY: getrusage fills the struct.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) };
        u.ru_minflt as u64
    }

    #[test]
    fn each_dropped_page_faults_once_when_touched() {
        let mut p = Pages::new(64).unwrap();
        p.fault(64);
        let before = minor_faults();
        p.fault(64);
        // 64 faults, and a few the test itself may take meanwhile.
        let n = minor_faults() - before;
        assert!((64..=72).contains(&n), "{n} faults for 64 pages");
    }
}
