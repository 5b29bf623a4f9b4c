//! `noise=`: disturbances (interrupts, timer ticks, rare hiccups) injected into workers'
//! service.
//!
//! A real worker is disturbed by events that come in *wall time*, whatever it is doing:
//! a NIC interrupt, the scheduler tick, a page fault. Each noise source is therefore a
//! seeded point process in time, one per worker (TailWAG's per-CPU interrupt handling):
//!
//! - `poisson:rate=R` — events at rate R per second, independent gaps (device interrupts);
//! - `every:D` — one event every D, phase drawn at random per worker (timer ticks).
//!
//! `for=DIST` (or `for:DIST`) is the length of each event, any spec of
//! `taillab_core::dist` or a bare duration for a fixed length (`for:20us`). While a worker serves (its critical sections included), every
//! event that falls in what it is doing adds its length to it; an event that falls inside
//! another's extension adds too, as interrupts queue behind each other. So a worker
//! busy for `s` is stretched on average to `s / (1 − ρ)` with ρ = rate × mean length (for
//! ρ ≪ 1, by `s·ρ`). Events that come while the worker waits for a request or for a lock
//! are dropped: they take CPU nobody is waiting for (for Poisson events this is exact in
//! distribution, the process being memoryless; periodic events keep their phase).
//!
//! `cpus=LIST` (`0,2` or `0-3`) restricts a source to workers pinned on those CPUs
//! (`--cpus`): a worker is disturbed when every CPU its affinity mask allows is in the
//! list, read once when its thread starts. Unpinned workers may run anywhere, so a
//! restricted source leaves them alone.
//!
//! Several sources are separated by `;`: `noise=every:1ms,for=2us;poisson:rate=50,for=exp:200us`.
//! Worker `w`'s processes are seeded from `w` and the source's position, so a spec gives the
//! same event sequence in every run; what it hits still differs, as requests arrive at
//! other times.

use rand::Rng;
use rand_distr::{Distribution, Exp};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::fmt;
use std::str::FromStr;
use taillab_core::dist::{parse_duration_ns, Dist};

/// When a noise source's events come.
#[derive(Debug, Clone, PartialEq)]
pub enum Arrivals {
    /// Independent exponential gaps, `rate` events per second.
    Poisson {
        /// Events per second, > 0.
        rate: f64,
    },
    /// One event every `period_ns`.
    Every {
        /// Time between events in ns, > 0.
        period_ns: f64,
    },
}

/// One noise source: its arrivals, the length of each event, and the CPUs it hits.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    /// When its events come.
    pub arrivals: Arrivals,
    /// How long each event keeps a worker (ns).
    pub length: Dist,
    /// `None`: every worker; else only workers pinned within these CPUs.
    pub cpus: Option<Vec<usize>>,
}

/// The `noise=` setting: zero or more sources (`none` for zero).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Noise(pub Vec<Source>);

const FORM: &str = "write it as poisson:rate=2000,for=exp:5us or every:1ms,for=20us, \
optionally with ,cpus=0,2 (CPU list or range 0-3), several joined by `;`, or none";

impl Noise {
    /// Fraction of a busy worker's time the sources unrestricted by `cpus` add, ρ / (1 − ρ)
    /// (∞ when their ρ reaches 1: the events alone would keep a worker busy forever).
    pub fn stretch(&self) -> f64 {
        let rho: f64 = self
            .0
            .iter()
            .filter(|s| s.cpus.is_none())
            .map(Source::load)
            .sum();
        if rho >= 1.0 {
            f64::INFINITY
        } else {
            rho / (1.0 - rho)
        }
    }
}

impl Source {
    /// ρ: events per ns × mean event length, the share of time the events take.
    pub fn load(&self) -> f64 {
        let per_ns = match self.arrivals {
            Arrivals::Poisson { rate } => rate / 1e9,
            Arrivals::Every { period_ns } => 1.0 / period_ns,
        };
        per_ns * self.length.mean()
    }

    /// Whether a worker allowed on `allowed` CPUs is disturbed by this source.
    pub fn hits(&self, allowed: &[usize]) -> bool {
        match &self.cpus {
            None => true,
            Some(c) => !allowed.is_empty() && allowed.iter().all(|a| c.contains(a)),
        }
    }
}

