//! Measures kv service time without the harness: builds the server and one
//! client, calls `Worker::handle` in a loop on this thread, prints percentiles.
//!
//! `cargo run --release -p taillab-kv --example kv_service_time -- [requests=N] [key=value ...]`
//! (other `key=value` pairs are the app's `--set` keys, e.g. `workload=e ops=8`).

use std::time::Instant;

use taillab_core::app::{service_line, time_handles};
use taillab_core::{DataCtx, Params};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut requests = 20_000usize;
    let mut sets = Vec::new();
    for a in std::env::args().skip(1) {
        match a.strip_prefix("requests=") {
            Some(n) => requests = n.parse()?,
            None => sets.push(a),
        }
    }
    let params = Params::parse(sets.iter().map(|s| s.as_str()))?;
    let app = taillab_kv::app();
    let data = DataCtx::from_env();
    let t0 = Instant::now();
    let server = app.server(&data, &params, 1)?;
    println!(
        "server ready in {:.0} ms: {}",
        t0.elapsed().as_secs_f64() * 1e3,
        server.report()
    );
    let mut worker = server.worker(0)?;
    let mut client = app.client(&data, &params, 1)?;
    // A tenth untimed first warms caches and the allocator.
    let ns = time_handles(
        worker.as_mut(),
        client.as_mut(),
        requests / 10,
        requests,
        |_| {},
    )?;
    println!(
        "service time over {requests} requests: {}",
        service_line(&ns)
    );
    println!(
        "loadavg: {}",
        std::fs::read_to_string("/proc/loadavg")?.trim()
    );
    Ok(())
}
