//! Runs transactions back to back on one worker and prints service-time
//! percentiles per transaction type and the GC report (until `taillab run`
//! measures it through the harness).
//!
//! `cargo run --release -p taillab-middleware --example middleware_service_times -- [requests] [--set k=v ...]`
use std::time::Instant;

use taillab_core::{DataCtx, Params};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: usize = args
        .first()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(200_000);
    let sets: Vec<&str> = args
        .iter()
        .skip(1)
        .filter(|a| *a != "--set")
        .map(|s| s.as_str())
        .collect();
    let params = Params::parse(sets)?;
    let ctx = DataCtx::from_env();
    let app = taillab_middleware::app();
    app.prepare(&ctx, &params)?;
    let server = app.server(&ctx, &params, 1)?;
    let mut client = app.client(&ctx, &params, 1)?;
    let mut worker = server.worker(0)?;
    let (mut req, mut resp) = (Vec::new(), Vec::new());
    // Warm up the JIT and the heap before measuring (a fifth of the run).
    let warm = n / 5;
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); 6];
    for i in 0..n + warm {
        if i == warm {
            server.begin_measurement(0);
        }
        req.clear();
        resp.clear();
        client.next_request(&mut req);
        let t = Instant::now();
        worker.handle(&req, &mut resp)?;
        if i >= warm {
            times[req[0] as usize].push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    let names = [
        "new_order",
        "payment",
        "order_status",
        "delivery",
        "stock_level",
        "customer_report",
        "all",
    ];
    let mut all: Vec<f64> = times.concat();
    times.push(std::mem::take(&mut all));
    println!("| transaction | share | mean µs | p50 µs | p95 µs | p99 µs | p99.9 µs | max µs |");
    println!("|---|---|---|---|---|---|---|---|");
    for (name, t) in names.iter().zip(times.iter_mut()) {
        if t.is_empty() {
            continue;
        }
        t.sort_by(|a, b| a.total_cmp(b));
        let q = |p: f64| t[((t.len() - 1) as f64 * p).round() as usize];
        println!(
            "| {name} | {:.1} % | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.0} |",
            100.0 * t.len() as f64 / n as f64,
            t.iter().sum::<f64>() / t.len() as f64,
            q(0.5),
            q(0.95),
            q(0.99),
            q(0.999),
            q(1.0)
        );
    }
    println!("{}", serde_json::to_string_pretty(&server.report())?);
    Ok(())
}
