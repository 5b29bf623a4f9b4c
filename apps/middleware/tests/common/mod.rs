//! Shared by the integration tests. Each test file is its own process and
//! so gets its own JVM, which is how the GC-switch tests get their collector.
#![allow(dead_code)]

use std::sync::{Arc, Mutex, MutexGuard};

use taillab_core::{DataCtx, Params, Server};

/// Tests in one file share the process's JVM and its one company, which
/// `server` rebuilds: each test holds this lock for its whole run.
pub fn lock() -> MutexGuard<'static, ()> {
    static L: Mutex<()> = Mutex::new(());
    L.lock().unwrap_or_else(|e| e.into_inner())
}

/// A server for `pairs` (`--set` strings), data in a per-process temp dir.
pub fn server(pairs: &[&str]) -> (Arc<dyn Server>, DataCtx) {
    let root = std::env::temp_dir().join(format!("taillab-mw-test-{}", std::process::id()));
    let ctx = DataCtx { root };
    let p = Params::parse(pairs.iter().copied()).unwrap();
    let app = taillab_middleware::app();
    app.prepare(&ctx, &p).unwrap();
    (app.server(&ctx, &p, 1).unwrap(), ctx)
}

/// Runs `n` client requests through one worker; all must succeed.
pub fn drive(server: &dyn Server, pairs: &[&str], seed: u64, n: usize) {
    let app = taillab_middleware::app();
    let ctx = DataCtx {
        root: std::env::temp_dir(),
    };
    let mut client = app
        .client(&ctx, &Params::parse(pairs.iter().copied()).unwrap(), seed)
        .unwrap();
    let mut worker = server.worker(0).unwrap();
    let (mut req, mut resp) = (Vec::new(), Vec::new());
    for _ in 0..n {
        req.clear();
        resp.clear();
        client.next_request(&mut req);
        worker.handle(&req, &mut resp).unwrap();
        assert!(!resp.is_empty());
    }
}

/// Names of the collectors the JVM reports in `Server::report()`.
pub fn collectors(server: &dyn Server) -> Vec<String> {
    let r = server.report();
    r["collectors"]
        .as_array()
        .unwrap_or_else(|| panic!("no collectors in {r}"))
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}
