//! The real binary against queueing theory, a server stall, and bad input.
//!
//! Bounds: each is the claim it backs (docs/methodology.md: undisturbed runs within 3 % of
//! theory at mean and p99 for ρ ≤ 0.7; the harness's own error within 5 % of an exact
//! replay of a run's own draws, 15 % for the thread shaper) plus four standard errors of the
//! run's own sampling noise at its request count (from 40 simulated runs of each queue, see
//! each test), so that a correct harness misses only when the host adds latency. Noise on a
//! shared VM only ever adds latency, so below theory only the sampling noise is allowed. A
//! wrong formula, coordinated omission or a harness that adds its own delay is off by far
//! more (TailBench's harness was +52–78 % on the M/M/1 mean here). A comparison that fails
//! is retried (see `within_tries`): a try on a host the run's environment check calls
//! disturbed is not counted, three undisturbed failures fail the test; a systematic error
//! fails every try.

use serde_json::Value;
use std::path::Path;
use std::process::Command;

mod common;
use common::*;

/// Timing tests must not share the 2 cores with each other: one at a time.
fn run(args: &[&str], out: &Path) -> Value {
    let s = common::run(args, out);
    if let Some(why) = host_disturbed(&s) {
        *LAST_DISTURBED.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
    }
    s
}

fn soj(s: &Value, k: &str) -> f64 {
    s["latency_ns"]["sojourn"][k].as_f64().unwrap()
}

/// Why the last `run` was disturbed (its environment check failed: steal,
/// other processes, preempted workers), if it was. Tests are serial.
static LAST_DISTURBED: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// [`common::within_tries`] with the disturbance the last `run` saw.
fn within_tries(name: &str, mut attempt: impl FnMut(u64) -> Result<(), String>) {
    common::within_tries(name, 6, 3, |k| {
        *LAST_DISTURBED.lock().unwrap_or_else(|e| e.into_inner()) = None;
        attempt(k).map_err(|e| {
            (
                e,
                LAST_DISTURBED
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take(),
            )
        })
    })
}

fn rel(x: f64, want: f64) -> f64 {
    x / want - 1.0
}

/// The claim against theory: within 3 % at mean and p99 (docs/methodology.md, the accuracy
/// benchmark's target for ρ ≤ 0.7).
const CLAIM: f64 = 0.03;

/// Asymmetric bounds around theory for a statistic whose relative sampling standard error at
/// the run's request count is `se`: noise on a shared VM (vCPU preemption, steal) only ever
/// *adds* latency, while coordinated omission or a wrong formula shows on either side. Below
/// by more than four standard errors fails; above is allowed the claim on top of them.
fn within(x: f64, want: f64, se: f64) -> bool {
    within_claim(x, want, se, CLAIM)
}

/// [`within`] for a path whose claim is `claim` rather than [`CLAIM`].
fn within_claim(x: f64, want: f64, se: f64, claim: f64) -> bool {
    (-4.0 * se..=claim + 4.0 * se).contains(&rel(x, want))
}

/// `name`'s mean and p99 against theory, as [`within`] judges them, for the message and the
/// log of every try.
fn against_theory(name: &str, s: &Value, th: (f64, f64), se: (f64, f64)) -> Result<(), String> {
    let (m, p) = (soj(s, "mean"), soj(s, "p99"));
    let msg = format!(
        "{name}: mean {m:.0} vs {:.0} ns ({:+.1}%, allowed {:+.1}…{:+.1}%), p99 {p:.0} vs {:.0} ns ({:+.1}%, allowed {:+.1}…{:+.1}%)",
        th.0,
        rel(m, th.0) * 100.0,
        -400.0 * se.0,
        (CLAIM + 4.0 * se.0) * 100.0,
        th.1,
        rel(p, th.1) * 100.0,
        -400.0 * se.1,
        (CLAIM + 4.0 * se.1) * 100.0,
    );
    eprintln!("{msg}");
    if within(m, th.0, se.0) && within(p, th.1, se.1) {
        Ok(())
    } else {
        Err(msg)
    }
}

