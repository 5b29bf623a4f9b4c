//! `faults=K,every=N`: planted page faults, the instrument `--explain`'s fault count is
//! checked against.
//!
//! The client marks every N-th request it draws (the requests whose index in the run's
//! schedule is a multiple of N, warmup included), so which requests fault is known from
//! the schedule alone; the server, on a marked request, drops K pages of its worker's own
//! buffer (`madvise(MADV_DONTNEED)`) and writes one byte to each, taking K minor faults
//! inside the request's service. Every other request touches nothing new.

/// Pages dropped and touched per marked request, and how often a request is marked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Faults {
    /// K: pages per marked request.
    pub pages: u64,
    /// N: every N-th request is marked.
    pub every: u64,
}

/// Most pages per request (16 MiB of 4 KiB pages): more is a unit slip.
const MAX_PAGES: u64 = 4096;

impl Faults {
    /// `none` or `K,every=N`.
    pub fn parse(s: &str) -> Result<Option<Faults>, String> {
        if s == "none" {
            return Ok(None);
        }
        let want = "K,every=N: K pages faulted on every N-th request, e.g. 64,every=100";
        let (k, rest) = s.split_once(',').ok_or_else(|| want.to_string())?;
        let n = rest
            .strip_prefix("every=")
            .ok_or_else(|| want.to_string())?;
        let pages: u64 = k.trim().parse().map_err(|_| want.to_string())?;
        let every: u64 = n.trim().parse().map_err(|_| want.to_string())?;
        if pages == 0 || pages > MAX_PAGES || every == 0 {
            return Err(format!("K in 1..={MAX_PAGES} and N ≥ 1 ({want})"));
        }
        Ok(Some(Faults { pages, every }))
    }

    /// The pages the client asks request `index` (its position in the schedule) to fault.
    pub fn pages_for(&self, index: u64) -> u64 {
        if index % self.every == 0 {
            self.pages
        } else {
            0
        }
    }
}

impl std::fmt::Display for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{},every={}", self.pages, self.every)
    }
}

/// One worker's buffer of pages to fault.
pub struct FaultBuffer {
    base: *mut u8,
    len: usize,
    page: usize,
}

// SAFETY: the mapping is owned by one worker and only touched through `&mut self`.
unsafe impl Send for FaultBuffer {}

impl FaultBuffer {
    /// A mapping of `pages` pages, not yet touched; `None` when the kernel refuses it.
    pub fn new(pages: u64) -> Option<FaultBuffer> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let len = pages as usize * page;
        // SAFETY: a fresh anonymous private mapping, owned by the returned buffer.
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
        // One fault a page: a transparent huge page would take 512 pages in one.
        // SAFETY: our fresh mapping.
        unsafe { libc::madvise(p, len, libc::MADV_NOHUGEPAGE) };
        Some(FaultBuffer {
            base: p as *mut u8,
            len,
            page,
        })
    }

    /// Drops the first `pages` pages and writes to each: that many minor faults.
    pub fn fault(&mut self, pages: u64) {
        let n = (pages as usize).min(self.len / self.page);
        // SAFETY: within our mapping; a volatile write so the touch is not elided.
        unsafe {
            libc::madvise(self.base as *mut _, n * self.page, libc::MADV_DONTNEED);
            for i in 0..n {
                std::ptr::write_volatile(self.base.add(i * self.page), 1);
            }
        }
    }
}

impl Drop for FaultBuffer {
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
    fn a_marked_request_takes_its_faults_and_the_spec_reads_back() {
        let f = Faults::parse("64,every=10").unwrap().unwrap();
        assert_eq!(f.to_string(), "64,every=10");
        assert_eq!(
            (f.pages_for(0), f.pages_for(5), f.pages_for(20)),
            (64, 0, 64)
        );
        for bad in [
            "64",
            "64,every=0",
            "0,every=3",
            "x,every=2",
            "99999,every=2",
        ] {
            assert!(Faults::parse(bad).is_err(), "{bad}");
        }
        let mut b = FaultBuffer::new(64).unwrap();
        b.fault(64);
        let before = minor_faults();
        b.fault(64);
        // Each dropped page faults once when written again (a THP would fault fewer).
        let n = minor_faults() - before;
        assert!((32..=80).contains(&n), "{n} faults for 64 pages");
    }
}
