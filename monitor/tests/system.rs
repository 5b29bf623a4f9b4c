//! `system show|tune|reset` against a fake /proc and /sys tree (so the tests
//! never change the real host), and one live `SystemReport::collect`.

use std::fs;
use std::path::Path;
use std::time::Duration;

use taillab_monitor::{SystemReport, Thresholds, Tuner};

fn put(root: &Path, rel: &str, content: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, content).unwrap();
}

fn get(root: &Path, rel: &str) -> String {
    fs::read_to_string(root.join(rel))
        .unwrap()
        .trim()
        .to_string()
}

/// A bare-metal-like host with cpufreq, turbo and the usual knobs.
fn fake_host(root: &Path) {
    put(root, "sys/devices/system/cpu/online", "0-1\n");
    put(
        root,
        "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
        "powersave\n",
    );
    put(
        root,
        "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor",
        "schedutil\n",
    );
    put(
        root,
        "sys/devices/system/cpu/cpu0/cpufreq/scaling_driver",
        "intel_pstate\n",
    );
    put(root, "sys/devices/system/cpu/intel_pstate/no_turbo", "0\n");
    put(root, "proc/sys/kernel/sched_rt_runtime_us", "950000\n");
    put(root, "proc/sys/kernel/numa_balancing", "1\n");
    put(
        root,
        "sys/kernel/mm/transparent_hugepage/enabled",
        "[always] madvise never\n",
    );
    put(root, "proc/irq/24/smp_affinity_list", "0-1\n");
    put(root, "proc/irq/25/smp_affinity_list", "1\n");
    put(root, "sys/kernel/mm/damon/admin/kdamonds/0/state", "on\n");
}

#[test]
fn tune_saves_prior_values_and_reset_restores_them() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fake_host(&root);
    let state = dir.path().join("state/system-tune.json");
    let tuner = Tuner::with_root(&root, state.clone(), Some(&[1]));

    let shown = tuner.show();
    let names: Vec<&str> = shown.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "cpu_governor",
            "turbo",
            "sched_rt_runtime_us",
            "numa_balancing",
            "transparent_hugepage",
            "damon",
            "irq_affinity"
        ]
    );
    assert!(shown.iter().all(|s| s.status == "not tuned"), "{shown:?}");

    let applied = tuner.apply(&[]).unwrap();
    assert!(applied.iter().all(|s| s.status == "tuned"), "{applied:?}");
    assert_eq!(
        get(
            &root,
            "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"
        ),
        "performance"
    );
    assert_eq!(
        get(
            &root,
            "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor"
        ),
        "performance"
    );
    assert_eq!(
        get(&root, "sys/devices/system/cpu/intel_pstate/no_turbo"),
        "1"
    );
    assert_eq!(get(&root, "proc/sys/kernel/sched_rt_runtime_us"), "-1");
    assert_eq!(get(&root, "proc/sys/kernel/numa_balancing"), "0");
    // A plain file stands in for the selector; the kernel would show brackets.
    assert_eq!(
        get(&root, "sys/kernel/mm/transparent_hugepage/enabled"),
        "madvise"
    );
    assert_eq!(get(&root, "proc/irq/24/smp_affinity_list"), "0");
    assert_eq!(
        get(&root, "sys/kernel/mm/damon/admin/kdamonds/0/state"),
        "off"
    );
    assert!(state.exists());

    // A second tune changes nothing and must not overwrite the saved values.
    let again = tuner.apply(&[]).unwrap();
    assert!(
        again.iter().all(|s| s.message == "already set"),
        "{again:?}"
    );

    let msgs = tuner.reset().unwrap();
    assert!(
        msgs.iter()
            .all(|m| m.text.starts_with("restored") && !m.failed),
        "{msgs:?}"
    );
    assert_eq!(
        get(
            &root,
            "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"
        ),
        "powersave"
    );
    assert_eq!(
        get(
            &root,
            "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor"
        ),
        "schedutil"
    );
    assert_eq!(get(&root, "proc/sys/kernel/sched_rt_runtime_us"), "950000");
    assert_eq!(
        get(&root, "sys/kernel/mm/transparent_hugepage/enabled"),
        "always"
    );
    assert_eq!(get(&root, "proc/irq/24/smp_affinity_list"), "0-1");
    assert_eq!(get(&root, "proc/irq/25/smp_affinity_list"), "1");
    assert_eq!(
        get(&root, "sys/kernel/mm/damon/admin/kdamonds/0/state"),
        "on"
    );
    assert!(!state.exists());
    assert!(tuner.reset().unwrap()[0].text.contains("nothing to reset"));
}

