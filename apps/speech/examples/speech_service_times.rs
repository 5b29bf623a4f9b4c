//! Decodes every utterance of a set once per pass on one worker and prints
//! the word error rate and service-time percentiles (until `taillab run`
//! measures it through the harness).
//!
//! `cargo run --release -p taillab-speech --example speech_service_times -- [all|recorded|an4] [passes]`
use std::time::Instant;

use taillab_core::{DataCtx, Params};
use taillab_speech::{data, encode_request, SpeechServer};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let set = args.next().unwrap_or_else(|| "all".into());
    let passes: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(1);
    let ctx = DataCtx::from_env();
    taillab_speech::app().prepare(&ctx, &Params::new())?;
    let limit: usize = args
        .next()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(usize::MAX);
    let utts: Vec<_> = data::load(&data::dir(&ctx), &set)?
        .into_iter()
        .take(limit)
        .collect();
    let server = SpeechServer::new(&data::dir(&ctx));
    let mut worker = taillab_core::Server::worker(&server, 0)?;
    let (mut req, mut resp) = (Vec::new(), Vec::new());
    let mut times = Vec::new();
    let (mut errs, mut words) = (
        std::collections::BTreeMap::new(),
        std::collections::BTreeMap::new(),
    );
    for pass in 0..passes {
        for u in &utts {
            req.clear();
            resp.clear();
            encode_request(u, &mut req);
            let t = Instant::now();
            worker.handle(&req, &mut resp)?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
            let hyp = String::from_utf8_lossy(&resp);
            let (e, n) = data::wer(&u.transcript, &hyp);
            *errs.entry(u.search.name()).or_insert(0) += e;
            *words.entry(u.search.name()).or_insert(0) += n;
            if pass == 0 && (e > 0 || u.set == "recorded" || std::env::var_os("VERBOSE").is_some())
            {
                println!("{:<34} ref: {}\n{:<34} hyp: {hyp}", u.id, u.transcript, "");
            }
        }
    }
    for (k, e) in &errs {
        println!(
            "WER {k}: {:.1}% ({e}/{})",
            100.0 * *e as f64 / words[k] as f64,
            words[k]
        );
    }
    if times.is_empty() {
        return Err("no utterances decoded (limit 0?)".into());
    }
    times.sort_by(|a, b| a.total_cmp(b));
    let q = |p: f64| times[((times.len() - 1) as f64 * p).round() as usize];
    println!(
        "set={set} n={} service ms: mean {:.1} p50 {:.1} p95 {:.1} p99 {:.1} max {:.1}",
        times.len(),
        times.iter().sum::<f64>() / times.len() as f64,
        q(0.5),
        q(0.95),
        q(0.99),
        q(1.0)
    );
    Ok(())
}
