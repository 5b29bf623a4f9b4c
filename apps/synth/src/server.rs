//! The server side of synth: its shared state (the planted lock, pauses, periodic slow
//! requests, speed and noise, each seeded from the run's seed), the calibrated spin, and the
//! worker that serves a request.

use super::*;

/// The server: state all workers share (locks, noise counters, the stall).
pub struct SynthServer(pub(super) Arc<Shared>);

pub(super) struct Shared {
    pub(super) stall: Option<Stall>,
    pub(super) spin: Spin,
    pub(super) iters_per_us: f64,
    /// Start of the measured phase (0 until the harness says), for stalls.
    pub(super) measure_start: AtomicU64,
    pub(super) request_len: usize,
    /// `faults=`: each worker faults the pages a request asks for.
    pub(super) faults: Option<Faults>,
    pub(super) recv_lock: Option<HybridLock>,
    pub(super) send_lock: Option<HybridLock>,
    pub(super) noise: Noise,
    /// Seeds the workers' noise processes (with each worker's index).
    pub(super) noise_seed: u64,
    pub(super) threads: usize,
    pub(super) workers: AtomicUsize,
    pub(super) noisy_workers: AtomicUsize,
    pub(super) noise_events: AtomicU64,
    pub(super) noise_ns: AtomicU64,
    /// `pause=`: its spec, the server's timeline, the count of the next request-driven
    /// pause; the pauses that met a request and the ns they added.
    pub(super) pause: Option<(Pause, parking_lot::Mutex<PauseClock>, AtomicU64)>,
    pub(super) pause_hits: AtomicU64,
    pub(super) pause_ns: AtomicU64,
    /// `periodic=`: its spec, the count of the next slow request, the draws' generator;
    /// slow requests served and their summed service (ns).
    pub(super) periodic: Option<(Periodic, AtomicU64, parking_lot::Mutex<Xoshiro256PlusPlus>)>,
    pub(super) periodic_hits: AtomicU64,
    pub(super) periodic_ns: AtomicU64,
    /// `scale=`, for periodic draws (the client scales its own).
    pub(super) scale: f64,
    /// Requests started, for `pause=requests:N` and `periodic=`.
    pub(super) started: AtomicU64,
    pub(super) cold: Option<Cold>,
    /// Requests served with `cold` set, and the sum of their factors in millionths.
    pub(super) cold_requests: AtomicU64,
    pub(super) cold_factor_micro: AtomicU64,
    /// `speed=`: its spec, the seed of its order and the origin of its stretches; requests
    /// it slowed or sped and the sum of their factors in millionths.
    pub(super) speed: Option<(Speed, u64, u64)>,
    pub(super) speed_requests: AtomicU64,
    pub(super) speed_factor_micro: AtomicU64,
}

/// The server's pause timeline is seeded from this.
pub(super) const PAUSE_SEED: u64 = 0x7061_7573_6531;
/// The periodic slow requests' gaps and lengths are seeded from this.
pub(super) const PERIODIC_SEED: u64 = 0x7065_7269_6f64;
/// The order of `speed=`'s factors is seeded from this.
pub(super) const SPEED_SEED: u64 = 0x7370_6565_6431;

/// Noise processes of worker `w` are seeded from this (with the run's) and `w`.
pub(super) const NOISE_SEED: u64 = 0x6e6f_6973_6531;

/// One of the server's seeds for a run: the constant itself for seed 0 (what
/// [`App::server`] gives), else mixed with the run's seed.
pub(super) fn seeded(constant: u64, run: u64) -> u64 {
    if run == 0 {
        constant
    } else {
        taillab_core::arrival::derive_seed(constant ^ run, 1)
    }
}

