//! Faults, overload and bad input: what survives what, through the real
//! binary, real processes, real sockets and a real (small) file system.
//!
//! Each test records one row of the suite's table — fault, runs, survived,
//! data lost — under `CARGO_TARGET_TMPDIR/faults/`; `scripts/faults-table` (run by
//! `make test` and `make test-faults`) prints the table after the tests ran. A row is written before
//! the test's assertions, so a failing fault still shows in the table.
//!
//! The quick part runs in the default suite; the long part (ten random
//! kills of a sweep, 10 000 connections, ten-second overloads) is
//! `#[ignore]`d and run by `make test-faults`.
//!
//! Timing bounds are wide: the VM these run on is shared, and a disturbed
//! host moves wall times by seconds. What is asserted exactly is what was
//! kept, what was refused, and what was written.

use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::*;

// ---- the table -------------------------------------------------------------

/// Appends this test's row to the suite's table (one file per row).
fn record(fault: &str, runs: usize, survived: usize, lost: u64, unit: &str) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("faults");
    std::fs::create_dir_all(&dir).unwrap();
    let slug: String = fault
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let row = format!("{fault}\t{runs}\t{survived}\t{lost} {unit}\n");
    std::fs::write(dir.join(format!("{slug}.row")), row).unwrap();
}

/// Records the row, then fails the test unless every trial survived with nothing lost.
fn verdict(fault: &str, runs: usize, survived: usize, lost: u64, unit: &str, why: &[String]) {
    record(fault, runs, survived, lost, unit);
    assert!(
        survived == runs && lost == 0,
        "{fault}: {survived}/{runs} survived, {lost} {unit} lost:\n{}",
        why.join("\n")
    );
}

// ---- processes ---------------------------------------------------------------

fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) on a pid this test started.
    unsafe { libc::kill(pid as i32, sig) };
}

/// Stops a server with SIGTERM; its exit status and stderr.
fn stop_server(mut k: Kid) -> (std::process::ExitStatus, String) {
    signal(k.0.id(), libc::SIGTERM);
    let st = k.0.wait().unwrap();
    let mut err = String::new();
    k.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    (st, err)
}

/// The pids of `parent`'s direct children whose command line contains `word`.
fn children_with(parent: u32, word: &str) -> Vec<u32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, r)| r.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if ppid == Some(parent) && cmd.contains(word) {
            v.push(pid);
        }
    }
    v.sort();
    v
}

