//! The locks all of synth's workers share (`recv_lock=`, `send_lock=`).
//!
//! A short critical section under a lock every worker takes is what keeps apps with tiny
//! service times from scaling with workers: in TailWAG's analysis the servers' shared socket
//! `recv()`/`send()` (a few µs each) serialised silo's and specjbb's workers. Synth models
//! it as TailWAG's generator does, with a *hybrid* lock: a waiter spins (polling `try_lock`)
//! for up to `lock_spin`, then blocks and is parked by the kernel until the holder
//! releases it. Spinning keeps hand-offs at tens of ns while critical sections are short;
//! parking keeps a long wait from burning a CPU, at the price of a wake-up (µs) — the
//! trade-off a disturbed holder (an interrupt inside the critical section) exposes.

use parking_lot::{Mutex, MutexGuard};
use std::sync::atomic::{AtomicU64, Ordering};
use taillab_core::clock::now_ns;

/// A mutex that spins for `spin_ns`, then parks; counts how it was acquired.
pub struct HybridLock {
    m: Mutex<()>,
    spin_ns: u64,
    acquired: AtomicU64,
    contended: AtomicU64,
    parked: AtomicU64,
    wait_ns: AtomicU64,
}

impl HybridLock {
    /// A lock whose waiters spin up to `spin_ns` before they park.
    pub fn new(spin_ns: u64) -> Self {
        HybridLock {
            m: Mutex::new(()),
            spin_ns,
            acquired: AtomicU64::new(0),
            contended: AtomicU64::new(0),
            parked: AtomicU64::new(0),
            wait_ns: AtomicU64::new(0),
        }
    }

    /// Takes the lock: at once if free, else spinning up to `spin_ns`, else parked.
    pub fn lock(&self) -> MutexGuard<'_, ()> {
        self.acquired.fetch_add(1, Ordering::Relaxed);
        if let Some(g) = self.m.try_lock() {
            return g;
        }
        self.contended.fetch_add(1, Ordering::Relaxed);
        let t = now_ns();
        let deadline = t + self.spin_ns;
        let g = loop {
            if now_ns() >= deadline {
                self.parked.fetch_add(1, Ordering::Relaxed);
                break self.m.lock();
            }
            std::hint::spin_loop();
            if let Some(g) = self.m.try_lock() {
                break g;
            }
        };
        self.wait_ns.fetch_add(now_ns() - t, Ordering::Relaxed);
        g
    }

    /// Acquisitions, how many waited, how many of those parked, and the total wait.
    pub fn stats(&self) -> serde_json::Value {
        serde_json::json!({
            "acquired": self.acquired.load(Ordering::Relaxed),
            "contended": self.contended.load(Ordering::Relaxed),
            "parked": self.parked.load(Ordering::Relaxed),
            "wait_ns": self.wait_ns.load(Ordering::Relaxed),
            "spin_ns": self.spin_ns,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    /// Whatever the spin limit (0: park at once), no two holders are ever inside together,
    /// and waiters that outlast the spin limit park. The test holds the lock itself until all
    /// three threads have found it taken and parked, so contention does not depend on how the
    /// host schedules the threads.
    #[test]
    fn excludes_and_parks_after_spinning() {
        for spin_ns in [0, 1_000, 1_000_000] {
            let lock = Arc::new(HybridLock::new(spin_ns));
            let inside = Arc::new(AtomicUsize::new(0));
            let held = lock.lock();
            let hs: Vec<_> = (0..3)
                .map(|_| {
                    let (lock, inside) = (lock.clone(), inside.clone());
                    std::thread::spawn(move || {
                        for _ in 0..200 {
                            let _g = lock.lock();
                            assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "overlap");
                            taillab_core::clock::spin_until(now_ns() + 20_000);
                            inside.fetch_sub(1, Ordering::SeqCst);
                        }
                    })
                })
                .collect();
            let t0 = std::time::Instant::now();
            while lock.parked.load(Ordering::SeqCst) < 3 {
                assert!(
                    t0.elapsed().as_secs() < 30,
                    "waiters never parked: {}",
                    lock.stats()
                );
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            drop(held);
            for h in hs {
                h.join().unwrap();
            }
            let s = lock.stats();
            assert_eq!(s["acquired"], 601, "{s}");
            assert!(s["contended"].as_u64().unwrap() >= 3, "{s}");
            assert!(s["parked"].as_u64().unwrap() >= 3, "{s}");
            if spin_ns == 0 {
                assert_eq!(s["parked"], s["contended"], "{s}");
            }
        }
    }
}
