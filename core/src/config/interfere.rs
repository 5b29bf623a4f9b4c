//! The interference grammar: `CLASS:N[,KEY=VALUE...][@cpus=LIST][,nice=N]`.
//!
//! | class   | what runs                                   | keys                      |
//! |---------|---------------------------------------------|---------------------------|
//! | `cpu`   | `stress-ng --cpu N` (arithmetic loops)      | `load=1..100`, `method=M` |
//! | `vm`    | `stress-ng --vm N --vm-keep` (memory writes) | `bytes=SIZE`             |
//! | `io`    | `stress-ng --iomix N` (mixed file I/O)      | `bytes=SIZE`              |
//! | `hdd`   | `stress-ng --hdd N` (sequential writes)     | `bytes=SIZE`              |
//! | `cache` | `stress-ng --cache N` (cache thrashing)     |                           |
//! | `net`   | iperf3 server + client with N TCP streams on 127.0.0.1 | `rate=BITS` (e.g. `1G`) |
//!
//! `@cpus=0-1,3` pins every process of the hog to those CPUs (affinity is
//! set before `exec` and inherited by stress-ng's workers); `nice=N`
//! (-20..=19) sets their nice value. Examples: `cpu:1@cpus=0`,
//! `vm:2,bytes=256M@nice=10`, `net:1,rate=2G@cpus=1,nice=5`.
//!
//! `io` is `--iomix` rather than stress-ng's `--io`: the latter only calls
//! `sync()` in a loop, which with nothing dirty is kernel CPU time, not disk
//! traffic.
//!
//! The grammar lives with the configuration (a run's `interference.hogs`
//! setting); `taillab-interfere` runs the hogs.
//!
//! Values print back in the same form ([`Display`](fmt::Display) round-trips
//! through [`FromStr`]) and serialise as that string.

use super::value::{ConfigValue, CpuList};
use std::fmt;
use std::str::FromStr;

/// The kind of load a hog produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    /// CPU time (stress-ng `--cpu`).
    Cpu,
    /// Memory bandwidth and page faults (stress-ng `--vm`).
    Vm,
    /// Mixed file I/O (stress-ng `--iomix`).
    Io,
    /// Sequential disk writes (stress-ng `--hdd`).
    Hdd,
    /// Cache thrashing (stress-ng `--cache`).
    Cache,
    /// Loopback TCP traffic (iperf3).
    Net,
}

impl Class {
    /// Every class, in the order the docs list them.
    pub const ALL: [Class; 6] = [
        Class::Cpu,
        Class::Vm,
        Class::Io,
        Class::Hdd,
        Class::Cache,
        Class::Net,
    ];

    /// The class's name in the grammar.
    pub fn name(self) -> &'static str {
        match self {
            Class::Cpu => "cpu",
            Class::Vm => "vm",
            Class::Io => "io",
            Class::Hdd => "hdd",
            Class::Cache => "cache",
            Class::Net => "net",
        }
    }

    /// The keys this class accepts after its count.
    pub fn keys(self) -> &'static [&'static str] {
        match self {
            Class::Cpu => &["load", "method"],
            Class::Vm | Class::Io | Class::Hdd => &["bytes"],
            Class::Cache => &[],
            Class::Net => &["rate"],
        }
    }

    /// The program this class runs (`stress-ng` or `iperf3`).
    pub fn program(self) -> &'static str {
        match self {
            Class::Net => "iperf3",
            _ => "stress-ng",
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Class keys and their values, in the order given.
type Params = Vec<(String, String)>;

/// One planned hog: what it does, how many instances, and where it runs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct InterfereSpec {
    /// The kind of load (stress-ng stressor or iperf3).
    pub class: Class,
    /// Instances (stress-ng workers, or iperf3 parallel streams), 1..=1024.
    pub count: u32,
    /// Class keys in the order given (`bytes=256M`), validated.
    pub params: Vec<(String, String)>,
    /// CPUs every process of the hog may run on; `None`: any allowed CPU.
    pub cpus: Option<CpuList>,
    /// Nice value of the hog's processes; `None`: inherited.
    pub nice: Option<i32>,
}

/// The form every error message names.
pub const SPEC_FORM: &str = "CLASS:N[,KEY=VALUE...][@cpus=LIST][,nice=N] with CLASS one of cpu, vm, io, hdd, cache, net (e.g. cpu:1@cpus=0, vm:2,bytes=256M@nice=10)";

fn spec_err(s: &str, why: impl fmt::Display) -> String {
    format!("bad interference `{s}`: {why}")
}

/// A size for stress-ng: digits with an optional b/k/m/g suffix, or a
/// percentage of memory or disk (`50%`).
fn valid_size(v: &str) -> bool {
    let digits = v.trim_end_matches(['b', 'B', 'k', 'K', 'm', 'M', 'g', 'G', '%']);
    let suffix = &v[digits.len()..];
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) && suffix.len() <= 1
}

