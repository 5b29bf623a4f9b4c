//! `--profile perf`: sample the workers' stacks with `perf record` during the
//! measured phase and turn them into `perf.folded` and `flame.svg` in the
//! run folder.
//!
//! The sampling event is `cpu-clock`, a software timer, because VMs (this
//! project's development hosts among them) usually expose no hardware PMU,
//! where the default `cycles` event fails. Stacks are unwound through frame
//! pointers (`-g`); Rust release code omits them unless built with
//! `-C force-frame-pointers=yes`, so deep stacks may be cut short —
//! [`PerfOptions::call_graph`] `dwarf` unwinds properly at the price of a
//! much bigger `perf.data`.
//!
//! A host without perf, or where the kernel does not let this user profile
//! (`kernel.perf_event_paranoid`), gives [`Profile::Skipped`] with the
//! reason and what to do; the run goes on without a profile. Folding and
//! drawing use the `inferno` library (no Perl scripts needed).

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::preflight;

pub use taillab_core::config::ProfileMode;
pub use taillab_core::sections::planned::ProfileOutcome;

/// What to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PerfTarget {
    /// Whole processes (all their threads).
    Pids(Vec<i32>),
    /// Only these threads (e.g. the worker threads of the harness).
    Tids(Vec<i32>),
}

/// How to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerfOptions {
    /// perf event (default `cpu-clock`, available without a PMU).
    pub event: String,
    /// Samples per second per thread (default 997: not a multiple of
    /// common timer rates, so sampling does not lock onto periodic work).
    pub frequency_hz: u32,
    /// `fp` (frame pointers, `-g`) or `dwarf`.
    pub call_graph: String,
}

impl Default for PerfOptions {
    fn default() -> Self {
        PerfOptions {
            event: "cpu-clock".into(),
            frequency_hz: 997,
            call_graph: "fp".into(),
        }
    }
}

/// A running `perf record`.
#[derive(Debug)]
pub struct PerfRecording {
    child: Option<Child>,
    dir: PathBuf,
    data: PathBuf,
    log: PathBuf,
    title: String,
    /// Unit of the folded counts.
    count_name: String,
}

/// The result of asking for a profile.
#[derive(Debug)]
pub enum Profile {
    /// `perf record` is running; finish it to get the files.
    Recording(PerfRecording),
    /// Not recorded; the reason says why and what would make it work.
    Skipped(String),
}

/// Why perf cannot record here, if it cannot.
pub fn perf_unavailable() -> Option<String> {
    if preflight::find_program("perf").is_none() {
        return Some("perf is not installed: apt-get install linux-perf (or `make setup`)".into());
    }
    // SAFETY: geteuid has no side effects.
    let root = unsafe { libc::geteuid() } == 0;
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok());
    match paranoid {
        None => Some("this kernel has no perf events (/proc/sys/kernel/perf_event_paranoid is missing)".into()),
        Some(p) if p > 2 && !root => Some(format!(
            "perf is not permitted: kernel.perf_event_paranoid is {p}; run as root or `sysctl kernel.perf_event_paranoid=2`"
        )),
        _ => None,
    }
}

