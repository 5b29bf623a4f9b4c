//! Skips that `TAILLAB_REQUIRE` turns into failures, the skip ledger, and the retries of the
//! accuracy tests, for every crate's integration tests (each `common` module includes this
//! file by path).
//!
//! A test that cannot run on this host (no Slurm, no THP, not root, a host disturbed on every
//! try) calls [`skip_without`] with the feature it lacks and returns: it passes, with a
//! SKIPPED line on stderr. Where the comma-separated environment variable `TAILLAB_REQUIRE`
//! lists that feature (or is `all`), the same call fails the test instead, so a host that
//! should have the feature (CI after `make setup`: `.ci/run`) cannot pass by skipping. The
//! names and what they mean are in `tests/features.txt`, which Python's tests read too.
//!
//! **The ledger.** `cargo test` shows nothing a passing test prints, so a skip would read
//! `ok`. Every skip therefore also appends a line to the ledger (`ledger.tsv` in
//! `TAILLAB_SKIP_LEDGER`, by default `CARGO_TARGET_TMPDIR/skips`), and so does every accuracy
//! test's outcome ([`within_tries`]) and the time it spent on extra tries; `scripts/skips-table` prints the ledger at the end of
//! `make test` and fails the run when more than its stated share of the accuracy tests
//! skipped as disturbed. The SKIPPED line also goes to the process's stderr directly, past
//! the test harness's capture.

use std::io::Write;
use std::time::{Duration, Instant};

/// The feature names, one a line, each with what it is.
const FEATURES: &str = include_str!("features.txt");

fn known() -> Vec<&'static str> {
    FEATURES
        .lines()
        .filter(|l| !l.starts_with([' ', '#']))
        .filter_map(|l| l.split_whitespace().next())
        .collect()
}

/// Whether `TAILLAB_REQUIRE` lists `feature` (or is `all`). A name there that is no feature
/// fails the test: a typo would otherwise let the skip it meant to forbid pass.
pub fn required(feature: &str) -> bool {
    let known = known();
    assert!(
        known.contains(&feature),
        "test bug: `{feature}` is not in tests/features.txt"
    );
    let list = std::env::var("TAILLAB_REQUIRE").unwrap_or_default();
    let mut hit = false;
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        assert!(
            name == "all" || known.contains(&name),
            "TAILLAB_REQUIRE names `{name}`, which is not a feature: give `all` or some of {}",
            known.join(", ")
        );
        hit |= name == "all" || name == feature;
    }
    hit
}

/// The running test as the ledger names it: package, test binary and test
/// (`taillab-cli/harness::mm1_matches_theory`).
fn test_id() -> String {
    let t = std::thread::current();
    let test = t.name().filter(|n| *n != "main").unwrap_or("?");
    format!(
        "{}/{}::{test}",
        env!("CARGO_PKG_NAME"),
        env!("CARGO_CRATE_NAME")
    )
}

/// The ledger's folder: `TAILLAB_SKIP_LEDGER`, else the target directory's scratch folder.
fn ledger_dir() -> std::path::PathBuf {
    std::env::var_os("TAILLAB_SKIP_LEDGER")
        .map(Into::into)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("skips"))
}

/// Appends one tab-separated row (`kind`, the test, then `fields`) to the ledger. One write of
/// a file opened for appending, so rows of tests running at once do not interleave. A ledger
/// that cannot be written fails the test: the table would otherwise hide this skip.
fn ledger(kind: &str, fields: &[&str]) {
    let clean = |s: &str| s.replace(['\t', '\n', '\r'], " ");
    let mut row = vec![kind.to_string(), test_id()];
    row.extend(fields.iter().map(|f| clean(f)));
    let line = row.join("\t") + "\n";
    let dir = ledger_dir();
    let write = std::fs::create_dir_all(&dir).and_then(|()| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("ledger.tsv"))?
            .write_all(line.as_bytes())
    });
    if let Err(e) = write {
        panic!(
            "cannot append to the skip ledger in {}: {e} (set TAILLAB_SKIP_LEDGER to a writable folder)",
            dir.display()
        );
    }
}

