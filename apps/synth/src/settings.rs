//! The grammar of synth's own settings that are more than a distribution: `cold=` (a worker
//! slower after idling), `periodic=` (slow requests at regular gaps) and `stall=` (one stall at a
//! planned time).

use super::*;

/// `cold=F,tau=D`: a worker's service slows by up to the factor `1 + extra` after idling.
///
/// Warmth `w` in [0, 1] per worker: it decays as exp(-idle/tau) between requests and
/// grows as `1 - (1 - w) exp(-busy/tau)` while the worker serves (its busy time, locks
/// and noise included). A request starting at warmth `w` spins its service draw times
/// `1 + extra * (1 - w)^power` (`power` 1 unless `,power=P` is given: with P > 1 a worker
/// is slow only when it has idled for long — the apps' mean service drops from light to
/// medium load and then hardly moves). A new worker starts cold (w = 0).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cold {
    /// F: how much slower a fully cold worker serves (0.3 = 30 % slower).
    pub extra: f64,
    /// D in ns: the time constant of cooling and warming.
    pub tau_ns: f64,
    /// P: the power of the coldness (1 - w) in the factor.
    pub power: f64,
}

impl Cold {
    /// The factor for a request starting at warmth `w`.
    pub fn factor(&self, w: f64) -> f64 {
        1.0 + self.extra * (1.0 - w).powf(self.power)
    }
    /// Warmth after `idle_ns` of waiting from warmth `w`.
    pub fn cooled(&self, w: f64, idle_ns: f64) -> f64 {
        w * (-idle_ns / self.tau_ns).exp()
    }
    /// Warmth after `busy_ns` of serving from warmth `w`.
    pub fn warmed(&self, w: f64, busy_ns: f64) -> f64 {
        1.0 - (1.0 - w) * (-busy_ns / self.tau_ns).exp()
    }
}

pub(crate) fn parse_cold(v: &str) -> Result<Option<Cold>, AppError> {
    if v == "none" {
        return Ok(None);
    }
    let bad = |why: String| {
        bad(
            "cold",
            v,
            format!("{why}; write it as F,tau=D[,power=P], e.g. 0.3,tau=10ms (or none)"),
        )
    };
    let (f, rest) = v
        .split_once(',')
        .ok_or_else(|| bad("no tau= after the factor".into()))?;
    let extra = f
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .ok_or_else(|| bad(format!("`{f}` is not a factor >= 0")))?;
    let (t, pw) = match rest.split_once(',') {
        Some((t, pw)) => (t, Some(pw)),
        None => (rest, None),
    };
    let d = t
        .trim()
        .strip_prefix("tau=")
        .ok_or_else(|| bad(format!("`{t}` is not tau=DURATION")))?;
    let tau_ns = parse_duration_ns(d).map_err(|e| bad(e.to_string()))?;
    if tau_ns <= 0.0 {
        return Err(bad("tau must be > 0".into()));
    }
    let power = match pw {
        None => 1.0,
        Some(pw) => pw
            .trim()
            .strip_prefix("power=")
            .and_then(|x| x.trim().parse::<f64>().ok())
            .filter(|x| x.is_finite() && *x > 0.0)
            .ok_or_else(|| bad(format!("`{pw}` is not power=P with P > 0")))?,
    };
    Ok(Some(Cold {
        extra,
        tau_ns,
        power,
    }))
}

/// `periodic=requests:N-M,for=DIST`: every N-th to M-th request the server starts (a gap
/// drawn uniformly in `lo..=hi`; the first slow request is drawn uniformly in the first
/// gap) serves a draw of `length` (times `scale`) in place of its own service. The count is
/// server-wide, as a database's checkpoint counts every commit.
#[derive(Debug, Clone, PartialEq)]
pub struct Periodic {
    /// Fewest requests between two slow ones (>= 1).
    pub lo: u64,
    /// Most requests between two slow ones (>= lo).
    pub hi: u64,
    /// A slow request's service time (ns).
    pub length: Dist,
    /// `cold=` slows the slow requests too (`cold=yes`, the default) or not (`cold=no`: their
    /// own work — a checkpoint's I/O, a sweep through memory — does not grow with a cold
    /// cache the way a short request does).
    pub cold: bool,
}

pub(crate) const PERIODIC_FORM: &str =
    "write it as requests:80-90,for=lognormal:6ms,cv=0.1[,cold=no] (or requests:85,for=6ms; or none)";

impl Periodic {
    /// Parses `none` or `requests:N[-M],for=DIST`.
    pub fn parse(v: &str) -> Result<Option<Periodic>, String> {
        let v = v.trim();
        if v == "none" || v.is_empty() {
            return Ok(None);
        }
        let rest = v
            .strip_prefix("requests:")
            .ok_or_else(|| format!("`{v}` must start with requests:; {PERIODIC_FORM}"))?;
        let (mut gap, mut length, mut cold) = (None, None, true);
        for (k, x) in noise::fields(rest.trim()) {
            match k.as_str() {
                "" if gap.is_none() => {
                    gap = Some(
                        noise::count_range(&x, "the gap")
                            .map_err(|e| format!("{e}; {PERIODIC_FORM}"))?,
                    );
                }
                "for" => length = Some(noise::parse_length(&x).map_err(|e| format!("`{x}`: {e}"))?),
                "cold" => {
                    cold = match x.as_str() {
                        "yes" => true,
                        "no" => false,
                        _ => return Err(format!("cold=`{x}`: yes or no; {PERIODIC_FORM}")),
                    }
                }
                _ => return Err(format!("unexpected `{x}`; {PERIODIC_FORM}")),
            }
        }
        match (gap, length) {
            (Some((lo, hi)), Some(length)) => Ok(Some(Periodic {
                lo,
                hi,
                length,
                cold,
            })),
            _ => Err(format!("needs a gap and for=DIST; {PERIODIC_FORM}")),
        }
    }

    /// Mean requests between two slow ones.
    pub fn mean_gap(&self) -> f64 {
        (self.lo + self.hi) as f64 / 2.0
    }

    /// The next gap.
    pub(crate) fn gap<R: rand::Rng>(&self, rng: &mut R) -> u64 {
        rng.gen_range(self.lo..=self.hi)
    }
}

impl std::fmt::Display for Periodic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.lo == self.hi {
            write!(f, "requests:{},for={}", self.lo, self.length)?;
        } else {
            write!(f, "requests:{}-{},for={}", self.lo, self.hi, self.length)?;
        }
        if !self.cold {
            write!(f, ",cold=no")?;
        }
        Ok(())
    }
}

/// A stall: all workers stop serving for `len_ns` from `at_ns` into the measured phase.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stall {
    /// Start, in ns after the measured phase begins (`at:` of `stall=`).
    pub at_ns: u64,
    /// Length in ns (`for:` of `stall=`); always > 0.
    pub len_ns: u64,
}

pub(crate) fn parse_stall(v: &str) -> Result<Option<Stall>, AppError> {
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
        let (k, d) = part
            .split_once(':')
            .ok_or_else(|| bad(format!("`{part}` is not key:duration")))?;
        let d = parse_duration_ns(d).map_err(|e| bad(e.to_string()))? as u64;
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
