//! Knobs changed for a run are back afterwards: read from the real files.
//! A knob whose file this host lacks is skipped with a message (a failure where
//! `TAILLAB_REQUIRE` lists it: thp, irq, dma-latency).

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use taillab_interfere::tuning::{
    irq_affinity_files, numa_nodes, read_dma_latency, read_rt_runtime, recover_journal,
    RT_RUNTIME_FILE,
};
use taillab_interfere::{DmaLatency, NumaNode, RtRuntime, ThpMode, Tuning};

const THP: &str = "/sys/kernel/mm/transparent_hugepage/enabled";

/// One test at a time: they change the same host-wide files.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn thp_now() -> Option<String> {
    let t = std::fs::read_to_string(THP).ok()?;
    let a = t.find('[')?;
    let b = t.find(']')?;
    Some(t[a + 1..b].to_string())
}

fn other_thp(now: &str) -> ThpMode {
    if now == "never" {
        ThpMode::Madvise
    } else {
        ThpMode::Never
    }
}

fn irq_values() -> Vec<(std::path::PathBuf, String)> {
    irq_affinity_files()
        .into_iter()
        .filter_map(|f| {
            Some((
                f.clone(),
                std::fs::read_to_string(&f).ok()?.trim().to_string(),
            ))
        })
        .collect()
}

#[test]
fn thp_is_restored_when_the_guard_drops() {
    let _s = serial();
    let Some(before) = thp_now() else {
        return skip_without("thp", &format!("{THP} does not exist on this host"));
    };
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("run-tuning.json");
    let want = other_thp(&before);
    let t = Tuning {
        thp: Some(want),
        ..Default::default()
    };
    let guard = t.apply_with(&journal).unwrap();
    assert_eq!(thp_now().as_deref(), Some(want.to_string().as_str()));
    assert!(journal.exists(), "prior value saved before the write");
    let k = &guard.applied().knobs[0];
    assert_eq!(k.before.as_deref(), Some(before.as_str()));
    drop(guard);
    assert_eq!(thp_now(), Some(before));
    assert!(!journal.exists(), "journal deleted after restoring");
}

#[test]
fn irq_affinity_is_restored() {
    let _s = serial();
    let online = taillab_interfere::tuning::online_cpus();
    let before = irq_values();
    if before.is_empty() || online.len() < 2 {
        let why = "no /proc/irq/*/smp_affinity_list or a single CPU on this host";
        return skip_without("irq", why);
    }
    let target = online[online.len() - 1].to_string();
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("run-tuning.json");
    let t = Tuning {
        irq_cpus: Some(target.parse().unwrap()),
        ..Default::default()
    };
    let guard = match t.apply_with(&journal) {
        Ok(g) => g,
        Err(e) => {
            return skip_without("irq", &format!("this host moves no IRQ: {e}"));
        }
    };
    let during = irq_values();
    let moved = during.iter().filter(|(_, v)| *v == target).count();
    assert!(moved > 0, "{:?}", guard.applied());
    assert!(
        guard.applied().knobs[0].message.contains("moved"),
        "{:?}",
        guard.applied()
    );
    let lines = guard.restore();
    assert!(lines.iter().any(|l| l.starts_with("restored")), "{lines:?}");
    assert_eq!(irq_values(), before, "every IRQ back where it was");
}

fn rt_runtime_now() -> Option<String> {
    Some(
        std::fs::read_to_string(RT_RUNTIME_FILE)
            .ok()?
            .trim()
            .to_string(),
    )
}

/// A real-time limit other than the host's: none where it has one, the kernel's default
/// where it has none.
fn other_rt_runtime(now: &str) -> RtRuntime {
    if now == "-1" {
        RtRuntime(Some(950_000))
    } else {
        RtRuntime(None)
    }
}

#[test]
fn rt_runtime_is_restored_when_the_guard_drops_and_on_error() {
    let _s = serial();
    let Some(before) = rt_runtime_now() else {
        return skip_without("rt-runtime", &format!("{RT_RUNTIME_FILE} does not exist"));
    };
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("run-tuning.json");
    let want = other_rt_runtime(&before);
    let t = Tuning {
        rt_runtime: Some(want),
        ..Default::default()
    };
    let guard = match t.apply_with(&journal) {
        Ok(g) => g,
        Err(e) => return skip_without("rt-runtime", &format!("not writable here: {e}")),
    };
    assert_eq!(rt_runtime_now(), Some(want.kernel()));
    assert_eq!(read_rt_runtime().unwrap().0, want);
    assert!(journal.exists(), "prior value saved before the write");
    let k = &guard.applied().knobs[0];
    assert_eq!(
        (k.knob.as_str(), k.before.as_deref()),
        ("rt_runtime", Some(before.as_str()))
    );
    drop(guard);
    assert_eq!(rt_runtime_now().as_deref(), Some(before.as_str()));
    assert!(!journal.exists(), "journal deleted after restoring");

    // A value the kernel would refuse (longer than its period) is refused before anything
    // changes.
    let (_, period) = read_rt_runtime().unwrap();
    let too_long = Tuning {
        rt_runtime: Some(RtRuntime(Some(u32::try_from(period + 1).unwrap()))),
        ..Default::default()
    };
    let e = too_long.apply_with(&journal).unwrap_err().to_string();
    assert!(e.contains("exceeds the period"), "{e}");
    assert_eq!(rt_runtime_now().as_deref(), Some(before.as_str()));
}

