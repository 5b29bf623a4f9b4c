//! The TCP settings whose default is chosen from the host a part runs on:
//! `net.receive`, `net.client_wait`, `net.server_wait`, `harness.dispatch`.
//!
//! Each is declared once (fields.rs) as an optional value; `none`, the
//! default, means "choose here", and [`resolve`] is the only place that
//! chooses. The choice and its reasons are printed when a run starts and
//! recorded, resolved, in `summary.json` (`transport.choice`, and the
//! server's own in `server`).
//!
//! Why these rules (measured in bench/transport, docs/transport-cost.md):
//! - **receive = sender.** One thread per client that reads its connections
//!   whenever it would otherwise wait. A receiver thread must be woken for
//!   each response; on a small host it then competes with the spinning
//!   sender for a CPU, and waited milliseconds for it. Kernel receive stamps
//!   keep `completed` true however late the read, but responses that wait
//!   together share the stamp of the last one, and a late reader delays
//!   sends: fewer wake-ups is the right default everywhere.
//! - **client wait = spin on a CPU of its own**, hybrid otherwise. A pinned
//!   client whose CPUs no server worker may use loses nothing by spinning;
//!   an unpinned one could take a CPU from the server it measures. (Hybrid
//!   spins the last `spin_margin` before each send anyway, so at rates
//!   above 1/margin the two differ little.)
//! - **dispatch = per-worker with one FIFO worker**, shared otherwise. With
//!   one worker both are the same M/G/1 FIFO queue, and per-worker saves the
//!   reader → worker hand-off (a wake-up per request). With several workers
//!   only the shared queue is the M/G/n system of the model, so it stays.
//! - **server wait = hybrid when the host has a CPU for every thread of the
//!   experiment on it, block otherwise.** Workers that spin (hybrid spins
//!   `spin_margin` after each request) on an oversubscribed host take the
//!   CPU from each other and from the client; blocking then costs less.
//!
//! `harness.wait` keeps its meaning for integrated runs; for TCP an explicit
//! `spin` (or, for the server, `block`) there still applies to both sides,
//! as before these settings existed.

use super::{Dispatch, Receive, RunConfig};
use crate::clock::WaitMode;
use crate::queue::Discipline;

/// What [`resolve`] knows about the host besides the configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostFacts {
    /// CPUs this process may run on (its affinity).
    pub cpus: Vec<usize>,
    /// CPUs a server process on this host may use, when the client found
    /// one (a local `--target`); `None`: unknown or on another host.
    pub server_affinity: Option<Vec<usize>>,
    /// Client processes that share this host with the server's workers.
    pub local_clients: usize,
}

impl HostFacts {
    /// This process's CPUs; `local_clients` and `server_affinity` as given.
    pub fn here(local_clients: usize, server_affinity: Option<Vec<usize>>) -> Self {
        HostFacts {
            cpus: affinity(0).unwrap_or_else(all_cpus),
            server_affinity,
            local_clients,
        }
    }
}

/// The CPUs process (or thread) `pid` may run on (0: the caller).
pub fn affinity(pid: i32) -> Option<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; the kernel fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is ours and sized as passed.
    let r =
        unsafe { libc::sched_getaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return None;
    }
    // SAFETY: CPU_ISSET reads within the set for indices below CPU_SETSIZE.
    Some(
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect(),
    )
}

fn all_cpus() -> Vec<usize> {
    (0..std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1))
        .collect()
}

/// A TCP run's resolved settings and why each was chosen.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct TcpChoice {
    /// `net.receive`: who reads responses in a client.
    pub receive: Receive,
    /// `net.client_wait`: how a client's sender waits for send times.
    pub client_wait: WaitMode,
    /// `net.server_wait`: how the server's workers wait for work.
    pub server_wait: WaitMode,
    /// `harness.dispatch` of the server: one shared queue or one per worker.
    pub dispatch: Dispatch,
    /// One line per setting: `name value (why)`.
    pub why: Vec<String>,
}

impl TcpChoice {
    /// The one line printed at the start of a run.
    pub fn line(&self) -> String {
        self.why.join("; ")
    }

