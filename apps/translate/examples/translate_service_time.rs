//! Service time of the translate app on one worker, until the harness runs it.
//!
//! `cargo run --release -p taillab-translate --example translate_service_time -- [N] [corpus]`
//! prepares the data (in `$TAILLAB_DATA`), draws N sentences with seed 1,
//! calls `Worker::handle` back to back and prints percentiles of the time
//! per call, then word-count statistics of each sentence pool.

use taillab_core::app::{service_line, time_handles, DataCtx, Params};

fn pct(sorted: &[u64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize] as f64
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: usize = args.first().map(|s| s.parse()).transpose()?.unwrap_or(2000);
    let corpus = args.get(1).cloned().unwrap_or_else(|| "mixed".into());
    let data = DataCtx::from_env();
    let app = taillab_translate::app();
    let params = Params::parse([format!("corpus={corpus}").as_str()])?;
    app.prepare(&data, &params)?;
    let server = app.server(&data, &params, 1)?;
    let mut w = server.worker(0)?;
    let mut client = app.client(&data, &params, 1)?;
    let ns = time_handles(w.as_mut(), client.as_mut(), 0, n, |_| {})?;
    println!("translate corpus={corpus} n={n}: {}", service_line(&ns));
    let all = taillab_translate::load_sentences(&data.app_dir("translate"))?;
    for src in ["wordnet", "gcide"] {
        let mut words: Vec<u64> = all
            .iter()
            .filter(|(s, _)| s == src)
            .map(|(_, t)| t.split_whitespace().count() as u64)
            .collect();
        words.sort_unstable();
        let m = words.iter().sum::<u64>() as f64 / words.len() as f64;
        println!(
            "{src}: {} sentences, words per sentence mean {m:.1}, p50 {:.0}, p95 {:.0}, max {}",
            words.len(),
            pct(&words, 0.5),
            pct(&words, 0.95),
            words[words.len() - 1]
        );
    }
    println!("{}", server.report());
    Ok(())
}
