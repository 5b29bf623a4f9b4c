//! search through the integrated harness, on a slice of real WordNet data,
//! with every answer checked by a wrapper around the workers (the harness
//! drops responses once timed; a wrong answer fails the request, which the
//! harness counts as an error).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use taillab_core::{run_integrated, AppError, Bound, DataCtx, Params, RunSpec, Server, Worker};
use taillab_search::proto::{self, Mode};

struct Checked {
    inner: Arc<dyn Server>,
    hits: Arc<AtomicU64>,
}

struct CheckedWorker {
    inner: Box<dyn Worker>,
    hits: Arc<AtomicU64>,
}

impl Server for Checked {
    fn worker(&self, i: usize) -> Result<Box<dyn Worker>, AppError> {
        Ok(Box::new(CheckedWorker {
            inner: self.inner.worker(i)?,
            hits: self.hits.clone(),
        }))
    }
    fn report(&self) -> serde_json::Value {
        self.inner.report()
    }
}

fn tokens(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .collect()
}

impl Worker for CheckedWorker {
    fn handle(&mut self, req: &[u8], resp: &mut Vec<u8>) -> Result<(), AppError> {
        self.inner.handle(req, resp)?;
        let q = proto::decode_query(req)?;
        let hits = proto::decode_response(resp)?;
        let wrong = |what: String| Err(AppError::Request(format!("wrong answer to {q:?}: {what}")));
        if hits.len() > q.k as usize {
            return wrong(format!("{} hits for k = {}", hits.len(), q.k));
        }
        // Every term was drawn from the index, so OR and one-term queries match.
        if hits.is_empty() && (q.terms.len() == 1 || q.mode == Mode::Or) {
            return wrong("no hits".into());
        }
        if hits.windows(2).any(|h| h[0].score < h[1].score) {
            return wrong("scores not in BM25 order".into());
        }
        for h in &hits {
            // The snippet is cut around the matched terms, so it shows one
            // (AND: it may show only some of them).
            let text = tokens(&format!("{} {}", h.title, h.snippet));
            if !q.terms.iter().any(|t| text.contains(t)) {
                return wrong(format!("hit {} shows none of the terms", h.id));
            }
        }
        self.hits.fetch_add(hits.len() as u64, Ordering::Relaxed);
        Ok(())
    }
}

#[test]
fn integrated_run_on_wordnet_slice() {
    let data = DataCtx {
        root: std::env::temp_dir().join(format!("taillab-search-harness-{}", std::process::id())),
    };
    let p = Params::parse([
        "sources=wordnet",
        "max_docs=5000",
        "min_hits=2",
        "max_hits=1000",
    ])
    .unwrap();
    let app = taillab_search::app();
    let hits = Arc::new(AtomicU64::new(0));
    let server = Arc::new(Checked {
        inner: app.server(&data, &p, 2).unwrap(),
        hits: hits.clone(),
    });
    let spec = RunSpec {
        qps: 500.0,
        threads: 2,
        seed: 3,
        warmup: Bound::Requests(100),
        measure: Bound::Requests(1000),
        ..RunSpec::default()
    };
    let client = app.client(&data, &p, 4).unwrap();
    let r = run_integrated(&spec, server, client, &mut |_| {}).unwrap();
    assert_eq!(r.errors, 0, "first error: {:?}", r.first_error);
    assert_eq!(r.totals.measured, 1000);
    assert!(
        hits.load(Ordering::Relaxed) > 2000,
        "only {} hits",
        hits.load(Ordering::Relaxed)
    );
    assert_eq!(r.app_stats["documents"], 5000, "{}", r.app_stats);
    let _ = std::fs::remove_dir_all(&data.root);
}
