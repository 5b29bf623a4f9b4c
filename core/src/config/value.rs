//! How one setting's value is written: the one parser (and printer) per kind
//! of value that flags, TOML files, `--grid` axes and `config.toml` share.
//!
//! Every value type implements [`ConfigValue`]: `parse` reads the text form
//! (a flag's argument, a grid alternative, a TOML scalar turned into text),
//! `show` writes it back so that `parse(show(v)) == v`, and `to_toml` gives
//! the native TOML form for `config.toml` (numbers stay numbers). Errors are
//! [`ValueError`]s; where a parser names no form, the setting adds its `FORM`
//! ([`ValueError::or_expected`]) and the caller prefixes the key.

use crate::dist::Dist;
pub use crate::error::ValueError;
use std::fmt;
use std::str::FromStr;

/// A value a setting can hold.
pub trait ConfigValue: Sized + Clone + PartialEq {
    /// The written form, for errors and help (`a duration like 30s`).
    const FORM: &'static str;
    /// A flag of this type takes no argument (a switch: `--save-requests`).
    const SWITCH: bool = false;
    /// A flag of this type may be repeated, each occurrence one item.
    const REPEATED: bool = false;
    /// The value is itself a list (a TOML array is one value, not an axis).
    const LIST: bool = false;
    /// In a sweep, `a,b` is two values of an axis (numbers and names; not
    /// texts or distributions, which may contain commas).
    const COMMA_AXIS: bool = false;
    /// A number: in a sweep, `FROM:TO:STEP` is a range of axis values.
    const NUMBER: bool = false;
    /// Parses the text form.
    fn parse(s: &str) -> Result<Self, ValueError>;
    /// Parses several items (a repeated flag or a TOML array).
    fn parse_many(items: &[&str]) -> Result<Self, ValueError> {
        match items {
            [one] => Self::parse(one),
            _ => Err(ValueError::new(
                items.join(","),
                format!("takes one value, got {}", items.len()),
            )),
        }
    }
    /// The text form (`parse(show(v)) == v`).
    fn show(&self) -> String;
    /// The native TOML form, or `None` for "not set" (the key is left out).
    fn to_toml(&self) -> Option<toml::Value> {
        Some(toml::Value::String(self.show()))
    }
    /// The allowed names, for enumerations.
    fn possible() -> Option<&'static [&'static str]> {
        None
    }
}

/// Whole numbers: the same parser for every width (underscores allowed:
/// `1_000_000`), stored in TOML as integers where they fit.
macro_rules! whole_number {
    ($($t:ty => $form:literal),* $(,)?) => {$(
        impl ConfigValue for $t {
            const COMMA_AXIS: bool = true;
            const NUMBER: bool = true;
            const FORM: &'static str = $form;
            fn parse(s: &str) -> Result<Self, ValueError> {
                s.trim().replace('_', "").parse().map_err(|_| ValueError::not(s, Self::FORM))
            }
            fn show(&self) -> String {
                self.to_string()
            }
            fn to_toml(&self) -> Option<toml::Value> {
                Some(i64::try_from(*self).map_or_else(|_| toml::Value::String(self.show()), toml::Value::Integer))
            }
        }
    )*};
}

whole_number!(u64 => "a whole number like 1000", usize => "a whole number like 2", u32 => "a whole number like 10");

/// Signed whole numbers (a nice value): the same parser, always a TOML integer.
impl ConfigValue for i32 {
    const COMMA_AXIS: bool = true;
    const NUMBER: bool = true;
    const FORM: &'static str = "a whole number like -20";
    fn parse(s: &str) -> Result<Self, ValueError> {
        s.trim()
            .replace('_', "")
            .parse()
            .map_err(|_| ValueError::not(s, Self::FORM))
    }
    fn show(&self) -> String {
        self.to_string()
    }
    fn to_toml(&self) -> Option<toml::Value> {
        Some(toml::Value::Integer(i64::from(*self)))
    }
}

impl ConfigValue for f64 {
    const COMMA_AXIS: bool = true;
    const NUMBER: bool = true;
    const FORM: &'static str = "a number like 2500 or 0.5";
    fn parse(s: &str) -> Result<Self, ValueError> {
        match s.trim().replace('_', "").parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(v),
            _ => Err(ValueError::not(s, Self::FORM)),
        }
    }
    fn show(&self) -> String {
        // Rust prints the shortest text that reads back to the same f64.
        self.to_string()
    }
    fn to_toml(&self) -> Option<toml::Value> {
        Some(toml::Value::Float(*self))
    }
}