/// `cpus=`: a set of CPUs (taillab's one CPU-list grammar), ascending, each once.
fn parse_cpus(s: &str) -> Result<Vec<usize>, String> {
    let mut out = taillab_core::placement::parse_cpu_list(s).map_err(|e| format!("cpus: {e}"))?;
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Splits `kind:first,key=..,key=..` into fields; a comma-separated piece that does not
/// start a known key continues the previous field (so `for=uniform:1us,3us` and
/// `cpus=0,2` keep their commas).
pub(crate) fn fields(body: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for piece in body.split(',') {
        let key = ["rate", "for", "cpus", "cold"]
            .into_iter()
            .find(|k| piece.starts_with(&format!("{k}=")) || piece.starts_with(&format!("{k}:")));
        match (key, out.last_mut()) {
            (Some(k), _) => out.push((k.to_string(), piece[k.len() + 1..].to_string())),
            (None, Some(last)) => {
                last.1.push(',');
                last.1.push_str(piece);
            }
            (None, None) => out.push((String::new(), piece.to_string())),
        }
    }
    out
}

/// An event length: a distribution, or a bare duration for a fixed one (`for:20us`).
pub(crate) fn parse_length(v: &str) -> Result<Dist, String> {
    match parse_duration_ns(v) {
        Ok(ns) if !v.contains(':') => Ok(Dist::Fixed(ns)),
        _ => v.parse::<Dist>().map_err(|e| e.to_string()),
    }
}

fn parse_source(s: &str) -> Result<Source, String> {
    let (kind, rest) = s
        .split_once(':')
        .ok_or_else(|| format!("`{s}` needs a kind, poisson: or every:"))?;
    let mut f = fields(rest.trim()).into_iter();
    let arrivals = match kind.trim() {
        "poisson" => Arrivals::Poisson { rate: 0.0 },
        "every" => {
            let (k, d) = f.next().unwrap_or_default();
            if !k.is_empty() {
                return Err("every: starts with its period, as in every:1ms".into());
            }
            let period_ns = parse_duration_ns(&d)?;
            if period_ns <= 0.0 {
                return Err("the period of every: must be > 0".into());
            }
            Arrivals::Every { period_ns }
        }
        k => return Err(format!("unknown noise kind `{k}`")),
    };
    let mut src = Source {
        arrivals,
        length: Dist::Fixed(0.0),
        cpus: None,
    };
    let (mut rate, mut length) = (None, None);
    for (k, v) in f {
        match k.as_str() {
            "rate" => {
                let r: f64 = v
                    .parse()
                    .map_err(|_| format!("rate=`{v}` is not a number"))?;
                if !(r > 0.0 && r.is_finite()) {
                    return Err(format!("rate={v} must be > 0 (events per second)"));
                }
                rate = Some(r);
            }
            "for" => length = Some(parse_length(&v)?),
            "cpus" => src.cpus = Some(parse_cpus(&v)?),
            _ => return Err(format!("unexpected `{v}`")),
        }
    }
    match (&mut src.arrivals, rate) {
        (Arrivals::Poisson { rate: r }, Some(x)) => *r = x,
        (Arrivals::Poisson { .. }, None) => return Err("poisson: needs rate=R".into()),
        (Arrivals::Every { .. }, Some(_)) => return Err("every: takes a period, not rate=".into()),
        _ => {}
    }
    src.length = length.ok_or("a noise source needs for=DIST (each event's length)")?;
    if src.load() >= 1.0 {
        return Err(format!(
            "its events would take {:.0}% of the time (rate × mean length ≥ 1)",
            100.0 * src.load()
        ));
    }
    Ok(src)
}

impl FromStr for Noise {
    type Err = String;
    /// Parses `none` or sources joined by `;`; the error names the expected form.
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s == "none" || s.is_empty() {
            return Ok(Noise::default());
        }
        s.split(';')
            .map(|p| parse_source(p.trim()).map_err(|why| format!("`{p}`: {why}; {FORM}")))
            .collect::<Result<Vec<_>, _>>()
            .map(Noise)
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.arrivals {
            Arrivals::Poisson { rate } => write!(f, "poisson:rate={rate}")?,
            Arrivals::Every { period_ns } => write!(f, "every:{}ns", period_ns.round() as u64)?,
        }
        write!(f, ",for={}", self.length)?;
        if let Some(c) = &self.cpus {
            let v: Vec<String> = c.iter().map(|c| c.to_string()).collect();
            write!(f, ",cpus={}", v.join(","))?;
        }
        Ok(())
    }
}

impl fmt::Display for Noise {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        let v: Vec<String> = self.0.iter().map(|s| s.to_string()).collect();
        f.write_str(&v.join(";"))
    }
}

