//! A host without stress-ng gets an error that says how to install it.
//! (Own test binary: it empties PATH for the whole process.)

use taillab_interfere::{InterfereError, Interference, PreflightError};

#[test]
fn missing_stress_ng_says_how_to_install_it() {
    let empty = tempfile::tempdir().unwrap();
    std::env::set_var("PATH", empty.path());
    let e = Interference::start(&["cpu:1".parse().unwrap()]).unwrap_err();
    assert!(
        matches!(e, InterfereError::Preflight(PreflightError::Missing { .. })),
        "{e}"
    );
    let m = e.to_string();
    assert!(
        m.contains("apt-get install stress-ng") && m.contains("make setup"),
        "{m}"
    );
    let e = Interference::start(&["net:1".parse().unwrap()]).unwrap_err();
    assert!(e.to_string().contains("apt-get install iperf3"), "{e}");
}