#[test]
fn a_vm_without_cpufreq_skips_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    put(&root, "sys/devices/system/cpu/online", "0-1\n");
    put(&root, "proc/sys/kernel/sched_rt_runtime_us", "950000\n");
    let tuner = Tuner::with_root(&root, dir.path().join("s.json"), None);
    let only = vec!["cpu_governor".to_string(), "turbo".to_string()];
    let out = tuner.apply(&only).unwrap();
    assert_eq!(out.len(), 2);
    assert!(
        out.iter()
            .all(|s| s.status == "unavailable" && s.message.starts_with("skipped:")),
        "{out:?}"
    );
    assert!(out[0].message.contains("no cpufreq"));
    // Nothing was changed, so there is no state file.
    assert!(!dir.path().join("s.json").exists());
}

#[test]
fn a_value_the_kernel_refuses_is_skipped_and_not_saved() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    put(&root, "sys/devices/system/cpu/online", "0\n");
    // A directory where a file is expected: the write fails like EIO would.
    fs::create_dir_all(root.join("proc/sys/kernel/numa_balancing")).unwrap();
    put(&root, "proc/sys/kernel/sched_rt_runtime_us", "950000\n");
    let state = dir.path().join("s.json");
    let tuner = Tuner::with_root(&root, state.clone(), None);
    let out = tuner.apply(&[]).unwrap();
    let rt = out
        .iter()
        .find(|s| s.name == "sched_rt_runtime_us")
        .unwrap();
    assert_eq!(rt.status, "tuned");
    let saved = fs::read_to_string(&state).unwrap();
    assert!(
        saved.contains("950000") && !saved.contains("numa_balancing"),
        "{saved}"
    );
}

#[test]
fn corrupt_state_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("s.json");
    fs::write(&state, "{not json").unwrap();
    let tuner = Tuner::with_root(dir.path(), state, None);
    let e = tuner.reset().unwrap_err().to_string();
    assert!(e.contains("parse") && e.contains("s.json"), "{e}");
}

#[test]
fn report_of_a_fake_host_warns_about_each_setting() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fake_host(root);
    put(
        root,
        "proc/cpuinfo",
        "model name\t: Test CPU @ 1GHz\nflags\t\t: fpu hypervisor\n",
    );
    put(root, "proc/loadavg", "3.50 1.00 0.50 2/100 42\n");
    put(
        root,
        "sys/devices/system/clocksource/clocksource0/current_clocksource",
        "kvm-clock\n",
    );
    put(
        root,
        "sys/devices/system/cpu/cpuidle/current_driver",
        "none\n",
    );
    let r = SystemReport::collect_with(root, Duration::ZERO).unwrap();
    assert_eq!(r.cpu_model.as_deref(), Some("Test CPU @ 1GHz"));
    assert!(r.virtualized);
    assert_eq!(r.cores_online, 2);
    assert_eq!(r.governors["powersave"], vec![0]);
    assert_eq!(r.turbo, Some(true));
    assert_eq!(r.transparent_hugepage.as_deref(), Some("always"));
    let w = r.warnings(&Thresholds::default()).join("\n");
    for needle in [
        "load average is 3.50",
        "governor is powersave/schedutil",
        "turbo",
        "sched_rt_runtime_us is 950000",
        "transparent huge pages",
        "kvm-clock",
        "NUMA",
        "no cpuidle driver",
    ] {
        assert!(w.contains(needle), "missing `{needle}` in:\n{w}");
    }
    let text = r.to_string();
    assert!(text.contains("Test CPU @ 1GHz (virtual machine)"), "{text}");
}

