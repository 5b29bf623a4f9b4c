//! The /proc parsers against files captured on a Debian 12 VM (`*.real`) and
//! hand-made edge cases (`*.txt`).

use std::path::PathBuf;

use taillab_monitor::procfs::{
    parse_loadavg, parse_pid_stat, parse_pid_status, parse_schedstat, parse_stat,
};
use taillab_monitor::sample::HostSample;

fn data(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("fixture {}: {e}", p.display()))
}

#[test]
fn real_proc_stat() {
    let s = parse_stat(&data("stat.real")).unwrap();
    assert_eq!(s.per_cpu.len(), 2);
    assert_eq!(s.per_cpu[1].0, 1);
    // The aggregate line is the sum of the per-CPU lines, up to the kernel
    // rounding each value from ns to ticks separately (1 tick per CPU).
    let sum_user: u64 = s.per_cpu.iter().map(|(_, c)| c.user).sum();
    let sum_steal: u64 = s.per_cpu.iter().map(|(_, c)| c.steal).sum();
    assert!(
        s.cpu.user.abs_diff(sum_user) <= 2,
        "{} vs {sum_user}",
        s.cpu.user
    );
    assert!(
        s.cpu.steal.abs_diff(sum_steal) <= 2,
        "{} vs {sum_steal}",
        s.cpu.steal
    );
    assert!(s.ctxt.unwrap() > 0 && s.intr.unwrap() > 0);
    assert!(s.procs_running.unwrap() >= 1);
}

#[test]
fn old_kernel_stat_with_four_fields() {
    let s = parse_stat(&data("stat_old_kernel.txt")).unwrap();
    assert_eq!(
        (s.cpu.user, s.cpu.system, s.cpu.idle, s.cpu.steal),
        (100, 50, 1000, 0)
    );
    assert_eq!(s.ctxt, None);
    assert_eq!(s.intr, Some(5));
}

#[test]
fn garbage_stat_is_a_clear_error() {
    let e = parse_stat(&data("stat_garbage.txt")).unwrap_err();
    assert!(e.to_string().contains("/proc/stat"), "{e}");
    let e = parse_stat("cpu 1 2 x 4\n").unwrap_err();
    assert!(e.to_string().contains("cpu field 3 is `x`"), "{e}");
}

#[test]
fn counters_wrapping_at_32_bits() {
    let a = parse_stat(&data("stat_wrap_before.txt")).unwrap();
    let b = parse_stat(&data("stat_wrap_after.txt")).unwrap();
    let h = HostSample::between(&a, &b, 1.0);
    // user 6+10, system 10, idle 296+300, steal 1+5 ticks: total 628.
    assert!(
        (h.steal_pct - 100.0 * 6.0 / 628.0).abs() < 1e-9,
        "{}",
        h.steal_pct
    );
    assert!((h.user_pct - 100.0 * 16.0 / 628.0).abs() < 1e-9);
    assert!((h.ctxt_per_s - 16.0).abs() < 1e-9);
    assert!((h.intr_per_s - 196.0).abs() < 1e-9);
}

#[test]
fn iowait_going_backwards_is_not_a_wrap() {
    let a = parse_stat(&data("stat_iowait_before.txt")).unwrap();
    let b = parse_stat(&data("stat_iowait_after.txt")).unwrap();
    let h = HostSample::between(&a, &b, 1.0);
    assert_eq!(h.iowait_pct, 0.0);
    // 50 user + 10 system + 90 idle = 150 ticks: one CPU, so percentages add to 100.
    assert!((h.user_pct - 100.0 * 50.0 / 150.0).abs() < 1e-9);
    let sum = h.user_pct + h.system_pct + h.idle_pct + h.iowait_pct + h.steal_pct;
    assert!((sum - 100.0).abs() < 1e-9);
}

#[test]
fn real_loadavg() {
    let l = parse_loadavg(&data("loadavg.real")).unwrap();
    assert!(l.load1 >= 0.0 && l.total >= l.running && l.total > 0);
    assert!(parse_loadavg("0.5 x").is_err());
    // No running/total field: still the three loads.
    assert_eq!(parse_loadavg("1 2 3").unwrap().load15, 3.0);
}

#[test]
fn real_pid_stat_of_a_shell_and_kernel_threads() {
    let p = parse_pid_stat(&data("pid_stat.real")).unwrap();
    assert_eq!(p.comm, "sh");
    assert!(p.ppid > 0 && p.rss_pages > 0 && p.starttime > 0);
    assert!(p.processor.is_some());
    let k = parse_pid_stat(&data("pid_stat_kthread.real")).unwrap();
    assert_eq!((k.pid, k.comm.as_str(), k.rss_pages), (2, "kthreadd", 0));
    let w = parse_pid_stat(&data("pid_stat_kworker.real")).unwrap();
    assert!(w.comm.starts_with("kworker/0:0H"), "{}", w.comm);
}

#[test]
fn process_names_with_spaces_and_parentheses() {
    // A real process started as `/tmp/x) y (z`.
    let p = parse_pid_stat(&data("pid_stat_parens.real")).unwrap();
    assert_eq!(p.comm, "x) y (z");
    assert_eq!(p.state, 'S');
    assert_eq!(p.rss_pages, 397);
    let status = parse_pid_status(&data("pid_status_parens.real"));
    assert_eq!(status.name.as_deref(), Some("x) y (z"));
    // Hand-made: a name that ends in `)`.
    let q = parse_pid_stat(&data("pid_stat_close_paren.txt")).unwrap();
    assert_eq!(q.comm, "evil)name");
    assert_eq!(
        (q.utime, q.stime, q.minflt, q.majflt, q.num_threads),
        (300, 40, 20, 2, 3)
    );
}

#[test]
fn truncated_pid_stat_names_the_missing_field() {
    let e = parse_pid_stat(&data("pid_stat_truncated.txt")).unwrap_err();
    assert!(e.to_string().contains("field 12 is missing"), "{e}");
    assert!(parse_pid_stat("no parens here").is_err());
    assert!(parse_pid_stat("12 )x( S").is_err());
}

#[test]
fn real_and_partial_status() {
    let s = parse_pid_status(&data("pid_status.real"));
    assert_eq!(s.name.as_deref(), Some("sh"));
    assert!(s.vm_rss_kb.unwrap() > 0);
    assert!(s.voluntary_ctxt_switches.is_some() && s.nonvoluntary_ctxt_switches.is_some());
    let k = parse_pid_status(&data("pid_status_kthread.real"));
    assert_eq!(k.vm_rss_kb, None);
    assert!(k.voluntary_ctxt_switches.is_some());
    let m = parse_pid_status(&data("pid_status_missing.txt"));
    assert_eq!(
        (m.name.as_deref(), m.voluntary_ctxt_switches),
        (Some("kworker"), None)
    );
}

#[test]
fn schedstat() {
    let s = parse_schedstat(&data("schedstat.real")).unwrap();
    assert!(s.timeslices >= 1);
    assert_eq!(parse_schedstat("5 6").unwrap().wait_ns, 6);
    assert!(parse_schedstat("5").is_err());
}
