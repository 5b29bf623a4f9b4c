//! Trace replay: arrival times read from a file.
//!
//! ```text
//! trace:PATH[,gaps|,times][,unit=s|ms|us|ns][,column=NAME][,scale=X]
//! ```
//!
//! The file is text: one value per line, or CSV with a header line (the
//! first line that is not a number). Blank lines and lines starting with
//! `#` are skipped. Values are **timestamps** (non-decreasing; the first
//! arrival is sent at the schedule start, the others at their distance
//! from it) or, with `gaps`, **gaps** (≥ 0; the first gap is counted from
//! the schedule start). CSV: the column is `column=NAME`, else `intended`
//! when there is one (a taillab `requests.csv` replays that run's
//! schedule), else the first. A column named `gap…` means gaps, and a name
//! ending in `_ns`, `_us`, `_ms` or `_s` (or `intended`: ns) gives the unit;
//! otherwise values are seconds unless `unit=` says otherwise. A trace whose
//! unit was so assumed and that then spans more than a day is refused: a file
//! of ns timestamps read as seconds plans a run of decades that would sit at
//! its first request. The message names the unit assumed, the span it gives,
//! the spans the other units would give, and `unit=` (`unit=s` keeps seconds).
//!
//! `scale=X` multiplies the rate: every distance from the start is divided
//! by X (scale=2 plays the trace twice as fast). Offsets are computed in
//! f64 ns and rounded once each, so a scaled trace does not drift.
//!
//! The file is read when the spec is parsed, so a bad file is refused
//! before anything runs, with the line at fault; a run uses what was read
//! then. The path is made absolute, so the spec names the same file from
//! any working directory (a TCP client started elsewhere must see the same
//! path).

use super::{ArrivalProcess, END};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The longest span a trace may have when no `unit=` or header gave its unit (seconds
/// assumed): a day. Longer is far more likely a file in ms, µs or ns.
pub const MAX_ASSUMED_SPAN_S: f64 = 86_400.0;

/// A unit for trace values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Seconds.
    S,
    /// Milliseconds.
    Ms,
    /// Microseconds.
    Us,
    /// Nanoseconds.
    Ns,
}

impl Unit {
    fn ns(self) -> f64 {
        match self {
            Unit::S => 1e9,
            Unit::Ms => 1e6,
            Unit::Us => 1e3,
            Unit::Ns => 1.0,
        }
    }
    fn parse(s: &str) -> Option<Unit> {
        Some(match s {
            "s" => Unit::S,
            "ms" => Unit::Ms,
            "us" | "µs" => Unit::Us,
            "ns" => Unit::Ns,
            _ => return None,
        })
    }
    fn name(self) -> &'static str {
        match self {
            Unit::S => "s",
            Unit::Ms => "ms",
            Unit::Us => "us",
            Unit::Ns => "ns",
        }
    }
}

/// A parsed trace spec and the arrivals its file holds.
#[derive(Debug, Clone)]
pub struct Trace {
    /// The file, absolute.
    pub path: PathBuf,
    /// `Some(true)`: values are gaps; `Some(false)`: timestamps; `None`: as the header says.
    pub gaps: Option<bool>,
    /// `unit=`, when given (else from the header, else seconds).
    pub unit: Option<Unit>,
    /// `column=`, when given.
    pub column: Option<String>,
    /// Rate multiplier (`scale=`).
    pub scale: f64,
    /// Unscaled offsets from the schedule start, ns.
    offsets: Arc<Vec<f64>>,
    /// Whether the values were gaps (decides how many gaps the span holds).
    were_gaps: bool,
    /// File line of each arrival (1-based), for messages.
    lines: Arc<Vec<u32>>,
}

impl PartialEq for Trace {
    fn eq(&self, o: &Self) -> bool {
        self.path == o.path
            && self.gaps == o.gaps
            && self.unit == o.unit
            && self.column == o.column
            && self.scale == o.scale
    }
}

impl Trace {
    /// Parses `PATH[,option]*` and reads the file.
    pub fn parse(args: &str) -> Result<Trace, crate::error::ValueError> {
        crate::error::ValueError::wrap(args, || Self::parse_text(args))
    }

