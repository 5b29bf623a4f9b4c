use super::*;

#[test]
fn time_limits_round_up_to_minutes() {
    assert_eq!(slurm_time(Dur(1)), "0-00:01:00");
    assert_eq!(slurm_time(Dur(90_000_000_000)), "0-00:02:00");
    assert_eq!(slurm_time(Dur(25 * 3600 * 1_000_000_000)), "1-01:00:00");
}

#[test]
fn run_folders_are_recognised_and_unused_runs_set_aside() {
    assert_eq!(run_index(Path::new("/x/run-12")), Some(12));
    assert_eq!(run_index(Path::new("/x/run-1.disturbed-1")), None);
    let d = std::env::temp_dir().join(format!("taillab-slurm-unit-{}", std::process::id()));
    for k in 0..4 {
        std::fs::create_dir_all(d.join(format!("run-{k}"))).unwrap();
    }
    set_aside_unused(&d, 2).unwrap();
    let mut names: Vec<String> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["run-0", "run-1", "run-2.unused", "run-3.unused"]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn stderr_tail_says_what_is_there() {
    let d = std::env::temp_dir().join(format!("taillab-slurm-tail-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    assert!(stderr_tail(&d.join("none")).contains("never started"));
    std::fs::write(d.join("e"), "a\n\nb\nc\nerror: the last line\n").unwrap();
    let t = stderr_tail(&d.join("e"));
    assert!(t.ends_with("b | c | error: the last line"), "{t}");
    std::fs::remove_dir_all(&d).unwrap();
}
