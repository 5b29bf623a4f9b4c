//! Measures kv service time without the harness: builds the server and one
//! client, calls `Worker::handle` in a loop on this thread, prints percentiles.
//!
//! `cargo run --release -p taillab-kv --example kv_service_time -- [requests=N] [key=value ...]`
//! (other `key=value` pairs are the app's `--set` keys, e.g. `workload=e ops=8`).

use std::time::Instant;

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
    let (mut req, mut resp) = (Vec::new(), Vec::new());
    // Warm up caches and the allocator before timing.
    for _ in 0..requests / 10 {
        req.clear();
        resp.clear();
        client.next_request(&mut req);
        worker.handle(&req, &mut resp)?;
    }
    let mut ns = Vec::with_capacity(requests);
    for _ in 0..requests {
        req.clear();
        resp.clear();
        client.next_request(&mut req);
        let t = Instant::now();
        worker.handle(&req, &mut resp)?;
        ns.push(t.elapsed().as_nanos() as u64);
    }
    ns.sort_unstable();
    let q = |p: f64| ns[((ns.len() as f64 * p) as usize).min(ns.len() - 1)] as f64 / 1e3;
    let mean = ns.iter().sum::<u64>() as f64 / ns.len() as f64 / 1e3;
    println!(
        "service time over {requests} requests (µs): mean {mean:.1} p50 {:.1} p95 {:.1} p99 {:.1} max {:.1}",
        q(0.5),
        q(0.95),
        q(0.99),
        q(1.0)
    );
    println!(
        "loadavg: {}",
        std::fs::read_to_string("/proc/loadavg")?.trim()
    );
    Ok(())
}