#[test]
fn mm1_matches_theory() {
    let _serial = serial();
    // M/M/1, λ = 2500/s, E[S] = 200 µs: ρ = 0.5, mean 400 µs, p99 = ln(100)/(μ−λ).
    let (mean_th, p99_th) = (400e3, 100f64.ln() / 2500.0 * 1e9);
    within_tries("M/M/1", |k| {
        let out = tmp(&format!("mm1-{k}"));
        let seed = (10 + k).to_string();
        let s = run(
            &[
                "--app",
                "synth",
                "--qps",
                "2500",
                "--warmup-requests",
                "5000",
                "--requests",
                "60000",
                "--seed",
                &seed,
                "--set",
                "service=exp:200us",
            ],
            &out,
        );
        assert_eq!(s["schema"], "taillab.run/2");
        assert_eq!(s["requests"]["warmup"], 5000);
        let _ = std::fs::remove_dir_all(&out);
        whole(&s, 60000)?;
        // 60 000 requests of M/M/1 at ρ 0.5: the mean's standard error is 1.2 %, the p99's
        // 2.6 % (40 simulated runs), so −4.8…+7.8 % and −10.4…+13.4 %.
        against_theory("M/M/1", &s, (mean_th, p99_th), (0.012, 0.026))
    });
}

#[test]
fn md1_matches_theory() {
    let _serial = serial();
    // M/D/1, λ = 2500/s, S = 200 µs: Pollaczek–Khinchine mean = 200 + 100 µs.
    // Its p99 comes from an exact FIFO replay of a long simulated M/D/1 run.
    let mean_th = taillab_core::model::mg1_mean(2500.0, 200e3, 200e3 * 200e3);
    let p99_th = simulated_p99(2500.0, "fixed:200us", 1);
    within_tries("M/D/1", |k| {
        let out = tmp(&format!("md1-{k}"));
        let seed = (20 + k).to_string();
        let s = run(
            &[
                "--app",
                "synth",
                "--qps",
                "2500",
                "--warmup-requests",
                "5000",
                "--requests",
                "60000",
                "--seed",
                &seed,
                "--set",
                "service=fixed:200us",
            ],
            &out,
        );
        let _ = std::fs::remove_dir_all(&out);
        whole(&s, 60000)?;
        let svc = s["latency_ns"]["service"]["p50"].as_f64().unwrap();
        assert!((svc / 200e3 - 1.0).abs() < 0.01, "fixed service p50 {svc}");
        // 60 000 requests of M/D/1 at ρ 0.5: standard errors 0.54 % (mean), 1.8 % (p99).
        against_theory("M/D/1", &s, (mean_th, p99_th), (0.0054, 0.018))
    });
}

/// Every one of `n` requests was measured: a host so busy that the run saturated ends it at
/// its drain deadline with fewer, and says so (`incomplete`), which is an error of the try
/// (excused where the host was disturbed), not of the test.
fn whole(s: &Value, n: u64) -> Result<(), String> {
    match s["requests"]["measured"].as_u64() {
        Some(m) if m == n => Ok(()),
        m => Err(format!(
            "measured {m:?} of {n} requests: {}",
            s["incomplete"]
        )),
    }
}

/// The p99 sojourn of 1 M requests of a Poisson stream at `qps` through `servers` FIFO
/// servers of `service` (an exact replay: what theory says where no closed form is at hand).
fn simulated_p99(qps: f64, service: &str, servers: usize) -> f64 {
    use rand::SeedableRng;
    use taillab_core::arrival::{ArrivalProcess, Poisson};
    let mut p = Poisson::new(qps, 99);
    let dist: taillab_core::dist::Dist = service.parse().unwrap();
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(98);
    let n = 1_000_000;
    let a: Vec<u64> = (0..n).map(|_| p.next_offset_ns()).collect();
    let s: Vec<u64> = (0..n).map(|_| dist.sample(&mut rng) as u64).collect();
    let mut soj = taillab_core::model::fifo_replay(&a, &s, servers);
    soj.sort_unstable();
    taillab_core::model::quantile(&soj, 0.99) as f64
}

