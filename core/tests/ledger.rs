//! The retries of the accuracy tests and what they enter in the skip ledger (tests/require.rs):
//! a pass after a disturbed try, a test disturbed on every try (skipped, or failed where
//! `TAILLAB_REQUIRE` lists `undisturbed`), and undisturbed misses (failed).

mod common;

use common::{require, tmp};

/// The ledger's rows of kind `kind`, each split at its tabs.
fn rows(dir: &std::path::Path, kind: &str) -> Vec<Vec<String>> {
    std::fs::read_to_string(dir.join("ledger.tsv"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with(&format!("{kind}\t")))
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

/// One test, so that the ledger's folder (an environment variable) is set once for it.
#[test]
fn within_tries_retries_skips_and_fails_and_enters_each_outcome() {
    let dir = tmp("ledger");
    std::fs::create_dir_all(&dir).unwrap();
    // The suite's waiting is spent, so a disturbed test's extra tries are forfeited at once.
    std::fs::write(dir.join("ledger.tsv"), "extra\tt\tearlier\twait\t300\n").unwrap();
    std::env::set_var("TAILLAB_SKIP_LEDGER", &dir);

    let disturbed = |e: &str| Err((e.to_string(), Some("steal 9 %".to_string())));
    require::within_tries("planted, second try", 6, 3, |k| match k {
        1 => disturbed("off"),
        _ => Ok(()),
    });
    let mut tries = 0;
    let all = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        require::within_tries("planted, always disturbed", 4, 2, |_| {
            tries += 1;
            disturbed("off")
        })
    }));
    assert_eq!(tries, 4, "no extra try once the waiting is spent");
    assert_eq!(all.is_err(), require::required("undisturbed"));
    let off = std::panic::catch_unwind(|| {
        require::within_tries("planted, always off", 6, 2, |_| Err(("off".into(), None)))
    });
    assert!(off.is_err(), "two undisturbed misses fail the test");

    let outcome: Vec<(String, String, String)> = rows(&dir, "accuracy")
        .into_iter()
        .map(|r| (r[2].clone(), r[3].clone(), r[4].clone()))
        .collect();
    let want = [
        ("planted, second try", "passed", "2"),
        ("planted, always disturbed", "disturbed", "4"),
        ("planted, always off", "failed", "2"),
    ];
    let want: Vec<(String, String, String)> = want
        .iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect();
    assert_eq!(outcome, want);
    let kind = if require::required("undisturbed") {
        "required"
    } else {
        "skip"
    };
    let skips = rows(&dir, kind);
    assert_eq!(skips.len(), 1, "{skips:?}");
    assert_eq!(skips[0][2], "undisturbed");
    assert!(skips[0][1]
        .ends_with("ledger::within_tries_retries_skips_and_fails_and_enters_each_outcome"));
    let _ = std::fs::remove_dir_all(&dir);
}
