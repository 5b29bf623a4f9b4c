//! kv through the integrated harness, with every answer checked.
//!
//! The harness drops responses once it has timed them, so the test wraps the
//! server: each worker checks its own answers and fails the request (which
//! the harness counts as an error) when one is wrong. With one worker and
//! FIFO order the server sees requests in the order the client drew them, so
//! the wrapper can keep a `BTreeMap` model and check last-write semantics.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use taillab_core::{run_integrated, AppError, Bound, DataCtx, Params, RunSpec, Server, Worker};
use taillab_kv::proto::{self, Key, Op, OpResult};

struct Checked {
    inner: Arc<dyn Server>,
    keys: u64,
    value_size: usize,
    /// Only a single worker may keep a model (see the module docs).
    model: bool,
    checked_ops: Arc<AtomicU64>,
}

struct CheckedWorker {
    inner: Box<dyn Worker>,
    model: Option<BTreeMap<Key, Vec<u8>>>,
    value_size: usize,
    checked_ops: Arc<AtomicU64>,
}

impl Server for Checked {
    fn worker(&self, i: usize) -> Result<Box<dyn Worker>, AppError> {
        let model = self.model.then(|| {
            (0..self.keys)
                .map(|n| (proto::key(n), proto::initial_value(n, self.value_size)))
                .collect()
        });
        Ok(Box::new(CheckedWorker {
            inner: self.inner.worker(i)?,
            model,
            value_size: self.value_size,
            checked_ops: self.checked_ops.clone(),
        }))
    }
    fn report(&self) -> serde_json::Value {
        self.inner.report()
    }
}

impl Worker for CheckedWorker {
    fn handle(&mut self, req: &[u8], resp: &mut Vec<u8>) -> Result<(), AppError> {
        self.inner.handle(req, resp)?;
        let ops = proto::decode_request(req)?;
        let results = proto::decode_response(&ops, resp)?;
        let wrong = |what: String| Err(AppError::Request(format!("wrong answer: {what}")));
        for (op, got) in ops.iter().zip(results) {
            match (op, &got, self.model.as_mut()) {
                (Op::Read(k), _, Some(m)) => {
                    if got != OpResult::Value(m[k].clone()) {
                        return wrong(format!("read of {k:?} did not return the last write"));
                    }
                }
                (Op::Read(_), OpResult::Value(v), None) => {
                    if v.len() != self.value_size || !proto::value_is_consistent(v) {
                        return wrong("torn or mis-sized value".into());
                    }
                }
                (Op::Update(k, v), OpResult::Done, m) => {
                    if let Some(m) = m {
                        m.insert(*k, v.clone());
                    }
                }
                (op, got, _) => return wrong(format!("{op:?} answered {got:?}")),
            }
            self.checked_ops.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

fn run(threads: usize, model: bool) {
    let p = Params::parse(["keys=20000", "ops=16", "workload=a"]).unwrap();
    let app = taillab_kv::app();
    let data = DataCtx {
        root: std::env::temp_dir().join("taillab-kv-harness"),
    };
    let checked_ops = Arc::new(AtomicU64::new(0));
    let server = Arc::new(Checked {
        inner: app.server(&data, &p, threads).unwrap(),
        keys: 20_000,
        value_size: 100,
        model,
        checked_ops: checked_ops.clone(),
    });
    let spec = RunSpec {
        qps: 2000.0,
        threads,
        seed: 5,
        warmup: Bound::Requests(200),
        measure: Bound::Requests(2000),
        ..RunSpec::default()
    };
    let client = app.client(&data, &p, 9).unwrap();
    let r = run_integrated(&spec, server, client, &mut |_| {}).unwrap();
    assert_eq!(r.errors, 0, "first error: {:?}", r.first_error);
    assert_eq!(r.totals.measured, 2000);
    assert_eq!(checked_ops.load(Ordering::Relaxed), 2200 * 16);
    assert_eq!(r.app_stats["records_now"], 20_000, "{}", r.app_stats);
}

#[test]
fn integrated_run_answers_match_model() {
    run(1, true);
}

#[test]
fn integrated_run_two_workers_never_tear() {
    run(2, false);
}