impl ConfigValue for bool {
    const FORM: &'static str = "true or false";
    const SWITCH: bool = true;
    fn parse(s: &str) -> Result<Self, ValueError> {
        match s.trim() {
            "true" | "yes" | "on" | "1" => Ok(true),
            "false" | "no" | "off" | "0" => Ok(false),
            _ => Err(ValueError::not(s, Self::FORM)),
        }
    }
    fn show(&self) -> String {
        self.to_string()
    }
    fn to_toml(&self) -> Option<toml::Value> {
        Some(toml::Value::Boolean(*self))
    }
}

impl ConfigValue for String {
    const FORM: &'static str = "text";
    fn parse(s: &str) -> Result<Self, ValueError> {
        ValueError::wrap(s, || Ok(s.to_string()))
    }
    fn show(&self) -> String {
        self.clone()
    }
}

/// `none` (or an empty value) means "not set".
impl<T: ConfigValue> ConfigValue for Option<T> {
    const FORM: &'static str = T::FORM;
    const SWITCH: bool = T::SWITCH;
    const LIST: bool = T::LIST;
    const COMMA_AXIS: bool = T::COMMA_AXIS;
    const NUMBER: bool = T::NUMBER;
    fn parse(s: &str) -> Result<Self, ValueError> {
        match s.trim() {
            "" | "none" => Ok(None),
            v => T::parse(v).map(Some),
        }
    }
    fn parse_many(items: &[&str]) -> Result<Self, ValueError> {
        match items {
            [one] => Self::parse(one),
            many => T::parse_many(many).map(Some),
        }
    }
    fn show(&self) -> String {
        self.as_ref().map_or_else(|| "none".to_string(), T::show)
    }
    fn to_toml(&self) -> Option<toml::Value> {
        self.as_ref().and_then(T::to_toml)
    }
    fn possible() -> Option<&'static [&'static str]> {
        T::possible()
    }
}

/// A CPU list: `0,1`, `0-3` or a mix (`0,2-3`), in the order given (round-
/// robin pinning follows it: `1,0` puts the first thread on CPU 1), printed
/// with ranges; empty (`none`) means "not pinned".
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct CpuList(pub Vec<usize>);

impl CpuList {
    /// The CPUs, in the order given.
    pub fn cpus(&self) -> &[usize] {
        &self.0
    }
}

impl ConfigValue for CpuList {
    const FORM: &'static str = "a CPU list like 0,1 or 0-3 (none for no pinning)";
    const LIST: bool = true;
    fn parse(s: &str) -> Result<Self, ValueError> {
        let parts: Vec<&str> = s.split(',').filter(|p| p.trim() != "none").collect();
        crate::placement::parse_cpu_list(&parts.join(","))
            .map(CpuList)
            .map_err(|e| e.expecting(Self::FORM))
    }
    fn parse_many(items: &[&str]) -> Result<Self, ValueError> {
        Self::parse(&items.join(","))
    }
    fn show(&self) -> String {
        if self.0.is_empty() {
            return "none".into();
        }
        crate::placement::show_cpus(&self.0)
    }
    fn to_toml(&self) -> Option<toml::Value> {
        Some(toml::Value::Array(
            self.0
                .iter()
                .map(|c| toml::Value::Integer(*c as i64))
                .collect(),
        ))
    }
}

/// `Display` and `FromStr` through a type's [`ConfigValue`] text form.
macro_rules! text_form {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.show())
            }
        }
        impl FromStr for $t {
            type Err = ValueError;
            fn from_str(s: &str) -> Result<Self, ValueError> {
<$t as ConfigValue>::parse(s)
}
        }
    )*};
}

text_form!(CpuList, Dur, Size);
crate::serde_as_display!(CpuList, Dur, Size);

/// A comma-separated list of names (`sojourn.mean,sojourn.p99`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Names(pub Vec<String>);

impl ConfigValue for Names {
    const LIST: bool = true;
    const FORM: &'static str = "a comma-separated list like sojourn.mean,sojourn.p99";
    fn parse(s: &str) -> Result<Self, ValueError> {
        Ok(Names(
            s.split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty() && *p != "none")
                .map(String::from)
                .collect(),
        ))
    }
    fn parse_many(items: &[&str]) -> Result<Self, ValueError> {
        Self::parse(&items.join(","))
    }
    fn show(&self) -> String {
        if self.0.is_empty() {
            "none".into()
        } else {
            self.0.join(",")
        }
    }
    fn to_toml(&self) -> Option<toml::Value> {
        Some(toml::Value::Array(
            self.0.iter().cloned().map(toml::Value::String).collect(),
        ))
    }
}