/// An exponential gap (ns) between events at `rate` per second.
fn poisson_gap(rate: f64, rng: &mut Xoshiro256PlusPlus) -> f64 {
    Exp::new(rate / 1e9)
        .expect("rate > 0 checked at parse")
        .sample(rng)
}

/// One worker's event process of one source.
struct Process {
    src: Source,
    next_ns: f64,
    rng: Xoshiro256PlusPlus,
}

impl Process {
    fn gap(&mut self) -> f64 {
        match self.src.arrivals {
            Arrivals::Poisson { rate } => poisson_gap(rate, &mut self.rng),
            Arrivals::Every { period_ns } => period_ns,
        }
    }

    /// Moves the next event to at or after `t` (events before `t` hit nobody waiting).
    fn skip_to(&mut self, t: f64) {
        if self.next_ns >= t {
            return;
        }
        self.next_ns = match self.src.arrivals {
            // Memoryless: the first event after t is t + a fresh gap.
            Arrivals::Poisson { .. } => t + self.gap(),
            Arrivals::Every { period_ns } => {
                self.next_ns + ((t - self.next_ns) / period_ns).ceil() * period_ns
            }
        };
    }
}

/// A worker's noise: its processes and what they added.
pub struct WorkerNoise {
    procs: Vec<Process>,
    /// Events that hit this worker.
    pub events: u64,
    /// The ns they added.
    pub added_ns: u64,
}

impl WorkerNoise {
    /// The processes of the sources that hit a worker allowed on `allowed` CPUs, seeded
    /// from `seed`, their clocks starting at `now_ns`.
    pub fn new(noise: &Noise, allowed: &[usize], seed: u64, now_ns: u64) -> Self {
        let procs = noise
            .0
            .iter()
            .enumerate()
            .filter(|(_, s)| s.hits(allowed))
            .map(|(i, s)| {
                let mut rng: Xoshiro256PlusPlus = rand::SeedableRng::seed_from_u64(
                    taillab_core::arrival::derive_seed(seed, i as u64),
                );
                let first = match s.arrivals {
                    Arrivals::Every { period_ns } => rng.gen_range(0.0..period_ns),
                    Arrivals::Poisson { .. } => 0.0,
                };
                let mut p = Process {
                    src: s.clone(),
                    next_ns: now_ns as f64 + first,
                    rng,
                };
                if let Arrivals::Poisson { .. } = s.arrivals {
                    p.next_ns += p.gap();
                }
                p
            })
            .collect();
        WorkerNoise {
            procs,
            events: 0,
            added_ns: 0,
        }
    }

    /// Whether any source hits this worker.
    pub fn active(&self) -> bool {
        !self.procs.is_empty()
    }

    /// The end of a stretch of work that began at `start_ns` and would end at `end_ns`
    /// undisturbed, once every event falling inside it (extensions included) is added.
    pub fn extend(&mut self, start_ns: u64, end_ns: u64) -> u64 {
        let mut end = end_ns as f64;
        for p in &mut self.procs {
            p.skip_to(start_ns as f64);
        }
        loop {
            let mut hit = false;
            for p in &mut self.procs {
                while p.next_ns < end {
                    let len = p.src.length.sample(&mut p.rng).max(0.0);
                    end += len;
                    self.events += 1;
                    self.added_ns += len.round() as u64;
                    p.next_ns += p.gap();
                    hit = true;
                }
            }
            if !hit {
                return end.round() as u64;
            }
        }
    }
}

/// `pause=`: stop-the-world pauses (a garbage collector's): one process for the whole
/// server. During a pause no worker progresses, whether it is serving (its request is
/// stretched by the pause) or idle (a request it starts inside a pause begins when the pause
/// ends). Pauses do not overlap.
///
/// - `requests:GAPS,for=DIST` — a pause every so many requests the server starts ([`Gaps`]:
///   `N`, `N-M`, a mixture of ranges or a cycle of them), in the request that reaches the count (a collector
///   runs when allocation fills the young generation: a fixed amount of work, not of time,
///   apart); the first falls anywhere in the first gap;
/// - `poisson:rate=R,for=DIST`, `every:D,for=DIST` — pauses in wall time from the server's
///   start (the next drawn after the previous ends; `every:` keeps its period).
#[derive(Debug, Clone, PartialEq)]
pub enum Pause {
    /// Pauses in wall time.
    Timed(Source),
    /// A pause every so many requests.
    Requests {
        /// Requests from one pause to the next.
        gaps: Gaps,
        /// Length of each pause (ns).
        length: Dist,
    },
}

