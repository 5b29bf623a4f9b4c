//! `synth`: the synthetic app, and the harness's test instrument.
//!
//! The *client* draws each request's service time from a distribution
//! (`--set service=SPEC`, grammar in `taillab_core::dist`) and puts it in the
//! payload, so one seed gives the same request sequence in every
//! configuration. The *server* busy-waits for that long:
//!
//! - `spin=clock` (default): spin until the clock says the service time has
//!   passed. Exact in wall time, which is what queueing-theory checks need.
//! - `spin=work`: run a calibrated arithmetic loop without reading the clock,
//!   like a real CPU-bound handler: preemption and frequency changes stretch
//!   it, as they would a real app.
//!
//! Neither sleeps: a sleeping "service" would measure the kernel's timer
//! wake-up, not a busy server.
//!
//! `--set stall=at:2s,for:500ms` stops every worker for `for`, starting `at`
//! into the measured phase, while requests keep arriving: a server hiccup.
//! An open-loop harness charges the stall to every request that arrived
//! during it (sojourns up to `for`); a closed-loop one would hide it.
//!
//! # A workload generator (TailWAG)
//!
//! With four more keys synth stands in for a real app whose timing was measured
//! (`taillab fit` writes the `service=` spec). Each request runs, as TailWAG's
//! generated workload does:
//!
//! 1. `recv_lock=DIST`: a critical section of that length under a lock shared by all
//!    workers (the receive side of a shared socket);
//! 2. the service time, drawn from `service=` and multiplied by `scale=F` (what if
//!    the app were F times slower; `scale=0.5`, twice as fast);
//! 3. `send_lock=DIST`: a second critical section under a second shared lock.
//!
//! The client draws all three lengths (same seed, same requests in every
//! configuration); the locks are hybrid, spinning up to `lock_spin` before they park
//! ([`lock`]). `noise=SPEC` disturbs workers while they do any of the three: events
//! arrive in wall time per worker (Poisson or periodic) and add their length, on all
//! workers or, with `cpus=`, only on workers pinned to those CPUs ([`noise`]).
//! `pause=SPEC` is a collector's stop-the-world pauses: one process for the whole server
//! in the same grammar; during a pause no worker progresses, serving or idle
//! ([`noise::Pause`]).
//! `periodic=requests:N-M,for=DIST` is a rare slow request that comes *regularly*: every
//! N-th to M-th request the server starts (the gap drawn uniformly in N..=M) serves a DIST
//! draw in place of its own service — a database checkpoint every so many commits, a log
//! rotation, a cache flush ([`Periodic`]). Unlike a pause it stops only its own worker.
//! Placed regularly, such requests queue less than the same share drawn independently:
//! two never come back to back.
//! `scale` stretches only `service=` and `periodic=` draws: lock and noise lengths stand for the OS and
//! the network stack, which a faster app does not shorten; set them explicitly.
//!
//! `cold=F,tau=D` makes a worker slower after idling, as a real app whose caches cool
//! ([`Cold`]): each worker keeps a warmth `w` in [0, 1] that decays as exp(-idle/D)
//! while it waits and approaches 1 as 1 - exp(-busy/D) while it serves; a request
//! that starts at warmth `w` serves its `service=` draw times `1 + F (1 - w)`. At
//! light load workers are mostly cold and serve up to `1 + F` times slower; busy ones
//! serve at the drawn speed. `taillab fit --pooled` estimates F and D from the
//! per-request records of runs at several loads.
//!
//! `speed=F1/F2/...,every=D` is the host's speed of the moment ([`speed`]): each stretch of
//! `D` of wall time multiplies the service of the requests that start in it by one of the
//! factors, dealt in shuffled cycles; an app on a shared host serves at the memory
//! system's speed, which wanders for seconds at a time, and queues more for it.
//!
//! A critical section or disturbance longer than the mean service is allowed (a
//! lock-bound app is a legitimate study) but warned about on stderr when the server
//! starts: it usually means a unit slipped.

#![warn(missing_docs)]
pub mod faults;
pub mod lock;
pub mod noise;
mod server;
mod settings;
pub mod speed;
#[cfg(test)]
mod tests;

use settings::*;
pub use settings::{Cold, Periodic, Stall};

use faults::{FaultBuffer, Faults};
use lock::HybridLock;
use noise::{Noise, Pause, PauseClock, WorkerNoise};
use speed::{Dealer, Speed};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use taillab_core::clock::{now_ns, sleep_until, spin_until};
use taillab_core::dist::{fmt_ns, parse_duration_ns, Dist};
use taillab_core::{App, AppError, Client, DataCtx, KeySpec, Params, Server, Worker};

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