#[test]
fn live_report_measures_steal_and_names_a_busy_process() {
    // Started in the background by a shell that exits at once: a child of
    // this process would be counted as this process's own (descendants of
    // the sampling process are never foreign).
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("sh -c 'while :; do :; done' </dev/null >/dev/null 2>&1 & echo $!")
        .output()
        .unwrap();
    let hog_pid: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let r = SystemReport::collect_with(Path::new("/"), Duration::from_millis(1000));
    // SAFETY: plain syscall on the pid we started.
    unsafe { libc::kill(hog_pid, libc::SIGKILL) };
    let r = r.unwrap();
    assert!(r.window_s > 0.8 && r.window_s < 3.0, "{}", r.window_s);
    assert!(r.cores_online >= 1 && r.kernel.is_some());
    assert!(r.steal_pct >= 0.0 && r.foreign_cpu_pct > 5.0, "{r:?}");
    assert!(
        r.busy_processes.iter().any(|p| p.pids.contains(&hog_pid)),
        "{:?}",
        r.busy_processes
    );
    let w = r.warnings(&Thresholds::default()).join("\n");
    assert!(w.contains("other processes use"), "{w}");
    // serde round trip (floats may differ in the last bit)
    let back: SystemReport = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(
        (&back.kernel, back.busy_processes.len()),
        (&r.kernel, r.busy_processes.len())
    );
    assert!((back.foreign_cpu_pct - r.foreign_cpu_pct).abs() < 1e-9);
}

/// A guest whose platform runs a DAMON pageout scheme (as the test VM's did) and the
/// `damon_reclaim` module: `show` names them and warns; `tune --only damon` turns both off;
/// `reset` turns them on again, and counts a kdamond its platform already turned back on
/// (the kernel refuses "on" for a running one) as restored instead of failing forever.
#[test]
fn damon_is_shown_warned_about_stopped_and_restored() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    put(&root, "sys/devices/system/cpu/online", "0-1\n");
    let k = "sys/kernel/mm/damon/admin/kdamonds";
    put(&root, &format!("{k}/nr_kdamonds"), "2\n");
    put(&root, &format!("{k}/0/state"), "on\n");
    put(&root, &format!("{k}/0/contexts/0/operations"), "paddr\n");
    put(
        &root,
        &format!("{k}/0/contexts/0/monitoring_attrs/intervals/sample_us"),
        "500000\n",
    );
    put(
        &root,
        &format!("{k}/0/contexts/0/schemes/0/action"),
        "pageout\n",
    );
    put(
        &root,
        &format!("{k}/0/contexts/0/schemes/1/action"),
        "stat\n",
    );
    // A second kdamond, off and only counting: neither shown nor touched.
    put(&root, &format!("{k}/1/state"), "off\n");
    put(
        &root,
        &format!("{k}/1/contexts/0/schemes/0/action"),
        "stat\n",
    );
    put(&root, "sys/module/damon_reclaim/parameters/enabled", "Y\n");

    let r = SystemReport::collect_with(&root, Duration::ZERO).unwrap();
    let names: Vec<&str> = r.damon.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["kdamonds/0", "damon_reclaim"], "{:?}", r.damon);
    assert_eq!(r.damon[0].actions, ["pageout", "stat"]);
    assert_eq!(r.damon[0].sample_us, Some(500_000));
    let text = r.to_string();
    assert!(
        text.contains(
            "DAMON:                kdamonds/0 on (paddr; pageout, stat; samples every 500 ms)"
        ),
        "{text}"
    );
    let w = r.warnings(&Thresholds::default());
    assert_eq!(
        w.iter().filter(|x| x.starts_with("DAMON ")).count(),
        2,
        "{w:?}"
    );

    let state = dir.path().join("s.json");
    let tuner = Tuner::with_root(&root, state.clone(), None);
    let before = tuner.show();
    let op = before.iter().find(|s| s.name == "damon").unwrap();
    assert_eq!(op.status, "not tuned", "{op:?}");
    let out = tuner.apply(&["damon".to_string()]).unwrap();
    assert_eq!(out[0].status, "tuned", "{out:?}");
    assert_eq!(get(&root, &format!("{k}/0/state")), "off");
    assert_eq!(get(&root, &format!("{k}/1/state")), "off");
    assert_eq!(
        get(&root, "sys/module/damon_reclaim/parameters/enabled"),
        "N"
    );
    let r = SystemReport::collect_with(&root, Duration::ZERO).unwrap();
    assert!(r.damon.is_empty() && r.to_string().contains("DAMON:                off"));

    // The platform turned kdamond 0 back on meanwhile: reset does not write it again.
    put(&root, &format!("{k}/0/state"), "on\n");
    let msgs = tuner.reset().unwrap();
    assert!(
        msgs.iter()
            .any(|m| m.text.contains("kdamonds/0/state = on (it already was)")),
        "{msgs:?}"
    );
    assert_eq!(
        get(&root, "sys/module/damon_reclaim/parameters/enabled"),
        "Y"
    );
    assert_eq!(get(&root, &format!("{k}/1/state")), "off");
    assert!(!state.exists(), "everything was restored");
}
