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

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use taillab_core::clock::{now_ns, sleep_until, spin_until};
use taillab_core::dist::{parse_duration_ns, Dist};
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
        help: "clock = spin on the clock (exact wall time); work = calibrated loop that preemption stretches",
    },
];

/// A stall: all workers stop serving for `len_ns` from `at_ns` into the measured phase.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stall {
    pub at_ns: u64,
    pub len_ns: u64,
}

fn parse_stall(v: &str) -> Result<Option<Stall>, AppError> {
    if v == "none" {
        return Ok(None);
    }
    let bad = |why: String| AppError::BadParam {
        key: "stall".into(),
        value: v.into(),
        expected: format!("{why}; write it as at:2s,for:500ms (or none)"),
    };
    let (mut at, mut len) = (None, None);
    for part in v.split(',') {
        let (k, d) = part.split_once(':').ok_or_else(|| bad(format!("`{part}` is not key:duration")))?;
        let d = parse_duration_ns(d).map_err(bad)? as u64;
        match k.trim() {
            "at" => at = Some(d),
            "for" => len = Some(d),
            other => return Err(bad(format!("unknown part `{other}`"))),
        }
    }
    match (at, len) {
        (Some(at_ns), Some(len_ns)) if len_ns > 0 => Ok(Some(Stall { at_ns, len_ns })),
        _ => Err(bad("both at: and a positive for: are needed".into())),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Spin {
    Clock,
    Work,
}

struct Config {
    service: Dist,
    stall: Option<Stall>,
    spin: Spin,
}

fn config(p: &Params) -> Result<Config, AppError> {
    p.check_keys("synth", KEYS)?;
    let spec = p.get("service").unwrap_or("exp:200us");
    let service: Dist = spec.parse().map_err(|e: taillab_core::dist::DistError| AppError::BadParam {
        key: "service".into(),
        value: spec.into(),
        expected: e.to_string(),
    })?;
    let stall = parse_stall(p.get("stall").unwrap_or("none"))?;
    let spin = match p.get("spin").unwrap_or("clock") {
        "clock" => Spin::Clock,
        "work" => Spin::Work,
        v => {
            return Err(AppError::BadParam { key: "spin".into(), value: v.into(), expected: "clock or work".into() })
        }
    };
    Ok(Config { service, stall, spin })
}

/// The synth app factory.
pub struct Synth;

/// The app, for registration in the CLI.
pub fn app() -> Arc<dyn App> {
    Arc::new(Synth)
}

impl App for Synth {
    fn name(&self) -> &'static str {
        "synth"
    }
    fn about(&self) -> &'static str {
        "synthetic server that busy-waits a service time drawn per request (the harness's test instrument)"
    }
    fn keys(&self) -> &'static [KeySpec] {
        KEYS
    }
    fn expected_service_ns(&self, params: &Params) -> Option<f64> {
        config(params).ok().map(|c| c.service.mean())
    }
    fn server(&self, _: &DataCtx, params: &Params, _threads: usize) -> Result<Arc<dyn Server>, AppError> {
        let c = config(params)?;
        let iters_per_us = if c.spin == Spin::Work { calibrate() } else { 0.0 };
        Ok(Arc::new(SynthServer(Arc::new(Shared {
            stall: c.stall,
            spin: c.spin,
            iters_per_us,
            measure_start: AtomicU64::new(0),
        }))))
    }
    fn client(&self, _: &DataCtx, params: &Params, seed: u64) -> Result<Box<dyn Client>, AppError> {
        let c = config(params)?;
        Ok(Box::new(SynthClient { dist: c.service, rng: Xoshiro256PlusPlus::seed_from_u64(seed) }))
    }
}

/// Draws service times; the payload is the service time in ns (u64 LE).
pub struct SynthClient {
    dist: Dist,
    rng: Xoshiro256PlusPlus,
}

impl Client for SynthClient {
    fn next_request(&mut self, out: &mut Vec<u8>) {
        let ns = self.dist.sample(&mut self.rng).round() as u64;
        out.extend_from_slice(&ns.to_le_bytes());
    }
}

pub struct SynthServer(Arc<Shared>);

struct Shared {
    stall: Option<Stall>,
    spin: Spin,
    iters_per_us: f64,
    /// Start of the measured phase (0 until the harness says), for stalls.
    measure_start: AtomicU64,
}

impl Server for SynthServer {
    fn worker(&self, _index: usize) -> Result<Box<dyn Worker>, AppError> {
        Ok(Box::new(SynthWorker(self.0.clone())))
    }
    fn begin_measurement(&self, at_ns: u64) {
        self.0.measure_start.store(at_ns, Ordering::Release);
    }
}