const KEYS: &[KeySpec] = &[
    KeySpec {
        name: "service",
        default: "exp:200us",
        help: "service-time distribution: fixed:D, exp:D, lognormal:D,cv=X, uniform:D,D, pareto:D,alpha=A, mix:w*SPEC+...",
    },
    KeySpec {
        name: "stall",
        default: "none",
        help: "stop all workers for a while: at:2s,for:500ms (times from the start of the measured phase)",
    },
    KeySpec {
        name: "spin",
        default: "clock",
        help: "clock = spin on the clock (exact wall time); work = calibrated loop that preemption stretches; sleep = sleep for the service (no CPU: many leaves of a fan-out on few CPUs)",
    },
    KeySpec {
        name: "recv_lock",
        default: "none",
        help: "critical section before the service, under a lock all workers share: a distribution (fixed:3us, lognormal:3.5us,cv=0.4)",
    },
    KeySpec {
        name: "send_lock",
        default: "none",
        help: "critical section after the service, under a second shared lock: a distribution",
    },
    KeySpec {
        name: "lock_spin",
        default: "10us",
        help: "how long a worker spins for a busy lock before it parks",
    },
    KeySpec {
        name: "noise",
        default: "none",
        help: "disturbances while serving: poisson:rate=2000,for=exp:5us or every:1ms,for=20us [,cpus=0,2]; several joined by ;",
    },
    KeySpec {
        name: "pause",
        default: "none",
        help: "stop-the-world pauses (a collector's): requests:10000,for=15ms (every N requests; N-M, 0.6*12000-16000+0.4*1-2000 or a cycle 12000-16000x4-5+1-2000x1-2 for drawn gaps), poisson:rate=2,for=20ms or every:500ms,for=exp:15ms; every worker stops, serving or idle",
    },
    KeySpec {
        name: "periodic",
        default: "none",
        help: "a regular slow request: requests:80-90,for=lognormal:6ms,cv=0.1 (every 80th to 90th request the server starts serves a draw of for= instead of its own; requests:85 for a fixed gap; ,cold=no: cold= does not slow it)",
    },
    KeySpec {
        name: "scale",
        default: "1",
        help: "multiply every service= draw by this factor (what-if faster/slower)",
    },
    KeySpec {
        name: "cold",
        default: "none",
        help: "slower after idling: F,tau=D serves a draw times 1+F(1-w), warmth w decaying as exp(-idle/D) (e.g. 0.3,tau=10ms); ,power=P: 1+F(1-w)^P, slow only when quite cold",
    },
    KeySpec {
        name: "faults",
        default: "none",
        help: "planted page faults: K,every=N drops and touches K pages of the worker's own on every N-th request the client draws (index a multiple of N), e.g. 64,every=100",
    },
    KeySpec {
        name: "speed",
        default: "none",
        help: "the host's speed of the moment: 0.8/1/1.2,every=500ms multiplies the service of each 500 ms stretch of wall time by one factor, dealt in shuffled cycles (taillab fit --pooled measures it)",
    },
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Spin {
    Clock,
    Work,
    /// Sleep instead of spinning: the service takes wall time but no CPU, so many servers
    /// (a fan-out's leaves) can share a few CPUs without queueing for them. The sleep
    /// overshoots by the host's wake-up delay, which the measured service time includes.
    Sleep,
}

struct Config {
    service: Dist,
    stall: Option<Stall>,
    spin: Spin,
    recv_lock: Option<Dist>,
    send_lock: Option<Dist>,
    lock_spin_ns: u64,
    noise: Noise,
    pause: Option<Pause>,
    periodic: Option<Periodic>,
    scale: f64,
    cold: Option<Cold>,
    speed: Option<Speed>,
    faults: Option<Faults>,
}

impl Config {
    /// Bytes of a request: the service time, then both lock lengths when a lock is set,
    /// then the pages to fault when `faults=` is set.
    fn request_len(&self) -> usize {
        let locks = if self.recv_lock.is_some() || self.send_lock.is_some() {
            24
        } else {
            8
        };
        locks + if self.faults.is_some() { 8 } else { 0 }
    }

    /// Mean time a worker is busy per request, noise included.
    fn busy_mean_ns(&self) -> f64 {
        let lock = |d: &Option<Dist>| d.as_ref().map_or(0.0, Dist::mean);
        let svc = self.service_mean_ns();
        (svc + lock(&self.recv_lock) + lock(&self.send_lock)) * (1.0 + self.noise.stretch())
            + self.pause.as_ref().map_or(0.0, |p| p.per_request_ns(svc))
    }

    /// Mean service per request (scaled), the periodic slow requests included.
    fn service_mean_ns(&self) -> f64 {
        let drawn = self.service.mean();
        self.scale
            * self.speed.as_ref().map_or(1.0, Speed::mean)
            * match &self.periodic {
                Some(p) => {
                    let share = 1.0 / p.mean_gap();
                    drawn * (1.0 - share) + p.length.mean() * share
                }
                None => drawn,
            }
    }

    /// Locks or disturbances longer than the mean service: allowed, but usually a slip.
    fn warnings(&self) -> Vec<String> {
        let svc = self.service.mean() * self.scale;
        let mut out = Vec::new();
        for (key, d) in [
            ("recv_lock", &self.recv_lock),
            ("send_lock", &self.send_lock),
        ] {
            if let Some(d) = d.as_ref().filter(|d| d.mean() > svc) {
                out.push(format!(
                    "{key}: its mean {} is longer than the service mean {} it wraps",
                    fmt_ns(d.mean()),
                    fmt_ns(svc)
                ));
            }
        }
        for s in self.noise.0.iter().filter(|s| s.length.mean() > svc) {
            out.push(format!(
                "noise `{s}`: each event ({}) is longer than the service mean {}",
                fmt_ns(s.length.mean()),
                fmt_ns(svc)
            ));
        }
        out
    }
}

fn bad(key: &str, value: &str, expected: impl Into<String>) -> AppError {
    AppError::BadParam {
        key: key.into(),
        value: value.into(),
        expected: expected.into(),
    }
}

fn dist_key(p: &Params, key: &str, default: &str) -> Result<Option<Dist>, AppError> {
    let v = p.get(key).unwrap_or(default);
    if v == "none" {
        return Ok(None);
    }
    v.parse()
        .map(Some)
        .map_err(|e: taillab_core::dist::DistError| bad(key, v, e.to_string()))
}

fn config(p: &Params) -> Result<Config, AppError> {
    p.check_keys("synth", KEYS)?;
    let service = dist_key(p, "service", "exp:200us")?
        .ok_or_else(|| bad("service", "none", "a distribution such as exp:200us"))?;
    let stall = parse_stall(p.get("stall").unwrap_or("none"))?;
    let spin = match p.get("spin").unwrap_or("clock") {
        "clock" => Spin::Clock,
        "work" => Spin::Work,
        "sleep" => Spin::Sleep,
        v => return Err(bad("spin", v, "clock, work or sleep")),
    };
    let ls = p.get("lock_spin").unwrap_or("10us");
    let lock_spin_ns = parse_duration_ns(ls)
        .map_err(|e| bad("lock_spin", ls, format!("{e}; a duration such as 10us")))?
        as u64;
    let nv = p.get("noise").unwrap_or("none");
    let noise = nv.parse::<Noise>().map_err(|e| bad("noise", nv, e))?;
    let pv = p.get("pause").unwrap_or("none");
    let pause = Pause::parse(pv).map_err(|e| bad("pause", pv, e))?;
    let rv = p.get("periodic").unwrap_or("none");
    let periodic = Periodic::parse(rv).map_err(|e| bad("periodic", rv, e))?;
    let sv = p.get("scale").unwrap_or("1");
    let scale = sv
        .parse::<f64>()
        .ok()
        .filter(|f| *f > 0.0 && f.is_finite())
        .ok_or_else(|| bad("scale", sv, "a factor > 0, e.g. 0.5 (twice as fast) or 2"))?;
    let cold = parse_cold(p.get("cold").unwrap_or("none"))?;
    let spv = p.get("speed").unwrap_or("none");
    let speed = Speed::parse(spv).map_err(|e| bad("speed", spv, e))?;
    let fv = p.get("faults").unwrap_or("none");
    let faults = Faults::parse(fv).map_err(|e| bad("faults", fv, e))?;
    Ok(Config {
        cold,
        speed,
        faults,
        service,
        stall,
        spin,
        recv_lock: dist_key(p, "recv_lock", "none")?,
        send_lock: dist_key(p, "send_lock", "none")?,
        lock_spin_ns,
        noise,
        pause,
        periodic,
        scale,
    })
}

/// The synth app factory.
pub struct Synth;

/// The app, for registration in the CLI.
pub fn app() -> Arc<dyn App> {
    Arc::new(Synth)
}

impl App for Synth {
    taillab_core::app_info!(
        "synth",
        "synthetic server that busy-waits a service time drawn per request (the harness's test instrument)",
        KEYS
    );
    fn expected_service_ns(&self, params: &Params) -> Option<f64> {
        config(params).ok().map(|c| c.busy_mean_ns())
    }
    fn check_params(&self, params: &Params) -> Result<(), AppError> {
        config(params).map(|_| ())
    }
    /// The server's own draws (pauses, slow requests, noise) from fixed seeds: the same
    /// in every run. A run draws them from its own seed ([`App::server_for_run`]).
    fn server(
        &self,
        data: &DataCtx,
        params: &Params,
        threads: usize,
    ) -> Result<Arc<dyn Server>, AppError> {
        self.server_for_run(data, params, threads, 0)
    }
    fn server_for_run(
        &self,
        _: &DataCtx,
        params: &Params,
        threads: usize,
        seed: u64,
    ) -> Result<Arc<dyn Server>, AppError> {
        let c = config(params)?;
        for w in c.warnings() {
            eprintln!("warning: synth: {w} (allowed; check the units)");
        }
        let iters_per_us = if c.spin == Spin::Work {
            calibrate()
        } else {
            0.0
        };
        let lock = |d: &Option<Dist>| d.as_ref().map(|_| HybridLock::new(c.lock_spin_ns));
        Ok(Arc::new(SynthServer(Arc::new(Shared {
            stall: c.stall,
            spin: c.spin,
            iters_per_us,
            measure_start: AtomicU64::new(0),
            request_len: c.request_len(),
            faults: c.faults,
            recv_lock: lock(&c.recv_lock),
            send_lock: lock(&c.send_lock),
            threads,
            workers: AtomicUsize::new(0),
            noisy_workers: AtomicUsize::new(0),
            noise_events: AtomicU64::new(0),
            noise_ns: AtomicU64::new(0),
            noise: c.noise,
            noise_seed: seeded(NOISE_SEED, seed),
            pause: c.pause.map(|p| {
                let mut clock = PauseClock::new(&p, seeded(PAUSE_SEED, seed), now_ns());
                let first = clock.first_count().unwrap_or(0);
                (p, parking_lot::Mutex::new(clock), AtomicU64::new(first))
            }),
            pause_hits: AtomicU64::new(0),
            pause_ns: AtomicU64::new(0),
            periodic: c.periodic.map(|p| {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(seeded(PERIODIC_SEED, seed));
                // The first slow request falls anywhere in the first gap.
                let g = p.gap(&mut rng);
                let first = rand::Rng::gen_range(&mut rng, 1..=g);
                (p, AtomicU64::new(first), parking_lot::Mutex::new(rng))
            }),
            periodic_hits: AtomicU64::new(0),
            periodic_ns: AtomicU64::new(0),
            scale: c.scale,
            started: AtomicU64::new(0),
            cold: c.cold,
            cold_requests: AtomicU64::new(0),
            cold_factor_micro: AtomicU64::new(0),
            speed: c.speed.map(|sp| (sp, seeded(SPEED_SEED, seed), now_ns())),
            speed_requests: AtomicU64::new(0),
            speed_factor_micro: AtomicU64::new(0),
        }))))
    }
    fn client(&self, _: &DataCtx, params: &Params, seed: u64) -> Result<Box<dyn Client>, AppError> {
        let c = config(params)?;
        Ok(Box::new(SynthClient {
            scale: c.scale,
            dist: c.service,
            recv: c.recv_lock,
            send: c.send_lock,
            faults: c.faults,
            drawn: 0,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        }))
    }
}

/// Draws service times (and critical-section lengths); the payload is the service time in
/// ns (u64 LE), followed by the recv and send critical sections' ns when a lock is set, and
/// the pages to fault when `faults=` is set.
pub struct SynthClient {
    dist: Dist,
    scale: f64,
    recv: Option<Dist>,
    send: Option<Dist>,
    faults: Option<Faults>,
    /// Requests drawn so far: the next one's index in the schedule.
    drawn: u64,
    rng: Xoshiro256PlusPlus,
}

impl Client for SynthClient {
    fn next_request(&mut self, out: &mut Vec<u8>) {
        let ns = (self.dist.sample(&mut self.rng) * self.scale).round() as u64;
        out.extend_from_slice(&ns.to_le_bytes());
        if self.recv.is_some() || self.send.is_some() {
            for d in [&self.recv, &self.send] {
                let cs = d
                    .as_ref()
                    .map_or(0, |d| d.sample(&mut self.rng).round() as u64);
                out.extend_from_slice(&cs.to_le_bytes());
            }
        }
        if let Some(f) = &self.faults {
            out.extend_from_slice(&f.pages_for(self.drawn).to_le_bytes());
        }
        self.drawn += 1;
    }
}

pub use server::*;