    fn parse_text(args: &str) -> Result<Trace, String> {
        let mut parts = args.split(',');
        let path = parts.next().unwrap_or("").trim();
        if path.is_empty() {
            return Err("trace: needs a file, as in trace:arrivals.csv".into());
        }
        let mut t = Trace {
            path: PathBuf::from(path),
            gaps: None,
            unit: None,
            column: None,
            scale: 1.0,
            offsets: Arc::default(),
            were_gaps: false,
            lines: Arc::default(),
        };
        for opt in parts.map(str::trim) {
            match opt.split_once('=') {
                None if opt == "gaps" => t.gaps = Some(true),
                None if opt == "times" => t.gaps = Some(false),
                Some(("unit", u)) => {
                    t.unit = Some(Unit::parse(u).ok_or_else(|| {
                        format!("trace unit `{u}` is not one of s, ms, us, ns")
                    })?)
                }
                Some(("column", c)) => t.column = Some(c.to_string()),
                Some(("scale", x)) => {
                    t.scale = x
                        .parse()
                        .ok()
                        .filter(|x: &f64| x.is_finite() && *x > 0.0)
                        .ok_or_else(|| format!("trace scale `{x}` must be a number > 0 (the rate multiplier)"))?
                }
                _ => {
                    return Err(format!(
                        "unknown trace option `{opt}`; use gaps, times, unit=s|ms|us|ns, column=NAME or scale=X"
                    ))
                }
            }
        }
        t.path = std::fs::canonicalize(&t.path).map_err(|e| {
            format!(
                "trace file {}: {e} (give a readable file)",
                t.path.display()
            )
        })?;
        t.load()?;
        Ok(t)
    }

    fn load(&mut self) -> Result<(), String> {
        let p = self.path.display().to_string();
        let text =
            std::fs::read_to_string(&self.path).map_err(|e| format!("trace file {p}: {e}"))?;
        let err = |line: usize, why: String| format!("trace file {p} line {line}: {why}");
        let mut col: Option<usize> = None;
        let mut header_gaps = None;
        let mut header_unit = None;
        let mut seen_data = false;
        let (mut offsets, mut lines) = (Vec::new(), Vec::new());
        let (mut prev, mut prev_line, mut acc, mut first) = (f64::NEG_INFINITY, 0, 0.0, None);
        for (i, raw) in text.lines().enumerate() {
            let n = i + 1;
            let l = raw.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = l.split(',').map(str::trim).collect();
            if !seen_data && col.is_none() && fields[0].parse::<f64>().is_err() {
                let (c, g, u) = self.header(&fields).map_err(|e| err(n, e))?;
                (col, header_gaps, header_unit) = (Some(c), g, u);
                continue;
            }
            if !seen_data && col.is_none() && self.column.is_some() {
                return Err(err(
                    n,
                    "column= needs a header line naming the columns".into(),
                ));
            }
            seen_data = true;
            let c = col.unwrap_or(0);
            let f = fields.get(c).ok_or_else(|| {
                err(
                    n,
                    format!("has no column {} (it has {})", c + 1, fields.len()),
                )
            })?;
            let v: f64 = f
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite())
                .ok_or_else(|| err(n, format!("`{f}` is not a number")))?;
            let gaps = self.gaps.or(header_gaps).unwrap_or(false);
            let unit = self.unit.or(header_unit).unwrap_or(Unit::S).ns();
            if gaps {
                if v < 0.0 {
                    return Err(err(n, format!("negative gap {f}; gaps must be ≥ 0")));
                }
                acc += v * unit;
                offsets.push(acc);
            } else {
                if v < prev {
                    return Err(err(
                        n,
                        format!("timestamp {f} is earlier than line {prev_line}'s: the file must be sorted by time"),
                    ));
                }
                let t0 = *first.get_or_insert(v);
                offsets.push((v - t0) * unit);
                (prev, prev_line) = (v, n);
            }
            self.were_gaps = gaps;
            lines.push(n as u32);
        }
        if offsets.is_empty() {
            return Err(format!(
                "trace file {p} holds no arrivals (empty, or only comments and a header)"
            ));
        }
        let span_ns = *offsets.last().expect("non-empty");
        if offsets.len() < 2 || span_ns <= 0.0 {
            return Err(format!(
                "trace file {p} needs at least two arrivals spread over time to define a rate"
            ));
        }
        if self.unit.or(header_unit).is_none() && span_ns / 1e9 > MAX_ASSUMED_SPAN_S {
            return Err(assumed_seconds(&p, span_ns / 1e9));
        }
        self.offsets = Arc::new(offsets);
        self.lines = Arc::new(lines);
        Ok(())
    }

    /// The column to read from a header line, and what its name says about
    /// gaps and unit.
    fn header(&self, fields: &[&str]) -> Result<(usize, Option<bool>, Option<Unit>), String> {
        let names: Vec<String> = fields.iter().map(|f| f.to_ascii_lowercase()).collect();
        let c = match &self.column {
            Some(want) => names
                .iter()
                .position(|n| *n == want.to_ascii_lowercase())
                .ok_or_else(|| {
                    format!(
                        "no column `{want}` in the header (it has {})",
                        fields.join(", ")
                    )
                })?,
            None => names.iter().position(|n| n == "intended").unwrap_or(0),
        };
        let name = &names[c];
        let unit = if name == "intended" {
            Some(Unit::Ns)
        } else {
            name.rsplit_once('_').and_then(|(_, u)| Unit::parse(u))
        };
        Ok((c, name.starts_with("gap").then_some(true), unit))
    }

    /// Arrivals in the file.
    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    /// Always false: an empty file is refused at parse time.
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// Offset of arrival `i` from the schedule start, scaled, in s.
    pub fn offset_s(&self, i: usize) -> f64 {
        self.offsets[i] / self.scale / 1e9
    }

    /// File line of arrival `i`.
    pub fn line(&self, i: usize) -> usize {
        self.lines[i] as usize
    }

    /// Mean rate (/s) over the whole file, scaled.
    pub fn mean_rate(&self) -> f64 {
        let gaps = self.len() - usize::from(!self.were_gaps);
        gaps as f64 / self.offset_s(self.len() - 1)
    }

    /// Arrivals with offsets in [a, b) s.
    pub fn count_between(&self, a: f64, b: f64) -> usize {
        let idx = |x: f64| self.offsets.partition_point(|&o| o / self.scale / 1e9 < x);
        idx(b) - idx(a)
    }

    /// The file as a spec string.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl std::fmt::Display for Trace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "trace:{}", self.path.display())?;
        match self.gaps {
            Some(true) => f.write_str(",gaps")?,
            Some(false) => f.write_str(",times")?,
            None => {}
        }
        if let Some(u) = self.unit {
            write!(f, ",unit={}", u.name())?;
        }
        if let Some(c) = &self.column {
            write!(f, ",column={c}")?;
        }
        if self.scale != 1.0 {
            write!(f, ",scale={}", self.scale)?;
        }
        Ok(())
    }
}

