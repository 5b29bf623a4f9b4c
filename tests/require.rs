//! Skips that `TAILLAB_REQUIRE` turns into failures, for every crate's integration tests
//! (each `common` module includes this file by path).
//!
//! A test that cannot run on this host (no Slurm, no THP, not root, a host disturbed on every
//! try) calls [`skip_without`] with the feature it lacks and returns: it passes, with a
//! SKIPPED line on stderr. Where the comma-separated environment variable `TAILLAB_REQUIRE`
//! lists that feature (or is `all`), the same call fails the test instead, so a host that
//! should have the feature (CI after `make setup`: `.ci/run`) cannot pass by skipping. The
//! names and what they mean are in `tests/features.txt`, which Python's tests read too.

/// The feature names, one a line, each with what it is.
const FEATURES: &str = include_str!("features.txt");

fn known() -> Vec<&'static str> {
    FEATURES
        .lines()
        .filter(|l| !l.starts_with([' ', '#']))
        .filter_map(|l| l.split_whitespace().next())
        .collect()
}

/// Whether `TAILLAB_REQUIRE` lists `feature` (or is `all`). A name there that is no feature
/// fails the test: a typo would otherwise let the skip it meant to forbid pass.
pub fn required(feature: &str) -> bool {
    let known = known();
    assert!(
        known.contains(&feature),
        "test bug: `{feature}` is not in tests/features.txt"
    );
    let list = std::env::var("TAILLAB_REQUIRE").unwrap_or_default();
    let mut hit = false;
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        assert!(
            name == "all" || known.contains(&name),
            "TAILLAB_REQUIRE names `{name}`, which is not a feature: give `all` or some of {}",
            known.join(", ")
        );
        hit |= name == "all" || name == feature;
    }
    hit
}

/// This host lacks `feature` (`why` says how it shows): prints that the test, or the part of
/// it the caller leaves out, is skipped; fails the test when `TAILLAB_REQUIRE` lists the
/// feature.
pub fn skip_without(feature: &str, why: &str) {
    let t = std::thread::current();
    let test = t.name().filter(|n| *n != "main").unwrap_or("this test");
    if required(feature) {
        panic!("{test}: needs `{feature}`, which TAILLAB_REQUIRE lists: {why}");
    }
    eprintln!(
        "SKIPPED {test}: {why} (needs `{feature}`; TAILLAB_REQUIRE={feature} makes this a failure)"
    );
}
