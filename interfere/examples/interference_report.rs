//! Runs planned interference for a second and prints its report — the
//! `interference` section a run's `summary.json` gets.
//!
//! ```text
//! cargo run --release -p taillab-interfere --example interference_report -- cpu:1@cpus=0 net:1,rate=50M
//! ```
//!
//! Needs stress-ng (and iperf3 for `net`): `apt-get install stress-ng iperf3`.

use std::time::Duration;

use taillab_interfere::{InterfereSpec, Interference};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let specs: Result<Vec<InterfereSpec>, taillab_core::ValueError> = if args.is_empty() {
        Ok(vec!["cpu:1@cpus=0".parse().expect("a valid spec")])
    } else {
        args.iter().map(|a| a.parse()).collect()
    };
    let specs = specs.unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(2);
    });
    // Ctrl-C stops the hogs before the process ends.
    taillab_interfere::signals::install().expect("signal thread");
    let hogs = Interference::start(&specs).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(2);
    });
    eprintln!("hog pids (for the environment monitor): {:?}", hogs.pids());
    std::thread::sleep(Duration::from_millis(200));
    hogs.mark_measured_start();
    std::thread::sleep(Duration::from_secs(1));
    hogs.mark_measured_end();
    let report = hogs.stop();
    println!("{}", serde_json::to_string_pretty(&report).expect("JSON"));
    if !report.ok {
        std::process::exit(1);
    }
}