    /// Writes the resolved values into `cfg` (so they travel as flags).
    pub fn apply(&self, cfg: &mut RunConfig) {
        cfg.net.receive = Some(self.receive);
        cfg.net.client_wait = Some(self.client_wait);
        cfg.net.server_wait = Some(self.server_wait);
        cfg.harness.dispatch = Some(self.dispatch);
    }
}

fn pick<T: std::fmt::Display + Copy>(
    why: &mut Vec<String>,
    name: &str,
    set: Option<T>,
    auto: impl FnOnce() -> (T, String),
) -> T {
    let (v, because) = match set {
        Some(v) => (v, "set".to_string()),
        None => auto(),
    };
    why.push(format!("{name} {v} ({because})"));
    v
}

fn cpus_text(c: &[usize]) -> String {
    c.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Chooses every TCP setting `cfg` leaves at `none`, for the parts that run
/// on a host described by `host` (see the module doc for the rules).
pub fn resolve(cfg: &RunConfig, host: &HostFacts) -> TcpChoice {
    let (h, n) = (&cfg.harness, &cfg.net);
    let mut why = Vec::new();
    let receive = pick(&mut why, "receive", n.receive, || {
        (
            Receive::Sender,
            "one thread reads while it waits: nothing to wake".into(),
        )
    });
    let server_cpus: Option<Vec<usize>> = if h.cpus.0.is_empty() {
        host.server_affinity.clone()
    } else {
        Some(h.cpus.0.clone())
    };
    let client_wait = pick(&mut why, "client-wait", n.client_wait, || {
        client_wait(cfg, server_cpus.as_deref())
    });
    let dispatch = pick(&mut why, "dispatch", h.dispatch, || {
        if h.threads == 1 && h.discipline == Discipline::Fifo {
            (
                Dispatch::PerWorker(crate::queue::Assign::RoundRobin),
                "one FIFO worker: the same M/G/1 queue without a hand-off".into(),
            )
        } else {
            (
                Dispatch::Shared,
                format!("{} workers: one shared queue is the M/G/n model", h.threads),
            )
        }
    });
    let server_wait = pick(&mut why, "server-wait", n.server_wait, || {
        if super::rt_wait(h.rt_priority, h.wait) != h.wait {
            return (
                WaitMode::Block,
                format!(
                    "rt_priority {}: a spinning SCHED_FIFO worker is RT-throttled",
                    h.rt_priority
                ),
            );
        }
        if h.wait != WaitMode::Hybrid {
            return (h.wait, format!("harness.wait {}", h.wait));
        }
        let need = h.threads + host.local_clients;
        let have = if h.cpus.0.is_empty() {
            host.cpus.len()
        } else {
            h.cpus.0.len() + host.local_clients
        };
        if have >= need {
            (
                WaitMode::Hybrid,
                format!("{have} CPUs for {need} threads: spin between close requests"),
            )
        } else {
            (
                WaitMode::Block,
                format!("{have} CPUs for {need} threads: spinning would take them from each other"),
            )
        }
    });
    TcpChoice {
        receive,
        client_wait,
        server_wait,
        dispatch,
        why,
    }
}

fn client_wait(cfg: &RunConfig, server_cpus: Option<&[usize]>) -> (WaitMode, String) {
    let (h, mine) = (&cfg.harness, &cfg.net.client_cpus.0);
    if h.wait == WaitMode::Spin {
        return (WaitMode::Spin, "harness.wait spin".into());
    }
    match server_cpus {
        _ if mine.is_empty() => (
            WaitMode::Hybrid,
            "not pinned: a spinning client could take the server's CPU".into(),
        ),
        Some(s) if mine.iter().all(|c| !s.contains(c)) => (
            WaitMode::Spin,
            format!(
                "CPU {} is the client's own (server on {})",
                cpus_text(mine),
                cpus_text(s)
            ),
        ),
        Some(s) => (
            WaitMode::Hybrid,
            format!(
                "CPU {} is shared with the server ({})",
                cpus_text(mine),
                cpus_text(s)
            ),
        ),
        None => (
            WaitMode::Spin,
            format!(
                "pinned to CPU {}, no local server seen there",
                cpus_text(mine)
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(sets: &[(&str, &str)]) -> RunConfig {
        let mut c = RunConfig::default();
        for (k, v) in sets {
            c.set(k, &[v]).unwrap();
        }
        c
    }

    fn host(cpus: usize, server: Option<Vec<usize>>, clients: usize) -> HostFacts {
        HostFacts {
            cpus: (0..cpus).collect(),
            server_affinity: server,
            local_clients: clients,
        }
    }

    #[test]
    fn defaults_follow_the_host() {
        // The case: memcached pinned to CPU 1, client to CPU 0.
        let c = resolve(
            &cfg(&[("net.client_cpus", "0")]),
            &host(2, Some(vec![1]), 1),
        );
        assert_eq!(
            (c.receive, c.client_wait),
            (Receive::Sender, WaitMode::Spin)
        );
        // Unpinned client: it sleeps between sends.
        let c = resolve(&cfg(&[]), &host(2, Some(vec![0, 1]), 1));
        assert_eq!(c.client_wait, WaitMode::Hybrid);
        // Pinned onto the server's CPU: no spinning.
        let c = resolve(
            &cfg(&[("net.client_cpus", "1")]),
            &host(2, Some(vec![1]), 1),
        );
        assert_eq!(c.client_wait, WaitMode::Hybrid);
        // One FIFO worker: per-worker; several, or LIFO: the shared queue.
        assert_eq!(
            resolve(&cfg(&[]), &host(2, None, 1)).dispatch,
            Dispatch::PerWorker(crate::queue::Assign::RoundRobin)
        );
        assert_eq!(
            resolve(&cfg(&[("harness.threads", "2")]), &host(8, None, 1)).dispatch,
            Dispatch::Shared
        );
        assert_eq!(
            resolve(&cfg(&[("harness.discipline", "lifo")]), &host(8, None, 1)).dispatch,
            Dispatch::Shared
        );
        // Oversubscribed: the server blocks.
        let c = resolve(&cfg(&[("harness.threads", "4")]), &host(2, None, 1));
        assert_eq!(c.server_wait, WaitMode::Block);
        // SCHED_FIFO workers block even with CPUs to spare (a spinning one is RT-throttled);
        // an explicit server wait is kept.
        let c = resolve(&cfg(&[("harness.rt_priority", "50")]), &host(8, None, 1));
        assert_eq!(c.server_wait, WaitMode::Block);
        assert!(
            c.why.iter().any(|w| w.contains("RT-throttled")),
            "{:?}",
            c.why
        );
        let c = resolve(
            &cfg(&[("harness.rt_priority", "50"), ("net.server_wait", "hybrid")]),
            &host(8, None, 1),
        );
        assert_eq!(c.server_wait, WaitMode::Hybrid);
        assert_eq!(
            resolve(&cfg(&[]), &host(2, None, 1)).server_wait,
            WaitMode::Hybrid
        );
    }

    #[test]
    fn explicit_settings_win_and_say_so() {
        let c = resolve(&cfg(&[("harness.wait", "spin")]), &host(2, None, 1));
        assert_eq!(
            (c.client_wait, c.server_wait),
            (WaitMode::Spin, WaitMode::Spin)
        );
        let c = resolve(
            &cfg(&[("net.receive", "threads"), ("net.server_wait", "block")]),
            &host(64, None, 1),
        );
        assert_eq!(
            (c.receive, c.server_wait),
            (Receive::Threads, WaitMode::Block)
        );
        assert!(c.line().contains("receive threads (set)"), "{}", c.line());
        // Applied, a choice travels: any host then resolves to the same values.
        let mut k = RunConfig::default();
        c.apply(&mut k);
        let again = resolve(&k, &host(1, None, 9));
        assert_eq!(
            (
                again.receive,
                again.client_wait,
                again.server_wait,
                again.dispatch
            ),
            (c.receive, c.client_wait, c.server_wait, c.dispatch)
        );
    }
}