/// What a single-worker run's `requests.csv` says about the harness itself.
struct ReplayCheck {
    /// Measured sojourn mean and p99 (measured phase).
    mean: f64,
    p99: f64,
    /// The same from an exact FIFO replay of the run's intended arrivals and
    /// measured service times, with stalls longer than `STALL_NS` between
    /// requests charged to the machine (added to the next service time).
    replay_mean: f64,
    replay_p99: f64,
    /// Median time the harness itself put between a request becoming due
    /// (its intended time, or the end of the previous one) and its start.
    dispatch_p50: u64,
    /// Dispatch gaps over `STALL_NS` (vCPU preemption, not harness code): each
    /// request's id, when it was due (s into the run) and the gap (ns).
    stalls: Vec<(u64, f64, u64)>,
    /// Requests replayed.
    requests: usize,
}

/// No code path of the harness between two requests takes this long; a gap
/// this long is the VM descheduling the worker (docs/hosts.md: ms-scale steal).
const STALL_NS: u64 = 500_000;

/// Most dispatch gaps over `STALL_NS` a run may have excused, per request:
/// one in 2 000. The excuse holds for a VM that takes the worker's CPU away
/// now and then (quiet here: none to a few in a 32 000-request run); a
/// harness that stalled on a code path of its own would do so every few
/// requests and be caught, as would a host so busy that the replay measured
/// it rather than the harness.
const MAX_STALL_SHARE: f64 = 1.0 / 2000.0;

/// The same for the thread shaper on a host without two CPUs to spare for it (docs/hosts.md,
/// "A thread shaper needs two CPUs more than its workers"): its thread and the worker share
/// the CPUs with the host's own, and a quiet 2-vCPU VM gave 27-46 gaps over 500 µs in 32 000
/// requests (2026-12-01), and a fresh-clone CI on the same VM 67-103 (2026-12-06, nothing else
/// running, the replay still within 1.5-1.9 % at the mean and 0.3-3.8 % at p99: bursts of
/// requests each woken 1.01 ms late, the host's tick): one in 250 holds that and still catches
/// a code path that stalls every few requests.
const MAX_STALL_SHARE_THREAD: f64 = 1.0 / 250.0;