impl Server for SynthServer {
    fn worker(&self, index: usize) -> Result<Box<dyn Worker>, AppError> {
        let s = &self.0;
        // Called on the worker's own thread, after the harness pinned it (--cpus).
        let noise = WorkerNoise::new(
            &s.noise,
            &allowed_cpus(),
            taillab_core::arrival::derive_seed(s.noise_seed, index as u64),
            now_ns(),
        );
        let hit = if noise.active() {
            s.noisy_workers.fetch_add(1, Ordering::Relaxed) + 1
        } else {
            s.noisy_workers.load(Ordering::Relaxed)
        };
        let made = s.workers.fetch_add(1, Ordering::Relaxed) + 1;
        if made == s.threads && hit == 0 && !s.noise.0.is_empty() {
            eprintln!(
                "warning: synth: noise `{}` hits no worker: none is pinned within its cpus= (pin them with --cpus)",
                s.noise
            );
        }
        Ok(Box::new(SynthWorker {
            s: self.0.clone(),
            noise,
            warmth: 0.0,
            last_end: None,
            dealer: Dealer::default(),
            fault_buf: s.faults.and_then(|f| FaultBuffer::new(f.pages as usize)),
        }))
    }
    fn begin_measurement(&self, at_ns: u64) {
        self.0.measure_start.store(at_ns, Ordering::Release);
    }
    fn report(&self) -> serde_json::Value {
        let s = &self.0;
        let mut out = serde_json::Map::new();
        for (k, l) in [("recv_lock", &s.recv_lock), ("send_lock", &s.send_lock)] {
            if let Some(l) = l {
                out.insert(k.into(), l.stats());
            }
        }
        if !s.noise.0.is_empty() {
            out.insert(
                "noise".into(),
                serde_json::json!({
                    "spec": s.noise.to_string(),
                    "workers_hit": s.noisy_workers.load(Ordering::Relaxed),
                    "events": s.noise_events.load(Ordering::Relaxed),
                    "added_ns": s.noise_ns.load(Ordering::Relaxed),
                }),
            );
        }
        if let Some((p, _, _)) = &s.pause {
            out.insert(
                "pause".into(),
                serde_json::json!({
                    "spec": p.to_string(),
                    "hits": s.pause_hits.load(Ordering::Relaxed),
                    "added_ns": s.pause_ns.load(Ordering::Relaxed),
                }),
            );
        }
        if let Some((p, _, _)) = &s.periodic {
            let hits = s.periodic_hits.load(Ordering::Relaxed);
            let sum = s.periodic_ns.load(Ordering::Relaxed) as f64;
            out.insert(
                "periodic".into(),
                serde_json::json!({
                    "spec": p.to_string(),
                    "hits": hits,
                    "mean_ns": if hits > 0 { sum / hits as f64 } else { 0.0 },
                }),
            );
        }
        if let Some(c) = s.cold {
            let n = s.cold_requests.load(Ordering::Relaxed);
            let sum = s.cold_factor_micro.load(Ordering::Relaxed) as f64 / 1e6;
            out.insert(
                "cold".into(),
                serde_json::json!({
                    "extra": c.extra,
                    "tau_ns": c.tau_ns,
                    "power": c.power,
                    "requests": n,
                    "mean_factor": if n > 0 { sum / n as f64 } else { 1.0 },
                }),
            );
        }
        if let Some((sp, _, _)) = &s.speed {
            let n = s.speed_requests.load(Ordering::Relaxed);
            let sum = s.speed_factor_micro.load(Ordering::Relaxed) as f64 / 1e6;
            out.insert(
                "speed".into(),
                serde_json::json!({
                    "spec": sp.to_string(),
                    "requests": n,
                    "mean_factor": if n > 0 { sum / n as f64 } else { 1.0 },
                }),
            );
        }
        if out.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::Value::Object(out)
        }
    }
}

/// The CPUs the calling thread may run on (empty when the kernel will not say).
pub(super) fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; we pass its true size; CPU_ISSET only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..8 * std::mem::size_of::<libc::cpu_set_t>())
            .filter(|&i| libc::CPU_ISSET(i, &set))
            .collect()
    }
}

/// Spins a calibrated amount of arithmetic; returns a value so the loop is not optimised away.
#[inline(never)]
pub(super) fn work(iters: u64) -> u64 {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in 0..iters {
        x = x.rotate_left(7) ^ i.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    }
    std::hint::black_box(x)
}

/// Iterations of [`work`] per µs on this core (best of several tries, so a
/// preempted try does not skew it).
pub(super) fn calibrate() -> f64 {
    let n = 2_000_000;
    (0..5)
        .map(|_| {
            let t = now_ns();
            work(n);
            n as f64 / ((now_ns() - t) as f64 / 1e3)
        })
        .fold(0.0, f64::max)
}

pub(super) struct SynthWorker {
    pub(super) s: Arc<Shared>,
    pub(super) noise: WorkerNoise,
    /// Warmth for `cold=` (0 = cold), and when this worker last finished a request.
    pub(super) warmth: f64,
    pub(super) last_end: Option<u64>,
    /// `speed=`: the current cycle's order of its factors.
    pub(super) dealer: Dealer,
    /// `faults=`: the pages it drops and touches.
    pub(super) fault_buf: Option<FaultBuffer>,
}

/// Keeps the CPU busy for `ns` of work plus whatever noise hits it meanwhile.
pub(super) fn busy(s: &Shared, noise: &mut WorkerNoise, ns: u64) {
    let start = now_ns();
    let mut end = match s.spin {
        Spin::Clock | Spin::Sleep => start + ns,
        Spin::Work => {
            work((ns as f64 / 1e3 * s.iters_per_us) as u64);
            now_ns()
        }
    };
    if noise.active() {
        let (e0, n0) = (noise.events, noise.added_ns);
        end = noise.extend(start, end);
        s.noise_events
            .fetch_add(noise.events - e0, Ordering::Relaxed);
        s.noise_ns.fetch_add(noise.added_ns - n0, Ordering::Relaxed);
    }
    if let Some((_, clock, _)) = &s.pause {
        let (stretched, hits) = clock.lock().extend(start, end);
        if hits > 0 {
            s.pause_hits.fetch_add(hits, Ordering::Relaxed);
            s.pause_ns.fetch_add(stretched - end, Ordering::Relaxed);
        }
        end = stretched;
    }
    if s.spin == Spin::Sleep {
        sleep_until(end);
    } else {
        spin_until(end);
    }
}

