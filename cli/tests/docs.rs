//! Every command the README and the user's guide show is run by a test: the cheap ones here,
//! with small counts, the rest by the test named beside them (which must exist). A command
//! added to either page without an entry below fails `every_documented_command_is_covered`,
//! so the pages cannot drift from what the binary accepts.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// How a documented command is tested.
enum How {
    /// Run here: the arguments after `taillab` (small counts; `{T}` is this test's temp folder,
    /// `{R}` the repository). Exit 0 is asserted.
    Run(&'static str),
    /// A script of the repository run here with these flags added to its sweep (`make demo`'s
    /// main job, shortened); exit 0 and its report are asserted.
    Script(&'static str, &'static str),
    /// Run by another test: `FILE::FUNCTION` (checked to exist), and why not here.
    Elsewhere(&'static str, &'static str),
}

/// Each documented command (as the page writes it, whitespace collapsed) and how it is
/// tested.
const COVERED: &[(&str, How)] = &[
    // README
    ("make demo", How::Script("scripts/demo.sh", "--duration 200ms --warmup 50ms --ci none --qps 1000,3000")),
    ("make test", How::Elsewhere(".ci/run", "CI runs the README's test command itself")),
    ("target/release/taillab run --app synth --qps 2500 --threads 1 --warmup-requests 2000 --requests 20000 --seed 7 --set service=exp:200us --out results/mm1",
     How::Run("run --app synth --qps 2500 --threads 1 --warmup-requests 200 --requests 2000 --seed 7 --set service=exp:200us --out {T}/mm1")),
    ("target/release/taillab load --app memcached --target 127.0.0.1:11211 --qps 50000 --duration 10s --out results/mc",
     How::Elsewhere("cli/tests/transport.rs::memcached_real_server", "it needs a memcached the test starts")),
    ("taillab sweep", How::Run("sweep --help")),
    ("taillab report", How::Run("report --help")),
    ("taillab model", How::Run("model --help")),
    ("taillab fit", How::Run("fit --help")),
    ("taillab tailwag", How::Run("tailwag --help")),
    // The guide
    ("target/release/taillab run --app synth --qps 2500 --threads 1 --warmup-requests 5000 --requests 100000 --seed 7 --set service=exp:200us --out results/mm1",
     How::Run("run --app synth --qps 2500 --threads 1 --warmup-requests 200 --requests 2000 --seed 7 --set service=exp:200us --out {T}/mm1-guide")),
    ("taillab config keys", How::Run("config keys")),
    ("taillab run --from DIR [flags]", How::Run("run --from {T}/mm1 --requests 1000 --warmup-requests 100 --out {T}/from")),
    ("taillab sweep --file configs/demo.toml",
     How::Run("sweep --file {R}/configs/demo.toml --duration 200ms --warmup 50ms --ci none --qps 1000,3000 --out {T}/demo")),
    ("taillab run --ci 0.01", How::Run("run --app synth --qps 2500 --requests 1000 --warmup-requests 100 --ci 0.5 --max-runs 3 --out {T}/ci")),
    ("taillab model --qps 2500 --service exp:200us", How::Run("model --qps 2500 --service exp:200us")),
    ("taillab run --app null --topology loopback --clients 2 --qps 20000 --duration 10s",
     How::Run("run --app null --topology loopback --clients 2 --qps 20000 --duration 500ms --warmup 100ms --out {T}/loopback")),
    ("taillab serve", How::Run("serve --help")),
    ("taillab load", How::Run("load --help")),
    ("taillab load --app memcached|redis|http|grpc --target HOST:PORT",
     How::Elsewhere("cli/tests/transport.rs::redis_real_server", "each needs a real server the tests start (memcached_real_server, nginx_real_server, grpc.rs)")),
    ("taillab explain RUN", How::Elsewhere("cli/tests/explain.rs::a_quiet_run_leaves_little_of_the_tail_unexplained", "it needs root and tracefs")),
    ("taillab attribute --factor interference.hogs='none|cpu:1' --factor harness.wait='hybrid|spin' …",
     How::Elsewhere("cli/tests/attribute.rs::planted_effects_are_recovered_after_a_resume", "a design of several cells")),
    ("taillab fit RUN", How::Elsewhere("cli/tests/fit.rs::fit_recovers_one_component", "it needs the Python package")),
    ("taillab tailwag APP --load 0.2,0.5,0.7", How::Elsewhere("cli/tests/tailwag.rs::tailwag_synth_recovers_a_known_mixture", "minutes of runs and a fit")),
    ("taillab model --fanout N …", How::Run("model --fanout 10 --qps 1000 --service exp:200us")),
    ("taillab reproduce tail-at-scale-fanout", How::Elsewhere("cli/tests/reproduce.rs::smoke_with_readers", "every item's smoke variant runs there")),
    ("taillab sweep --executor slurm …", How::Elsewhere("cli/tests/slurm.rs::slurm_sweeps_and_networked_runs_on_a_local_cluster", "it needs the local Slurm the test starts")),
    ("taillab reproduce --list", How::Run("reproduce --list")),
    ("taillab reproduce ID [--quick]", How::Elsewhere("cli/tests/reproduce.rs::smoke_with_readers", "every item's smoke variant runs there")),
    ("taillab reproduce ID --seed 7 --requests 3000",
     How::Elsewhere("cli/tests/reproduce.rs::run_settings_of_the_command_line_go_over_the_items_and_the_page_says_so", "an item's runs")),
    ("taillab apps", How::Run("apps")),
    ("taillab data prepare APP", How::Run("data prepare synth")),
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The commands a page shows: lines of its code blocks that start with `$ `, `taillab`,
/// `target/release/taillab` or `make ` (continuation lines joined, comments cut), and inline
/// code that starts with `taillab `; whitespace collapsed.
fn commands(page: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_block = false;
    let mut pending: Option<String> = None;
    for line in page.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block {
            let l = line.trim();
            let cont = pending.take();
            let l = match cont {
                Some(c) => format!("{c} {l}"),
                None if ["$ ", "taillab ", "target/release/taillab ", "make "]
                    .iter()
                    .any(|p| l.starts_with(p)) =>
                {
                    l.to_string()
                }
                None => continue,
            };
            match l.strip_suffix('\\') {
                Some(head) => pending = Some(head.trim().to_string()),
                None => out.push(
                    l.split(" # ")
                        .next()
                        .unwrap()
                        .trim_start_matches("$ ")
                        .to_string(),
                ),
            }
        } else {
            for (i, span) in line.split('`').enumerate() {
                if i % 2 == 1 && span.starts_with("taillab ") {
                    out.push(span.to_string());
                }
            }
        }
    }
    out.iter()
        .map(|c| c.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// The README's and the guide's commands, each with the page it is on. An inline span that
/// wraps over two lines is read from the page with its lines joined.
fn documented() -> Vec<(String, &'static str)> {
    let mut all = Vec::new();
    for page in ["README.md", "docs/guide.md"] {
        let text = std::fs::read_to_string(repo().join(page)).unwrap();
        // Inline code may wrap: join each paragraph's lines outside code blocks.
        let mut joined = String::new();
        let mut in_block = false;
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                in_block = !in_block;
            }
            joined.push_str(line);
            joined.push(
                if in_block || line.trim().is_empty() || line.trim_start().starts_with("```") {
                    '\n'
                } else {
                    ' '
                },
            );
        }
        for c in commands(&joined) {
            all.push((c, page));
        }
    }
    all
}

#[test]
fn every_documented_command_is_covered() {
    let docs = documented();
    assert!(
        docs.len() >= 20,
        "found only {} commands: is the parser reading the pages?",
        docs.len()
    );
    let missing: Vec<String> = docs
        .iter()
        .filter(|(c, _)| !COVERED.iter().any(|(d, _)| d == c))
        .map(|(c, p)| format!("{p}: `{c}`"))
        .collect();
    assert!(
        missing.is_empty(),
        "commands the pages show that no test runs (add each to COVERED in cli/tests/docs.rs):\n{}",
        missing.join("\n")
    );
    // An entry no page shows any more is stale.
    let stale: Vec<&str> = COVERED
        .iter()
        .map(|(d, _)| *d)
        .filter(|d| !docs.iter().any(|(c, _)| c == d))
        .collect();
    assert!(
        stale.is_empty(),
        "COVERED lists commands no page shows: {stale:?}"
    );
    // The tests named for the others exist.
    for (d, how) in COVERED {
        if let How::Elsewhere(at, why) = how {
            assert!(!why.is_empty());
            let (file, func) = at.split_once("::").unwrap_or((at, ""));
            let text = std::fs::read_to_string(repo().join(file))
                .unwrap_or_else(|e| panic!("`{d}`: {file}: {e}"));
            assert!(
                func.is_empty() || text.contains(&format!("fn {func}(")),
                "`{d}`: no fn {func} in {file}"
            );
        }
    }
}

#[test]
fn the_documented_commands_run() {
    let _g = serial();
    let t = tmp("docs");
    std::fs::create_dir_all(&t).unwrap();
    let (t_s, r_s) = (
        t.to_string_lossy().to_string(),
        repo().to_string_lossy().to_string(),
    );
    let mut failed = Vec::new();
    for (doc, how) in COVERED {
        let How::Run(args) = how else { continue };
        let args = args.replace("{T}", &t_s).replace("{R}", &r_s);
        let o = Command::new(bin())
            .args(args.split_whitespace())
            .current_dir(&t)
            .output()
            .unwrap();
        if !o.status.success() {
            let err = String::from_utf8_lossy(&o.stderr);
            failed.push(format!(
                "`{doc}` as `taillab {args}`: {}: {}",
                o.status,
                err.lines().last().unwrap_or("")
            ));
        }
    }
    for (doc, how) in COVERED {
        let How::Script(script, flags) = how else {
            continue;
        };
        let out = t.join("demo-script");
        let o = Command::new(repo().join(script))
            .env("OUT", &out)
            .env("TAILLAB_BIN", bin())
            .env("TAILLAB_DEMO_FLAGS", flags)
            .output()
            .unwrap();
        if !o.status.success() || !out.join("report/index.html").exists() {
            let err = String::from_utf8_lossy(&o.stderr);
            failed.push(format!(
                "`{doc}` as {script}: {}: {}",
                o.status,
                err.lines().last().unwrap_or("")
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    // The runs wrote their folders.
    for d in ["mm1", "from", "ci", "loopback", "demo"] {
        assert!(t.join(d).exists(), "{d} was not written");
    }
    let _ = std::fs::remove_dir_all(&t);
}
