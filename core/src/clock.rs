//! The one clock every stamp is taken from, and the ways of waiting for it.
//!
//! All six stamps of a request come from `CLOCK_MONOTONIC` (≈ 24 ns a read
//! through the vDSO on our VM), in nanoseconds. Only differences of stamps
//! taken on one host are ever computed, so no clock sync is needed.
//!
//! Waiting matters for accuracy: on a VM a sleeping thread wakes late
//! (`clock_nanosleep` oversleeps by tens of µs, p99 ≈ 180 µs here; see
//! docs/hosts.md). [`wait_until`] therefore sleeps only until `margin` before
//! the deadline and spins the rest, with the timer slack set to 1 ns by
//! [`set_timer_slack_1ns`].

/// Nanoseconds on `CLOCK_MONOTONIC`.
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sets this thread's timer slack to 1 ns so sleeps are not rounded up by the
/// default 50 µs. Returns false if the kernel refused (we then still spin).
pub fn set_timer_slack_1ns() -> bool {
    // SAFETY: PR_SET_TIMERSLACK takes an unsigned long and touches no memory of ours.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) == 0 }
}

/// This thread's timer slack in ns, as the kernel reports it.
pub fn timer_slack_ns() -> i64 {
    // SAFETY: PR_GET_TIMERSLACK has no pointer arguments.
    unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) as i64 }
}

/// Sleeps until the absolute monotonic time `t_ns` (may oversleep).
pub fn sleep_until(t_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (t_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (t_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: absolute sleep on CLOCK_MONOTONIC; `ts` outlives the call.
        let r = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        if r != libc::EINTR {
            return;
        }
    }
}

/// Spins until `t_ns`; returns the time at which it saw the deadline pass.
#[inline]
pub fn spin_until(t_ns: u64) -> u64 {
    loop {
        let now = now_ns();
        if now >= t_ns {
            return now;
        }
        std::hint::spin_loop();
    }
}

crate::names_enum! {
/// How a thread waits for a deadline or for work.
    pub enum WaitMode ("wait mode") {
        /// Busy-spin on the clock: most accurate, burns a core.
        Spin = "spin",
        /// Sleep in the kernel: frees the core, pays the wake-up latency.
        Block = "block",
        /// Sleep until `margin` before the deadline, then spin.
        Hybrid = "hybrid",
    }
}

/// Waits until `t_ns` the given way and returns the time the wait ended
/// (never earlier than `t_ns` for `Spin`/`Hybrid`; `Block` returns on wake).
#[inline]
pub fn wait_until(t_ns: u64, mode: WaitMode, margin_ns: u64) -> u64 {
    let now = now_ns();
    if now >= t_ns {
        return now;
    }
    match mode {
        WaitMode::Spin => spin_until(t_ns),
        WaitMode::Block => {
            sleep_until(t_ns);
            now_ns().max(t_ns)
        }
        WaitMode::Hybrid => {
            if t_ns - now > margin_ns {
                sleep_until(t_ns - margin_ns);
            }
            spin_until(t_ns)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_is_monotonic_and_waits_hit_deadline() {
        let a = now_ns();
        let b = now_ns();
        assert!(b >= a);
        set_timer_slack_1ns();
        assert_eq!(timer_slack_ns(), 1);
        for mode in [WaitMode::Spin, WaitMode::Block, WaitMode::Hybrid] {
            let t = now_ns() + 2_000_000;
            let w = wait_until(t, mode, 500_000);
            assert!(w >= t, "{mode}: woke {} ns early", t - w);
            assert!(w - t < 200_000_000, "{mode}: woke absurdly late");
        }
        assert_eq!("hybrid".parse::<WaitMode>().unwrap(), WaitMode::Hybrid);
        assert!("nap".parse::<WaitMode>().is_err());
    }
}