/// Starts `perf record` on `target`, writing `perf.data` (and `perf.log`)
/// into `dir`. Returns [`Profile::Skipped`] instead of an error when perf is
/// missing, not permitted, or exits at once (its first message is kept).
pub fn start_perf(target: &PerfTarget, dir: &Path, opts: &PerfOptions) -> Profile {
    if let Some(why) = perf_unavailable() {
        return Profile::Skipped(why);
    }
    let (flag, ids, title) = match target {
        PerfTarget::Pids(p) => ("-p", p, "processes"),
        PerfTarget::Tids(t) => ("-t", t, "threads"),
    };
    if ids.is_empty() {
        return Profile::Skipped("nothing to profile: no pids or thread ids given".into());
    }
    if let Err(e) = std::fs::create_dir_all(dir) {
        return Profile::Skipped(format!("cannot create {}: {e}", dir.display()));
    }
    let list: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
    let data = dir.join("perf.data");
    let log = dir.join("perf.log");
    let logf = match File::create(&log) {
        Ok(f) => f,
        Err(e) => return Profile::Skipped(format!("cannot write {}: {e}", log.display())),
    };
    let mut cmd = Command::new("perf");
    cmd.args([
        "record",
        "-e",
        &opts.event,
        "-F",
        &opts.frequency_hz.to_string(),
    ]);
    if opts.call_graph == "fp" {
        cmd.arg("-g");
    } else {
        cmd.args(["--call-graph", &opts.call_graph]);
    }
    cmd.args(["-o", &data.display().to_string(), flag, &list.join(",")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(logf);
    set_pdeathsig(&mut cmd);
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Profile::Skipped(format!("cannot start perf: {e}")),
    };
    let mut rec = PerfRecording {
        child: Some(child),
        dir: dir.to_path_buf(),
        data,
        log,
        title: format!("taillab: {title} {}", list.join(",")),
        count_name: if matches!(opts.event.as_str(), "cpu-clock" | "task-clock") {
            "ns".into()
        } else {
            "events".into()
        },
    };
    // perf creates perf.data empty at once and writes its header only once
    // every event is open: until then a SIGINT kills it without data or a
    // word (a first perf on a cold host can take seconds to load). So wait
    // for the header, or for perf to fail (bad event, no permission, gone
    // thread: its message is kept), before promising a profile.
    let until = Instant::now() + START_WAIT;
    loop {
        if let Some(Ok(Some(st))) = rec.child.as_mut().map(|c| c.try_wait()) {
            rec.child = None;
            return Profile::Skipped(format!(
                "perf record ended at once ({st}): {}",
                first_error_line(&rec.log)
            ));
        }
        if recording_started(&rec.data) {
            return Profile::Recording(rec);
        }
        if Instant::now() >= until {
            if let Some(mut c) = rec.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
            return Profile::Skipped(format!(
                "perf record had not started recording after {} s (no header in {}): {}",
                START_WAIT.as_secs(),
                rec.data.display(),
                first_error_line(&rec.log)
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// How long `perf record` may take to open its events.
const START_WAIT: Duration = Duration::from_secs(20);

/// perf has written its file header, so its events are open and a SIGINT
/// makes it write what it sampled.
fn recording_started(data: &Path) -> bool {
    std::fs::metadata(data)
        .map(|m| m.len() > 0)
        .unwrap_or(false)
}

fn set_pdeathsig(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

/// perf's first informative line (it prints a bare `Error:` first).
fn first_error_line(log: &Path) -> String {
    let t = std::fs::read_to_string(log).unwrap_or_default();
    t.lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('[') && *l != "Error:")
        .unwrap_or("no message")
        .to_string()
}

impl PerfRecording {
    /// Stops perf (SIGINT, so it writes its data), then writes
    /// `perf.folded` and `flame.svg` next to `perf.data`.
    pub fn finish(mut self) -> ProfileOutcome {
        if let Some(mut c) = self.child.take() {
            if let Ok(Some(st)) = c.try_wait() {
                if !st.success() {
                    return ProfileOutcome::Skipped {
                        reason: format!(
                            "perf record ended early ({st}): {}",
                            first_error_line(&self.log)
                        ),
                    };
                }
            }
            // SAFETY: signalling our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
            let until = Instant::now() + Duration::from_secs(30);
            while matches!(c.try_wait(), Ok(None)) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        match self.convert() {
            Ok(o) => o,
            Err(reason) => ProfileOutcome::Skipped { reason },
        }
    }

    fn convert(&self) -> Result<ProfileOutcome, String> {
        if !self.data.exists() {
            return Err(format!(
                "perf wrote no data: {}",
                first_error_line(&self.log)
            ));
        }
        let folded = self.dir.join("perf.folded");
        let svg = self.dir.join("flame.svg");
        let mut script = Command::new("perf");
        script
            .args(["script", "-i", &self.data.display().to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        set_pdeathsig(&mut script);
        let mut child = script
            .spawn()
            .map_err(|e| format!("cannot run perf script: {e}"))?;
        let out = child.stdout.take().expect("piped stdout");
        let (weight, stacks) = fold(BufReader::new(out), &folded)?;
        let _ = child.wait();
        if stacks == 0 {
            return Err(
                "perf recorded no samples (were the threads idle, or did they exit?)".into(),
            );
        }
        draw(&folded, &svg, &self.title, &self.count_name)?;
        let name = |p: &Path| {
            p.file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned()
        };
        Ok(ProfileOutcome::Written {
            data: name(&self.data),
            folded: name(&folded),
            svg: name(&svg),
            weight,
            stacks,
        })
    }
}

impl Drop for PerfRecording {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Folds `perf script` output into `out`; returns (total weight, distinct
/// stacks). The weight of a sample is its period when perf printed one.
pub fn fold(script: impl std::io::BufRead, out: &Path) -> Result<(u64, usize), String> {
    use inferno::collapse::perf::{Folder, Options};
    use inferno::collapse::Collapse;
    let mut opts = Options::default();
    opts.nthreads = 1;
    let mut buf = Vec::new();
    Folder::from(opts)
        .collapse(script, &mut buf)
        .map_err(|e| format!("cannot fold perf script output: {e}"))?;
    std::fs::write(out, &buf).map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    let text = String::from_utf8_lossy(&buf);
    let weight = text
        .lines()
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum();
    Ok((weight, text.lines().count()))
}

/// Draws a flame graph SVG from a folded-stack file; `count_name` is the
/// unit of the counts shown on hover (`ns` for `cpu-clock`).
pub fn draw(folded: &Path, svg: &Path, title: &str, count_name: &str) -> Result<(), String> {
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_string();
    opts.count_name = count_name.into();
    let input = File::open(folded).map_err(|e| format!("cannot read {}: {e}", folded.display()))?;
    let output = File::create(svg).map_err(|e| format!("cannot write {}: {e}", svg.display()))?;
    inferno::flamegraph::from_reader(&mut opts, BufReader::new(input), BufWriter::new(output))
        .map_err(|e| format!("cannot draw the flame graph: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_and_draws_a_captured_script() {
        let script = "app 10/11 1.000: 250000 cpu-clock:\n\tffff0001 spin+0x10 (/bin/app)\n\tffff0002 main+0x20 (/bin/app)\n\napp 10/11 1.001: 250000 cpu-clock:\n\tffff0001 spin+0x10 (/bin/app)\n\tffff0002 main+0x20 (/bin/app)\n\napp 10/11 1.002: 250000 cpu-clock:\n\tffff0003 other+0x1 (/bin/app)\n\tffff0002 main+0x20 (/bin/app)\n\n";
        let dir = tempfile::tempdir().unwrap();
        let folded = dir.path().join("perf.folded");
        // Each sample weighs its period (250000 ns of cpu-clock).
        let (weight, stacks) = fold(script.as_bytes(), &folded).unwrap();
        assert_eq!((weight, stacks), (750_000, 2));
        let text = std::fs::read_to_string(&folded).unwrap();
        assert!(text.contains("app;main;spin 500000"), "{text}");
        let svg = dir.path().join("flame.svg");
        draw(&folded, &svg, "t", "ns").unwrap();
        let s = std::fs::read_to_string(&svg).unwrap();
        assert!(
            s.starts_with("<?xml") && s.contains("spin"),
            "{}",
            &s[..200.min(s.len())]
        );
        assert_eq!("perf".parse::<ProfileMode>().unwrap().to_string(), "perf");
        assert!("gprof"
            .parse::<ProfileMode>()
            .unwrap_err()
            .to_string()
            .contains("off or perf"));
    }
}
