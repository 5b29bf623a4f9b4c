use super::*;

#[test]
fn set_saving_then_reset_restores_plain_and_selector_files() {
    let dir = std::env::temp_dir().join(format!("taillab-set-saving-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (plain, sel) = (dir.join("plain"), dir.join("sel"));
    std::fs::write(&plain, "0-1\n").unwrap();
    std::fs::write(&sel, "always [madvise] never\n").unwrap();
    let t = Tuner::with_root(&dir, dir.join("journal.json"), None);
    assert_eq!(t.set_saving(&plain, "0-1").unwrap(), SetOutcome::Unchanged);
    assert_eq!(
        t.set_saving(&plain, "1").unwrap(),
        SetOutcome::Changed { old: "0-1".into() }
    );
    // A second change keeps the first saved value.
    t.set_saving(&plain, "0").unwrap();
    assert_eq!(
        t.set_saving(&sel, "never").unwrap(),
        SetOutcome::Changed {
            old: "madvise".into()
        }
    );
    assert!(matches!(
        t.set_saving(&dir.join("missing"), "x").unwrap(),
        SetOutcome::Refused { .. }
    ));
    let msgs = t.reset().unwrap();
    assert_eq!(msgs.len(), 2, "{msgs:?}");
    assert_eq!(std::fs::read_to_string(&plain).unwrap(), "0-1");
    assert_eq!(std::fs::read_to_string(&sel).unwrap(), "madvise");
    assert!(!t.state_path().exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_value_that_cannot_be_written_back_is_a_failed_line_and_stays_saved() {
    let dir = std::env::temp_dir().join(format!("taillab-reset-fail-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let knob = dir.join("knob");
    std::fs::write(&knob, "a\n").unwrap();
    let t = Tuner::with_root(&dir, dir.join("journal.json"), None);
    t.set_saving(&knob, "b").unwrap();
    // A folder now stands where the knob was: writing it back fails.
    std::fs::remove_file(&knob).unwrap();
    std::fs::create_dir(&knob).unwrap();
    let msgs = t.reset().unwrap();
    assert!(
        matches!(msgs.as_slice(), [l] if l.failed && l.text.starts_with("could not restore")),
        "{msgs:?}"
    );
    assert!(t.state_path().exists(), "kept for a later reset");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn cpu_lists_and_selectors() {
    assert_eq!(
        bracketed("always [madvise] never").as_deref(),
        Some("madvise")
    );
    assert_eq!(bracketed("none"), None);
}