/// Why a trace read in assumed seconds that spans `span_s` is refused, and what to write.
fn assumed_seconds(p: &str, span_s: f64) -> String {
    let other: Vec<String> = [Unit::Ms, Unit::Us, Unit::Ns]
        .iter()
        .map(|u| format!("as {} {}", u.name(), human_span(span_s * u.ns() / 1e9)))
        .collect();
    format!(
        "trace file {p}: its values have no unit, so they were read as seconds, and the trace \
         would span {} (more than a day: a file in another unit, most likely); read {}. Give \
         the unit: trace:{p},unit=ns (or ms, us; a CSV column named e.g. `time_ns` says it \
         too), or unit=s if it really is in seconds",
        human_span(span_s),
        other.join(", ")
    )
}

/// A span in seconds as a person reads it: `41.7 min`, `79.2 years`.
fn human_span(s: f64) -> String {
    const DAY: f64 = 86_400.0;
    match s {
        s if s >= 365.25 * DAY => format!("{:.1} years", s / (365.25 * DAY)),
        s if s >= DAY => format!("{:.1} days", s / DAY),
        s if s >= 3600.0 => format!("{:.1} h", s / 3600.0),
        s if s >= 60.0 => format!("{:.1} min", s / 60.0),
        s if s >= 1.0 => format!("{s:.1} s"),
        s => format!("{:.1} ms", s * 1e3),
    }
}

/// Replays a [`Trace`]; [`END`] after its last arrival.
pub struct TraceProcess {
    trace: Trace,
    next: usize,
}

impl TraceProcess {
    /// Replays `trace` from its first arrival.
    pub fn new(trace: Trace) -> Self {
        TraceProcess { trace, next: 0 }
    }
}

