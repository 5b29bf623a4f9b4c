//! Service time of the img-dnn app on one worker, until the harness runs it.
//!
//! `cargo run --release -p taillab-img-dnn --example img_dnn_service_time -- [N] [dataset]`
//! prepares the data (in `$TAILLAB_DATA`), draws N test images with seed 1,
//! calls `Worker::handle` back to back and prints percentiles of the time
//! per call.

use std::time::Instant;

use taillab_core::app::{DataCtx, Params};

fn pct(sorted: &[u64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize] as f64
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: usize = args
        .first()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(20_000);
    let dataset = args.get(1).cloned().unwrap_or_else(|| "mnist".into());
    let data = DataCtx::from_env();
    let app = taillab_img_dnn::app();
    let params = Params::parse([format!("dataset={dataset}").as_str()])?;
    app.prepare(&data, &params)?;
    let server = app.server(&data, &params, 1)?;
    let mut w = server.worker(0)?;
    let mut client = app.client(&data, &params, 1)?;
    let (mut req, mut resp) = (Vec::new(), Vec::new());
    let mut ns = Vec::with_capacity(n);
    for _ in 0..n {
        req.clear();
        resp.clear();
        client.next_request(&mut req);
        let t0 = Instant::now();
        w.handle(&req, &mut resp)?;
        ns.push(t0.elapsed().as_nanos() as u64);
    }
    ns.sort_unstable();
    let mean = ns.iter().sum::<u64>() as f64 / n as f64;
    println!(
        "img-dnn dataset={dataset} n={n}: mean {:.1} us, p50 {:.1} us, p95 {:.1} us, p99 {:.1} us, max {:.1} us",
        mean / 1e3,
        pct(&ns, 0.5) / 1e3,
        pct(&ns, 0.95) / 1e3,
        pct(&ns, 0.99) / 1e3,
        ns[n - 1] as f64 / 1e3
    );
    println!("{}", server.report());
    Ok(())
}
