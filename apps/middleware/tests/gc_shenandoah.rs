//! `gc=shenandoah` starts the JVM with that collector and the report names it
//! (a file of its own: one JVM, so one collector, per test process).
mod common;

#[test]
fn reports_the_shenandoah_collector() {
    let _serial = common::lock();
    let pairs = ["gc=shenandoah", "heap=128m", "warehouses=1"];
    let (server, ctx) = common::server(&pairs);
    common::drive(server.as_ref(), &pairs, 3, 200);
    let names = common::collectors(server.as_ref());
    assert!(
        names.iter().any(|n| n.starts_with("Shenandoah")),
        "{names:?}"
    );
    assert!(
        !names.iter().any(|n| n.starts_with("G1")),
        "still G1: {names:?}"
    );
    assert_eq!(server.report()["gc"], "shenandoah");
    let _ = std::fs::remove_dir_all(&ctx.root);
}