impl ArrivalProcess for TraceProcess {
    fn next_offset_ns(&mut self) -> u64 {
        let Some(&o) = self.trace.offsets.get(self.next) else {
            return END;
        };
        self.next += 1;
        (o / self.trace.scale).round() as u64
    }
    fn rate(&self) -> f64 {
        self.trace.mean_rate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, body: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("taillab-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        p
    }

    fn offsets(t: &Trace) -> Vec<u64> {
        let mut p = TraceProcess::new(t.clone());
        std::iter::from_fn(|| Some(p.next_offset_ns()).filter(|&x| x != END)).collect()
    }

    #[test]
    fn reads_times_gaps_and_csv() {
        let p = file("times.txt", "# arrivals\n10.0\n10.5\n\n10.5\n12\n");
        let t = Trace::parse(&p.display().to_string()).unwrap();
        assert_eq!(offsets(&t), [0, 500_000_000, 500_000_000, 2_000_000_000]);
        assert!((t.mean_rate() - 1.5).abs() < 1e-12);
        let t2 = Trace::parse(&format!("{},scale=2", p.display())).unwrap();
        assert_eq!(offsets(&t2), [0, 250_000_000, 250_000_000, 1_000_000_000]);
        assert_eq!(
            Trace::parse(&t2.to_string()[6..]).unwrap(),
            t2,
            "round trip"
        );

        let g = file("gaps.csv", "gap_ms,kind\n1,a\n2,b\n0.5,c\n");
        let t = Trace::parse(&g.display().to_string()).unwrap();
        assert_eq!(offsets(&t), [1_000_000, 3_000_000, 3_500_000]);
        assert!((t.mean_rate() - 3.0 / 3.5e-3).abs() < 1e-6);

        let r = file(
            "requests.csv",
            "id,worker,intended,sent,enqueued,started,finished,completed,measured\n0,0,1000,1,1,1,1,1,0\n1,0,4000,1,1,1,1,1,1\n",
        );
        let t = Trace::parse(&r.display().to_string()).unwrap();
        assert_eq!(offsets(&t), [0, 3000]);
        let t = Trace::parse(&format!("{},column=id,unit=s", r.display())).unwrap();
        assert_eq!(offsets(&t), [0, 1_000_000_000]);
    }

    #[test]
    fn bad_files_name_the_line() {
        for (body, opts, want) in [
            ("", "", "no arrivals"),
            ("# nothing\n\n", "", "no arrivals"),
            ("1\n2\n1.5\n", "", "line 3"),
            ("1\n-2\n", ",gaps", "line 2: negative gap"),
            ("1\nabc\n", "", "line 2: `abc` is not a number"),
            ("1\n", "", "at least two"),
            ("t\n1\n2\n", ",column=x", "no column `x`"),
            ("1\n2\n", ",column=x", "needs a header"),
        ] {
            let p = file("bad.txt", body);
            let e = Trace::parse(&format!("{}{opts}", p.display())).unwrap_err();
            assert!(e.to_string().contains(want), "{body:?}: {e}");
        }
        assert!(Trace::parse("/nonexistent/file.csv")
            .unwrap_err()
            .to_string()
            .contains("nonexistent"));
        assert!(Trace::parse("x.csv,speed=2")
            .unwrap_err()
            .to_string()
            .contains("unknown trace option"));
    }

    /// 2.5 s of ns timestamps without a unit would be 79 years of seconds: refused, naming the unit
    /// assumed, the span and the fix; a unit given (by `unit=` or the header) is taken as is.
    #[test]
    fn a_trace_over_a_day_in_assumed_seconds_is_refused() {
        let body = "1000000000000\n1000001000000\n1002500000000\n";
        let p = file("ns.txt", body);
        let e = Trace::parse(&p.display().to_string()).unwrap_err();
        for want in [
            "read as seconds",
            "79.2 years",
            "as us 41.7 min, as ns 2.5 s",
            &format!("trace:{},unit=ns", p.display()),
        ] {
            assert!(e.to_string().contains(want), "{want}: {e}");
        }
        let t = Trace::parse(&format!("{},unit=ns", p.display())).unwrap();
        assert_eq!(offsets(&t)[1], 1_000_000);
        let h = file("ns.csv", &format!("time_ns\n{body}"));
        assert_eq!(Trace::parse(&h.display().to_string()).unwrap().len(), 3);
        // Seconds said outright are the user's choice; a day in seconds is still accepted.
        assert!(Trace::parse(&format!("{},unit=s", p.display())).is_ok());
        let day = file("day.txt", "0\n86400\n");
        assert!(Trace::parse(&day.display().to_string()).is_ok());
    }
}