/// A critical section of `ns` under `lock`, if that lock is set.
pub(super) fn critical(s: &Shared, noise: &mut WorkerNoise, lock: Option<&HybridLock>, ns: u64) {
    if let Some(l) = lock {
        let _g = l.lock();
        busy(s, noise, ns);
    }
}

pub(super) fn field(req: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(req[8 * i..8 * i + 8].try_into().expect("length checked"))
}

impl Worker for SynthWorker {
    fn handle(&mut self, req: &[u8], resp: &mut Vec<u8>) -> Result<(), AppError> {
        let SynthWorker {
            s,
            noise,
            warmth,
            last_end,
            dealer,
            fault_buf,
        } = self;
        let s: &Shared = s;
        if req.len() < s.request_len {
            return Err(AppError::Request(format!(
                "synth request must be {} bytes with these settings, got {} (client and server need the same --set)",
                s.request_len,
                req.len()
            )));
        }
        let drawn = field(req, 0);
        let mut svc = drawn;
        if let Some(st) = s.stall {
            let ms = s.measure_start.load(Ordering::Acquire);
            let start = now_ns();
            if ms > 0 && start >= ms + st.at_ns && start < ms + st.at_ns + st.len_ns {
                // The server is stopped: this worker serves nothing until the stall ends.
                sleep_until(ms + st.at_ns + st.len_ns);
            }
        }
        let by_count =
            s.periodic.is_some() || matches!(s.pause, Some((Pause::Requests { .. }, _, _)));
        let nth = if by_count {
            s.started.fetch_add(1, Ordering::Relaxed) + 1
        } else {
            0
        };
        if let Some((Pause::Requests { .. }, clock, next)) = &s.pause {
            // The request that fills the count stops the world, itself included. Counts
            // are unique, so one request matches; only it moves `next` on.
            if nth == next.load(Ordering::Acquire) {
                let mut c = clock.lock();
                c.trigger(now_ns());
                next.store(nth + c.next_gap(), Ordering::Release);
            }
        }
        let mut warm_anyway = false;
        if let Some((p, next, rng)) = &s.periodic {
            // Counts are unique, so one request matches; only it moves `next` on.
            if nth == next.load(Ordering::Acquire) {
                warm_anyway = !p.cold;
                let mut rng = rng.lock();
                svc = (p.length.sample(&mut *rng) * s.scale).round().max(0.0) as u64;
                next.store(nth + p.gap(&mut *rng), Ordering::Release);
                s.periodic_hits.fetch_add(1, Ordering::Relaxed);
                s.periodic_ns.fetch_add(svc, Ordering::Relaxed);
            }
        }
        // Only `cold=` and `speed=` read the clock before the request, once.
        let begin = (s.cold.is_some() || s.speed.is_some()).then(now_ns);
        if let (Some((sp, seed, origin)), Some(t)) = (&s.speed, begin) {
            // The host's speed applies to whatever the request serves, slow ones included.
            let f = dealer.factor(sp, *seed, t.saturating_sub(*origin));
            svc = (svc as f64 * f).round() as u64;
            s.speed_requests.fetch_add(1, Ordering::Relaxed);
            s.speed_factor_micro
                .fetch_add((f * 1e6).round() as u64, Ordering::Relaxed);
        }
        let cold_start = s.cold.zip(begin).map(|(c, start)| {
            if let Some(end) = *last_end {
                *warmth = c.cooled(*warmth, start.saturating_sub(end) as f64);
            }
            // A slow request with `cold=no` is served at its drawn length (and warms).
            let f = if warm_anyway { 1.0 } else { c.factor(*warmth) };
            svc = (svc as f64 * f).round() as u64;
            s.cold_requests.fetch_add(1, Ordering::Relaxed);
            s.cold_factor_micro
                .fetch_add((f * 1e6).round() as u64, Ordering::Relaxed);
            (c, start)
        });
        let locks = s.recv_lock.is_some() || s.send_lock.is_some();
        if let Some(b) = fault_buf.as_mut() {
            let pages = field(req, if locks { 3 } else { 1 });
            if pages > 0 {
                b.fault(pages as usize);
            }
        }
        if locks {
            critical(s, noise, s.recv_lock.as_ref(), field(req, 1));
        }
        busy(s, noise, svc);
        if locks {
            critical(s, noise, s.send_lock.as_ref(), field(req, 2));
        }
        if let Some((c, start)) = cold_start {
            let end = now_ns();
            *warmth = c.warmed(*warmth, end.saturating_sub(start) as f64);
            *last_end = Some(end);
        }
        resp.extend_from_slice(&drawn.to_le_bytes());
        Ok(())
    }
}