fn replay_check(out: &Path, warmup: usize) -> ReplayCheck {
    let csv = std::fs::read_to_string(out.join("requests.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next().unwrap(),
        "id,worker,intended,sent,enqueued,started,finished,completed,measured,enqueued_user,completed_user,ideal_completed"
    );
    let mut rows: Vec<Vec<u64>> = lines
        .map(|l| l.split(',').map(|x| x.parse().unwrap()).collect())
        .collect();
    for r in &rows {
        // intended ≤ sent = enqueued ≤ started ≤ finished = completed (in-process).
        assert!(
            r[2] <= r[3] && r[3] == r[4] && r[4] <= r[5] && r[5] <= r[6] && r[6] == r[7],
            "{r:?}"
        );
    }
    rows.sort_by_key(|r| r[0]);
    // One worker, FIFO: service order is id order.
    assert!(
        rows.windows(2).all(|w| w[0][6] <= w[1][5]),
        "not served in FIFO order"
    );
    let (mut prev_fin, mut dispatch, mut stalls) = (0u64, Vec::new(), Vec::new());
    let mut arr = Vec::new();
    let mut svc = Vec::new();
    let t0 = rows.first().map_or(0, |r| r[2]);
    for r in &rows {
        let due = r[2].max(prev_fin);
        let gap = r[5] - due;
        let mut s = r[6] - r[5];
        if gap > STALL_NS {
            stalls.push((r[0], (due - t0) as f64 / 1e9, gap));
            s += gap;
        }
        dispatch.push(gap);
        arr.push(r[2]);
        svc.push(s);
        prev_fin = r[6];
    }
    let ideal = taillab_core::model::fifo_replay(&arr, &svc, 1);
    let measured: Vec<u64> = rows.iter().map(|r| r[7] - r[2]).collect();
    let (mut a, mut b) = (ideal[warmup..].to_vec(), measured[warmup..].to_vec());
    let mean = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len() as f64;
    let (replay_mean, mean) = (mean(&a), mean(&b));
    a.sort_unstable();
    b.sort_unstable();
    dispatch.sort_unstable();
    ReplayCheck {
        mean,
        p99: taillab_core::model::quantile(&b, 0.99) as f64,
        replay_mean,
        replay_p99: taillab_core::model::quantile(&a, 0.99) as f64,
        dispatch_p50: taillab_core::model::quantile(&dispatch, 0.5),
        stalls,
        requests: rows.len(),
    }
}

impl ReplayCheck {
    /// The excused stalls, each named: `request 812 at 3.21 s: 0.73 ms`.
    fn named_stalls(&self) -> String {
        let each: Vec<String> = self
            .stalls
            .iter()
            .map(|(id, at, gap)| format!("request {id} at {at:.2} s: {:.2} ms", *gap as f64 / 1e6))
            .collect();
        each.join(", ")
    }

    /// Within `tol` of the replay on mean and p99, a median dispatch under
    /// `dispatch_max` ns, and at most `stall_share` of the requests excused as
    /// stalls.
    fn judge(&self, tol: f64, dispatch_max: u64, stall_share: f64) -> Result<(), String> {
        let most = (self.requests as f64 * stall_share).floor() as usize;
        let msg = format!(
            "mean {:.0} vs replay {:.0} ({:+.1}%), p99 {:.0} vs replay {:.0} ({:+.1}%), dispatch p50 {} ns, {} stalls > {} µs excused (at most {most}): [{}]",
            self.mean,
            self.replay_mean,
            rel(self.mean, self.replay_mean) * 100.0,
            self.p99,
            self.replay_p99,
            rel(self.p99, self.replay_p99) * 100.0,
            self.dispatch_p50,
            self.stalls.len(),
            STALL_NS / 1000,
            self.named_stalls()
        );
        eprintln!("{msg}");
        if rel(self.mean, self.replay_mean).abs() < tol
            && rel(self.p99, self.replay_p99).abs() < tol
            && self.dispatch_p50 < dispatch_max
            && self.stalls.len() <= most
        {
            Ok(())
        } else {
            Err(msg)
        }
    }
}

#[test]
fn harness_matches_replay_of_its_own_draws() {
    let _serial = serial();
    // Same arrivals, same measured service times, ideal FIFO: what is left
    // is the harness's own error, without sampling noise. The harness adds
    // send lag and dispatch time only: about a microsecond per request.
    within_tries("replay", |k| {
        let out = tmp(&format!("replay-{k}"));
        let seed = (30 + k).to_string();
        let s = run(
            &[
                "--app",
                "synth",
                "--qps",
                "2500",
                "--warmup-requests",
                "2000",
                "--requests",
                "30000",
                "--seed",
                &seed,
                "--set",
                "service=exp:200us",
                "--save-requests",
            ],
            &out,
        );
        if let Err(e) = whole(&s, 30000) {
            let _ = std::fs::remove_dir_all(&out);
            return Err(e);
        }
        let c = replay_check(&out, 2000);
        assert!(
            (c.mean - soj(&s, "mean")).abs() < 1.0,
            "summary mean disagrees with requests.csv"
        );
        let _ = std::fs::remove_dir_all(&out);
        c.judge(0.05, 10_000, MAX_STALL_SHARE)
    });
}

#[test]
fn ten_microsecond_services_at_rho_08_match_their_ideal() {
    let _serial = serial();
    // At 10 µs services a harness cost δ per request moves the mean by about δ/S ÷ (1 − ρ):
    // with a lock around the claim and the bookkeeping between requests, one worker at ρ 0.8
    // measured 1.12× its ideal mean here (1.15× on a 16-CPU host). Now the claim is an atomic
    // ticket inside the service time and the bookkeeping runs off the path (a helper on the
    // free CPU), so what is left is the wake-up of an idle worker: well under 1 %.
    within_tries("exp:10us at 0.8", |k| {
        let out = tmp(&format!("ten-us-{k}"));
        let seed = (50 + k).to_string();
        let s = run(
            &[
                "--app",
                "synth",
                "--qps",
                "80000",
                "--warmup-requests",
                "20000",
                "--requests",
                "300000",
                "--seed",
                &seed,
                "--set",
                "service=exp:10us",
            ],
            &out,
        );
        let _ = std::fs::remove_dir_all(&out);
        let ideal = |k: &str| s["ideal"]["sojourn"][k].as_f64().unwrap();
        let (m, p) = (
            soj(&s, "mean") / ideal("mean"),
            soj(&s, "p99") / ideal("p99"),
        );
        let placed = &s["placement"]["workers"];
        if !(0.98..=1.05).contains(&m) || !(0.97..=1.05).contains(&p) {
            return Err(format!(
                "measured ÷ ideal mean {m:.3}, p99 {p:.3} (placement {})",
                s["placement"]
            ));
        }
        // One worker on a host of two CPUs or more is pinned to a CPU of its own by default.
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(
            placed.as_array().map(|a| a.len()),
            Some(usize::from(cpus >= 2)),
            "{}",
            s["placement"]
        );
        Ok(())
    });
}

#[test]
fn stall_is_charged_to_every_request_that_waited() {
    let _serial = serial();
    // 3 s at 1000 qps with the server stopped for 500 ms from 1 s: requests
    // arriving in the stall wait up to 500 ms; those in its first half wait
    // > 250 ms — about 1/12 of all. A closed-loop tester would send nothing
    // during the stall and report neither.
    let out = tmp("stall");
    let s = run(
        &[
            "--app",
            "synth",
            "--qps",
            "1000",
            "--duration",
            "3s",
            "--set",
            "service=fixed:100us",
            "--set",
            "stall=at:1s,for:500ms",
            "--save-requests",
        ],
        &out,
    );
    let max = soj(&s, "max");
    assert!(
        max >= 450e6,
        "max sojourn {max} ns: the stall was not charged"
    );
    let csv = std::fs::read_to_string(out.join("requests.csv")).unwrap();
    let soj: Vec<u64> = csv
        .lines()
        .skip(1)
        .map(|l| {
            l.split(',')
                .map(|x| x.parse::<u64>().unwrap())
                .collect::<Vec<_>>()
        })
        .filter(|r| r[8] == 1)
        .map(|r| r[7] - r[2])
        .collect();
    let frac = soj.iter().filter(|&&x| x > 250_000_000).count() as f64 / soj.len() as f64;
    assert!(
        (0.06..0.15).contains(&frac),
        "fraction over 250 ms = {frac:.3}, expected ≈ 1/12"
    );
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn two_workers_agree_with_mm2() {
    let _serial = serial();
    // M/M/2 at ρ = 0.4 with two inline workers: mean sojourn from Erlang C, p99 from an
    // exact FIFO replay of a long simulated M/M/2 run.
    let mean_th = taillab_core::model::mmc_mean(2, 4000.0, 200e3);
    let p99_th = simulated_p99(4000.0, "exp:200us", 2);
    within_tries("M/M/2", |k| {
        let out = tmp(&format!("mm2-{k}"));
        let s = run(
            &[
                "--app",
                "synth",
                "--qps",
                "4000",
                "--threads",
                "2",
                "--warmup-requests",
                "2000",
                "--requests",
                "30000",
                "--seed",
                &(40 + k).to_string(),
                "--set",
                "service=exp:200us",
            ],
            &out,
        );
        let _ = std::fs::remove_dir_all(&out);
        whole(&s, 30000)?;
        // 30 000 requests of M/M/2 at ρ 0.4: standard errors 0.84 % (mean), 1.8 % (p99).
        against_theory("M/M/2", &s, (mean_th, p99_th), (0.0084, 0.018))
    });
}

#[test]
fn summary_has_the_documented_shape_and_logs() {
    let _serial = serial();
    let out = tmp("shape");
    let s = run(
        &[
            "--app",
            "synth",
            "--qps",
            "2000",
            "--requests",
            "3000",
            "--set",
            "service=fixed:50us",
        ],
        &out,
    );
    for k in [
        "schema",
        "app",
        "config",
        "threads",
        "seed",
        "offered_qps",
        "achieved_qps",
        "duration_s",
        "host",
        "checks",
    ] {
        assert!(!s[k].is_null(), "summary.json lacks {k}");
    }
    for m in ["sojourn", "service", "queue", "send_lag"] {
        for q in ["mean", "p50", "p90", "p95", "p99", "p999", "max"] {
            assert!(s["latency_ns"][m][q].is_number(), "latency_ns.{m}.{q}");
        }
        let log = std::fs::read_to_string(out.join("hist").join(format!("{m}.hlog"))).unwrap();
        let lines: Vec<&str> = log.lines().filter(|l| l.starts_with("Tag=")).collect();
        assert!(!lines.is_empty(), "{m}.hlog has no intervals");
        // Interval counts add up to the measured count.
        let total: u64 = lines
            .iter()
            .map(|l| {
                taillab_core::collector::decode_hist(l.rsplit(',').next().unwrap())
                    .unwrap()
                    .len()
            })
            .sum();
        assert_eq!(total, 3000, "{m}.hlog intervals");
    }
    for c in ["rate", "send_lag", "saturation"] {
        assert!(s["checks"][c]["ok"].is_boolean(), "checks.{c}.ok");
    }
    assert_eq!(
        s["host"]["cores"].as_u64().unwrap() as usize,
        std::thread::available_parallelism().unwrap().get()
    );
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn saturation_is_detected_and_warned() {
    let _serial = serial();
    let out = tmp("sat");
    let o = Command::new(bin())
        .args([
            "run",
            "--app",
            "synth",
            "--qps",
            "3000",
            "--duration",
            "2s",
            "--set",
            "service=fixed:500us",
            "-q",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("will saturate"));
    let s: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(
        s["checks"]["saturation"]["ok"], false,
        "{}",
        s["checks"]["saturation"]
    );
    assert_eq!(s["checks"]["rate"]["ok"], false);
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn same_seed_same_requests() {
    let _serial = serial();
    let (a, b) = (tmp("seed-a"), tmp("seed-b"));
    let args = [
        "--app",
        "synth",
        "--qps",
        "500",
        "--requests",
        "300",
        "--seed",
        "5",
        "--set",
        "service=lognormal:50us,cv=2",
        "--save-requests",
    ];
    run(&args, &a);
    run(&args, &b);
    // Service times are drawn by the client from the seed: the spun times agree to within timer noise.
    let col = |d: &Path| -> Vec<u64> {
        std::fs::read_to_string(d.join("requests.csv"))
            .unwrap()
            .lines()
            .skip(1)
            .map(|l| {
                let r: Vec<u64> = l.split(',').map(|x| x.parse().unwrap()).collect();
                r[6] - r[5]
            })
            .collect()
    };
    let (x, y) = (col(&a), col(&b));
    assert_eq!(x.len(), y.len());
    let close = x
        .iter()
        .zip(&y)
        .filter(|(p, q)| (**p as i64 - **q as i64).abs() < 20_000)
        .count();
    assert!(
        close as f64 > 0.95 * x.len() as f64,
        "only {close}/{} service times agree",
        x.len()
    );
    std::fs::remove_dir_all(&a).unwrap();
    std::fs::remove_dir_all(&b).unwrap();
}

fn fails_with(args: &[&str], needle: &str) {
    let o = Command::new(bin()).args(args).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{args:?} exited {:?}: {err}",
        o.status.code()
    );
    assert!(
        err.contains(needle),
        "{args:?}: error `{err}` lacks `{needle}`"
    );
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
}

#[test]
fn bad_input_gets_one_clear_line() {
    let _serial = serial();
    let base = ["run", "--app", "synth", "--requests", "10", "-q"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        base.iter().copied().chain(extra.iter().copied()).collect()
    };
    fails_with(
        &["run", "--app", "nope", "--qps", "10", "--requests", "1"],
        "unknown app `nope`",
    );
    fails_with(
        &with(&["--qps", "10", "--config", "cloud"]),
        "unknown topology `cloud`",
    );
    fails_with(&with(&["--qps", "0"]), "--qps must be a positive number");
    fails_with(&with(&["--qps", "NaN"]), "`NaN` is not a number");
    fails_with(&with(&["--qps", "-5"]), "--qps");
    fails_with(
        &with(&["--qps", "10", "--threads", "0"]),
        "--threads must be in",
    );
    fails_with(
        &with(&["--qps", "10", "--set", "service=exp:200"]),
        "no unit",
    );
    fails_with(
        &with(&["--qps", "10", "--set", "colour=red"]),
        "has no setting `colour`",
    );
    // A setting refused when the app starts leaves no empty results folder.
    let out = tmp("bad-set");
    let out_s = out.to_str().unwrap().to_string();
    let leaked: &'static str = Box::leak(out_s.into_boxed_str());
    fails_with(
        &with(&["--qps", "10", "--set", "service=exp:200", "--out", leaked]),
        "no unit",
    );
    assert!(!out.exists(), "{} was left behind", out.display());
    fails_with(&with(&["--qps", "10", "--wait", "nap"]), "--wait");
    fails_with(
        &["run", "--app", "synth", "--qps", "10", "-q"],
        "--requests N or --duration",
    );
    fails_with(
        &with(&["--qps", "10", "--out", "/proc/taillab-cannot-write"]),
        "pick a writable --out",
    );
    fails_with(
        &with(&[
            "--qps",
            "10",
            "--discipline",
            "lifo",
            "--net-delay",
            "exp:5us",
        ]),
        "simulated for FIFO only",
    );
    fails_with(
        &with(&["--qps", "10", "--net-delay", "exp:5"]),
        "--net-delay",
    );
}

#[test]
fn thread_shaper_matches_replay_of_its_own_draws() {
    let _serial = serial();
    // The shaper thread + real queue (used for LIFO/random and the
    // transports): its hand-off to a worker costs a few µs more than the
    // inline claim; both cores are busy, so it gets a wider bound.
    within_tries("thread replay", |k| {
        let out = tmp(&format!("thr-{k}"));
        let s = run(
            &[
                "--app",
                "synth",
                "--qps",
                "2500",
                "--shaper",
                "thread",
                "--warmup-requests",
                "2000",
                "--requests",
                "30000",
                "--seed",
                &(50 + k).to_string(),
                "--set",
                "service=exp:200us",
                "--save-requests",
            ],
            &out,
        );
        if let Err(e) = whole(&s, 30000) {
            let _ = std::fs::remove_dir_all(&out);
            return Err(e);
        }
        let c = replay_check(&out, 2000);
        let m = soj(&s, "mean");
        let _ = std::fs::remove_dir_all(&out);
        // Far off theory is a broken shaper (coordinated omission, a queue that loses
        // requests). The shaper's claim is its replay's 15 %; theory here is Pollaczek–Khinchine
        // at the run's own measured service (mean and variance), so a host that stretched the
        // services it spun (undetected as steal: one such try was +26.6 % over M/M/1 at the
        // nominal 200 µs) is not taken for the shaper's error. 30 000 requests of M/M/1 at
        // ρ 0.5 give the mean a standard error of 1.5 %.
        let replay = c.judge(0.15, 20_000, MAX_STALL_SHARE_THREAD);
        let svc = &s["latency_ns"]["service"];
        let (m1, sd) = (
            svc["mean"].as_f64().unwrap(),
            svc["stdev"].as_f64().unwrap(),
        );
        let th = taillab_core::model::mg1_mean(2500.0, m1, sd * sd + m1 * m1);
        if !within_claim(m, th, 0.015, 0.15) {
            return Err(format!(
                "thread shaper mean {m:.0} vs M/G/1 at its service {th:.0} ns ({:+.1}%); replay: {}",
                rel(m, th) * 100.0,
                replay.err().unwrap_or_else(|| "within bounds".into())
            ));
        }
        replay
    });
}