/// Repeatable items that may contain commas (launcher templates): each flag
/// occurrence or TOML array element is one item.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Items(pub Vec<String>);

impl ConfigValue for Items {
    const LIST: bool = true;
    const FORM: &'static str = "text (repeat the flag, or a TOML array, for several)";
    const REPEATED: bool = true;
    fn parse(s: &str) -> Result<Self, ValueError> {
        Ok(Items(if s.is_empty() || s == "none" {
            vec![]
        } else {
            vec![s.to_string()]
        }))
    }
    fn parse_many(items: &[&str]) -> Result<Self, ValueError> {
        ValueError::wrap(&items.join(","), || {
            Ok(Items(
                items
                    .iter()
                    .filter(|s| !s.is_empty() && **s != "none")
                    .map(|s| s.to_string())
                    .collect(),
            ))
        })
    }
    fn show(&self) -> String {
        match self.0.as_slice() {
            [] => "none".into(),
            [one] => one.clone(),
            many => many.join(" ; "),
        }
    }
    fn to_toml(&self) -> Option<toml::Value> {
        Some(toml::Value::Array(
            self.0.iter().cloned().map(toml::Value::String).collect(),
        ))
    }
}

/// A duration in nanoseconds, written with a unit (`30s`, `500ms`, `200us`,
/// `150ns`); a bare number is seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct Dur(pub u64);

