//! Service time of each TPC-C transaction type, measured by calling
//! `Worker::handle` in a closed loop on N threads (no queueing: every request
//! is issued when the previous one on that thread returns, so the numbers are
//! service times, including any wait for SQLite's write lock held by another
//! thread).
//!
//! ```text
//! cargo run --release -p taillab-oltp --example oltp_service_times -- \
//!     --app oltp-mem --threads 1 --requests 20000 [--set warehouses=1 ...]
//! ```
//! Data goes to `$TAILLAB_DATA` (default `~/.local/share/taillab`).

use std::time::Instant;
use taillab_core::{DataCtx, Params};
use taillab_oltp::{Kind, TxnResult};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut app_name = "oltp-mem".to_string();
    let mut threads = 1usize;
    let mut requests = 20_000usize;
    let mut sets: Vec<String> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--app" => app_name = val()?,
            "--threads" => threads = val()?.parse()?,
            "--requests" => requests = val()?.parse()?,
            "--set" => sets.push(val()?),
            other => return Err(format!("unknown argument {other}; see the example's doc").into()),
        }
    }
    let app = taillab_oltp::apps()
        .into_iter()
        .find(|a| a.name() == app_name)
        .ok_or("--app must be oltp-mem or oltp-disk")?;
    let params = Params::parse(sets.iter().map(|s| s.as_str()))?;
    let data = DataCtx::from_env();
    let t = Instant::now();
    app.prepare(&data, &params)?;
    eprintln!("prepare: {:.1} s", t.elapsed().as_secs_f64());
    let t = Instant::now();
    let server = app.server(&data, &params, threads)?;
    eprintln!(
        "server start (load/copy): {:.2} s",
        t.elapsed().as_secs_f64()
    );

    let per_thread = requests / threads;
    let wall = Instant::now();
    let samples: Vec<Vec<(Kind, u64)>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|i| {
                let (server, app, params, data) = (&server, &app, &params, &data);
                s.spawn(move || {
                    let mut w = server.worker(i).expect("worker");
                    let mut c = app.client(data, params, 1000 + i as u64).expect("client");
                    let (mut req, mut resp) = (Vec::new(), Vec::new());
                    let mut out = Vec::with_capacity(per_thread);
                    for _ in 0..per_thread {
                        req.clear();
                        resp.clear();
                        c.next_request(&mut req);
                        let t0 = Instant::now();
                        w.handle(&req, &mut resp).expect("transaction failed");
                        let ns = t0.elapsed().as_nanos() as u64;
                        out.push((TxnResult::decode(&resp).expect("response").kind(), ns));
                    }
                    out
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("worker thread panicked"))
            .collect()
    });
    let secs = wall.elapsed().as_secs_f64();
    let all: Vec<(Kind, u64)> = samples.into_iter().flatten().collect();
    println!(
        "{app_name} {} threads={threads}: {} txns in {secs:.2} s = {:.0} txn/s",
        params,
        all.len(),
        all.len() as f64 / secs
    );
    println!(
        "{:<13} {:>7} {:>9} {:>9} {:>9} {:>9}",
        "type", "count", "p50 us", "p95 us", "p99 us", "max us"
    );
    let mut rows: Vec<(&str, Vec<u64>)> = Kind::ALL
        .iter()
        .map(|k| {
            (
                k.name(),
                all.iter()
                    .filter(|(kk, _)| kk == k)
                    .map(|&(_, ns)| ns)
                    .collect(),
            )
        })
        .collect();
    rows.push(("all", all.iter().map(|&(_, ns)| ns).collect()));
    for (name, mut v) in rows {
        if v.is_empty() {
            continue;
        }
        v.sort_unstable();
        let q =
            |p: f64| v[((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1] as f64 / 1e3;
        println!(
            "{name:<13} {:>7} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
            v.len(),
            q(0.5),
            q(0.95),
            q(0.99),
            q(1.0)
        );
    }
    println!("app_stats: {}", server.report());
    println!(
        "loadavg: {}",
        std::fs::read_to_string("/proc/loadavg")?.trim()
    );
    Ok(())
}
