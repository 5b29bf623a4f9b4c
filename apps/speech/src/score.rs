//! Word error rate of every set, measured once at prepare time.
//!
//! Requests carry no transcript, so the server cannot score itself; instead
//! `prepare` decodes every utterance once with the same decoders the workers
//! build and stores `wer.json` (per set, per source, per search) and
//! `hyps.tsv` (each utterance's hypothesis). The server returns `wer.json`
//! in its `report()`. A decoder carries a little state from one utterance
//! to the next, so a run that sends utterances in another order can differ
//! on a few words (README: two orders differed by at most half a point per
//! set).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde_json::{json, Value};
use taillab_core::AppError;

use crate::data::{self, prep_err, Utterance};
use crate::ffi::Decoder;

/// Errors and reference words under one label.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    errors: usize,
    words: usize,
    utterances: usize,
}

impl Tally {
    fn json(self) -> Value {
        let wer = self.errors as f64 / self.words.max(1) as f64;
        json!({
            "wer": (wer * 1e4).round() / 1e4,
            "errors": self.errors,
            "words": self.words,
            "utterances": self.utterances,
        })
    }
}

/// Decodes `utts` on one thread with its own decoders.
fn decode_share(dir: &Path, utts: &[&Utterance]) -> Result<Vec<String>, AppError> {
    let engine = |e: crate::ffi::PsError| prep_err(e.0);
    let [lm, an4] = data::decoder_configs(dir);
    let mut decoders = [
        Decoder::new(&lm).map_err(engine)?,
        Decoder::new(&an4).map_err(engine)?,
    ];
    let mut hyps = Vec::with_capacity(utts.len());
    for u in utts {
        let d = &mut decoders[data::decoder_index(u.search)];
        d.select(u.search.decoder_name()).map_err(engine)?;
        hyps.push(d.decode(&u.samples).map_err(engine)?);
    }
    Ok(hyps)
}

/// Decodes every utterance (on up to two threads) and writes `wer.json`
/// and `hyps.tsv`.
pub fn write(dir: &Path) -> Result<(), AppError> {
    let utts = data::load(dir, "all")?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(2));
    let shares: Vec<Vec<&Utterance>> = (0..threads)
        .map(|t| utts.iter().skip(t).step_by(threads).collect())
        .collect();
    let decoded: Vec<Result<Vec<String>, AppError>> = std::thread::scope(|s| {
        let handles: Vec<_> = shares
            .iter()
            .map(|share| s.spawn(|| decode_share(dir, share)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(prep_err("a decoding thread panicked")))
            })
            .collect()
    });
    let mut hyps = vec![String::new(); utts.len()];
    for (t, share) in decoded.into_iter().enumerate() {
        for (k, h) in share?.into_iter().enumerate() {
            hyps[t + k * threads] = h;
        }
    }
    let (report, table) = summarize(&utts, &hyps);
    for (file, text) in [("wer.json", format!("{report:#}\n")), ("hyps.tsv", table)] {
        let path = dir.join(file);
        std::fs::write(&path, text).map_err(|e| AppError::io(&path, e))?;
    }
    Ok(())
}

/// WER per set, source and search; and the hypotheses as `id\thyp` lines.
fn summarize(utts: &[Utterance], hyps: &[String]) -> (Value, String) {
    let mut by: BTreeMap<&str, BTreeMap<String, Tally>> = BTreeMap::new();
    let mut table = String::from("id\thypothesis\n");
    for (u, h) in utts.iter().zip(hyps) {
        let (e, n) = data::wer(&u.transcript, h);
        let keys = [
            ("sets", u.set.clone()),
            ("sets", "all".to_string()),
            ("sources", u.source.clone()),
            ("searches", u.search.name().to_string()),
        ];
        for (group, key) in keys {
            let t = by.entry(group).or_default().entry(key).or_default();
            t.errors += e;
            t.words += n;
            t.utterances += 1;
        }
        writeln!(table, "{}\t{h}", u.id).ok();
    }
    let report = by
        .into_iter()
        .map(|(g, m)| {
            let inner: serde_json::Map<String, Value> =
                m.into_iter().map(|(k, t)| (k, t.json())).collect();
            (g.to_string(), Value::Object(inner))
        })
        .collect::<serde_json::Map<_, _>>();
    (Value::Object(report), table)
}

/// `wer.json` of a prepared folder (Null when absent).
pub fn read(dir: &Path) -> Value {
    std::fs::read_to_string(dir.join("wer.json"))
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Search;

    fn utt(set: &str, source: &str, text: &str) -> Utterance {
        Utterance {
            id: format!("{source}-{text}"),
            set: set.into(),
            source: source.into(),
            search: Search::Lm,
            transcript: text.into(),
            samples: Vec::new(),
        }
    }

    #[test]
    fn tallies_per_set_and_source() {
        let utts = [
            utt("an4", "flite-slt", "a b c d"),
            utt("recorded", "asterisk", "go on"),
        ];
        let hyps = ["a b x d".to_string(), String::new()];
        let (r, table) = summarize(&utts, &hyps);
        assert_eq!(r["sets"]["an4"]["wer"], 0.25);
        assert_eq!(r["sets"]["recorded"]["errors"], 2);
        assert_eq!(r["sets"]["all"]["words"], 6);
        assert_eq!(r["sources"]["asterisk"]["utterances"], 1);
        assert_eq!(r["searches"]["lm"]["errors"], 3);
        assert!(table.contains("flite-slt-a b c d\ta b x d"));
    }
}
