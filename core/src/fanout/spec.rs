//! The configuration of a fan-out (`[fanout]`): how many leaves, replicas, which answers a
//! request waits for, hedged or tied copies.

use super::*;

/// When a fanned-out request is answered: all leaves, or the first K.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FanoutWait {
    /// Every leaf's answer.
    #[default]
    All,
    /// The first K answers.
    First(usize),
}

impl FanoutWait {
    /// Answers needed out of `leaves`.
    pub fn needed(&self, leaves: usize) -> usize {
        match self {
            FanoutWait::All => leaves,
            FanoutWait::First(k) => *k,
        }
    }
}

impl std::fmt::Display for FanoutWait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FanoutWait::All => write!(f, "all"),
            FanoutWait::First(k) => write!(f, "k={k}"),
        }
    }
}

impl std::str::FromStr for FanoutWait {
    type Err = crate::error::ValueError;
    fn from_str(s: &str) -> Result<Self, crate::error::ValueError> {
        crate::error::ValueError::wrap(s, || {
            let s = s.trim();
            if s == "all" {
                return Ok(FanoutWait::All);
            }
            let k = s
                .strip_prefix("k=")
                .and_then(|k| k.parse::<usize>().ok())
                .ok_or_else(|| format!("`{s}`: say `all` or `k=K` (the first K answers)"))?;
            if k == 0 {
                return Err("k=0 waits for nothing: K must be at least 1".into());
            }
            Ok(FanoutWait::First(k))
        })
    }
}

/// When a second copy of a sub-request goes to another replica.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Hedge {
    /// Never.
    #[default]
    None,
    /// After this long without an answer (ns).
    After(u64),
    /// After the running quantile q (in (0, 1)) of a leaf's latency.
    Quantile(f64),
}

impl std::fmt::Display for Hedge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Hedge::None => write!(f, "none"),
            Hedge::After(ns) => write!(f, "after={}", Dur(*ns).show()),
            Hedge::Quantile(q) => {
                // 0.95 → p95, 0.999 → p99.9
                let p = format!("{:.4}", q * 100.0);
                write!(
                    f,
                    "after=p{}",
                    p.trim_end_matches('0').trim_end_matches('.')
                )
            }
        }
    }
}

impl std::str::FromStr for Hedge {
    type Err = crate::error::ValueError;
    fn from_str(s: &str) -> Result<Self, crate::error::ValueError> {
        crate::error::ValueError::wrap(s, || {
            let s = s.trim();
            if s == "none" {
                return Ok(Hedge::None);
            }
            let bad = || {
                format!("`{s}`: say `none`, `after=2ms` (a delay) or `after=p95` (a running quantile of the leaf's latency)")
            };
            let v = s.strip_prefix("after=").ok_or_else(bad)?;
            if let Some(q) = v.strip_prefix('p') {
                let q: f64 = q.parse().map_err(|_| bad())?;
                // p95 → 0.95, p99.9 → 0.999
                let q = q / 100.0;
                if !(q > 0.0 && q < 1.0) {
                    return Err(format!("`{s}`: the quantile must be between p0 and p100"));
                }
                return Ok(Hedge::Quantile(q));
            }
            let ns = Dur::parse(v).map_err(|_| bad())?.0;
            if ns == 0 {
                return Err(format!(
                "`{s}`: a hedge delay must be positive (it is how long to wait before the copy)"
            ));
            }
            Ok(Hedge::After(ns))
        })
    }
}

impl ConfigValue for FanoutWait {
    const FORM: &'static str = "all, or k=K (the first K answers)";
    fn parse(s: &str) -> Result<Self, crate::error::ValueError> {
        s.parse()
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

impl ConfigValue for Hedge {
    const FORM: &'static str = "none, after=DURATION (e.g. after=2ms) or after=pQ (e.g. after=p95)";
    fn parse(s: &str) -> Result<Self, crate::error::ValueError> {
        s.parse()
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

pub(super) fn ser_display<T: std::fmt::Display, S: serde::Serializer>(
    v: &T,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.serialize_str(&v.to_string())
}

/// A fan-out (`[fanout]`): leaves, replicas, when a request is answered, hedging, tying.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
pub struct FanoutSpec {
    /// Leaves a request is split over (1: no fan-out).
    pub leaves: usize,
    /// Replicas of each leaf.
    pub replicas: usize,
    /// All answers or the first K.
    #[serde(serialize_with = "ser_display")]
    pub wait: FanoutWait,
    /// Hedged copies.
    #[serde(serialize_with = "ser_display")]
    pub hedge: Hedge,
    /// Tied copies.
    pub tied: bool,
}

/// An empty histogram of ns (1 ns to 60 s at 3 significant digits, growing beyond).
pub(super) fn hist() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds");
    h.auto(true);
    h
}

/// Sub-requests of the first requests whose latencies set a quantile hedge's delay before it
/// hedges at all (and how often the delay is recomputed after that).
pub const HEDGE_LEARN: u64 = 500;

impl FanoutSpec {
    /// Whether this is a fan-out at all (more than one leaf or replica).
    pub fn is_on(&self) -> bool {
        self.leaves > 1 || self.replicas > 1 || self.tied || self.hedge != Hedge::None
    }

    /// No fan-out: one leaf, one replica, all answers, no copies (the configuration's default).
    pub fn default_one() -> Self {
        FanoutSpec {
            leaves: 1,
            replicas: 1,
            ..Default::default()
        }
    }

    /// Answers a request needs.
    pub fn needed(&self) -> usize {
        self.wait.needed(self.leaves)
    }

    /// Servers in all (leaves × replicas).
    pub fn servers(&self) -> usize {
        self.leaves * self.replicas
    }

    /// Checks the combination; the message names the setting to change.
    pub fn validate(&self) -> Result<(), crate::error::Invalid> {
        self.check().map_err(crate::error::Invalid)
    }

    pub(super) fn check(&self) -> Result<(), String> {
        if self.leaves == 0 || self.leaves > 1024 {
            return Err(format!(
                "--fanout must be in 1..=1024 leaves, got {}",
                self.leaves
            ));
        }
        if self.replicas == 0 || self.replicas > 16 {
            return Err(format!(
                "--replicas must be in 1..=16, got {}",
                self.replicas
            ));
        }
        if let FanoutWait::First(k) = self.wait {
            if k > self.leaves {
                return Err(format!(
                    "--fanout-wait k={k} waits for more answers than the {} leaves give: K must be at most --fanout",
                    self.leaves
                ));
            }
        }
        if (self.hedge != Hedge::None || self.tied) && self.replicas < 2 {
            return Err(format!(
                "{} sends a second copy to another replica: add --replicas 2 (or more)",
                if self.tied { "--tied" } else { "--hedge" }
            ));
        }
        if self.hedge != Hedge::None && self.tied {
            return Err(
                "--hedge and --tied are two ways to use a second replica: choose one".into(),
            );
        }
        Ok(())
    }
}