const PAUSE_FORM: &str = "write it as requests:10000,for=15ms (or requests:9000-11000,for=..., \
requests:0.6*12000-16000+0.4*1-2000,for=..., a cycle requests:12000-16000x4+1-2000x2,for=...), \
poisson:rate=2,for=20ms or \
every:500ms,for=exp:15ms, or none (one source, no cpus=: a pause stops every worker)";

/// Request counts from one event to the next: `N` (always N), `N-M` (uniform in N..=M), a
/// mixture of ranges drawn independently with weights summing to 1,
/// `0.6*12000-16000+0.4*1-2000`, or a cycle of ranges each repeated so many times,
/// `12000-16000x4+1-2000x2` (four long gaps, then two short, again and again), the times
/// themselves drawn anew each turn when given as a range (`12000-16000x3-5+1-2000x1-2`). A
/// collector's pauses come in clusters — most a young generation's fill apart, then two or
/// three a few hundred requests apart (a marking cycle's) — which a cycle keeps together
/// and independent draws do not.
#[derive(Debug, Clone, PartialEq)]
pub enum Gaps {
    /// (weight, lo, hi) terms, drawn independently.
    Mix(Vec<(f64, u64, u64)>),
    /// (fewest times, most times, lo, hi) terms, in turn.
    Cycle(Vec<(u64, u64, u64, u64)>),
}

/// Where a cycle of gaps stands: its term and the gaps left in it (fresh: not started).
#[derive(Debug, Clone, Copy, Default)]
pub struct CyclePos {
    started: bool,
    term: usize,
    left: u64,
}

/// `N` or `N-M` (`what` names it in the error): whole numbers > 0, N <= M.
pub(crate) fn count_range(range: &str, what: &str) -> Result<(u64, u64), String> {
    let (a, b) = range.split_once('-').unwrap_or((range, range));
    let n = |x: &str| x.trim().parse::<u64>().ok().filter(|n| *n > 0);
    match (n(a), n(b)) {
        (Some(lo), Some(hi)) if lo <= hi => Ok((lo, hi)),
        _ => Err(format!(
            "`{range}`: {what} is a whole number > 0 or a range N-M with N <= M"
        )),
    }
}

impl Gaps {
    /// Parses `N`, `N-M`, `W*N-M+W*N-M...` or `N-MxK+N-MxK1-K2...`; every count > 0, N <= M.
    pub fn parse(s: &str) -> Result<Gaps, String> {
        let s = s.trim();
        let terms: Vec<&str> = s.split('+').collect();
        if terms.iter().any(|t| t.contains('x')) {
            let mut out = Vec::new();
            for t in &terms {
                let (range, k) = t.rsplit_once('x').ok_or_else(|| {
                    format!("`{t}`: each term of a cycle needs its count, as in 1-2000x2")
                })?;
                let (k1, k2) = count_range(k, "the count after x")?;
                let (lo, hi) = count_range(range, "a gap")?;
                out.push((k1, k2, lo, hi));
            }
            return Ok(Gaps::Cycle(out));
        }
        let mut out = Vec::new();
        for t in &terms {
            let (w, range) = match t.split_once('*') {
                Some((w, r)) => {
                    let w: f64 = w
                        .trim()
                        .parse()
                        .map_err(|_| format!("`{t}`: weight `{w}` is not a number"))?;
                    if !(w > 0.0 && w <= 1.0) {
                        return Err(format!("`{t}`: weight {w} must be in (0, 1]"));
                    }
                    (w, r)
                }
                None if terms.len() == 1 => (1.0, *t),
                None => {
                    return Err(format!(
                        "`{t}`: each term of a mixture needs a weight, as in 0.4*1-2000"
                    ))
                }
            };
            let (lo, hi) = count_range(range, "a gap")?;
            out.push((w, lo, hi));
        }
        let total: f64 = out.iter().map(|t| t.0).sum();
        if (total - 1.0).abs() > 1e-3 {
            return Err(format!("`{s}`: the weights sum to {total}, not 1"));
        }
        for t in &mut out {
            t.0 /= total;
        }
        Ok(Gaps::Mix(out))
    }