/// This host lacks `feature` (`why` says how it shows): prints that the test, or the part of
/// it the caller leaves out, is skipped, and enters it in the ledger; fails the test when
/// `TAILLAB_REQUIRE` lists the feature.
pub fn skip_without(feature: &str, why: &str) {
    let test = test_id();
    if required(feature) {
        ledger("required", &[feature, why]);
        panic!("{test}: needs `{feature}`, which TAILLAB_REQUIRE lists: {why}");
    }
    ledger("skip", &[feature, why]);
    // Straight to the process's stderr: the test harness captures `eprintln!`.
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {test}: {why} (needs `{feature}`; TAILLAB_REQUIRE={feature} makes this a failure)"
    );
}

/// How an accuracy test ([`within_tries`]) ended, for the ledger: `passed`, `failed`, or
/// `disturbed` (every try ran on a disturbed host: nothing was checked).
pub fn accuracy_outcome(name: &str, outcome: &str, tries: u64) {
    ledger("accuracy", &[name, outcome, &tries.to_string()]);
}

/// Tries a fully disturbed accuracy test gets beyond its own, each after waiting for the host
/// to quieten ([`wait_for_quiet`]) up to twice as long as the one before: a neighbour's burst
/// (a build, another suite) often passes within a minute. A wait that ends with the host still
/// busy forfeits its try (it would be disturbed too), and a host busy for longer than these
/// waits is one the run should report as such rather than wait out.
const EXTRA_TRIES: u64 = 3;
/// The first of those waits; then 20 s and 40 s.
const FIRST_WAIT: Duration = Duration::from_secs(10);
/// The most time all accuracy tests of one ledger (one `make test`) spend on extra tries and
/// their waits: on a host busy throughout, every accuracy test would otherwise add its 70 s
/// of waits and its extra tries to the suite, which must stay under 40 minutes here.
const EXTRA_BUDGET_S: f64 = 300.0;

/// Runs `attempt` until it is within bounds. A try out of bounds on a host the caller calls
/// disturbed (the error's second half: steal or other processes, e.g. a CI machine shared
/// with other jobs) is not held against the code and is repeated, up to `tries` in all;
/// `max_off` tries out of bounds on an undisturbed host fail the test, as does any
/// undisturbed failure once the tries are used up. If every one of the `tries` was disturbed
/// the test gets up to [`EXTRA_TRIES`] more, each after a wait for a quiet host that doubles
/// (within the suite's [`EXTRA_BUDGET_S`]); if those are disturbed or forfeited too the
/// comparison is inconclusive: the host, not the code, was measured. That skips the test
/// (feature `undisturbed`) rather than fail it, and the ledger counts it: `make test` fails
/// when more than a stated share of the accuracy tests ended so (`scripts/skips-table`).
pub fn within_tries(
    name: &str,
    tries: u64,
    max_off: usize,
    mut attempt: impl FnMut(u64) -> Result<(), (String, Option<String>)>,
) {
    let mut off = Vec::new();
    let mut wait = FIRST_WAIT;
    let mut k = 0;
    for round in 1..=tries + EXTRA_TRIES {
        if round > tries {
            if !off.is_empty() {
                break;
            }
            let quiet = wait_for_quiet(name, wait);
            wait *= 2;
            if !quiet {
                continue;
            }
        }
        k += 1;
        let t = Instant::now();
        let outcome = attempt(k);
        if round > tries {
            extra(name, "try", t.elapsed().as_secs_f64());
        }
        match outcome {
            Ok(()) => return accuracy_outcome(name, "passed", k),
            Err((e, Some(why))) => eprintln!(
                "{name}: try {k} out of bounds on a disturbed host ({e}; {why}); not counted"
            ),
            Err((e, None)) => {
                eprintln!("{name}: try {k} out of bounds ({e})");
                off.push(e);
                if off.len() == max_off {
                    break;
                }
            }
        }
    }
    if off.is_empty() {
        accuracy_outcome(name, "disturbed", k);
        let why = format!("{name}: INCONCLUSIVE: every try ran on a disturbed host (see above)");
        return skip_without("undisturbed", &why);
    }
    accuracy_outcome(name, "failed", k);
    panic!(
        "{name}: out of bounds on an undisturbed host: {}",
        off.join(" / ")
    );
}

