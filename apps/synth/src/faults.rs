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
        if index.is_multiple_of(self.every) {
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

/// One worker's buffer of pages to fault (`taillab_core::pages::Pages`).
pub use taillab_core::pages::Pages as FaultBuffer;

#[cfg(test)]
mod tests {
    use super::*;

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
        // The pages themselves: core's `pages` tests them.
        assert!(FaultBuffer::new(64).is_some());
    }
}