    /// Mean requests from one event to the next.
    pub fn mean(&self) -> f64 {
        match self {
            Gaps::Mix(t) => t.iter().map(|(w, lo, hi)| w * (lo + hi) as f64 / 2.0).sum(),
            Gaps::Cycle(t) => {
                let times = |a: u64, b: u64| (a + b) as f64 / 2.0;
                let n: f64 = t.iter().map(|x| times(x.0, x.1)).sum();
                t.iter()
                    .map(|(a, b, lo, hi)| times(*a, *b) * (lo + hi) as f64 / 2.0)
                    .sum::<f64>()
                    / n
            }
        }
    }

    /// The next gap, drawn: independently for a mixture; for a cycle, from the term `at`
    /// stands in (a fresh cycle starts at a drawn term, part of the way through it).
    pub fn sample<R: Rng>(&self, rng: &mut R, at: &mut CyclePos) -> u64 {
        match self {
            Gaps::Mix(t) => {
                let mut u: f64 = rng.gen();
                for (w, lo, hi) in t {
                    if u < *w {
                        return rng.gen_range(*lo..=*hi);
                    }
                    u -= w;
                }
                let (_, lo, hi) = t[t.len() - 1];
                rng.gen_range(lo..=hi)
            }
            Gaps::Cycle(t) => {
                if !at.started {
                    at.started = true;
                    at.term = rng.gen_range(0..t.len());
                    let k = rng.gen_range(t[at.term].0..=t[at.term].1);
                    at.left = rng.gen_range(1..=k);
                } else if at.left == 0 {
                    at.term = (at.term + 1) % t.len();
                    at.left = rng.gen_range(t[at.term].0..=t[at.term].1);
                }
                at.left -= 1;
                let (_, _, lo, hi) = t[at.term];
                rng.gen_range(lo..=hi)
            }
        }
    }
}

impl fmt::Display for Gaps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let one = |lo: u64, hi: u64| {
            if lo == hi {
                lo.to_string()
            } else {
                format!("{lo}-{hi}")
            }
        };
        let terms: Vec<String> = match self {
            Gaps::Mix(t) if t.len() == 1 => vec![one(t[0].1, t[0].2)],
            Gaps::Mix(t) => t
                .iter()
                .map(|(w, lo, hi)| format!("{}*{}", (w * 1e6).round() / 1e6, one(*lo, *hi)))
                .collect(),
            Gaps::Cycle(t) => t
                .iter()
                .map(|(a, b, lo, hi)| format!("{}x{}", one(*lo, *hi), one(*a, *b)))
                .collect(),
        };
        f.write_str(&terms.join("+"))
    }
}

impl Pause {
    /// Parses `none` (no pauses) or one source: `requests:GAPS,for=DIST`, or the noise
    /// grammar without `cpus=`.
    pub fn parse(s: &str) -> Result<Option<Pause>, String> {
        let s = s.trim();
        if s == "none" || s.is_empty() {
            return Ok(None);
        }
        if s.contains(';') {
            return Err(format!("`{s}`: one pause source only; {PAUSE_FORM}"));
        }
        if let Some(rest) = s.strip_prefix("requests:") {
            let mut gaps = None;
            let mut length = None;
            for (k, v) in fields(rest.trim()) {
                match k.as_str() {
                    "" if gaps.is_none() => {
                        gaps =
                            Some(Gaps::parse(&v).map_err(|e| format!("`{s}`: {e}; {PAUSE_FORM}"))?)
                    }
                    "for" => length = Some(parse_length(&v).map_err(|e| format!("`{s}`: {e}"))?),
                    _ => return Err(format!("`{s}`: unexpected `{v}`; {PAUSE_FORM}")),
                }
            }
            return match (gaps, length) {
                (Some(gaps), Some(length)) => Ok(Some(Pause::Requests { gaps, length })),
                _ => Err(format!("`{s}`: needs a count and for=DIST; {PAUSE_FORM}")),
            };
        }
        let src = parse_source(s).map_err(|why| format!("`{s}`: {why}; {PAUSE_FORM}"))?;
        if src.cpus.is_some() {
            return Err(format!(
                "`{s}`: a pause stops every worker, cpus= does not apply"
            ));
        }
        Ok(Some(Pause::Timed(src)))
    }

    /// Mean time paused per request when a worker serves `service_ns` on average: the
    /// pauses' share of the time for timed ones (ρ/(1 − ρ) of the service), one length per
    /// N requests for request-driven ones.
    pub fn per_request_ns(&self, service_ns: f64) -> f64 {
        match self {
            Pause::Timed(src) => {
                let rho = src.load();
                service_ns * rho / (1.0 - rho)
            }
            Pause::Requests { gaps, length } => length.mean() / gaps.mean(),
        }
    }
}