/// Enters time spent beyond a test's own tries (`wait` for a quiet host, or an extra `try`).
fn extra(name: &str, what: &str, seconds: f64) {
    ledger("extra", &[name, what, &format!("{seconds:.1}")]);
}

/// Seconds the accuracy tests of this ledger have spent on extra tries and waits so far.
fn extra_so_far() -> f64 {
    let text = std::fs::read_to_string(ledger_dir().join("ledger.tsv")).unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with("extra\t"))
        .filter_map(|l| l.split('\t').nth(4)?.parse::<f64>().ok())
        .sum()
}

/// Other processes' CPU, in CPUs, above which a second counts as busy while waiting: the
/// runs' own environment check fails a run at 10 % of a CPU of other work.
const QUIET_CPU: f64 = 0.10;

/// Waits until one second passes in which the host's CPUs, less this process's own, were
/// busy less than [`QUIET_CPU`] (steal counted as busy), or until `most` has passed or the
/// suite's [`EXTRA_BUDGET_S`] is spent; whether the host was quiet. The wait is entered in
/// the ledger.
pub fn wait_for_quiet(name: &str, most: Duration) -> bool {
    let left = EXTRA_BUDGET_S - extra_so_far();
    if left <= 0.0 {
        eprintln!("{name}: no extra try: the suite's {EXTRA_BUDGET_S} s for them are spent");
        return false;
    }
    let most = most.min(Duration::from_secs_f64(left));
    let t = Instant::now();
    let (mut seen, mut quiet) = (f64::NAN, false);
    while !quiet && t.elapsed() < most {
        let a = host_and_own_cpu();
        std::thread::sleep(Duration::from_secs(1));
        let b = host_and_own_cpu();
        seen = (b.0 - a.0) - (b.1 - a.1);
        quiet = seen < QUIET_CPU;
    }
    let waited = t.elapsed().as_secs_f64();
    extra(name, "wait", waited);
    eprintln!(
        "{name}: waited {waited:.0} s for a quiet host: {} (other work {seen:.2} CPU in the last second)",
        if quiet { "quiet" } else { "still busy" }
    );
    quiet
}

/// CPU seconds so far: the whole host's busy time (user, nice, system, irq, softirq), its
/// steal, this process's own, and its waited-for children's.
pub fn cpu_times() -> (f64, f64, f64, f64) {
    let hz = 100.0; // USER_HZ: the unit of /proc/stat and /proc/self/stat
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<f64> = stat
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let g = |i: usize| f.get(i).copied().unwrap_or(0.0) / hz;
    // user nice system idle iowait irq softirq steal
    let busy = g(0) + g(1) + g(2) + g(5) + g(6);
    let me = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = me.rsplit_once(')').map(|x| x.1).unwrap_or("");
    let v: Vec<f64> = after
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    // utime, stime, cutime and cstime (fields 14-17) are the 12th-15th after the name: the
    // state is first.
    let t = |i: usize| v.get(i).copied().unwrap_or(0.0) / hz;
    (busy, g(7), t(11) + t(12), t(13) + t(14))
}

/// The host's busy and stolen CPU seconds, and this process's with its children's.
fn host_and_own_cpu() -> (f64, f64) {
    let (busy, steal, own, children) = cpu_times();
    (busy + steal, own + children)
}