#[test]
fn c_state_limit_is_held_and_released() {
    let _s = serial();
    let Some(before) = read_dma_latency() else {
        let why = "/dev/cpu_dma_latency does not exist on this host";
        return skip_without("dma-latency", why);
    };
    let t = Tuning {
        dma_latency: Some(DmaLatency(3)),
        ..Default::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let guard = t.apply_with(&dir.path().join("j.json")).unwrap();
    // Another request may be stricter; ours is in force unless so.
    assert!(read_dma_latency().unwrap() <= 3);
    drop(guard);
    assert_eq!(read_dma_latency(), Some(before));
}

#[test]
fn numa_binding_says_when_the_host_has_one_node() {
    let _s = serial();
    let nodes = numa_nodes();
    let t = Tuning {
        numa_node: Some(NumaNode(nodes[0] as u32)),
        ..Default::default()
    };
    let dir = tempfile::tempdir().unwrap();
    // The policy is per thread: bind a scratch thread, not the test runner's.
    let msg = std::thread::spawn(move || {
        let g = t.apply_with(&dir.path().join("j.json")).unwrap();
        g.applied().knobs[0].message.clone()
    })
    .join()
    .unwrap();
    if nodes.len() == 1 {
        assert!(msg.contains("one NUMA node"), "{msg}");
    } else {
        assert!(msg.contains("bound to node"), "{msg}");
    }
}

#[test]
fn a_bad_knob_changes_nothing() {
    let _s = serial();
    let Some(before) = thp_now() else {
        return skip_without("thp", &format!("{THP} does not exist on this host"));
    };
    let dir = tempfile::tempdir().unwrap();
    let t = Tuning {
        thp: Some(other_thp(&before)),
        // A node that cannot exist is refused by validate() before THP changes.
        numa_node: Some(NumaNode(1000)),
        ..Default::default()
    };
    assert!(t.apply_with(&dir.path().join("j.json")).is_err());
    assert_eq!(thp_now(), Some(before));
}

/// Not a test on its own: the helper process that
/// `a_killed_run_is_restored_from_its_journal` SIGKILLs.
#[test]
fn helper_hold_tuning() {
    let Ok(journal) = std::env::var("TAILLAB_TEST_JOURNAL") else {
        return;
    };
    let now = thp_now().unwrap();
    let t = Tuning {
        thp: Some(other_thp(&now)),
        dma_latency: read_dma_latency().map(|_| DmaLatency(4)),
        rt_runtime: rt_runtime_now().map(|r| other_rt_runtime(&r)),
        ..Default::default()
    };
    let g = t.apply_with(Path::new(&journal)).unwrap();
    println!("APPLIED");
    std::thread::sleep(Duration::from_secs(120));
    drop(g);
}

#[test]
fn a_killed_run_is_restored_from_its_journal() {
    let _s = serial();
    let Some(before) = thp_now() else {
        return skip_without("thp", &format!("{THP} does not exist on this host"));
    };
    let dma_before = read_dma_latency();
    let rt_before = rt_runtime_now();
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("run-tuning.json");
    let mut child = spawn_helper(
        "helper_hold_tuning",
        &[("TAILLAB_TEST_JOURNAL", journal.to_str().unwrap())],
    );
    read_line_starting(&mut child, "APPLIED");
    let during = thp_now();
    let rt_during = rt_runtime_now();
    sigkill(&mut child);
    let (dma_after, thp_after, journal_left) = (read_dma_latency(), thp_now(), journal.exists());
    let rt_after = rt_runtime_now();
    // Restore first, so that a failed assertion below leaves the host as it was.
    let lines = recover_journal(&journal).unwrap();
    assert_ne!(during.as_deref(), Some(before.as_str()));
    // The kernel dropped the C-state request with the process...
    assert_eq!(dma_after, dma_before);
    // ...but a sysfs value stays changed until someone restores it.
    assert_eq!(thp_after, during);
    assert!(journal_left);
    assert!(
        lines
            .iter()
            .any(|l| l.text.contains("transparent_hugepage") && !l.failed),
        "{lines:?}"
    );
    assert_eq!(thp_now(), Some(before));
    // The real-time limit too: changed by the killed run, put back from its journal.
    if rt_before.is_some() {
        assert_eq!(rt_after, rt_during);
        assert_ne!(rt_during, rt_before);
        assert_eq!(rt_runtime_now(), rt_before);
    }
    assert!(!journal.exists());
}
