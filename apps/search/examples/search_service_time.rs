//! Measures search service time without the harness: prepares the index if
//! needed (timed), builds the server and one client, calls `Worker::handle`
//! in a loop on this thread and prints percentiles.
//!
//! `cargo run --release -p taillab-search --example search_service_time -- [requests=N] [key=value ...]`
//! (other `key=value` pairs are the app's `--set` keys, e.g. `terms=1 mode=or`).

use std::time::Instant;

use taillab_core::app::{service_line, time_handles};
use taillab_core::{DataCtx, Params};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut requests = 5_000usize;
    let mut sets = Vec::new();
    for a in std::env::args().skip(1) {
        match a.strip_prefix("requests=") {
            Some(n) => requests = n.parse()?,
            None => sets.push(a),
        }
    }
    let params = Params::parse(sets.iter().map(|s| s.as_str()))?;
    let app = taillab_search::app();
    let data = DataCtx::from_env();
    let t0 = Instant::now();
    app.prepare(&data, &params)?;
    println!(
        "prepare: {:.1} s (0 when already prepared)",
        t0.elapsed().as_secs_f64()
    );
    let server = app.server(&data, &params, 1)?;
    println!("server: {}", server.report());
    let mut worker = server.worker(0)?;
    let mut client = app.client(&data, &params, 1)?;
    // The first tenth, untimed, warms the page cache and tantivy's block caches.
    let mut hits = 0usize;
    let ns = time_handles(
        worker.as_mut(),
        client.as_mut(),
        requests / 10,
        requests,
        |resp| hits += resp[0] as usize,
    )?;
    println!(
        "service time over {requests} queries: {}; {:.2} hits/query",
        service_line(&ns),
        hits as f64 / requests as f64
    );
    println!(
        "loadavg: {}",
        std::fs::read_to_string("/proc/loadavg")?.trim()
    );
    Ok(())
}