impl fmt::Display for Pause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pause::Timed(src) => src.fmt(f),
            Pause::Requests { gaps, length } => write!(f, "requests:{gaps},for={length}"),
        }
    }
}

/// The server's pause timeline, shared by its workers: pauses materialised in order (as
/// workers' clocks reach them, or as requests trigger them), the recent ones kept for
/// workers a little behind.
pub struct PauseClock {
    pause: Pause,
    rng: Xoshiro256PlusPlus,
    /// Start of the next timed pause not yet in `windows`.
    next_ns: f64,
    /// Pauses (start, end) in order, disjoint.
    windows: std::collections::VecDeque<(f64, f64)>,
    /// Where a cycle of gaps stands.
    gap_pos: CyclePos,
}

/// How far behind the newest query a worker may be and still see a pause (ns).
const PAUSE_KEEP_NS: f64 = 1e9;

impl PauseClock {
    /// The timeline of `pause`, seeded from `seed`, starting at `now_ns`.
    pub fn new(pause: &Pause, seed: u64, now_ns: u64) -> Self {
        let mut rng: Xoshiro256PlusPlus = rand::SeedableRng::seed_from_u64(seed);
        let first = match pause {
            Pause::Timed(Source {
                arrivals: Arrivals::Every { period_ns },
                ..
            }) => rng.gen_range(0.0..*period_ns),
            Pause::Timed(Source {
                arrivals: Arrivals::Poisson { rate },
                ..
            }) => poisson_gap(*rate, &mut rng),
            Pause::Requests { .. } => f64::INFINITY,
        };
        PauseClock {
            pause: pause.clone(),
            rng,
            next_ns: now_ns as f64 + first,
            windows: Default::default(),
            gap_pos: CyclePos::default(),
        }
    }

    /// Materialises every timed pause that starts before `t`.
    fn reach(&mut self, t: f64) {
        let Pause::Timed(src) = &self.pause else {
            return;
        };
        while self.next_ns < t {
            let len = src.length.sample(&mut self.rng).max(0.0);
            let end = self.next_ns + len;
            self.windows.push_back((self.next_ns, end));
            self.next_ns = match src.arrivals {
                Arrivals::Poisson { rate } => end + poisson_gap(rate, &mut self.rng),
                // Keeps its period unless a pause outlasts it.
                Arrivals::Every { period_ns } => (self.next_ns + period_ns).max(end),
            };
        }
    }

    /// The count of the first request-driven pause: anywhere in the first gap (None for
    /// timed pauses).
    pub fn first_count(&mut self) -> Option<u64> {
        match self.next_gap() {
            0 => None,
            g => Some(self.rng.gen_range(1..=g)),
        }
    }

    /// Requests from a request-driven pause to the next (0 for timed pauses); a cycle of
    /// gaps starts at a drawn place in its turn.
    pub fn next_gap(&mut self) -> u64 {
        match &self.pause {
            Pause::Requests { gaps, .. } => gaps.sample(&mut self.rng, &mut self.gap_pos),
            Pause::Timed(_) => 0,
        }
    }

    /// A request-driven pause from `now_ns` (or from the end of one under way).
    pub fn trigger(&mut self, now_ns: u64) {
        let Pause::Requests { length, .. } = &self.pause else {
            return;
        };
        let len = length.sample(&mut self.rng).max(0.0);
        let start = self
            .windows
            .back()
            .map_or(now_ns as f64, |w| w.1.max(now_ns as f64));
        self.windows.push_back((start, start + len));
    }

    /// The end of work that began at `start_ns` and would end at `end_ns` without pauses,
    /// and how many pauses it met: a pause under way at the start delays it to the pause's
    /// end, every pause that starts before the (stretched) end adds its length.
    pub fn extend(&mut self, start_ns: u64, end_ns: u64) -> (u64, u64) {
        let (start, mut end) = (start_ns as f64, end_ns as f64);
        while self
            .windows
            .front()
            .is_some_and(|w| w.1 < start - PAUSE_KEEP_NS)
        {
            self.windows.pop_front();
        }
        self.reach(end);
        let mut hits = 0;
        let mut i = 0;
        while i < self.windows.len() {
            let (ps, pe) = self.windows[i];
            i += 1;
            if pe <= start {
                continue;
            }
            if ps >= end {
                break;
            }
            end += pe - ps.max(start);
            hits += 1;
            self.reach(end);
        }
        (end.round() as u64, hits)
    }
}

#[cfg(test)]
mod tests;