/// Spins a calibrated amount of arithmetic; returns a value so the loop is not optimised away.
#[inline(never)]
fn work(iters: u64) -> u64 {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in 0..iters {
        x = x.rotate_left(7) ^ i.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    }
    std::hint::black_box(x)
}

/// Iterations of [`work`] per µs on this core (best of several tries, so a
/// preempted try does not skew it).
fn calibrate() -> f64 {
    let n = 2_000_000;
    (0..5)
        .map(|_| {
            let t = now_ns();
            work(n);
            n as f64 / ((now_ns() - t) as f64 / 1e3)
        })
        .fold(0.0, f64::max)
}

struct SynthWorker(Arc<Shared>);

impl Worker for SynthWorker {
    fn handle(&mut self, req: &[u8], resp: &mut Vec<u8>) -> Result<(), AppError> {
        let s = &*self.0;
        let bytes: [u8; 8] = req
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| AppError::Request(format!("synth request must be 8 bytes, got {}", req.len())))?;
        let svc = u64::from_le_bytes(bytes);
        let mut start = now_ns();
        if let Some(st) = s.stall {
            let ms = s.measure_start.load(Ordering::Acquire);
            if ms > 0 && start >= ms + st.at_ns && start < ms + st.at_ns + st.len_ns {
                // The server is stopped: this worker serves nothing until the stall ends.
                sleep_until(ms + st.at_ns + st.len_ns);
                start = now_ns();
            }
        }
        match s.spin {
            Spin::Clock => {
                spin_until(start + svc);
            }
            Spin::Work => {
                work((svc as f64 / 1e3 * s.iters_per_us) as u64);
            }
        }
        resp.extend_from_slice(&svc.to_le_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stall_spec() {
        assert_eq!(parse_stall("none").unwrap(), None);
        assert_eq!(parse_stall("at:2s,for:500ms").unwrap(), Some(Stall { at_ns: 2_000_000_000, len_ns: 500_000_000 }));
        for bad in ["at:2s", "for:1s", "at:2,for:1s", "at:1s,for:0s", "when:1s,for:1s", "x"] {
            assert!(parse_stall(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn client_is_seeded_and_server_spins_the_drawn_time() {
        let p = Params::parse(["service=uniform:100us,300us"]).unwrap();
        let ctx = DataCtx { root: std::env::temp_dir() };
        let mut a = Synth.client(&ctx, &p, 5).unwrap();
        let mut b = Synth.client(&ctx, &p, 5).unwrap();
        let (mut x, mut y) = (Vec::new(), Vec::new());
        for _ in 0..100 {
            a.next_request(&mut x);
            b.next_request(&mut y);
        }
        assert_eq!(x, y);
        let server = Synth.server(&ctx, &p, 1).unwrap();
        let mut w = server.worker(0).unwrap();
        let mut resp = Vec::new();
        let req = 250_000u64.to_le_bytes();
        let t = now_ns();
        w.handle(&req, &mut resp).unwrap();
        let took = now_ns() - t;
        assert!(took >= 250_000, "spun only {took} ns");
        assert_eq!(resp, req);
        assert!(w.handle(&[1, 2], &mut resp).is_err());
    }

    #[test]
    fn work_spin_is_calibrated() {
        let p = Params::parse(["service=fixed:1ms", "spin=work"]).unwrap();
        let ctx = DataCtx { root: std::env::temp_dir() };
        let server = Synth.server(&ctx, &p, 1).unwrap();
        let mut w = server.worker(0).unwrap();
        let mut best = u64::MAX;
        for _ in 0..5 {
            let t = now_ns();
            w.handle(&1_000_000u64.to_le_bytes(), &mut Vec::new()).unwrap();
            best = best.min(now_ns() - t);
        }
        // Best of five: within ±30 % of 1 ms even on a busy VM.
        assert!((700_000..1_300_000).contains(&best), "work spin of 1 ms took {best} ns");
    }

    #[test]
    fn bad_params_name_the_key() {
        let ctx = DataCtx { root: std::env::temp_dir() };
        for (p, key) in [("service=exp:1", "service"), ("spin=fast", "spin"), ("stall=at:1s", "stall"), ("sevrice=exp:1us", "sevrice")] {
            let e = Synth.server(&ctx, &Params::parse([p]).unwrap(), 1).err().unwrap().to_string();
            assert!(e.contains(key), "{p}: {e}");
        }
    }
}