impl Dur {
    /// Seconds as a float.
    pub fn secs(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// From seconds (rounded to the nanosecond).
    pub fn from_secs(s: f64) -> Self {
        Dur((s * 1e9).round() as u64)
    }
}

impl ConfigValue for Dur {
    const FORM: &'static str = "a duration like 30s, 500ms or 200us";
    fn parse(s: &str) -> Result<Self, ValueError> {
        let t = s.trim();
        if let Ok(v) = t.parse::<f64>() {
            return if v.is_finite() && v >= 0.0 {
                Ok(Dur::from_secs(v))
            } else {
                Err(ValueError::not(s, Self::FORM))
            };
        }
        crate::dist::parse_duration_ns(t)
            .map(|ns| Dur(ns.round() as u64))
            .map_err(|e| e.expecting(Self::FORM))
    }
    fn show(&self) -> String {
        let n = self.0;
        for (unit, k) in [("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)] {
            if n >= k && n.is_multiple_of(k) {
                return format!("{}{unit}", n / k);
            }
        }
        format!("{n}ns")
    }
}

/// A size in bytes, written with a unit (`16MiB`, `1GiB`, `64KiB`, `512B`);
/// a bare number is bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Size(pub u64);

impl ConfigValue for Size {
    const FORM: &'static str = "a size like 16MiB, 1GiB or 4096 (bytes)";
    fn parse(s: &str) -> Result<Self, ValueError> {
        let t = s.trim();
        let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let mult: u64 = match unit.trim() {
            "" | "B" => 1,
            "KiB" | "K" | "k" | "KB" => 1 << 10,
            "MiB" | "M" | "MB" => 1 << 20,
            "GiB" | "G" | "GB" => 1 << 30,
            _ => return Err(ValueError::not(s, Self::FORM)),
        };
        match num.trim().parse::<u64>() {
            Ok(v) => v
                .checked_mul(mult)
                .map(Size)
                .ok_or_else(|| ValueError::new(s, format!("`{s}` is too large"))),
            Err(_) => Err(ValueError::not(s, Self::FORM)),
        }
    }
    fn show(&self) -> String {
        let n = self.0;
        for (unit, k) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
            if n >= k && n.is_multiple_of(k) {
                return format!("{}{unit}", n / k);
            }
        }
        format!("{n}")
    }
}

impl ConfigValue for Dist {
    const FORM: &'static str =
        "a distribution like exp:200us, fixed:1ms or mix:0.9*exp:100us+0.1*fixed:2ms";
    fn parse(s: &str) -> Result<Self, ValueError> {
        s.parse::<Dist>()
            .map_err(|e| ValueError::new(s, e.to_string()))
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

impl ConfigValue for crate::arrival::ArrivalSpec {
    const FORM: &'static str = "an arrival process: poisson, fixed, lognormal:cv=X, gamma:cv=X, pareto:alpha=A, mmpp:on=D,off=D,ratio=R, trace:FILE[,scale=F], steps:R@D,..., ramp:A..B over D, sine:mean=R,amp=R,period=D";
    fn parse(s: &str) -> Result<Self, ValueError> {
        s.trim().parse()
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

/// `a, b or c`.
pub fn one_of(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => one.to_string(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// Edit distance, for "did you mean" hints.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            cur.push(
                (prev[j] + usize::from(ca != *cb))
                    .min(prev[j + 1] + 1)
                    .min(cur[j] + 1),
            );
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The candidate nearest to `key` (by edit distance, then by a shared
/// suffix after the section), if any is plausibly what was meant.
pub fn nearest<'a>(key: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let last = |k: &'a str| k.rsplit('.').next().unwrap_or(k);
    let key_last = key.rsplit('.').next().unwrap_or(key);
    candidates
        .into_iter()
        .map(|c| {
            let c_last = last(c);
            // A key written longer or shorter than the real one (`probe_secs` for `probe`).
            let affix = key_last.starts_with(c_last) || c_last.starts_with(key_last);
            let d = edit_distance(key, c).min(edit_distance(key_last, c_last) + 1);
            (
                if affix && key_last.len().min(c_last.len()) >= 3 {
                    d.min(1)
                } else {
                    d
                },
                c,
            )
        })
        .filter(|(d, c)| *d <= 3.max(c.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Parses `T: FromStr` through its own error (for types defined elsewhere).
pub fn parse_via<T: FromStr>(s: &str) -> Result<T, ValueError>
where
    T::Err: fmt::Display,
{
    s.trim()
        .parse::<T>()
        .map_err(|e| ValueError::new(s, e.to_string()))
}

impl ConfigValue for crate::queue::Dispatch {
    const FORM: &'static str = crate::queue::DISPATCH_FORM;
    const COMMA_AXIS: bool = true;
    fn parse(s: &str) -> Result<Self, ValueError> {
        s.parse()
    }
    fn show(&self) -> String {
        self.to_string()
    }
    fn possible() -> Option<&'static [&'static str]> {
        Some(&["shared", "per-worker:random", "per-worker:round-robin"])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes_round_trip() {
        for s in ["30s", "500ms", "200us", "150ns", "1500us", "0ns"] {
            assert_eq!(Dur::parse(s).unwrap().show(), s);
        }
        assert_eq!(Dur::parse("2").unwrap(), Dur(2_000_000_000));
        assert_eq!(Dur::parse("0.5").unwrap(), Dur(500_000_000));
        // The parts: what was given, what is wrong, the form and the fix.
        let e = Dur::parse("3 parsecs").unwrap_err();
        assert_eq!(e.given, "3 parsecs");
        assert!(e.problem.contains("unknown unit `parsecs`"), "{e:?}");
        assert_eq!(e.expected.as_deref(), Some(Dur::FORM));
        assert!(
            e.fix
                .as_deref()
                .is_some_and(|f| f.contains("ns, us, ms or s")),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "unknown unit `parsecs` in `3 parsecs`; use ns, us, ms or s \
             (expected a duration like 30s, 500ms or 200us)"
        );
        for s in ["16MiB", "1GiB", "64KiB", "4097"] {
            assert_eq!(Size::parse(s).unwrap().show(), s);
        }
        assert_eq!(Size::parse("4096").unwrap().show(), "4KiB");
        assert!(Size::parse("12 furlongs").is_err());
    }

    #[test]
    fn lists_and_options() {
        assert_eq!(CpuList::parse("0,2-3").unwrap().0, vec![0, 2, 3]);
        assert_eq!(
            CpuList::parse("1,0").unwrap().0,
            vec![1, 0],
            "order is kept"
        );
        assert_eq!(CpuList::parse("0,1,2,5").unwrap().show(), "0-2,5");
        assert_eq!(CpuList::parse("none").unwrap().0, Vec::<usize>::new());
        assert!(CpuList::parse("3-1").is_err() && CpuList::parse("x").is_err());
        assert_eq!(<Option<u64>>::parse("none").unwrap(), None);
        assert_eq!(<Option<u64>>::parse("7").unwrap(), Some(7));
        assert_eq!(Items::parse_many(&["a,b", "c"]).unwrap().0.len(), 2);
        let e = u64::parse("two").unwrap_err();
        assert_eq!((e.given.as_str(), e.problem.as_str()), ("two", ""));
        assert_eq!(e.to_string(), "`two` is not a whole number like 1000");
    }

    #[test]
    fn nearest_key() {
        let keys = ["harness.threads", "harness.wait", "load.qps"];
        assert_eq!(nearest("harness.thread", keys), Some("harness.threads"));
        assert_eq!(nearest("threds", keys), Some("harness.threads"));
        assert_eq!(nearest("completely.different", keys), None);
        assert_eq!(
            nearest("probe_secs", ["load", "slo", "probe"]),
            Some("probe")
        );
    }
}