fn check_param(class: Class, key: &str, value: &str) -> Result<(), String> {
    if !class.keys().contains(&key) {
        return Err(if class.keys().is_empty() {
            format!("class {class} takes no keys, got `{key}`")
        } else {
            format!(
                "class {class} has no key `{key}` (its keys: {})",
                class.keys().join(", ")
            )
        });
    }
    let ok = match key {
        "load" => value.parse::<u32>().is_ok_and(|p| (1..=100).contains(&p)),
        "method" => {
            !value.is_empty()
                && value
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        }
        "bytes" => valid_size(value),
        "rate" => {
            let d = value.trim_end_matches(['k', 'K', 'm', 'M', 'g', 'G']);
            !d.is_empty() && d.parse::<f64>().is_ok_and(|x| x > 0.0) && value.len() - d.len() <= 1
        }
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{key}={value}` is not valid ({})",
            match key {
                "load" => "a percentage 1..100",
                "method" => "a stress-ng method name such as matrixprod",
                "bytes" => "a size like 256M, 1G or 50%",
                "rate" => "bits per second like 500M or 2G",
                _ => "unknown",
            }
        ))
    }
}

impl InterfereSpec {
    /// The value of a class key, if given.
    pub fn param(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn parse_head(s: &str, head: &str) -> Result<(Class, u32, Params), String> {
        let mut parts = head.split(',');
        let first = parts.next().unwrap_or("");
        let (cname, count) = first
            .split_once(':')
            .ok_or_else(|| spec_err(s, format!("`{first}` has no `:N` count")))?;
        let class = Class::ALL
            .into_iter()
            .find(|c| c.name() == cname.trim())
            .ok_or_else(|| spec_err(s, format!("unknown class `{cname}`")))?;
        let count: u32 = count
            .trim()
            .parse()
            .ok()
            .filter(|n| (1..=1024).contains(n))
            .ok_or_else(|| spec_err(s, format!("count `{count}` is not a number 1..1024")))?;
        let mut params: Vec<(String, String)> = Vec::new();
        for kv in parts {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| spec_err(s, format!("`{kv}` is not KEY=VALUE")))?;
            let (k, v) = (k.trim(), v.trim());
            check_param(class, k, v).map_err(|e| spec_err(s, e))?;
            if params.iter().any(|(pk, _)| pk == k) {
                return Err(spec_err(s, format!("key `{k}` given twice")));
            }
            params.push((k.to_string(), v.to_string()));
        }
        Ok((class, count, params))
    }

    /// `cpus=0,2-3,nice=5`: a token without `=` continues the CPU list.
    fn parse_opts(s: &str, opts: &str) -> Result<(Option<CpuList>, Option<i32>), String> {
        let (mut cpus, mut nice): (Option<String>, Option<i32>) = (None, None);
        let mut in_cpus = false;
        for tok in opts.split(',') {
            match tok.split_once('=') {
                Some(("cpus", v)) if cpus.is_none() => {
                    cpus = Some(v.to_string());
                    in_cpus = true;
                }
                Some(("nice", v)) if nice.is_none() => {
                    let n = v
                        .trim()
                        .parse::<i32>()
                        .ok()
                        .filter(|n| (-20..=19).contains(n))
                        .ok_or_else(|| spec_err(s, format!("nice `{v}` is not -20..19")))?;
                    nice = Some(n);
                    in_cpus = false;
                }
                Some((k, _)) if k == "cpus" || k == "nice" => {
                    return Err(spec_err(s, format!("`{k}` given twice")))
                }
                Some((k, _)) => {
                    return Err(spec_err(
                        s,
                        format!("unknown option `@{k}` (options: cpus, nice)"),
                    ))
                }
                None if in_cpus => {
                    let c = cpus.as_mut().expect("in_cpus implies cpus");
                    c.push(',');
                    c.push_str(tok);
                }
                None => return Err(spec_err(s, format!("`{tok}` is not cpus=LIST or nice=N"))),
            }
        }
        let cpus = cpus
            .map(|c| match CpuList::parse(&c) {
                Ok(l) if !l.0.is_empty() => Ok(l),
                _ => Err(spec_err(
                    s,
                    format!("bad CPU list `{c}`: expected numbers and ranges like `0-3,8`"),
                )),
            })
            .transpose()?;
        Ok((cpus, nice))
    }
}

impl FromStr for InterfereSpec {
    type Err = crate::error::ValueError;
    fn from_str(s: &str) -> Result<Self, crate::error::ValueError> {
        crate::error::ValueError::wrap(s, || {
            let s = s.trim();
            let (head, opts) = match s.split_once('@') {
                Some((h, o)) => (h, Some(o)),
                None => (s, None),
            };
            let (class, count, params) = Self::parse_head(s, head)?;
            let (cpus, nice) = match opts {
                Some(o) => Self::parse_opts(s, o)?,
                None => (None, None),
            };
            Ok(InterfereSpec {
                class,
                count,
                params,
                cpus,
                nice,
            })
        })
        .map_err(|e| e.expecting(SPEC_FORM))
    }
}

impl fmt::Display for InterfereSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.class, self.count)?;
        for (k, v) in &self.params {
            write!(f, ",{k}={v}")?;
        }
        let mut sep = '@';
        if let Some(c) = &self.cpus {
            write!(f, "{sep}cpus={}", c.show())?;
            sep = ',';
        }
        if let Some(n) = self.nice {
            write!(f, "{sep}nice={n}")?;
        }
        Ok(())
    }
}

/// Several hogs as one setting value: specs joined by `+`, or `none`
/// (`cpu:1@cpus=0+vm:1`), for a sweep axis whose values are whole sets.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct InterfereSet(pub Vec<InterfereSpec>);

impl FromStr for InterfereSet {
    type Err = crate::error::ValueError;
    fn from_str(s: &str) -> Result<Self, crate::error::ValueError> {
        let s = s.trim();
        if s.is_empty() || s == "none" {
            return Ok(InterfereSet::default());
        }
        s.split('+')
            .map(str::parse)
            .collect::<Result<Vec<_>, _>>()
            .map(InterfereSet)
    }
}

impl fmt::Display for InterfereSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        for (i, s) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("+")?;
            }
            write!(f, "{s}")?;
        }
        Ok(())
    }
}

crate::serde_as_display!(InterfereSpec, InterfereSet, Class);

impl FromStr for Class {
    type Err = crate::error::ValueError;
    fn from_str(s: &str) -> Result<Self, crate::error::ValueError> {
        crate::error::ValueError::wrap(s, || {
            Class::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| format!("unknown interference class `{s}`: expected one of cpu, vm, io, hdd, cache, net"))
        })
    }
}

impl ConfigValue for InterfereSet {
    const FORM: &'static str = SPEC_FORM;
    const REPEATED: bool = true;
    const LIST: bool = true;
    fn parse(s: &str) -> Result<Self, crate::error::ValueError> {
        s.parse()
    }
    fn parse_many(items: &[&str]) -> Result<Self, crate::error::ValueError> {
        let mut v = Vec::new();
        for i in items {
            v.extend(i.parse::<InterfereSet>()?.0);
        }
        Ok(InterfereSet(v))
    }
    fn show(&self) -> String {
        self.to_string()
    }
    fn to_toml(&self) -> Option<toml::Value> {
        Some(toml::Value::Array(
            self.0
                .iter()
                .map(|s| toml::Value::String(s.to_string()))
                .collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for s in [
            "cpu:1",
            "cpu:1@cpus=0",
            "cpu:2,load=50,method=matrixprod@cpus=0-1,nice=10",
            "vm:2,bytes=256M@nice=10",
            "io:1,bytes=64M",
            "hdd:1,bytes=1G@cpus=1",
            "cache:3@nice=-5",
            "net:2,rate=2G@cpus=0,2-3",
        ] {
            let p: InterfereSpec = s.parse().unwrap();
            assert_eq!(p.to_string(), s);
            let j = serde_json::to_string(&p).unwrap();
            assert_eq!(serde_json::from_str::<InterfereSpec>(&j).unwrap(), p);
        }
        let p: InterfereSpec = "cpu:1@cpus=3,1,2".parse().unwrap();
        assert_eq!(p.cpus.unwrap().0, vec![3, 1, 2]);
        let set: InterfereSet = "cpu:1@cpus=0+vm:1".parse().unwrap();
        assert_eq!(set.0.len(), 2);
        assert_eq!(set.to_string(), "cpu:1@cpus=0+vm:1");
        assert_eq!("none".parse::<InterfereSet>().unwrap().to_string(), "none");
    }

    #[test]
    fn errors_name_the_problem_and_the_form() {
        let cases = [
            ("gpu:1", "unknown class `gpu`"),
            ("cpu", "has no `:N` count"),
            ("cpu:x", "count `x`"),
            ("cpu:0", "count `0`"),
            ("cpu:1,bytes=1G", "no key `bytes`"),
            ("cache:1,x=1", "takes no keys"),
            ("vm:1,bytes=lots", "`bytes=lots` is not valid"),
            ("cpu:1,load=150", "`load=150`"),
            ("cpu:1@cpus=a", "bad CPU list"),
            ("cpu:1@cpus=3-1", "bad CPU list"),
            ("cpu:1@nice=40", "nice `40`"),
            ("cpu:1@prio=1", "unknown option `@prio`"),
            ("cpu:1@nice=1,nice=2", "given twice"),
            ("cpu:1,load", "not KEY=VALUE"),
        ];
        for (s, want) in cases {
            let e = s.parse::<InterfereSpec>().unwrap_err();
            assert!(e.problem.contains(want), "{s}: {e}");
            assert_eq!(e.expected.as_deref(), Some(SPEC_FORM), "{s}");
            assert!(
                e.to_string().ends_with(&format!("(expected {SPEC_FORM})")),
                "{e}"
            );
        }
    }
}
