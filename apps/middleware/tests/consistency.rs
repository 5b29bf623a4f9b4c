//! Transactions from concurrent workers keep the company consistent; bad
//! requests are rejected with a message; the default collector is G1.
mod common;

use taillab_core::AppError;
use taillab_middleware::{MiddlewareClient, Tx};

#[test]
fn concurrent_transactions_keep_data_consistent() {
    let _serial = common::lock();
    let pairs = ["warehouses=2", "heap=256m"];
    let (server, ctx) = common::server(&pairs);
    std::thread::scope(|s| {
        for t in 0..3u64 {
            let server = &server;
            s.spawn(move || common::drive(server.as_ref(), &pairs, 100 + t, 1500));
        }
    });
    // Downcast is not available through `dyn Server`, so rebuild the check
    // through a typed server on the same (already started) JVM.
    let typed =
        taillab_middleware::typed_server(&ctx, &taillab_core::Params::parse(pairs).unwrap())
            .unwrap();
    common::drive(&typed, &pairs, 7, 300);
    assert_eq!(
        typed.check().unwrap(),
        "",
        "company inconsistent after the run"
    );
    let r = taillab_core::Server::report(&typed);
    let tx = &r["transactions_total"];
    // Counters are per JVM, and other tests in this process may add theirs.
    let done: i64 = tx
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_i64().unwrap())
        .sum();
    assert!(done >= 3 * 1500 + 300, "{r}");
    assert_eq!(r["gc"], "g1");
    assert!(
        common::collectors(&typed)
            .iter()
            .any(|c| c.starts_with("G1")),
        "{r}"
    );
    let _ = std::fs::remove_dir_all(&ctx.root);
}

#[test]
fn bad_requests_are_rejected_with_a_reason() {
    let _serial = common::lock();
    let (server, _ctx) = common::server(&["warehouses=1", "heap=256m"]);
    let mut w = server.worker(0).unwrap();
    let mut resp = Vec::new();
    let mut good = Vec::new();
    MiddlewareClient::new(1, 1).request(Tx::Delivery, &mut good);
    let mut bad_wh = good.clone();
    bad_wh[1] = 9; // warehouse 9 of 1
    let mut bad_carrier = good.clone();
    *bad_carrier.last_mut().unwrap() = 42;
    for (req, want) in [
        (vec![1u8], "header"),
        (vec![9, 1, 0, 1, 0], "unknown transaction type"),
        (bad_wh, "warehouse 9"),
        (bad_carrier, "carrier 42"),
    ] {
        match w.handle(&req, &mut resp) {
            Err(AppError::Request(m)) => assert!(m.contains(want), "{m}"),
            other => panic!("expected a rejection containing {want:?}, got {other:?}"),
        }
    }
    w.handle(&good, &mut resp).unwrap();
    assert!(String::from_utf8_lossy(&resp).starts_with("DELIVERY"));
}

/// The JVM starts once per process: another GC in the same process is an
/// error that says to use a separate run.
#[test]
fn a_second_gc_in_one_process_is_refused() {
    let _serial = common::lock();
    let (_server, ctx) = common::server(&["warehouses=1", "heap=256m"]);
    let p = taillab_core::Params::parse(["gc=serial", "heap=256m"]).unwrap();
    let e = taillab_middleware::app()
        .server(&ctx, &p, 1)
        .err()
        .expect("must refuse")
        .to_string();
    assert!(e.contains("separate"), "{e}");
}