/// Waits until `parent` has `n` children running `word`.
fn await_children(parent: u32, word: &str, n: usize) -> Vec<u32> {
    let t = Instant::now();
    loop {
        let v = children_with(parent, word);
        if v.len() >= n {
            return v;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "{word} processes never started: {v:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits for `c` (at most `limit`); its status, how long it took after the
/// call, and the peak RSS (KiB) of it and every descendant it waited for.
fn wait_rss(c: &mut Child, limit: Duration) -> (Option<i32>, Duration, u64) {
    let t = Instant::now();
    loop {
        let mut status = 0;
        // SAFETY: wait4 on our own child; rusage is plain data.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::wait4(c.id() as i32, &mut status, libc::WNOHANG, &mut ru) };
        if r == c.id() as i32 {
            let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
            return (code, t.elapsed(), ru.ru_maxrss as u64);
        }
        if t.elapsed() > limit {
            let _ = c.kill();
            let _ = c.wait();
            return (None, t.elapsed(), 0);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn stderr_of(c: &mut Child) -> String {
    let mut e = String::new();
    if let Some(mut s) = c.stderr.take() {
        let _ = s.read_to_string(&mut e);
    }
    e
}

fn summary_if_any(dir: &Path) -> Option<Value> {
    let p = dir.join("summary.json");
    p.exists().then(|| json(&p))
}

// ---- files -----------------------------------------------------------------

/// Every file under `dir` with its bytes (empty when `dir` is missing).
fn files_under(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut m = BTreeMap::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return m;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            m.extend(files_under(&p));
        } else {
            m.insert(p.clone(), std::fs::read(&p).unwrap_or_default());
        }
    }
    m
}

/// Every path under `dir` (folders too), relative to it.
fn tree(dir: &Path) -> Vec<String> {
    let mut v = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            v.push(p.strip_prefix(dir).unwrap().display().to_string());
            if p.is_dir() && !p.is_symlink() {
                stack.push(p);
            }
        }
    }
    v.sort();
    v
}

/// A scratch folder with an empty `home/` and an empty `cwd/`: commands run
/// there with HOME pointing at it, so anything they write outside `--out`
/// shows up.
struct Scratch {
    root: PathBuf,
}

impl Scratch {
    fn new(name: &str) -> Scratch {
        let root = tmp(name);
        std::fs::create_dir_all(root.join("home")).unwrap();
        std::fs::create_dir_all(root.join("cwd")).unwrap();
        Scratch { root }
    }
    fn home(&self) -> PathBuf {
        self.root.join("home")
    }
    fn cwd(&self) -> PathBuf {
        self.root.join("cwd")
    }
    /// `taillab ARGS` in the scratch cwd with the scratch HOME.
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.args(args)
            .current_dir(self.cwd())
            .env("HOME", self.home())
            .env_remove("TAILLAB_DATA");
        c
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

// ---- 3. bad input -------------------------------------------------------------

/// A small real run and sweep, then versions of them a newer taillab (or an
/// interrupted copy) would leave: the results folders bad input points at.
fn results_fixtures(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    #[rustfmt::skip]
    let o = Command::new(bin())
        .args(["run", "--app", "synth", "--qps", "2000", "--requests", "300", "--no-monitor", "-q", "--out"])
        .arg(dir.join("run"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    #[rustfmt::skip]
    let o = Command::new(bin())
        .args(["sweep", "--app", "synth", "--qps", "2000", "--requests", "300", "--no-monitor", "-q", "--out"])
        .arg(dir.join("sweep"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let copy = |from: &str, to: &str| {
        let o = Command::new("cp")
            .arg("-a")
            .arg(dir.join(from))
            .arg(dir.join(to))
            .status()
            .unwrap();
        assert!(o.success());
    };
    let edit = |file: &str, from: &str, to: &str| {
        let p = dir.join(file);
        let t = std::fs::read_to_string(&p).unwrap();
        assert!(t.contains(from), "{file} lacks {from}");
        std::fs::write(&p, t.replace(from, to)).unwrap();
    };
    copy("run", "run-newer");
    edit("run-newer/summary.json", "taillab.run/2", "taillab.run/99");
    copy("run", "run-cut");
    let s = std::fs::read(dir.join("run/summary.json")).unwrap();
    std::fs::write(dir.join("run-cut/summary.json"), &s[..s.len() / 3]).unwrap();
    copy("sweep", "sweep-newer");
    edit(
        "sweep-newer/experiment.json",
        "taillab.experiment/1",
        "taillab.experiment/99",
    );
    copy("sweep", "sweep-run-newer");
    edit(
        "sweep-run-newer/points/integrated-t1-q2000/run-0/summary.json",
        "taillab.run/2",
        "taillab.run/99",
    );
    std::fs::remove_file(dir.join("sweep-run-newer/points/integrated-t1-q2000/aggregate.json"))
        .unwrap();
    copy("sweep", "sweep-cut");
    std::fs::write(
        dir.join("sweep-cut/experiment.json"),
        "{\"schema\": \"taill",
    )
    .unwrap();
    copy("run", "run-locked");
    std::fs::create_dir_all(dir.join("empty")).unwrap();
    std::fs::create_dir_all(dir.join("dir.toml")).unwrap();
}

/// Experiment files, each wrong in one way.
const BAD_FILES: &[(&str, &str)] = &[
    (
        "type.toml",
        "[load]\nqps = [100.0]\nduration = \"1s\"\n[harness]\nthreads = \"two\"\n",
    ),
    ("range.toml", "[load]\nqps = [0.0]\nduration = \"1s\"\n"),
    (
        "unknown-key.toml",
        "[load]\nqps = [100.0]\nduration = \"1s\"\n[harness]\nthreds = [1]\n",
    ),
    (
        "both.toml",
        "[load]\nqps = [100.0]\nduration = \"1s\"\nrequests = 10\n",
    ),
    (
        "section.toml",
        "[colour]\nx = 1\n[load]\nqps = 100\nduration = \"1s\"\n",
    ),
    ("syntax.toml", "[load]\nqps = [1,\n"),
    (
        "empty-axis.toml",
        "[load]\nqps = 100\nduration = \"1s\"\n[grid]\n\"load.qps\" = []\n",
    ),
    (
        "axis-value.toml",
        "[load]\nqps = 100\nduration = \"1s\"\n[grid]\n\"harness.threads\" = [1, 0]\n",
    ),
    (
        "grid-in-run.toml",
        "[load]\nqps = 100\nduration = \"1s\"\n[grid]\n\"harness.threads\" = [1, 2]\n",
    ),
];

/// A malformed invocation and the words its one error line must hold: the
/// problem, then the fix. `F/` in an argument is the fixtures folder.
type Case = (&'static [&'static str], &'static [&'static str]);

#[rustfmt::skip]
const BAD_INPUT: &[Case] = &[
    // flags: types and ranges
    (&["run", "--app", "synth", "--qps", "abc", "--requests", "10"], &["`abc`", "like 2500"]),
    (&["run", "--app", "synth", "--qps", "-5", "--requests", "10"], &["--qps must be a positive number", "-5"]),
    (&["model", "--qps", "-5", "--service", "exp:1ms"], &["'-5'", "never negative"]),
    (&["run", "--app", "synth", "--qps", "100", "--requests", "10", "--threads", "0"], &["--threads", "1..=1024"]),
    (&["run", "--app", "synth", "--qps", "1e12", "--requests", "10"], &["1000000000000", "max 1e8"]),
    (&["run", "--app", "synth", "--qps", "100", "--requests", "0"], &["--requests", "at least 1"]),
    (&["run", "--app", "synth", "--qps", "100", "--requests", "10", "--rt-priority", "500"], &["500", "1..=99"]),
    (&["run", "--app", "synth", "--qps", "100", "--requests", "10", "--max-record-mem", "1XB"], &["`1XB`", "like 16MiB"]),
    (&["run", "--app", "synth", "--qps", "100", "--requests", "10", "--interval", "0s"], &["--interval", "at least 1ms"]),
    (&["run", "--app", "synth", "--qps", "100", "--requests", "10", "--monitor-period", "1ms"], &["1ms", "10ms..60s"]),
    (&["run", "--app", "synth", "--qps", "100", "--requests", "10", "--cpus", "999"], &["CPU 999", "nproc"]),
    (&["run", "--app", "synth", "--qps", "100", "--requests", "10", "--arrival", "weird"], &["`weird`", "use poisson"]),
    (&["run", "--app", "synth", "--qps", "100", "--requests", "10", "--ci", "2"], &["--ci", "e.g. 0.01"]),
    (&["run", "--app", "synth", "--qps", "100", "--requests", "10", "--set", "service=exp:abc"], &["exp:abc", "Use e.g."]),
    // unknown names
    (&["run", "--app", "nosuch", "--qps", "100", "--requests", "10"], &["`nosuch`", "taillab apps"]),
    (&["run", "--app", "synth", "--qps", "100", "--requests", "10", "--set", "colour=red"], &["colour", "its keys are"]),
    (&["run", "--app", "synth", "--qps", "100", "--requests", "10", "--threds", "2"], &["'--threds'", "'--threads'"]),
    // contradictory or missing settings
    (&["run", "--app", "synth", "--qps", "100"], &["how long", "--requests N or --duration"]),
    (&["run", "--app", "synth", "--qps", "100", "--requests", "10", "--duration", "1s"], &["not both", "give either"]),
    (&["run", "--app", "synth", "--qps", "100", "--requests", "10", "--warmup", "1s", "--warmup-requests", "5"], &["not both", "give either"]),
    (&["run", "--app", "synth", "--qps", "100", "--requests", "10", "--ci", "0.1", "--min-runs", "5", "--max-runs", "2"], &["--max-runs 2", "below --min-runs 5"]),
    (&["run", "--app", "synth", "--config", "loopback", "--qps", "100", "--requests", "10", "--clients", "0"], &["net.clients", "1..=256"]),
    (&["run", "--app", "memcached", "--config", "loopback", "--qps", "100", "--requests", "10"], &["external server", "--target HOST:PORT"]),
    (&["load", "--app", "null", "--qps", "10", "--requests", "5"], &["where the server is", "--target HOST:PORT"]),
    (&["load", "--app", "null", "--target", "nohost.invalid:1", "--qps", "10", "--requests", "5", "--out", "o"], &["nohost.invalid", "HOST:PORT"]),
    (&["load", "--app", "null", "--target", "127.0.0.1:1", "--qps", "10", "--requests", "5", "--out", "o"], &["127.0.0.1:1", "is the server running"]),
    (&["serve", "--app", "null", "--listen", "1.2.3"], &["`1.2.3`", "like 127.0.0.1:7878"]),
    (&["serve", "--app", "null", "--max-frame", "2GiB"], &["--max-frame", "1B..=1GiB"]),
    // missing and unwritable files
    (&["run", "--app", "synth", "--qps", "100", "--requests", "10", "--file", "/nonexistent.toml"], &["/nonexistent.toml", "give a readable TOML file"]),
    (&["run", "--app", "synth", "--qps", "100", "--requests", "10", "--out", "/proc/taillab-x"], &["/proc/taillab-x", "pick a writable --out"]),
    (&["run", "--from", "F/empty", "--out", "o"], &["no config.toml", "--from takes a run folder"]),
    (&["sweep", "--file", "F/missing.toml", "--dry-run"], &["missing.toml", "give a readable TOML file"]),
    (&["sweep", "--file", "F/dir.toml", "--dry-run"], &["Is a directory", "give a readable TOML file"]),
    // experiment files
    (&["sweep", "--app", "synth", "--file", "F/type.toml", "--dry-run"], &["harness.threads", "like 2"]),
    (&["sweep", "--app", "synth", "--file", "F/range.toml", "--dry-run"], &["qps", "0"]),
    (&["sweep", "--app", "synth", "--file", "F/unknown-key.toml", "--dry-run"], &["threds", "did you mean `harness.threads`"]),
    (&["sweep", "--app", "synth", "--file", "F/both.toml", "--dry-run"], &["not both", "give either"]),
    (&["sweep", "--app", "synth", "--file", "F/section.toml", "--dry-run"], &["colour", "sections are"]),
    (&["sweep", "--app", "synth", "--file", "F/syntax.toml", "--dry-run"], &["line 4", "fix the file"]),
    (&["sweep", "--app", "synth", "--file", "F/empty-axis.toml", "--dry-run"], &["load.qps", "at least one value"]),
    (&["sweep", "--app", "synth", "--file", "F/axis-value.toml", "--dry-run"], &["got 0", "1..=1024"]),
    (&["run", "--app", "synth", "--file", "F/grid-in-run.toml"], &["[grid]", "taillab sweep --file"]),
    (&["sweep", "--app", "synth", "--qps", "10", "--requests", "5", "--grid", "harness.therads=1|2", "--dry-run"], &["harness.therads", "harness.threads"]),
    // results folders: newer schemas, cut short, missing
    (&["report", "F/run-newer"], &["taillab.run/99", "same taillab checkout"]),
    (&["report", "F/run-cut"], &["not valid JSON", "re-run it"]),
    (&["report", "F/nothing-here"], &["does not exist", "give the folder"]),
    (&["compare", "F/run", "F/run-newer"], &["taillab.run/99", "same taillab checkout"]),
    (&["sweep", "--app", "synth", "--qps", "2000", "--requests", "300", "--no-monitor", "-q", "--resume", "--out", "F/sweep-newer"],
     &["taillab.experiment/99", "a new --out"]),
    (&["sweep", "--app", "synth", "--qps", "2000", "--requests", "300", "--no-monitor", "-q", "--resume", "--out", "F/sweep-run-newer"],
     &["taillab.run/99", "matching taillab version"]),
    (&["sweep", "--app", "synth", "--qps", "2000", "--requests", "300", "--no-monitor", "-q", "--resume", "--out", "F/sweep-cut"],
     &["not valid JSON", "a new --out"]),
];

/// One malformed invocation: exit 2, one line naming the problem and the
/// fix, no panic, nothing written (scratch cwd and HOME stay empty, the
/// fixtures unchanged). Returns why it failed, if it did.
fn bad_case(s: &Scratch, fixtures: &Path, args: &[&str], want: &[&str]) -> Option<String> {
    let f = format!("{}/", fixtures.display());
    let args: Vec<String> = args.iter().map(|a| a.replace("F/", &f)).collect();
    for d in [s.home(), s.cwd()] {
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
    }
    let before = files_under(fixtures);
    let o = s
        .cmd(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut why = Vec::new();
    if o.status.code() != Some(2) {
        why.push(format!("exit {:?}", o.status.code()));
    }
    if lines.len() != 1 {
        why.push(format!("{} lines", lines.len()));
    }
    if err.contains("panicked") {
        why.push("panicked".into());
    }
    for w in want {
        if !err.contains(w) {
            why.push(format!("no `{w}`"));
        }
    }
    let written = tree(&s.root);
    if written != ["cwd", "home"] {
        why.push(format!("wrote {written:?}"));
    }
    if files_under(fixtures) != before {
        why.push("changed the fixtures".into());
    }
    (!why.is_empty()).then(|| format!("{args:?}: {} — stderr: {err}", why.join(", ")))
}

#[test]
fn bad_input_exits_2_with_one_line_and_writes_nothing() {
    let s = Scratch::new("bad-input");
    let fixtures = tmp("bad-input-fixtures");
    results_fixtures(&fixtures);
    for (name, body) in BAD_FILES {
        std::fs::write(
            fixtures.join(name),
            format!("[app]\nname = \"synth\"\n{body}"),
        )
        .unwrap();
    }
    let mut failed: Vec<String> = BAD_INPUT
        .iter()
        .filter_map(|(args, want)| bad_case(&s, &fixtures, args, want))
        .collect();
    let mut n = BAD_INPUT.len();
    // A results folder this user may not read (root reads anything, so as nobody).
    if unsafe { libc::geteuid() } == 0 {
        use std::os::unix::fs::PermissionsExt;
        use std::os::unix::process::CommandExt;
        let locked = fixtures.join("run-locked");
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
        let o = s
            .cmd(&["run", "--from"])
            .arg(&locked)
            .args(["--out", "/tmp/taillab-never-written"])
            .uid(65534)
            .output()
            .unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        n += 1;
        if o.status.code() != Some(2)
            || err.lines().count() != 1
            || !err.contains("Permission denied")
            || Path::new("/tmp/taillab-never-written").exists()
        {
            failed.push(format!("unreadable --from folder: {err}"));
        }
    } else {
        let why = "the unreadable --from folder case runs as another user, which needs root";
        skip_without("root", why);
    }
    let wrote = failed
        .iter()
        .filter(|f| f.contains("wrote") || f.contains("changed the fixtures"))
        .count() as u64;
    verdict(
        "bad input: malformed invocations, files, results folders",
        n,
        n - failed.len(),
        wrote,
        "written",
        &failed,
    );
    let _ = std::fs::remove_dir_all(&fixtures);
}

// ---- 1. killed processes -----------------------------------------------------

/// `taillab run --config loopback ARGS --out OUT -q`, in the background.
fn loopback_run(args: &[&str], out: &Path) -> Child {
    Command::new(bin())
        .args([
            "run",
            "--app",
            "null",
            "--config",
            "loopback",
            "--no-monitor",
            "-q",
        ])
        .args(args)
        .arg("--out")
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn server_killed_mid_run_ends_the_run_and_keeps_what_was_measured() {
    let _s = serial();
    let out = tmp("kill-server");
    let mut c = loopback_run(&["--qps", "1000", "--duration", "30s"], &out);
    let srv = await_children(c.id(), " serve ", 1)[0];
    std::thread::sleep(Duration::from_millis(2000));
    signal(srv, libc::SIGKILL);
    let (code, took, _) = wait_rss(&mut c, Duration::from_secs(60));
    let err = stderr_of(&mut c);
    let s = summary_if_any(&out);
    let measured = s
        .as_ref()
        .map_or(0, |s| s["requests"]["measured"].as_u64().unwrap_or(0));
    let mut why = vec![format!(
        "exit {code:?} after {took:?}; measured {measured}; stderr: {err}"
    )];
    let lost_named = s
        .as_ref()
        .is_some_and(|s| s["transport"]["server_lost"].is_string());
    let flagged = s.as_ref().is_some_and(|s| {
        s["incomplete"].is_string()
            && s["checks"]["saturation"]["ok"] == false
            && s["checks"]["saturation"]["verdict"]
                .as_str()
                .unwrap()
                .contains("cut short")
    });
    let ok = code == Some(2) && took < Duration::from_secs(5) && lost_named && flagged;
    if let Some(s) = &s {
        why.push(format!(
            "transport {} saturation {}",
            s["transport"], s["checks"]["saturation"]
        ));
    }
    // About 2000 requests were measured before the kill; keeping fewer than
    // half of them would be a loss.
    let lost = u64::from(measured < 1000);
    verdict(
        "server SIGKILLed mid-run (loopback)",
        1,
        usize::from(ok),
        lost,
        "runs",
        &why,
    );
    assert!(err.contains("measured part was written"), "{err}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_killed_client_leaves_the_server_serving_the_next() {
    let _s = serial();
    let (srv, addr) = serve(&["--app", "null"]);
    let kills: usize = 3;
    let mut why = Vec::new();
    for k in 0..kills {
        let out = tmp(&format!("kill-client-{k}"));
        #[rustfmt::skip]
        let mut c = Kid(Command::new(bin())
            .args(["load", "--app", "null", "--target", &addr, "--qps", "2000", "--duration", "30s",
                   "--no-monitor", "-q", "--out"])
            .arg(&out)
            .stderr(Stdio::null())
            .spawn()
            .unwrap());
        std::thread::sleep(Duration::from_millis(700 + 400 * k as u64));
        signal(c.0.id(), libc::SIGKILL);
        let _ = c.0.wait();
        let _ = std::fs::remove_dir_all(&out);
    }
    let out = tmp("kill-client-next");
    #[rustfmt::skip]
    let o = Command::new(bin())
        .args(["load", "--app", "null", "--target", &addr, "--qps", "2000", "--requests", "2000",
               "--no-monitor", "-q", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let s = summary_if_any(&out);
    let served = o.status.success()
        && s.as_ref()
            .is_some_and(|s| s["requests"]["measured"] == 2000 && s["requests"]["errors"] == 0);
    why.push(format!(
        "next client: {} {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    ));
    let (st, err) = stop_server(srv);
    why.push(format!("server: {st} {err}"));
    let ok = served && st.success() && err.contains("on 4 connections");
    verdict(
        "client SIGKILLed: server serves the next",
        kills,
        if ok { kills } else { 0 },
        0,
        "runs",
        &why,
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_dead_client_is_named_and_the_others_shards_kept() {
    let _s = serial();
    let out = tmp("kill-one-client");
    #[rustfmt::skip]
    let mut c = loopback_run(&["--qps", "2000", "--duration", "4s", "--clients", "2", "--save-requests"], &out);
    let clients = await_children(c.id(), " load ", 2);
    std::thread::sleep(Duration::from_millis(1500));
    signal(clients[1], libc::SIGKILL);
    let (code, took, _) = wait_rss(&mut c, Duration::from_secs(60));
    let err = stderr_of(&mut c);
    let s = summary_if_any(&out);
    let mut why = vec![format!("exit {code:?} after {took:?}; stderr: {err}")];
    let (kept, named) = match &s {
        Some(s) => {
            let per = &s["transport"]["per_client"];
            why.push(format!("per_client {per}"));
            // Client 0 ran its whole 4 s at 1000/s; its shard is all there.
            let c0 = per[0]["measured"].as_u64().unwrap_or(0);
            (
                c0 >= 3600 && s["requests"]["measured"] == c0,
                per[1]["lost"].is_string(),
            )
        }
        None => (false, false),
    };
    let marked = s.as_ref().is_some_and(|s| {
        s["incomplete"]
            .as_str()
            .is_some_and(|w| w.contains("client 1"))
    });
    let ok = code == Some(2) && err.contains("client 1") && named && marked;
    verdict(
        "one client of two SIGKILLed (loopback)",
        1,
        usize::from(ok),
        u64::from(!kept),
        "shards",
        &why,
    );
    let _ = std::fs::remove_dir_all(&out);
}

// ---- 2. overload -------------------------------------------------------------------

/// Peak RSS allowed for any taillab process of an overloaded run.
const RSS_CAP_KIB: u64 = 256 << 10;

/// A run of `secs` at `qps` against one synth worker serving fixed 10 µs
/// (at most 100 000 requests a second); wall time, exit code, peak RSS
/// (KiB, the largest taillab process) and the summary.
fn timed_run(
    topology: &str,
    qps: u64,
    secs: u64,
    name: &str,
) -> (Duration, Option<i32>, u64, Option<Value>) {
    let out = tmp(name);
    let t = Instant::now();
    #[rustfmt::skip]
    let mut c = Command::new(bin())
        .args(["run", "--app", "synth", "--set", "service=fixed:10us", "--config", topology, "--threads", "1",
               "--qps", &qps.to_string(), "--duration", &format!("{secs}s"), "-q", "--out"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (code, _, rss) = wait_rss(&mut c, Duration::from_secs(10 * secs + 120));
    let took = t.elapsed();
    let s = summary_if_any(&out);
    let _ = std::fs::remove_dir_all(&out);
    (took, code, rss, s)
}

/// Offered load 3× the saturation rate: the run ends within twice its
/// planned time (the same run's wall time at a light load, less its
/// measured `secs`, is the start-up and write-out it may add), is flagged
/// saturated, and no process grows past [`RSS_CAP_KIB`].
fn overload(topology: &str, secs: u64) -> (bool, Vec<String>) {
    let (light, _, _, _) = timed_run(topology, 2000, secs, &format!("light-{topology}"));
    let overhead = light.saturating_sub(Duration::from_secs(secs));
    let (took, code, rss, s) = timed_run(topology, 300_000, secs, &format!("overload-{topology}"));
    let limit = Duration::from_secs(2 * secs) + overhead + Duration::from_secs(1);
    let flagged = s
        .as_ref()
        .is_some_and(|s| s["checks"]["saturation"]["ok"] == false);
    let why = format!(
        "{topology} {secs} s at 3× saturation: exit {code:?} after {took:?} (limit {limit:?}, light run {light:?}), peak RSS {} MiB, saturation {}",
        rss >> 10,
        s.as_ref().map_or(Value::Null, |s| s["checks"]["saturation"].clone())
    );
    (
        code == Some(0) && took <= limit && flagged && rss <= RSS_CAP_KIB,
        vec![why],
    )
}

fn overload_row(secs: u64) {
    let _s = serial();
    let mut why = Vec::new();
    let mut survived = 0;
    for topology in ["integrated", "loopback"] {
        let (ok, w) = overload(topology, secs);
        survived += usize::from(ok);
        why.extend(w);
    }
    eprintln!("{}", why.join("\n"));
    verdict(
        &format!("overload 3× saturation for {secs} s (integrated, loopback)"),
        2,
        survived,
        0,
        "runs",
        &why,
    );
}

#[test]
fn overload_ends_in_time_flagged_and_bounded() {
    overload_row(2);
}

#[test]
#[ignore = "long: two 10 s overloads; make test-faults"]
fn overload_ten_seconds_ends_in_time_flagged_and_bounded() {
    overload_row(10);
}

// ---- 5. exposure -------------------------------------------------------------------

/// The local addresses (`/proc/net/tcp` hex, `0100007F:1EC6`) of the
/// listening TCP sockets process `pid` holds.
fn listening_addrs(pid: u32) -> Vec<String> {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().to_string();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .collect();
    let mut v = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        for row in std::fs::read_to_string(table)
            .unwrap_or_default()
            .lines()
            .skip(1)
        {
            let f: Vec<&str> = row.split_whitespace().collect();
            // local_address is field 1, st field 3 (0A = LISTEN), inode field 9.
            if f.len() > 9 && f[3] == "0A" && inodes.iter().any(|i| i == f[9]) {
                v.push(f[1].to_string());
            }
        }
    }
    v
}

#[test]
fn serve_without_listen_binds_loopback_only() {
    let _s = serial();
    #[rustfmt::skip]
    let mut c = Kid(Command::new(bin())
        .args(["serve", "--app", "null"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap());
    let mut line = String::new();
    BufReader::new(c.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addrs = listening_addrs(c.0.id());
    let mut why = vec![format!("printed {line:?}; listening sockets {addrs:?}")];
    // 0100007F is 127.0.0.1 in /proc/net/tcp's byte order; 1EC6 is port 7878.
    let mut ok = line.trim() == "listening 127.0.0.1:7878"
        && !addrs.is_empty()
        && addrs.iter().all(|a| a == "0100007F:1EC6");
    if line.is_empty() {
        // The port is taken (another server on this host): the refusal names the address it tried.
        let err = stderr_of(&mut c.0);
        ok = err.contains("127.0.0.1:7878") && !err.contains("0.0.0.0");
        why.push(format!("no server; stderr: {err}"));
    }
    verdict(
        "serve without --listen binds 127.0.0.1 only",
        1,
        usize::from(ok),
        0,
        "exposed",
        &why,
    );
}

// ---- 6. progress output ---------------------------------------------------------------

/// Runs `taillab ARGS --out OUT` (no -q) with stderr on a pipe; its stderr
/// and why its progress lines are not plain, if they are not.
fn piped_progress(args: &[&str], line_start: &str, name: &str) -> (String, Option<String>) {
    let out = tmp(name);
    let o = Command::new(bin())
        .args(args)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&out);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    let lines: Vec<&str> = err.lines().collect();
    let progress = lines.iter().filter(|l| l.starts_with(line_start)).count();
    let why = if !o.status.success() {
        Some(format!("exit {}", o.status))
    } else if err.contains('\r') || err.contains('\x1b') {
        Some("carriage returns or escape codes".into())
    } else if progress < 2 || progress != lines.len() {
        Some(format!(
            "{progress} of {} lines are progress lines",
            lines.len()
        ))
    } else {
        None
    };
    (err, why)
}

#[test]
fn progress_on_a_pipe_is_one_plain_line_per_step() {
    let _s = serial();
    #[rustfmt::skip]
    let cases: [(&[&str], &str); 2] = [
        (&["run", "--app", "synth", "--qps", "2000", "--duration", "3s", "--no-monitor"], "run "),
        (&["sweep", "--app", "synth", "--qps", "1000,2000", "--duration", "1s", "--no-monitor"], "["),
    ];
    let mut why = Vec::new();
    let mut fragments = 0;
    for (k, (args, start)) in cases.iter().enumerate() {
        let (err, bad) = piped_progress(args, start, &format!("progress-{k}"));
        fragments += err.matches('\r').count() as u64;
        if let Some(b) = bad {
            why.push(format!("{args:?}: {b}; stderr: {err:?}"));
        }
    }
    verdict(
        "progress with stderr on a pipe (run, sweep)",
        2,
        2 - why.len(),
        fragments,
        "\\r fragments",
        &why,
    );
}

// ---- 2. a flood of connections -----------------------------------------------------

/// A request frame of the taillab protocol (magic, version 2, kind 1, length, id).
fn request_frame(id: u64, payload: &[u8]) -> Vec<u8> {
    let mut f = b"TL\x02\x01".to_vec();
    f.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    f.extend_from_slice(&id.to_le_bytes());
    f.extend_from_slice(payload);
    f
}

/// Sends one request on `s` and reads its whole response.
fn round_trip(mut s: &TcpStream, id: u64) -> bool {
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let mut head = [0u8; 40];
    if s.write_all(&request_frame(id, b"ping")).is_err() || s.read_exact(&mut head).is_err() {
        return false;
    }
    let len = u32::from_le_bytes(head[4..8].try_into().unwrap()) as usize;
    let mut payload = vec![0u8; len];
    &head[..4] == b"TL\x02\x02"
        && head[8..16] == id.to_le_bytes()
        && s.read_exact(&mut payload).is_ok()
}

/// Whether the server closed `s` (end of file or reset) within a few seconds.
fn closed_by_peer(mut s: &TcpStream) -> bool {
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let mut b = [0u8; 64];
    match s.read(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => {
            e.kind() != std::io::ErrorKind::WouldBlock && e.kind() != std::io::ErrorKind::TimedOut
        }
    }
}

/// Lets this process open `n` more sockets (soft limit up to the hard one).
fn allow_open_files(n: u64) {
    // SAFETY: getrlimit/setrlimit on a plain struct owned here.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
        r.rlim_cur = r.rlim_max.min(r.rlim_cur.max(n + 1024));
        libc::setrlimit(libc::RLIMIT_NOFILE, &r);
    }
}

/// The number before `word` in `text` (`"3 refused"` → 3).
fn count_before(text: &str, word: &str) -> Option<u64> {
    let i = text.find(&format!(" {word}"))?;
    text[..i]
        .rsplit(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// Opens `n` connections to a server allowing `limit` (`None`: its
/// default, 1024): the first `limit` are served, the rest closed, the
/// refusals logged in a few lines and counted; then a load runs clean.
fn connection_flood(limit: Option<usize>, n: usize) {
    let _s = serial();
    allow_open_files(n as u64);
    let lim = limit.unwrap_or(1024);
    let arg = lim.to_string();
    let mut args = vec!["--app", "null"];
    if limit.is_some() {
        args.extend(["--max-connections", &arg]);
    }
    let (srv, addr) = serve(&args);
    let t = Instant::now();
    let conns: Vec<TcpStream> = (0..n)
        .filter_map(|_| TcpStream::connect(&addr).ok())
        .collect();
    let mut why = vec![format!("{} of {n} connects succeeded", conns.len())];
    let served = conns
        .iter()
        .take(lim)
        .enumerate()
        .filter(|(i, s)| round_trip(s, *i as u64))
        .count();
    let refused = conns.iter().skip(lim).filter(|s| closed_by_peer(s)).count();
    let took = t.elapsed();
    drop(conns);
    let out = tmp("flood-then-load");
    #[rustfmt::skip]
    let o = Command::new(bin())
        .args(["load", "--app", "null", "--target", &addr, "--qps", "2000", "--requests", "1000", "--no-monitor", "-q", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let clean =
        o.status.success() && summary_if_any(&out).is_some_and(|s| s["requests"]["errors"] == 0);
    let _ = std::fs::remove_dir_all(&out);
    let (st, err) = stop_server(srv);
    let log_lines = err
        .lines()
        .filter(|l| l.contains("refused") && l.contains("--max-connections"))
        .count();
    let stopped = err
        .lines()
        .find(|l| l.contains("stopped after"))
        .unwrap_or("");
    let counted = count_before(stopped, "refused");
    why.push(format!(
        "{served}/{lim} first served, {refused}/{} refused seen, {log_lines} log lines in {took:?}, load after: {}, stopped: {stopped}",
        n - lim,
        o.status
    ));
    // One line at once, then one per 5 s at most (plus the last at stop).
    let log_ok = log_lines >= 1 && log_lines as u64 <= 2 + took.as_secs() / 5;
    let ok =
        refused == n - lim && counted == Some((n - lim) as u64) && log_ok && clean && st.success();
    verdict(
        &format!("{n} connections against serve (limit {lim})"),
        n,
        if ok {
            served + refused
        } else {
            served.min(refused)
        },
        (lim - served) as u64,
        "requests",
        &why,
    );
}

#[test]
fn connections_beyond_the_limit_are_refused_and_the_first_served() {
    connection_flood(Some(50), 200);
}

#[test]
#[ignore = "long: 10 000 connections; make test-faults"]
fn ten_thousand_connections_are_refused_beyond_the_default_limit() {
    connection_flood(None, 10_000);
}

// ---- 3. malformed frames on the wire ---------------------------------------------

/// The resident peak (VmHWM, KiB) of process `pid`.
fn peak_rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Sends `head`, then streams up to `more` bytes of filler while the
/// server lets it; the bytes it took after `head`, and whether it then
/// closed the connection.
fn send_malformed(addr: &str, head: &[u8], more: usize) -> (usize, bool) {
    let mut s = TcpStream::connect(addr).unwrap();
    let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
    let _ = s.write_all(head);
    let chunk = vec![0x5a_u8; 1 << 20];
    let mut sent = 0;
    while sent < more {
        match s.write(&chunk) {
            Ok(k) => sent += k,
            Err(_) => break,
        }
    }
    (sent, closed_by_peer(&s))
}

#[test]
fn malformed_frames_drop_their_connection_and_others_are_served() {
    let _s = serial();
    let (srv, addr) = serve(&["--app", "null"]);
    let out = tmp("malformed-load");
    #[rustfmt::skip]
    let mut load = Kid(Command::new(bin())
        .args(["load", "--app", "null", "--target", &addr, "--qps", "2000", "--requests", "6000", "--no-monitor", "-q", "--out"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap());
    std::thread::sleep(Duration::from_millis(500));
    // Random bytes from a fixed xorshift seed (the first byte is never 'T').
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    let random: Vec<u8> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8 | 0x80
        })
        .collect();
    let mut giant = request_frame(1, b"");
    giant[4..8].copy_from_slice(&(1u32 << 30).to_le_bytes());
    let mut version = request_frame(1, b"ping");
    version[2] = 7;
    let mut response = request_frame(1, b"ping");
    response[3] = 2;
    #[rustfmt::skip]
    let cases: [(&str, &[u8], usize); 4] = [
        ("random bytes", &random, 0),
        ("a 1 GiB length, then 256 MiB streamed", &giant, 256 << 20),
        ("protocol version 7", &version, 0),
        ("a response sent to the server", &response, 0),
    ];
    let mut why = Vec::new();
    let mut closed = 0;
    for (name, head, more) in cases {
        let (sent, gone) = send_malformed(&addr, head, more);
        closed += usize::from(gone);
        why.push(format!(
            "{name}: {sent} bytes taken after the header, closed {gone}"
        ));
        // What the server took beyond the header is what the sockets buffer, not the 1 GiB announced.
        if sent > 32 << 20 {
            closed = closed.saturating_sub(1);
        }
    }
    let peak = peak_rss_kib(srv.0.id());
    let (code, _, _) = wait_rss(&mut load.0, Duration::from_secs(60));
    let s = summary_if_any(&out);
    let _ = std::fs::remove_dir_all(&out);
    let measured = s
        .as_ref()
        .map_or(0, |s| s["requests"]["measured"].as_u64().unwrap_or(0));
    let errors = s
        .as_ref()
        .map_or(1, |s| s["requests"]["errors"].as_u64().unwrap_or(1));
    let (st, err) = stop_server(srv);
    let stopped = err
        .lines()
        .find(|l| l.contains("stopped after"))
        .unwrap_or("");
    why.push(format!("server peak RSS {} MiB; load exit {code:?}, {measured} measured, {errors} errors; {stopped}", peak >> 10));
    let counted = count_before(stopped, "dropped") == Some(4);
    let ok = closed == 4 && counted && peak < 128 << 10 && code == Some(0) && st.success();
    verdict(
        "malformed frames on one connection while another loads",
        4,
        if ok { 4 } else { closed.min(3) },
        errors + (6000 - measured.min(6000)),
        "requests",
        &why,
    );
}

// ---- 1. a sweep killed at random points ---------------------------------------------

/// A small integrated sweep of `points` loads, two runs each.
fn kill_sweep_args(points: usize) -> Vec<String> {
    let qps: Vec<String> = (1..=points).map(|i| (300 * i).to_string()).collect();
    #[rustfmt::skip]
    let a = ["sweep", "--app", "synth", "--qps", &qps.join(","), "--duration", "0.5s", "--set", "service=exp:100us",
             "--ci", "0.5", "--min-runs", "2", "--max-runs", "2", "--seed", "3", "--no-monitor", "-q"];
    a.iter().map(|s| s.to_string()).collect()
}

/// The files of every finished run (a `run-K` folder holding `summary.json`) under `out`.
fn finished_runs(out: &Path) -> BTreeMap<PathBuf, BTreeMap<PathBuf, Vec<u8>>> {
    let mut m = BTreeMap::new();
    for point in std::fs::read_dir(out.join("points"))
        .into_iter()
        .flatten()
        .flatten()
    {
        for run in std::fs::read_dir(point.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let p = run.path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if name.starts_with("run-") && !name.contains('.') && p.join("summary.json").exists() {
                m.insert(p.clone(), files_under(&p));
            }
        }
    }
    m
}

/// Resumes the sweep of `args` in `out` to its end.
fn resume_sweep(args: &[String], out: &Path) -> Output {
    Command::new(bin())
        .args(args)
        .arg("--resume")
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

/// Kills a sweep (SIGKILL) `kills` times at random moments, resuming it
/// after each, then lets it finish: it completes, and every run folder
/// finished before a kill keeps its bytes.
fn sweep_killed(kills: usize, points: usize) {
    let _s = serial();
    let out = tmp(&format!("kill-sweep-{kills}"));
    let args = kill_sweep_args(points);
    let mut x = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    let mut why = vec![format!("random seed {x}")];
    let mut seen: BTreeMap<PathBuf, BTreeMap<PathBuf, Vec<u8>>> = BTreeMap::new();
    let mut changed = 0u64;
    let mut done = 0;
    for k in 0..kills {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let delay = Duration::from_millis(200 + x % 1000);
        let mut c = Command::new(bin());
        c.args(&args)
            .arg("--out")
            .arg(&out)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if k > 0 {
            c.arg("--resume");
        }
        let mut c = Kid(c.spawn().unwrap());
        std::thread::sleep(delay);
        if c.0.try_wait().unwrap().is_some() {
            why.push(format!("kill {k}: the sweep had finished before {delay:?}"));
            break;
        }
        signal(c.0.id(), libc::SIGKILL);
        let _ = c.0.wait();
        done += 1;
        for (run, files) in finished_runs(&out) {
            match seen.get(&run) {
                Some(before) if *before != files => {
                    changed += 1;
                    why.push(format!("kill {k}: {} changed", run.display()));
                }
                Some(_) => {}
                None => {
                    seen.insert(run, files);
                }
            }
        }
        why.push(format!(
            "kill {k} after {delay:?}: {} runs finished",
            seen.len()
        ));
    }
    let o = resume_sweep(&args, &out);
    let finals = finished_runs(&out);
    for (run, files) in &seen {
        if finals.get(run) != Some(files) {
            changed += 1;
            why.push(format!("{} changed or vanished by the end", run.display()));
        }
    }
    let complete = o.status.success() && finals.len() == 2 * points;
    why.push(format!(
        "final resume: {} with {} runs; {}",
        o.status,
        finals.len(),
        String::from_utf8_lossy(&o.stderr)
    ));
    verdict(
        &format!("sweep SIGKILLed at random points, resumed ({kills} kills)"),
        kills,
        if complete { done } else { 0 },
        changed,
        "finished runs",
        &why,
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// SIGTERM to a sweep whose stderr reader has gone (a parent script killed first, its pipe
/// left without a reader): the sweep still ends, as the signal would, within seconds, and a
/// resume finishes it. Its signal thread once died writing its one line to that stderr, and
/// every later SIGTERM was caught and ignored.
#[test]
fn sigterm_ends_a_sweep_whose_stderr_reader_has_gone() {
    let _s = serial();
    let out = tmp("term-sweep");
    let args = kill_sweep_args(6);
    let mut c = Command::new(bin());
    c.args(&args)
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut c = Kid(c.spawn().unwrap());
    drop(c.0.stderr.take());
    std::thread::sleep(Duration::from_millis(800));
    let mut why = vec![];
    let by_signal = if c.0.try_wait().unwrap().is_some() {
        why.push("the sweep had ended before the signal".to_string());
        false
    } else {
        signal(c.0.id(), libc::SIGTERM);
        // No exit code within the limit: ended by the signal (an exit of its own, as when
        // the signal was ignored and the sweep ran to its end, gives one; so does 128 + 15).
        let limit = Duration::from_secs(10);
        let (code, took, _) = wait_rss(&mut c.0, limit);
        why.push(format!("after SIGTERM: exit code {code:?} after {took:?}"));
        took < limit && matches!(code, None | Some(143))
    };
    let o = resume_sweep(&args, &out);
    let resumed = o.status.success() && finished_runs(&out).len() == 12;
    why.push(format!(
        "resume: {}; {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    ));
    verdict(
        "SIGTERM to a sweep whose stderr reader is gone",
        1,
        usize::from(by_signal && resumed),
        0,
        "finished runs",
        &why,
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_sweep_killed_twice_resumes_and_keeps_finished_runs() {
    sweep_killed(2, 4);
}

#[test]
#[ignore = "long: ten random kills; make test-faults"]
fn a_sweep_killed_ten_times_resumes_and_keeps_finished_runs() {
    sweep_killed(10, 12);
}

// ---- 4. disk trouble -------------------------------------------------------------------

/// A tmpfs of `kib` KiB mounted on a fresh folder, unmounted when dropped
/// (also when an assertion failed). `None` when mounting is not allowed.
struct TinyDisk(PathBuf);

impl TinyDisk {
    fn mount(name: &str, kib: u64) -> Option<TinyDisk> {
        let dir = tmp(name);
        std::fs::create_dir_all(&dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(&dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = std::fs::remove_dir(&dir);
        }
        ok.then_some(TinyDisk(dir))
    }
}

impl Drop for TinyDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Why a failed command's stderr is not one clear error line naming `words`, if it is not.
fn one_error_line(o: &Output, words: &[&str]) -> Option<String> {
    let err = String::from_utf8_lossy(&o.stderr);
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error")).collect();
    let named = errors.len() == 1 && words.iter().all(|w| errors[0].contains(w));
    (o.status.success() || err.contains("panicked") || !named)
        .then(|| format!("{}: {err}", o.status))
}

#[test]
fn a_full_disk_mid_sweep_is_a_clear_error_and_earlier_runs_stay() {
    let _s = serial();
    let Some(disk) = TinyDisk::mount("tiny-disk", 1500) else {
        return skip_without("tmpfs", "cannot mount a tmpfs here (needs root)");
    };
    let out = disk.0.join("sweep");
    // Each run's requests.csv is about 560 KiB: the third of four cannot fit.
    #[rustfmt::skip]
    let o = Command::new(bin())
        .args(["sweep", "--app", "synth", "--qps", "2000,2001,2002,2003", "--requests", "4000", "--save-requests",
               "--no-monitor", "-q", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let mut why: Vec<String> = one_error_line(&o, &["No space left", "free space"])
        .into_iter()
        .collect();
    let runs = finished_runs(&out);
    let mut lost = 0;
    for run in runs.keys() {
        // A finished run of the sweep reads back whole (its requests.csv too).
        let s = json(&run.join("summary.json"));
        let rows =
            std::fs::read_to_string(run.join("requests.csv")).map_or(0, |t| t.lines().count());
        if s["requests"]["measured"] != 4000 || rows != 4001 {
            lost += 1;
            why.push(format!(
                "{}: measured {}, {rows} csv lines",
                run.display(),
                s["requests"]["measured"]
            ));
        }
    }
    // Every run folder without a summary is the one cut short; none has a temp summary left.
    let cut: Vec<String> = tree(&out)
        .into_iter()
        .filter(|p| p.ends_with(".tmp"))
        .collect();
    if runs.len() != 2 || !cut.is_empty() {
        why.push(format!(
            "{} finished runs (want 2), temp files {cut:?}",
            runs.len()
        ));
    }
    let ok = why.is_empty();
    verdict(
        "results disk fills mid-sweep (tmpfs)",
        1,
        usize::from(ok),
        lost,
        "finished runs",
        &why,
    );
}

#[test]
fn the_results_folder_removed_mid_sweep_is_a_clear_error() {
    let _s = serial();
    let out = tmp("vanishing");
    #[rustfmt::skip]
    let c = Kid(Command::new(bin())
        .args(["sweep", "--app", "synth", "--qps", "1000,1001,1002,1003,1004,1005", "--duration", "0.5s",
               "--no-monitor", "-q", "--out"])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap());
    let t = Instant::now();
    while finished_runs(&out).is_empty() && t.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
    // The sweep writes on while the folder goes: a file created between remove_dir_all's
    // listing and its rmdir leaves the folder "not empty" (1 time in 40 here); remove again,
    // as `rm -rf` run twice would.
    for _ in 0..100 {
        match std::fs::remove_dir_all(&out) {
            Err(e) if e.kind() == std::io::ErrorKind::DirectoryNotEmpty => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
            r => {
                r.unwrap();
                break;
            }
        }
    }
    let mut c = c;
    let o = Output {
        status: c.0.wait().unwrap(),
        stdout: Vec::new(),
        stderr: stderr_of(&mut c.0).into_bytes(),
    };
    let why: Vec<String> = one_error_line(&o, &["vanished", "new --out"])
        .into_iter()
        .collect();
    let ok = why.is_empty() && o.status.code() == Some(2);
    verdict(
        "results folder removed mid-sweep",
        1,
        usize::from(ok),
        0,
        "runs",
        &why,
    );
    let _ = std::fs::remove_dir_all(&out);
}
