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
    let mut times: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    let (mut errs, mut words) = (
        std::collections::BTreeMap::new(),
        std::collections::BTreeMap::new(),
    );
    let mut audio_s = 0.0;
    for pass in 0..passes {
        for u in &utts {
            req.clear();
            resp.clear();
            encode_request(u, &mut req);
            let t = Instant::now();
            worker.handle(&req, &mut resp)?;
            let ms = t.elapsed().as_secs_f64() * 1e3;
            times.entry(u.search.name()).or_default().push(ms);
            times.entry("all").or_default().push(ms);
            audio_s += u.samples.len() as f64 / 16000.0;
            let hyp = String::from_utf8_lossy(&resp);
            let (e, n) = data::wer(&u.transcript, &hyp);
            if pass == 0 {
                *errs.entry(u.search.name()).or_insert(0) += e;
                *words.entry(u.search.name()).or_insert(0) += n;
            }
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
    let all_n = times.get("all").map_or(0, |t| t.len());
    if all_n == 0 {
        return Err("no utterances decoded (limit 0?)".into());
    }
    let total_ms: f64 = times["all"].iter().sum();
    println!(
        "set={set} passes={passes}: {:.0} s of audio decoded in {:.0} s (real-time factor {:.2})",
        audio_s,
        total_ms / 1e3,
        total_ms / 1e3 / audio_s
    );
    println!("| search | requests | mean ms | p50 ms | p95 ms | p99 ms | max ms |");
    println!("|---|---|---|---|---|---|---|");
    for (k, t) in times.iter_mut() {
        t.sort_by(|a, b| a.total_cmp(b));
        let q = |p: f64| t[((t.len() - 1) as f64 * p).round() as usize];
        println!(
            "| {k} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
            t.len(),
            t.iter().sum::<f64>() / t.len() as f64,
            q(0.5),
            q(0.95),
            q(0.99),
            q(1.0)
        );
    }
    Ok(())
}
